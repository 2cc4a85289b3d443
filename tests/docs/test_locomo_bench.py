"""bench/retrieval/locomo.py on a tiny conversation in LoCoMo's JSON shape, and BM25.

CI does not depend on ../shared/data: the quick variant writes its own two-session
conversation. When the real data file is present, the committed results are
checked to parse and to describe that file.
"""

from __future__ import annotations

import importlib.util
import json
import random
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from darwin_memo.records.entry import MemoryEntry
from darwin_memo.retrieval.lexical import LexicalRetriever
from darwin_memo.store import MemoryStore

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "retrieval"
DATA = ROOT.parent / "shared" / "data" / "locomo-dev.zip"


def _module(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


locomo = _module("locomo")
bm25 = _module("bm25")
variants = _module("variants")

CONVERSATION = {
    "speaker_a": "Ana",
    "speaker_b": "Ben",
    "session_1_date_time": "1:56 pm on 8 May, 2023",
    "session_1": [
        {
            "speaker": "Ana",
            "dia_id": "D1:1",
            "text": "Hi Ben! I adopted a grey kitten named Pixel.",
        },
        {"speaker": "Ben", "dia_id": "D1:2", "text": "Congrats! I started learning the violin."},
        {
            "speaker": "Ana",
            "dia_id": "D1:3",
            "text": "Look at this!",
            "blip_caption": "a photo of a lighthouse on a rocky coast",
        },
    ],
    "session_2_date_time": "10:00 am on 9 June, 2023",
    "session_2": [
        {"speaker": "Ben", "dia_id": "D2:1", "text": "My violin teacher moved to Lisbon."},
        {"speaker": "Ana", "dia_id": "D2:2", "text": "Pixel knocked over my coffee today."},
    ],
    "qa": [
        {"question": "What is the name of Ana's kitten?", "evidence": ["D1:1"], "category": 4},
        {"question": "Where did Ben's violin teacher move?", "evidence": ["D2:1"], "category": 1},
        {"question": "When did Pixel spill coffee?", "evidence": ["D 2:2"], "category": 2},
        {"question": "What did Ana photograph?", "evidence": ["D1:3"], "category": 3},
        {"question": "Which quantum algorithm factors integers?", "evidence": [], "category": 5},
    ],
}


@pytest.fixture
def conversation(tmp_path: Path) -> Path:
    path = tmp_path / "conv.json"
    path.write_text(json.dumps(CONVERSATION), encoding="utf-8")
    return path


def test_parses_the_locomo_shape(conversation: Path) -> None:
    convs, digest = locomo.load(conversation)
    assert len(digest) == 64
    (conv,) = convs
    assert [t.dia_id for t in conv.turns] == ["D1:1", "D1:2", "D1:3", "D2:1", "D2:2"]
    assert conv.turns[3].date == "10:00 am on 9 June, 2023"
    assert conv.questions[2].evidence == ["D2:2"]  # the stray space LoCoMo has in a few ids
    entry = locomo.entry_for(conv.turns[0], captions=False)
    assert entry.question == "Hi Ben! I adopted a grey kitten named Pixel."
    assert entry.answer == "Ana on 1:56 pm on 8 May, 2023"
    assert entry.sources == ["D1:1"]
    assert "lighthouse" in locomo.entry_for(conv.turns[2], captions=True).question
    assert "lighthouse" not in locomo.entry_for(conv.turns[2], captions=False).question


def test_zip_folder_and_file_read_alike(conversation: Path, tmp_path: Path) -> None:
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "7.json").write_text(conversation.read_text(encoding="utf-8"), encoding="utf-8")
    archive = tmp_path / "data.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.write(folder / "7.json", "data/7.json")
    shapes = [locomo.load(p)[0] for p in (conversation, folder, archive)]
    assert {len(c[0].turns) for c in shapes} == {5}
    assert shapes[1][0].name == shapes[2][0].name == "7"
    with pytest.raises(SystemExit, match="not found; pass --data"):
        locomo.load(tmp_path / "missing.zip")


