from __future__ import annotations

import json
import math
import struct
import zlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import PUBLISHED
from darwin_memo import (
    EmbeddingRetriever,
    HashingEmbedder,
    LexicalRetriever,
    MemoryEntry,
    MemoryStore,
)
from darwin_memo.retrieval.lexical import tokenize

OBS = json.loads((PUBLISHED / "reference_observations.json").read_text(encoding="utf-8"))
TS = "2026-01-02T03:04:05+00:00"

MISC_ROWS = [
    ("数据库文件可以删除吗？", "不可以，数据库文件必须保留。", 1.0),
    ("Can logs/app-3.log be deleted?", "logs/app-3.log may be deleted after seven days.", 1.0),
    ("Are *.tmp files disposable?", "Files matching *.tmp under tmp/ are disposable.", 1.0),
    ("Is v1.2.3 safe to deploy?", "Version v1.2.3 is safe to deploy.", 1.0),
    ("Do caches expire?", "Caches expire after one day.", 2.0),
    ("Do caches expire?", "Caches expire after one day.", 3.0),
    ("Is the glass bus here?", "The glass bus arrives at noon.", 1.0),
    ("What about the data?", "Data is retained.", 1.0),
]


def misc_store(kind: str = "memory") -> MemoryStore:
    from conftest import new_store

    store = new_store(kind)
    for q, a, energy in MISC_ROWS:
        store.add(MemoryEntry(question=q, answer=a, energy=energy, recorded_ts=TS))
    return store


# Non-ASCII text is where we deliberately differ (the published tokenizer drops it).
@pytest.mark.parametrize(
    "case", [c for c in OBS["tokenize"] if c["text"].isascii()], ids=lambda c: c["text"][:20]
)
def test_tokenize_matches_published_on_ascii(case: dict) -> None:
    assert tokenize(case["text"]) == case["tokens"]


@pytest.mark.parametrize(
    "case",
    [c for c in OBS["retrieve"] if c["corpus"] == "misc" and c["query"].isascii()],
    ids=lambda c: c["query"],
)
def test_ranking_matches_published(case: dict, db_store_kind: str) -> None:
    hits = misc_store(db_store_kind).retrieve(case["query"], k=case["k"])
    got = [[e.question, e.kind.value, round(s, 9), e.energy] for e, s in hits]
    assert got == case["hits"]


@pytest.mark.parametrize("case", OBS["lexical_similarity"], ids=lambda c: c["a"][:15])
def test_similarity_matches_published_on_ascii(case: dict) -> None:
    r = LexicalRetriever()
    a = MemoryEntry(case["a"], "", recorded_ts=TS)
    b = MemoryEntry(case["b"], "", recorded_ts=TS)
    if (case["a"] + case["b"]).isascii():
        assert round(r.similarity(a, b), 9) == case["similarity"]
        return
    # A deliberate difference (docs/compatibility.md, "tokens"): the published tokenizer
    # drops non-ASCII letters, so two identical Chinese questions score 0 there.
    assert case["similarity"] == 0.0
    got = r.similarity(a, b)
    assert got == 1.0 if case["a"] == case["b"] else 0.0 < got < 1.0


def test_hashing_embedder_matches_published() -> None:
    for text, obs in OBS["hashing_embedder"].items():
        vec = HashingEmbedder()(text)
        assert len(vec) == obs["len"]
        nonzero = {str(i): round(v, 12) for i, v in enumerate(vec) if v}
        assert nonzero == {k: round(v, 12) for k, v in obs.get("nonzero_components", {}).items()}


@pytest.mark.parametrize(
    "question",
    [
        "数据库文件可以删除吗？",
        "هل يمكن حذف ملفات قاعدة البيانات؟",
        "データベースのファイルを削除できますか",
        "Können Löschvorgänge rückgängig gemacht werden?",
    ],
)
def test_any_script_is_retrievable_by_its_own_question(question: str) -> None:
    store = MemoryStore()
    target = store.add(MemoryEntry(question, "an answer"))
    store.add(MemoryEntry("Is it safe to delete old logs?", "Old logs may be deleted."))
    hits = store.retrieve(question)
    assert hits and hits[0][0].id == target.id


