"""``IvfIndex``: the approximate index behind ``EmbeddingRetriever(ann=...)``."""

from __future__ import annotations

import random

import pytest

np = pytest.importorskip("numpy")

from darwin_memo.records.entry import MemoryEntry  # noqa: E402
from darwin_memo.retrieval.ann import IvfIndex  # noqa: E402
from darwin_memo.retrieval.lexical import EmbeddingRetriever  # noqa: E402

DIMS = 32


def clustered(n: int, clusters: int, seed: int) -> tuple[dict[str, list[float]], list[str]]:
    """``n`` texts, each with a vector near one of ``clusters`` random directions."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(clusters, DIMS))
    vectors: dict[str, list[float]] = {}
    for i in range(n):
        v = centres[i % clusters] + 0.25 * rng.normal(size=DIMS)
        vectors[f"text {i}"] = [float(x) for x in v]
    return vectors, [f"text {i}" for i in range(n)]


def retriever(vectors: dict[str, list[float]], ann: IvfIndex | None) -> EmbeddingRetriever:
    def embed(text: str) -> list[float]:
        return vectors[text]

    return EmbeddingRetriever(embed, min_similarity=0.2, ann=ann)


def entries(texts: list[str]) -> list[MemoryEntry]:
    # The retriever embeds entry.text = question + " " + answer: split a text in two.
    out = []
    for i, t in enumerate(texts):
        head, tail = t.split(" ", 1)
        out.append(MemoryEntry(question=head, answer=tail, id=f"e{i:05d}"))
    return out


def test_probing_every_list_gives_exactly_the_exact_search() -> None:
    vectors, texts = clustered(1500, 12, seed=1)
    for q in range(30):  # queries: perturbed copies of stored vectors
        base = vectors[texts[q * 37]]
        vectors[f"query {q}"] = [x + 0.1 * ((k * 7 + q) % 5 - 2) for k, x in enumerate(base)]
    exact = retriever(vectors, None)
    approx = retriever(vectors, IvfIndex(nlist=16, nprobe=16, min_rows=100))
    for e in entries(texts):
        exact.index(e)
        approx.index(e)
    for q in range(30):
        for k in (1, 5, 40, None):
            assert approx.search(f"query {q}", k) == exact.search(f"query {q}", k)
    assert approx.ann is not None and approx.ann.trained


def test_recall_on_clustered_vectors_and_only_true_scores() -> None:
    vectors, texts = clustered(6000, 40, seed=2)
    rng = random.Random(3)
    queries = []
    for q in range(60):
        base = vectors[texts[rng.randrange(len(texts))]]
        vectors[f"query {q}"] = [x + rng.gauss(0, 0.2) for x in base]
        queries.append(f"query {q}")
    exact = retriever(vectors, None)
    index = IvfIndex(min_rows=1000)  # nlist 2 * sqrt(rows), nprobe a tenth of it
    approx = retriever(vectors, index)
    for e in entries(texts):
        exact.index(e)
        approx.index(e)
    found = total = 0
    for q in queries:
        want = dict(exact.search(q, 10))
        got = approx.search(q, 10)
        assert all(want.get(i, s) == s for i, s in got)  # any score returned is exact
        found += len(set(want) & {i for i, _ in got})
        total += len(want)
    assert found / total >= 0.95
    # and it scanned a fraction of the rows
    unit = np.asarray(vectors[queries[0]], dtype=np.float32)
    unit /= np.linalg.norm(unit)
    assert len(index.scores(np, approx._matrix, len(texts), unit)[0]) < len(texts) / 2


def test_rows_added_after_training_and_removed_rows() -> None:
    vectors, texts = clustered(3000, 10, seed=4)
    approx = retriever(vectors, IvfIndex(nlist=10, nprobe=10, min_rows=500))
    exact = retriever(vectors, None)
    first, later = entries(texts[:2000]), entries(texts)[2000:]
    for e in first:
        approx.index(e)
        exact.index(e)
    probe = texts[5]
    vectors["probe"] = vectors[probe]
    assert approx.search("probe", 5) == exact.search("probe", 5)  # trains on 2,000 rows
    for e in later:  # assigned to lists at the next search, not trained on
        approx.index(e)
        exact.index(e)
    for e in first[:300]:
        approx._unindex(e.id)
        exact._unindex(e.id)
    for t in (texts[2500], texts[7], texts[2999]):
        vectors["probe"] = vectors[t]
        got = approx.search("probe", 8)
        assert got == exact.search("probe", 8)
        assert not {i for i, _ in got} & {e.id for e in first[:300]}
    assert approx.ann is not None and approx.ann._trained_rows == 2000
    for i in range(3000, 4200):  # the store doubles: the index trains again
        vectors[f"text {i}"] = vectors[texts[i % 3000]]
        approx.index(MemoryEntry(question="text", answer=str(i), id=f"x{i}"))
    approx.search("probe", 3)
    assert approx.ann._trained_rows == 4200


def test_small_stores_stay_exact_and_bad_settings_are_refused() -> None:
    vectors, texts = clustered(300, 5, seed=5)
    index = IvfIndex(min_rows=1000)
    approx = retriever(vectors, index)
    for e in entries(texts):
        approx.index(e)
    vectors["probe"] = vectors[texts[0]]
    assert approx.search("probe", 1)[0][0] == "e00000"
    assert not index.trained  # under min_rows: the exact matrix product
    for bad in ({"nlist": 0}, {"nprobe": 0}, {"min_rows": 0}, {"retrain_growth": 1.0}):
        with pytest.raises(ValueError):
            IvfIndex(**bad)  # type: ignore[arg-type]
