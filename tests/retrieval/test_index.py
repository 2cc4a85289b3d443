"""The inverted index returns exactly what the published brute-force scan returns."""

from __future__ import annotations

import random
from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

# At import, not inside a test: importing test modules defines hypothesis tests, which
# hypothesis refuses to do while one of its tests runs (test_index on its own).
from test_consolidation import _weighted_groups_pairwise

from darwin_memo import LexicalRetriever, MemoryEntry, MemoryStore

VOCAB = [f"w{i}" for i in range(40)] + ["api", "worker", "queue", "restart", "cache", "the"]


def brute(store: MemoryStore, query: str, k: int) -> list[tuple[str, float]]:
    ranked = LexicalRetriever(store.retriever.min_coverage).rank(query, store.alive())  # type: ignore[attr-defined]
    ranked.sort(key=lambda pair: (pair[1], pair[0].energy), reverse=True)
    return [(e.id, s) for e, s in ranked[:k]]


def zipf_text(rnd: random.Random, n: int) -> str:
    return " ".join(VOCAB[min(int(rnd.paretovariate(1.2)) - 1, len(VOCAB) - 1)] for _ in range(n))


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 60), st.integers(1, 6), st.floats(0.0, 0.6))
def test_indexed_retrieve_equals_brute_force(seed: int, size: int, k: int, floor: float) -> None:
    rnd = random.Random(seed)
    store = MemoryStore(retriever=LexicalRetriever(min_coverage=floor))
    entries = [
        store.add(
            MemoryEntry(
                zipf_text(rnd, rnd.randint(1, 8)),
                zipf_text(rnd, rnd.randint(0, 8)),
                energy=rnd.choice([0.5, 1.0, 1.0, 2.0]),
            )
        )
        for _ in range(size)
    ]
    for e in rnd.sample(entries, k=min(len(entries), rnd.randint(0, 5))):
        store.bury(e.id)  # removals keep the index exact
    assert store.retriever.indexed == len(store)  # type: ignore[attr-defined]
    for _ in range(10):
        query = zipf_text(rnd, rnd.randint(1, 6))
        got = [(e.id, s) for e, s in store.retrieve(query, k)]
        assert got == brute(store, query, k), query


def test_common_word_queries_prune_but_stay_exact() -> None:
    rnd = random.Random(1)
    store = MemoryStore()
    for i in range(3000):
        words = ["restart", "the", "api", "worker", "queue"] if i % 2 else ["api", "cache"]
        store.add(MemoryEntry(" ".join([*words, f"x{i % 97}"]), zipf_text(rnd, 4)))
    query = "restart the api or the worker when the queue hangs"
    assert [(e.id, s) for e, s in store.retrieve(query, 3)] == brute(store, query, 3)


def _dense_store(rnd: random.Random, size: int) -> MemoryStore:
    from darwin_memo import EmbeddingRetriever, HashingEmbedder

    store = MemoryStore(retriever=EmbeddingRetriever(HashingEmbedder(dims=64), min_similarity=0.2))
    for _ in range(size):
        store.add(
            MemoryEntry(
                zipf_text(rnd, rnd.randint(1, 6)),
                zipf_text(rnd, rnd.randint(0, 6)),
                energy=rnd.choice([0.5, 1.0, 2.0]),
            )
        )
    return store


def _dense_brute(store: MemoryStore, query: str, k: int) -> list[tuple[str, float]]:
    ranked = store.retriever.rank(query, store.alive())
    ranked.sort(key=lambda pair: (pair[1], pair[0].energy), reverse=True)
    return [(e.id, s) for e, s in ranked[:k]]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 80), st.integers(1, 5))
def test_dense_search_equals_brute_force(seed: int, size: int, k: int) -> None:
    rnd = random.Random(seed)
    store = _dense_store(rnd, size)
    for e in rnd.sample(store.alive(), k=min(len(store), rnd.randint(0, 4))):
        store.bury(e.id)
    for _ in range(5):
        query = zipf_text(rnd, rnd.randint(1, 5))
        assert [(e.id, s) for e, s in store.retrieve(query, k)] == _dense_brute(store, query, k)


def test_dense_search_without_numpy(monkeypatch) -> None:
    import sys

    rnd = random.Random(3)
    store = _dense_store(rnd, 40)
    monkeypatch.setitem(sys.modules, "numpy", None)
    query = zipf_text(rnd, 3)
    assert [(e.id, s) for e, s in store.retrieve(query, 3)] == _dense_brute(store, query, 3)