def test_cjk_partial_overlap_ranks_the_right_entry() -> None:
    store = MemoryStore()
    db = store.add(MemoryEntry("数据库文件可以删除吗？", "不可以，数据库文件必须保留。"))
    store.add(MemoryEntry("缓存文件可以删除吗？", "可以，缓存文件可以随时删除。"))
    hits = store.retrieve("数据库能删吗")
    assert hits[0][0].id == db.id


def test_floor_makes_memory_silent() -> None:
    store = misc_store()
    assert store.retrieve("completely unrelated words here") == []
    assert store.retrieve("the of and") == []
    assert store.retrieve("") == []


def test_energy_is_only_a_tie_break() -> None:
    store = MemoryStore()
    low = store.add(MemoryEntry("Do caches expire?", "Caches expire after one day.", energy=0.1))
    high = store.add(MemoryEntry("Do caches expire?", "Caches expire after one day.", energy=4.0))
    assert [e.id for e, _ in store.retrieve("caches expire")] == [high.id, low.id]
    # a better-matching entry wins whatever its energy
    best = store.add(
        MemoryEntry("Do caches expire daily at noon?", "Caches expire daily at noon.", energy=0.01)
    )
    assert store.retrieve("caches expire daily noon")[0][0].id == best.id


def test_filters_and_half_life() -> None:
    store = MemoryStore()
    old = store.add(
        MemoryEntry("Are logs disposable?", "Logs are disposable.", born_cycle=0, sources=["a"])
    )
    new = store.add(
        MemoryEntry("Are logs disposable?", "Logs are disposable.", born_cycle=40, sources=["b"])
    )
    assert [e.id for e, _ in store.retrieve("logs disposable", source="a")] == [old.id]
    scored = dict(
        (e.id, s) for e, s in store.retrieve("logs disposable", half_life=20, now_cycle=40)
    )
    assert scored[new.id] == pytest.approx(4 * scored[old.id])
    with pytest.raises(ValueError, match="half_life"):
        store.retrieve("logs", half_life=0)
    with pytest.raises(ValueError, match="unknown kind"):
        store.retrieve("logs", kind="nonsense")
    assert store.retrieve("logs disposable", kind="entity") == []


def test_embedding_retriever_floor_and_persistence(tmp_path) -> None:
    calls: list[str] = []

    def embed(text: str) -> list[float]:
        calls.append(text)
        return HashingEmbedder()(text)

    store = MemoryStore(retriever=EmbeddingRetriever(embed))
    e = store.add(MemoryEntry("Can the database files be removed?", "No: they are protected."))
    assert store.retrieve("can the databse files be removed")[0][0].id == e.id
    assert store.retrieve("zzz qqq") == []
    path = tmp_path / "m.json"
    store.save(path)
    calls.clear()
    again = MemoryStore.load(path, retriever=EmbeddingRetriever(embed))
    again.retrieve("database files removed")
    assert calls == ["database files removed"]  # entry vector came from the file


def test_a_query_without_a_usable_vector_is_silence() -> None:
    """As published: nothing can be similar to a query the model cannot embed."""
    vectors = {"q a": [1.0, 0.0], "q": [], "q ": [], "nan": [math.nan, 1.0]}
    r = EmbeddingRetriever(lambda text: vectors[text])
    store = MemoryStore(retriever=r)
    store.add(MemoryEntry("q", "a"))
    assert store.retrieve("q") == []
    assert store.retrieve("nan") == []
    assert r.rank("q", store.alive()) == []
    with pytest.raises(ValueError, match="empty vector"):
        r.vector(MemoryEntry("q", "", id="e" * 12))  # asked for directly, it says why


UNEMBEDDABLE = MemoryEntry(
    "Is it safe to delete old log files?", "Old log files may be deleted after seven days!!"
)


def embed_but_one(text: str) -> list[float]:
    """HashingEmbedder, except an empty vector for one entry's text (a model's hiccup)."""
    return [] if text == UNEMBEDDABLE.text else HashingEmbedder()(text)


def batch_but_one(texts: list[str]) -> list[list[float]]:
    return [embed_but_one(t) for t in texts]


