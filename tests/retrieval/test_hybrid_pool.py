"""HybridRetriever's top-k search scores only the rows that may make the top k
(``_dense_pool``): its results must equal scoring every row, ties included."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from darwin_memo.records.entry import MemoryEntry
from darwin_memo.retrieval.embedding import HybridRetriever
from darwin_memo.retrieval.lexical import HashingEmbedder
from darwin_memo.store import MemoryStore

pytest.importorskip("numpy")

WORDS = "cache disk server restart nginx memory leak python test flaky deploy token".split()


def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6)))


def _everything(retriever: HybridRetriever, query: str, k: int) -> list[tuple[str, float]]:
    """Every row scored (the unbounded search), then cut to ``k``."""
    return retriever.search(query, None)[:k]


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    size=st.integers(1, 60),
    k=st.integers(1, 12),
    alpha=st.sampled_from([0.0, 0.3, 0.7, 1.0]),
    duplicates=st.booleans(),
)
def test_bounded_top_k_equals_scoring_every_row(
    seed: int, size: int, k: int, alpha: float, duplicates: bool
) -> None:
    rng = random.Random(seed)
    texts = [_text(rng) for _ in range(size)]
    if duplicates:  # exact ties in both scores
        texts += texts[: size // 2]
    retriever = HybridRetriever(HashingEmbedder(dims=64), alpha=alpha, min_similarity=0.2)
    store = MemoryStore(retriever=retriever)
    for i, text in enumerate(texts):
        store.add(MemoryEntry(question=text, answer=f"answer {i}"))
    for _ in range(5):
        query = _text(rng)
        assert retriever.search(query, k) == _everything(retriever, query, k)


def test_removed_entries_and_a_silent_query() -> None:
    retriever = HybridRetriever(HashingEmbedder(dims=64))
    store = MemoryStore(retriever=retriever)
    entries = [MemoryEntry(question=f"restart the {w} server", answer=w) for w in WORDS]
    for e in entries:
        store.add(e)
    store.bury(entries[0].id)
    query = "restart the cache server"
    assert retriever.search(query, 3) == _everything(retriever, query, 3)
    assert entries[0].id not in dict(retriever.search(query, 20))
    assert retriever.search("", 3) == []