def test_quick_run_measures_recall_silence_and_speed(conversation: Path, tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    args = ["--data", str(conversation), "--retrievers", "lexical,bm25,hashing", "--out", str(out)]
    assert locomo.main(args) == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["questions"] == 4 and report["turns"] == 5
    lexical = report["retrievers"]["lexical"]
    # kitten, violin teacher and coffee share words with their turn; the photo does not
    assert lexical["by_category"]["4"]["recall@5"] == 1.0
    assert lexical["by_category"]["1"]["recall@10"] == 1.0
    assert lexical["by_category"]["2"]["recall@10"] == 1.0
    assert lexical["by_category"]["3"]["recall@10"] == 0.0
    assert lexical["overall"]["recall@10"] == 0.75
    assert lexical["overall"]["mrr@10"] == 0.75
    assert lexical["silence_adversarial"] == 1.0  # nothing about quantum algorithms
    assert lexical["ingest_entries_per_s"] > 0 and lexical["decide_ms_p50"] >= 0
    assert set(report["retrievers"]) == {"lexical", "bm25", "hashing"}
    with_captions = locomo.run(conversation, ["lexical"], captions=True)
    assert with_captions["retrievers"]["lexical"]["by_category"]["3"]["recall@10"] == 0.0
    with pytest.raises(SystemExit, match="unknown retriever 'nope'"):
        locomo.run(conversation, ["nope"])


@pytest.mark.skipif(not DATA.exists(), reason="../shared/data/locomo-dev.zip is not here")
def test_committed_results_describe_the_data_file() -> None:
    _, digest = locomo.load(DATA)
    results = sorted((BENCH / "results").glob("locomo-dev*.json"))
    assert results
    for path in results:
        report = json.loads(path.read_text(encoding="utf-8"))
        assert report["data_sha256"] == digest
        assert report["questions"] == 762
        for figures in report["retrievers"].values():
            assert 0.0 <= figures["overall"]["recall@5"] <= figures["overall"]["recall@10"] <= 1
            assert set(figures["by_category"]) == {"1", "2", "3", "4"}


# -- BM25 (measured beside the published scorer, kept in bench/retrieval/bm25.py) ---------


def _entries(texts: list[str]) -> list[MemoryEntry]:
    return [MemoryEntry(t, "", sources=[str(i)]) for i, t in enumerate(texts)]


def test_bm25_scores_by_the_formula() -> None:
    import math

    entries = _entries(["cats purr", "cats cats cats sleep all day long", "dogs bark"])
    r = bm25.BM25Retriever(min_coverage=0.0)
    for e in entries:
        r.index(e)
    found = dict(r.search("cats", None))
    avgdl = (2 + 7 + 2) / 3
    idf = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))

    def term(tf: float, dl: float) -> float:
        return tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * dl / avgdl))

    # "day", "long", "all" are kept (all is no stopword); "cats" is stemmed to "cat"
    assert found[entries[0].id] == pytest.approx(idf * term(1, 2))
    assert found[entries[1].id] == pytest.approx(idf * term(3, 7))
    assert entries[2].id not in found
    assert r.rank("cats", entries)[0][0].id == max(found, key=lambda i: found[i])


def test_bm25_numpy_and_python_sums_agree_and_forget_is_clean() -> None:
    pytest.importorskip("numpy")
    rng = random.Random(5)
    words = [f"w{i}" for i in range(40)]
    entries = _entries([" ".join(rng.choices(words, k=rng.randint(1, 12))) for _ in range(300)])
    r = bm25.BM25Retriever()
    for e in entries:
        r.index(e)
    for e in entries[::3]:
        r.forget(e.id)
    import numpy as np

    n = len(r._ordinal)
    for _ in range(30):
        query = " ".join(rng.choices(words, k=3))
        tokens = list(dict.fromkeys(query.split()))
        idf, _ = r._weights(tokens, n, lambda t: r._df.get(t, 0))
        present = [t for t in tokens if t in r._postings]
        avgdl = r._total / n
        py = sorted(r._sum_python(present, idf, avgdl))
        vec = sorted(r._sum_numpy(np, present, idf, avgdl))
        assert py == vec  # bit-identical, not approximately
    rebuilt = bm25.BM25Retriever()
    for e in entries:
        if e.id in r._ordinal:
            rebuilt.index(e)
    assert r.search("w1 w2 w3", 5) == rebuilt.search("w1 w2 w3", 5)


def test_bm25_floor_keeps_silence_and_store_path_matches_rank() -> None:
    store = MemoryStore(retriever=bm25.BM25Retriever())
    for e in _entries(["logs are kept seven days", "cache expires daily", "deploy on friday"]):
        store.add(e)
    assert store.retrieve("quantum chromodynamics lattice", 3) == []
    indexed = [e.id for e, _ in store.retrieve("how long are logs kept", 3)]
    ranked = [e.id for e, _ in store.retrieve("how long are logs kept", 3, kind="explicit")]
    assert indexed == ranked and len(indexed) == 1
    with pytest.raises(ValueError, match="b must be"):
        bm25.BM25Retriever(b=2.0)


def test_the_published_scorer_stays_the_lexical_default() -> None:
    assert locomo.retrievers()["lexical"]().__class__ is LexicalRetriever


# -- reciprocal-rank fusion (measured, kept in bench/retrieval/variants.py) -------------


def _hybrid_store() -> tuple[MemoryStore, list[MemoryEntry]]:
    from darwin_memo.retrieval.lexical import HashingEmbedder

    store = MemoryStore(retriever=variants.RRFHybrid(HashingEmbedder()))
    rows = [
        ("Which port does the database listen on?", "The database listens on port 5432."),
        ("Who reviews pull requests?", "Mara reviews every pull request."),
        ("How do I migrate the database schema?", "Run the schema migration before deploying."),
        ("When are backups taken?", "Backups of the database run nightly."),
    ]
    return store, [store.add(MemoryEntry(q, a)) for q, a in rows]