@pytest.mark.parametrize("hybrid", [False, True], ids=["embedding", "hybrid"])
def test_an_entry_without_a_vector_is_dissimilar_and_consolidation_carries_on(
    store_kind: str, hybrid: bool
) -> None:
    from conftest import new_store
    from darwin_memo import EMBEDDING_MERGE_THRESHOLD, consolidate
    from darwin_memo.retrieval.embedding import HybridRetriever

    retriever = HybridRetriever(embed_but_one) if hybrid else EmbeddingRetriever(embed_but_one)
    dense = retriever.dense if isinstance(retriever, HybridRetriever) else retriever
    store = new_store(store_kind, retriever=retriever)
    # The broken entry is a near-copy of the other two: were it embedded, it would merge.
    bad = store.add(
        MemoryEntry(UNEMBEDDABLE.question, UNEMBEDDABLE.answer, sources=["runbook"], energy=3.0)
    )
    one = store.add(
        MemoryEntry(
            "Is it safe to delete old log files?",
            "Old log files may be deleted after seven days.",
            sources=["runbook"],
        )
    )
    two = store.add(
        MemoryEntry(
            "Is it safe to delete old log files?",
            "Old log files may be deleted after seven days!",
            sources=["runbook"],
        )
    )
    other = store.add(MemoryEntry("Are cache chunks disposable?", "Cache chunks are disposable."))

    assert retriever.warm(store.alive()) == 3  # the three others; no ValueError
    assert bad.id not in dense.dump_state()["vectors"]  # never cached: asked again later
    assert retriever.warm(store.alive()) == 0
    assert store.similarity(bad, one) == 0.0 and store.similarity(one, bad) == 0.0
    assert store.similarity(bad, bad) == 0.0
    assert store.similarity(one, two) > EMBEDDING_MERGE_THRESHOLD
    ranked = dense.rank("delete old log files", list(store.alive()))
    assert {e.id for e, _ in ranked} == {one.id, two.id}
    hits = store.retrieve("Is it safe to delete old log files?", k=5)
    assert bad.id not in {e.id for e, _ in hits} or hybrid  # hybrid: found lexically
    assert one.id in {e.id for e, _ in hits}

    assert consolidate(store, cycle=1, threshold=EMBEDDING_MERGE_THRESHOLD) == 1
    alive = {e.id: e for e in store.alive()}
    assert bad.id in alive and other.id in alive
    assert one.id not in alive and two.id not in alive
    (heir,) = [e for e in alive.values() if e.lineage]
    assert sorted(heir.lineage) == sorted([one.id, two.id])
    assert consolidate(store, cycle=2, threshold=EMBEDDING_MERGE_THRESHOLD) == 0
    assert bad.id in {e.id for e in store.alive()}


def test_warm_with_a_batch_skips_an_unusable_vector() -> None:
    retriever = EmbeddingRetriever(embed_but_one)
    store = MemoryStore(retriever=retriever)
    bad = store.add(MemoryEntry(UNEMBEDDABLE.question, UNEMBEDDABLE.answer))
    good = store.add(MemoryEntry("Are cache chunks disposable?", "Cache chunks are disposable."))
    assert retriever.warm(store.alive(), batch_but_one) == 1
    assert set(retriever.dump_state()["vectors"]) == {good.id}

    def not_finite(texts: list[str]) -> list[list[float]]:
        return [[math.nan, 1.0] for _ in texts]

    # A NaN vector would compare as similar to everything (min(1.0, nan) is 1.0).
    assert retriever.warm(store.alive(), not_finite) == 0
    assert retriever.similarity(bad, good) == 0.0
    with pytest.raises(ValueError, match="2 vectors for 1 texts"):
        retriever.warm([bad], lambda texts: [[1.0], [1.0]])


def test_cached_vectors_cost_a_double_per_component() -> None:
    """Cached vectors are arrays of doubles: 8 bytes a component, where lists of floats
    took 32 (a pointer and a float object each), and the values are unchanged."""
    import tracemalloc

    embedder = HashingEmbedder()
    r = EmbeddingRetriever(embedder)
    entries = [
        MemoryEntry(f"how do I restart worker {i}", f"drain queue {i} first") for i in range(300)
    ]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        r.warm(entries)
        grew = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grew < 300 * 256 * 12, f"{grew / 300:.0f} bytes per cached vector"
    for e in entries[:20]:
        got = r.vector(e)
        assert isinstance(got, list) and got == embedder(e.text)  # the same floats, as a list
    state = r.dump_state()["vectors"]
    restored = EmbeddingRetriever(embedder)
    restored.load_state({"vectors": json.loads(json.dumps(state))})
    assert all(restored.vector(e) == r.vector(e) for e in entries)
    assert restored.similarity(entries[0], entries[1]) == r.similarity(entries[0], entries[1])