@settings(max_examples=150, deadline=None)
@given(
    st.integers(0, 10_000),
    st.integers(2, 40),
    st.floats(0.05, 1.0),
    st.sampled_from(["off", "shared", "identical"]),
)
def test_indexed_consolidation_equals_pairwise(
    seed: int, size: int, threshold: float, policy: str
) -> None:
    from darwin_memo.retrieval.simjoin import _groups_indexed, _groups_pairwise

    rnd = random.Random(seed)
    store = MemoryStore()
    small = VOCAB[:8]
    for _ in range(size):
        words = rnd.choices(small, k=rnd.randint(0, 5))
        store.add(
            MemoryEntry(
                " ".join(words),
                "",
                energy=rnd.choice([0.5, 1.0, 1.0, 2.0]),
                sources=rnd.sample(["a", "b", "c"], k=rnd.randint(0, 2)),
            )
        )
    exclude = {e.id for e in rnd.sample(store.alive(), k=min(size, rnd.randint(0, 3)))}
    got = _groups_indexed(store, store.retriever, threshold, exclude, policy)  # type: ignore[arg-type]
    want = _groups_pairwise(store, threshold, exclude, policy)
    assert [[e.id for e in g] for g in got] == [[e.id for e in g] for g in want]


SLOTS = [f"svc{i}" for i in range(30)] + [f"INC-{i}" for i in range(30)]
TEMPLATES = [
    "is it safe to {a} the {b} of {c} during business hours",
    "why does {c} {a} when the {b} hangs",
    "{a} {b} {c}",
    "how do I fix {c} failing in {b} on {a} after the deploy of the api worker",
]


@settings(max_examples=120, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 120), st.floats(0.2, 1.0))
def test_indexed_consolidation_equals_pairwise_on_templated_lessons(
    seed: int, size: int, threshold: float
) -> None:
    """Long token sets sharing a sentence template: the positional filter's ground."""
    from darwin_memo.retrieval.simjoin import _groups_indexed, _groups_pairwise

    rnd = random.Random(seed)
    store = MemoryStore()
    for _ in range(size):
        text = rnd.choice(TEMPLATES).format(
            a=rnd.choice(SLOTS[:6]), b=rnd.choice(SLOTS), c=rnd.choice(SLOTS[25:])
        )
        extra = " ".join(rnd.choices(VOCAB, k=rnd.randint(0, 6)))
        store.add(MemoryEntry(text, extra, energy=rnd.choice([0.5, 1.0, 2.0])))
    got = _groups_indexed(store, store.retriever, threshold, (), "off")  # type: ignore[arg-type]
    want = _groups_pairwise(store, threshold, (), "off")
    assert [[e.id for e in g] for g in got] == [[e.id for e in g] for g in want]


def _weighted_pairwise(store: MemoryStore, threshold: float) -> list[list[str]]:
    """The greedy clustering with rarity-weighted Jaccard, compared pair by pair."""
    return _weighted_groups_pairwise(store, threshold, set(), "off")


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 40), st.floats(0.05, 0.95))
def test_weighted_consolidation_equals_its_pairwise_definition(
    seed: int, size: int, threshold: float
) -> None:
    from darwin_memo.retrieval.simjoin import _groups_indexed

    rnd = random.Random(seed)
    store = MemoryStore()
    for _ in range(size):
        words = rnd.choices(VOCAB[:10], k=rnd.randint(1, 5))
        store.add(MemoryEntry(" ".join(words), "", energy=rnd.choice([0.5, 1.0, 2.0])))
    got = _groups_indexed(store, store.retriever, threshold, (), "off", weighted=True)  # type: ignore[arg-type]
    assert [[e.id for e in g] for g in got] == _weighted_pairwise(store, threshold)


def test_weighted_rule_keeps_templated_lessons_apart() -> None:
    from darwin_memo.retrieval.simjoin import merge_groups

    def templated() -> MemoryStore:
        store = MemoryStore()
        for i in range(200):
            store.add(
                MemoryEntry(
                    f"Is it safe to restart the worker of svc{i}?",
                    f"Restart the worker of svc{i} only after draining it.",
                )
            )
        store.add(
            MemoryEntry(
                "Is it safe to restart the worker of svc7?",
                "Restart the worker of svc7 only after draining it!",
            )
        )
        return store

    published = templated()
    merge_groups(published, 1)
    assert len(published) < 20  # the published rule merges unrelated lessons by template
    weighted = templated()
    merges = merge_groups(weighted, 1, similarity="weighted")
    assert len(merges) == 1 and len(weighted) == 200  # only the true duplicate merges


def test_consolidation_on_the_sqlite_store_matches_memory() -> None:
    """The SQLite store hands consolidation its stored token sets: same groups."""
    from conftest import new_store
    from darwin_memo.retrieval.simjoin import merge_groups

    rnd = random.Random(5)
    texts = []
    for _ in range(150):
        texts.append(
            (
                rnd.choice(TEMPLATES).format(
                    a=rnd.choice(SLOTS[:4]), b=rnd.choice(SLOTS[:10]), c=rnd.choice(SLOTS[25:35])
                ),
                " ".join(rnd.choices(VOCAB[:12], k=rnd.randint(0, 4))),
                rnd.choice([0.5, 1.0, 2.0]),
            )
        )
    results = []
    for kind in ("memory", "sqlite"):
        store = new_store(kind)
        for i, (q, a, energy) in enumerate(texts):
            store.add(MemoryEntry(q, a, energy=energy, id=f"e{i:03d}"))
        merges = merge_groups(store, cycle=1, threshold=0.55)
        results.append([m.members for m in merges])
    assert results[0] == results[1]
    assert results[0], "the templated store should have near-duplicates to merge"