def test_reciprocal_rank_fusion_sums_reciprocal_ranks() -> None:
    store, entries = _hybrid_store()
    hybrid: Any = store.retriever
    query = "database schema migration"

    def order(pairs: list[tuple[MemoryEntry, float]]) -> list[str]:
        return [e.id for e, _ in sorted(pairs, key=lambda p: -p[1])]

    lex, den = order(hybrid.lexical.rank(query, entries)), order(hybrid.dense.rank(query, entries))
    expected = {i: 0.0 for i in {*lex, *den}}
    for ranking in (lex, den):
        for rank, i in enumerate(ranking, 1):
            expected[i] += (1 / (60 + rank)) / (2 / 61)
    indexed = {e.id: s for e, s in store.retrieve(query, 10)}
    scanned = {e.id: s for e, s in store.retrieve(query, 10, kind="explicit")}  # rank() path
    assert indexed == pytest.approx(expected) and scanned == pytest.approx(expected)
    if lex[0] == den[0]:
        assert indexed[lex[0]] == pytest.approx(1.0)  # first in both: the largest score
    with pytest.raises(ValueError, match="rrf_k must be a positive integer"):
        variants.RRFHybrid(rrf_k=0)


# -- the sweep of scoring variants (bench/retrieval/variants.py) ------------------------


def _hashing_cache() -> Any:
    from darwin_memo.retrieval.lexical import HashingEmbedder

    embed = HashingEmbedder()
    return variants.VectorCache(lambda texts: [embed(t) for t in texts], None)


@pytest.mark.parametrize("context", [0.0, 0.5])
def test_the_sweep_scores_as_hybrid_retriever_does(context: float) -> None:
    from darwin_memo.retrieval.embedding import HybridRetriever
    from darwin_memo.retrieval.lexical import HashingEmbedder

    rng = random.Random(11)
    words = "port database kitten violin coffee lisbon teacher backup nightly schema".split()
    rows = [" ".join(rng.choices(words, k=rng.randint(2, 7))) for _ in range(60)]
    retriever = HybridRetriever(HashingEmbedder(), min_similarity=0.2, context=context)
    store = MemoryStore(retriever=retriever)
    entries = [store.add(MemoryEntry(text, "Ana")) for text in rows]
    cache = _hashing_cache()
    corpus = variants.Corpus(entries, cache([e.text for e in entries]))
    queries = [" ".join(rng.choices(words, k=3)) for _ in range(25)] + ["quantum lattice"]
    scores, qualifies = variants.hybrid_scores(
        corpus, queries, cache(queries), min_similarity=0.2, context=context
    )
    tops = variants.top(scores, qualifies, 10)
    for j, query in enumerate(queries):
        found = store.retrieve(query, 10)
        assert [entries.index(e) for e, _ in found] == tops[j], query
        assert [s for _, s in found] == pytest.approx([scores[j, i] for i in tops[j]], abs=1e-9)
    assert tops[-1] == []  # no shared word, no close vector: silence, as the retriever


def test_lend_window_one_is_context_and_wider_windows_reach_further() -> None:
    import numpy as np

    scores = np.array([[0.0, 0.9, 0.1, 0.2, 0.0]])
    qualifies = scores > 0
    once = variants.lend(scores, qualifies, 0.5)
    assert once[0].tolist() == pytest.approx([0.0, 0.9 + 0.05, 0.1 + 0.45, 0.2 + 0.05, 0.0])
    twice = variants.lend(scores, qualifies, 0.5, window=2, decay=0.5)
    assert twice[0, 3] == pytest.approx(0.2 + 0.5 * 0.5 * 0.9)  # two places from 0.9
    assert twice[0, 0] == twice[0, 4] == 0.0  # entries that do not qualify gain nothing


def test_sweep_helpers_split_strip_and_stem() -> None:
    entries = [MemoryEntry("One thing. And another!", "Ana"), MemoryEntry("Only one", "Ben")]
    assert variants.sentence_pieces(entries) == ([0, 0], ["One thing. Ana", "And another! Ana"])
    assert variants.strip_scaffolding("When did Melanie paint a sunrise?") == (
        "Melanie paint a sunrise"
    )
    assert variants.strip_scaffolding("What?") == "What?"
    assert variants.suffix_stem("researching") == variants.suffix_stem("research")
    assert variants.suffix_stem("running") == "run"


def test_the_sweep_measures_every_variant_on_a_small_conversation(conversation: Path) -> None:
    sweep = variants.prepare(conversation, _hashing_cache())
    every = variants.variants(sweep)
    assert {"base", "context", "sentences+window=2", "rocchio beta=0.5 m=5"} <= set(every)
    base = variants.measure(every["base"], sweep)
    assert set(base) == set(variants.COLUMNS)
    assert base["recall@10 single-hop"] == 1.0  # the kitten's turn, by its words
    for name in ("context", "sentences+window=2", "rm3 weight=0.5", "with predecessor"):
        figures = variants.measure(every[name], sweep)
        # these only reorder what qualifies: the same silence as the default (stemming
        # changes the lexical side's tokens, hence what qualifies, and is left out)
        for column in ("silent: cat. 5", "silent: probes", "silent: foreign"):
            assert figures[column] == base[column], (name, column)