def _worker_store(n: int, queues: int) -> tuple[MemoryStore, list[MemoryEntry]]:
    """A store of ``n`` lessons about restarting worker w<i> (one word each of its own)."""
    store = MemoryStore()
    entries = [
        MemoryEntry(f"how do I restart worker w{i}?", f"drain queue {i % queues} then restart")
        for i in range(n)
    ]
    for e in entries:
        store.add(e)
    return store, entries


def test_listed_entries_share_one_string_per_token() -> None:
    """The token sets the index makes hold one string object per distinct token (at a
    million entries, each holding its own copies cost about a gigabyte), and asked
    after an entry's text changed it sees its new tokens."""
    store, entries = _worker_store(50, 7)
    assert store.retrieve("restart worker w3", 1)  # lists every entry
    retriever = store.retriever
    sets = [retriever.tokens(e) for e in entries]  # type: ignore[attr-defined]
    for word in ("restart", "worker", "drain", "queue"):
        held = {id(t) for toks in sets for t in toks if t == word}
        assert len(held) == 1, f"{word!r} is held as {len(held)} strings"
    entries[0].answer = "rebuild the cache instead"
    assert "cache" in retriever.tokens(entries[0])  # type: ignore[attr-defined]
    assert "drain" not in retriever.tokens(entries[0])  # type: ignore[attr-defined]


def test_a_store_read_at_once_keeps_no_token_sets_until_asked() -> None:
    """Listing a store read at once keeps each entry's question and answer, not its token
    set (a million sets cost gigabytes); a search that must look inside a candidate
    makes its set then, and an entry buried before any set was made leaves every list."""
    store, entries = _worker_store(40, 5)
    retriever = store.retriever
    retriever._list_pending()  # type: ignore[attr-defined]
    cache = retriever._tokens  # type: ignore[attr-defined]
    assert all(cache[e.id][2] is None for e in entries)
    store.bury(entries[3].id)  # its lists are left from its listed text
    df = retriever._df  # type: ignore[attr-defined]
    assert "w3" not in df and df["worker"] == 39 and df["restart"] == 39 and df["3"] == 7
    found = store.retrieve("restart worker w7", 3)
    assert found and found[0][0].id == entries[7].id
    assert cache[entries[7].id][2] is not None  # made for the search, and kept
    assert entries[3].id not in {e.id for e, _ in store.retrieve("restart worker w3", 50)}


def test_the_run_class_is_a_to_z_digits_dot_star_and_all_non_ascii() -> None:
    """``_RUN`` is written as a negated ASCII class: it must hold exactly the
    characters of ``[a-z0-9.*\u0080-\U0010ffff]``, checked at every code point."""
    from darwin_memo.retrieval.lexical import _RUN

    allowed = set("abcdefghijklmnopqrstuvwxyz0123456789.*")
    text = "".join(map(chr, range(0x110000)))
    held = "".join(_RUN.findall(text))
    assert held == "".join(ch for ch in text if ch in allowed or ord(ch) >= 0x80)


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=127)))
def test_tokenize_ascii_fast_path_equals_the_recipe(text: str) -> None:
    """Lowercase, runs of [a-z0-9.*], stopwords out, a plural's final s dropped."""
    from darwin_memo.retrieval.lexical import _RUN, STOPWORDS

    want = []
    for run in _RUN.findall(text.lower()):
        if run and run not in STOPWORDS:
            stemmed = len(run) > 3 and run.endswith("s") and not run.endswith("ss")
            want.append(run[:-1] if stemmed else run)
    assert tokenize(text) == want


def _hashed_gram_by_gram(text: str, dims: int, lo: int, hi: int) -> list[float]:
    """The spec's recipe, one character n-gram at a time (UTF-8 bytes into crc32)."""
    joined = " ".join(tokenize(text))
    vec = [0.0] * dims
    for n in range(lo, hi + 1):
        for i in range(len(joined) - n + 1):
            h = zlib.crc32(joined[i : i + n].encode("utf-8"))
            vec[h % dims] += -1.0 if h & 0x80000000 else 1.0
    norm = math.sqrt(sum(v * v for v in vec))
    return [v / norm for v in vec] if norm > 0 else vec


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(st.text(alphabet=st.characters(max_codepoint=127)), st.text()),
    st.sampled_from([(256, 3, 5), (7, 1, 2), (1, 2, 6)]),
)
def test_hashing_embedder_equals_the_recipe_bit_for_bit(
    text: str, shape: tuple[int, int, int]
) -> None:
    """ASCII texts take a faster path (bytes sliced once); every float is the same."""
    dims, lo, hi = shape
    got = HashingEmbedder(dims, (lo, hi))(text)
    want = _hashed_gram_by_gram(text, dims, lo, hi)
    assert [struct.pack("<d", v) for v in got] == [struct.pack("<d", v) for v in want]