@settings(max_examples=200, deadline=None)
@given(
    st.integers(0, 10_000),
    st.integers(1, 80),
    st.integers(1, 7),
    st.integers(1, 6),
    st.floats(0.0, 0.9),
)
def test_token_combinations_equal_the_candidate_search(
    seed: int, size: int, nq: int, k: int, floor: float
) -> None:
    from darwin_memo.retrieval.index import top_by_combinations, top_candidates

    rnd = random.Random(seed)
    vocab = [f"t{i}" for i in range(9)]
    docs = [set(rnd.sample(vocab, rnd.randint(0, 5))) for _ in range(size)]
    query = [rnd.choice([*vocab, "absent"]) for _ in range(nq)]
    qtokens = list(dict.fromkeys(query))

    def df(t: str) -> int:
        return sum(t in d for d in docs)

    def postings(t: str) -> list[int]:
        return [i for i, d in enumerate(docs) if t in d]

    def bitmap(t: str) -> int:
        return sum(1 << i for i, d in enumerate(docs) if t in d)

    def contains(t: str, keys: object) -> list[int]:
        return [key for key in keys if t in docs[key]]  # type: ignore[attr-defined]

    got = top_by_combinations(qtokens, size, df, bitmap, floor, k)
    want = top_candidates(qtokens, size, df, postings, contains, floor, k)
    assert got is not None
    assert sorted(got) == sorted(want)


def _published_top(
    docs: list[set[str]], qtokens: list[str], floor: float, k: int | None
) -> list[tuple[int, float]]:
    """The published scan's qualifying scores, cut at the k-th with its ties."""
    import math

    n = len(docs)
    idf = {t: math.log(1.0 + n / (1.0 + sum(t in d for d in docs))) for t in qtokens}
    mass = sum(idf.values())
    scored = []
    for key, d in enumerate(docs):
        score = sum(w for t, w in idf.items() if t in d)
        if score > 0 and score / mass >= floor:
            scored.append((key, score))
    scored.sort(key=lambda pair: pair[1], reverse=True)
    if k is not None and len(scored) > k:
        kth = scored[k - 1][1]
        scored = [pair for pair in scored if pair[1] >= kth]
    return scored


@settings(max_examples=300, deadline=None)
@given(
    st.integers(0, 10_000),
    st.integers(1, 300),
    st.integers(1, 16),
    st.one_of(st.none(), st.integers(1, 6)),
    st.floats(0.0, 0.9),
)
def test_code_search_equals_the_published_scan(
    seed: int, size: int, nq: int, k: int | None, floor: float
) -> None:
    """``top_by_codes`` (candidates scored by byte codes) returns what the scan returns."""
    from darwin_memo.retrieval.index import MAX_CODE_TOKENS, top_by_codes

    rnd = random.Random(seed)
    vocab = [f"t{i}" for i in range(14)]  # past 8 indexed tokens: one int per candidate
    # Skewed frequencies: a few common tokens, many rare ones, so lists differ in length
    # and the bar closes some of them.
    weights = [0.9 / (1 + i) ** 1.3 for i in range(len(vocab))]
    docs = [
        {t for t, w in zip(vocab, weights, strict=True) if rnd.random() < w} for _ in range(size)
    ]
    query = [rnd.choice([*vocab, "absent"]) for _ in range(nq)]
    qtokens = list(dict.fromkeys(query))
    calls: list[int] = []

    def df(t: str) -> int:
        return sum(t in d for d in docs)

    def postings(t: str) -> list[int]:
        return [i for i, d in enumerate(docs) if t in d]

    def flags(t: str, keys: Sequence[int]) -> bytes:
        calls.append(len(keys))
        assert list(keys) == sorted(keys), "flags is given ascending keys"
        return bytes(t in docs[key] for key in keys)

    got = top_by_codes(qtokens, size, df, postings, flags, floor, k)
    present = [t for t in qtokens if df(t) > 0]
    if len(present) > MAX_CODE_TOKENS:
        assert got is None
        return
    assert got is not None
    want = _published_top(docs, qtokens, floor, k)
    assert sorted(got) == sorted(want)  # same keys, bit-identical scores
    assert all(n > 0 for n in calls)


def test_weighted_rule_at_threshold_zero_groups_every_lesson_with_words() -> None:
    """A threshold of 0 is reached by every pair; an entry with no words joins nobody."""
    from darwin_memo.retrieval.simjoin import merge_groups

    store = MemoryStore()
    for text in ("restart the worker", "rotate the logs", "purge the cache", "?!"):
        store.add(MemoryEntry(text, ""))
    merges = merge_groups(store, 1, threshold=0.0, similarity="weighted")
    assert len(merges) == 1 and len(merges[0].members) == 3
    assert sorted(e.question for e in store.alive()) == ["?!", "restart the worker"]