def test_hashing_embedder_is_unit_norm_and_deterministic() -> None:
    v = HashingEmbedder()("databse files under data/")
    assert math.isclose(math.fsum(x * x for x in v), 1.0)
    assert v == HashingEmbedder()("databse files under data/")
    assert HashingEmbedder()("") == [0.0] * 256


def test_published_stopword_list() -> None:
    from darwin_memo.retrieval.lexical import STOPWORDS

    assert len(STOPWORDS) == 56
    assert {"should", "could", "would", "between", "against"} <= STOPWORDS


WORDS = ["deploy", "rollback", "cache", "worker", "queue", "flaky", "tests", "port", "api", "disk"]


def _index_state(r: LexicalRetriever) -> tuple[object, ...]:
    r._list_pending()
    return (
        list(r._ids),
        dict(r._ordinal),
        {t: list(p) for t, p in r._postings.items()},
        dict(r._df),
        dict(r._dead_in),
    )


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 12), st.lists(st.sampled_from(WORDS), min_size=0, max_size=6)),
        max_size=25,
    ),
    st.integers(0, 3),
)
def test_indexing_many_at_once_is_indexing_one_by_one(
    rows: list[tuple[int, list[str]]], already: int
) -> None:
    """A store being read indexes its entries in one pass: the same index, ids seen twice
    (refreshed) and an index that already holds entries included."""
    entries = [MemoryEntry(question=" ".join(ws), answer="a", id=f"e{i}") for i, ws in rows]
    early = [
        MemoryEntry(question=f"{WORDS[k]} early", answer="x", id=f"p{k}") for k in range(already)
    ]
    one, many = LexicalRetriever(), LexicalRetriever()
    for entry in early:
        one.index(entry)
        many.index(entry)
    if early:  # an edited entry leaves a dead ordinal behind in its old tokens' lists
        edited = MemoryEntry(question="edited text", answer="x", id=early[0].id)
        one.index(edited)
        many.index(edited)
    for entry in entries:
        one.index(entry)
    many.index_many(entries)
    assert _index_state(many) == _index_state(one)
    for word in WORDS[:4]:
        assert many.search(word, None) == one.search(word, None)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.characters(exclude_categories=()), max_size=40))  # surrogates too
def test_runs_are_the_published_recipe_runs(text: str) -> None:
    """Runs: ASCII letters, digits, '.' and '*', and any character outside ASCII."""
    import re

    from darwin_memo.retrieval.lexical import _RUN

    recipe = re.compile(r"(?:[a-z0-9.*]|[^\x00-\x7f])+")
    assert _RUN.findall(text) == recipe.findall(text)
    assert _RUN.findall(text.lower()) == recipe.findall(text.lower())


def test_a_subclass_that_indexes_its_own_way_sees_every_entry_of_a_loaded_store(
    tmp_path: object,
) -> None:
    from pathlib import Path

    seen: list[str] = []

    class Counting(LexicalRetriever):
        def index(self, entry: MemoryEntry) -> None:
            seen.append(entry.id)
            super().index(entry)

    store = MemoryStore()
    for i in range(5):
        store.add(MemoryEntry(question=f"deploy step {i}", answer="a", id=f"e{i}"))
    path = Path(str(tmp_path)) / "s.json"
    store.save(path)
    loaded = MemoryStore.load(path, retriever=Counting())
    assert seen == [f"e{i}" for i in range(5)]
    assert [e.id for e, _ in loaded.retrieve("deploy step 3", 1)] == ["e3"]


# -- HybridRetriever's blend and context (hashed n-grams stand in for the sentence model) --


def _hybrid_store(**kwargs: object) -> tuple[MemoryStore, list[MemoryEntry]]:
    from darwin_memo.retrieval.embedding import HybridRetriever

    store = MemoryStore(retriever=HybridRetriever(HashingEmbedder(), **kwargs))  # type: ignore[arg-type]
    rows = [
        ("Which port does the database listen on?", "The database listens on port 5432."),
        ("Who reviews pull requests?", "Mara reviews every pull request."),
        ("Any news?", "Nothing yet."),  # says nothing about the schema itself
        ("How do I migrate the database schema?", "Run the schema migration before deploying."),
        ("When are backups taken?", "Backups of the database run nightly."),
    ]
    return store, [store.add(MemoryEntry(q, a)) for q, a in rows]


def test_weighted_fusion_is_the_published_blend() -> None:
    store, entries = _hybrid_store()
    hybrid: Any = store.retriever
    query = "database schema migration"
    lex = dict((e.id, s) for e, s in hybrid.lexical.rank(query, entries))
    den = dict((e.id, s) for e, s in hybrid.dense.rank(query, entries))
    best = max(lex.values())
    expected = {i: 0.7 * den.get(i, 0.0) + 0.3 * lex.get(i, 0.0) / best for i in {*lex, *den}}
    got = store.retrieve(query, 10)
    assert {e.id: s for e, s in got} == pytest.approx(expected)
    assert [s for _, s in got] == sorted(expected.values(), reverse=True)


def test_context_lends_a_share_of_a_neighbours_score_and_only_reorders() -> None:
    plain, plain_entries = _hybrid_store(min_similarity=0.99)
    lent, entries = _hybrid_store(min_similarity=0.99, context=0.5)
    query = "how do I migrate the database schema"
    ids = [e.id for e in entries]
    same = dict(zip([e.id for e in plain_entries], ids, strict=True))
    base = {same[e.id]: s for e, s in plain.retrieve(query, 10)}
    with_context = {e.id: s for e, s in lent.retrieve(query, 10)}
    assert set(with_context) == set(base)  # the same entries found: context only reorders
    assert ids[2] not in base  # "Any news?" qualifies on its own for nothing, so gets nothing
    for i, entry_id in enumerate(ids):
        if entry_id not in base:
            continue
        near = [base.get(ids[j], 0.0) for j in (i - 1, i + 1) if 0 <= j < len(ids)]
        assert with_context[entry_id] == pytest.approx(base[entry_id] + 0.5 * max(near))
    scanned = {e.id: s for e, s in lent.retrieve(query, 10, kind="explicit")}  # rank() path
    assert scanned == pytest.approx(with_context)
    assert lent.retrieve("quantum chromodynamics on a lattice", 3) == []  # silence stays
    lent_r: Any = lent.retriever
    plain_r: Any = plain.retriever
    lent_r.forget(ids[3])  # a forgotten entry lends nothing
    plain_r.forget(plain_entries[3].id)
    query = "when are database backups taken"
    after = dict(lent_r.search(query, None))
    assert after[ids[4]] == pytest.approx(dict(plain_r.search(query, None))[plain_entries[4].id])


def test_hybrid_rejects_a_bad_context() -> None:
    from darwin_memo.retrieval.embedding import HybridRetriever

    for bad in (1.5, -0.1):
        with pytest.raises(ValueError, match="context must be within"):
            HybridRetriever(HashingEmbedder(), context=bad)


def test_exact_cosines_in_bulk_equal_the_scalar_recipe_bit_for_bit() -> None:
    np = pytest.importorskip("numpy")
    from array import array
    from random import Random

    from darwin_memo.retrieval.lexical import _cosine_normed, _exact_cosines, _norm

    rng = Random(7)
    for dims in (1, 3, 384):
        q = [rng.gauss(0, 1) * rng.choice([1.0, 1e-9, 1e9]) for _ in range(dims)]
        vectors = [
            array("d", [rng.gauss(0, 1) * rng.choice([1.0, 1e-8, 1e8]) for _ in range(dims)])
            for _ in range(60)
        ]
        vectors.append(array("d", [0.0] * dims))  # a zero vector is dissimilar: 0.0
        norms = [_norm(v) for v in vectors]
        bulk = _exact_cosines(np, q, _norm(q), vectors, norms)
        assert bulk == [_cosine_normed(q, _norm(q), v, norms[i]) for i, v in enumerate(vectors)]
        assert _exact_cosines(np, [0.0] * dims, 0.0, vectors, norms) == [0.0] * len(vectors)
        # the public form a store rescores its candidates with (norms computed there)
        assert EmbeddingRetriever(HashingEmbedder()).exact_cosines(q, vectors) == bulk
