"""Phase 1 of the organic layer: the associative graph.

Every entry gets one vector, the embedding of ``question + " " + answer``, and is
linked to the entries nearest to it by cosine. ``related(id, k)`` lists up to ``k``
other entries with their cosine clamped to [0, 1]. Relatedness is mechanical: it says
which lessons resemble each other, never which are worth keeping (only measured
outcomes decide that), so nothing here reads or writes energy.

Ties keep insertion order. Entry ids are random, so an id never breaks a tie: two
entries equally close to a third are listed in the order they joined the graph, and
``ordinal(id)`` says what that order is. An entry removed and added again joins at the
end.

The nearest-neighbour search is a backend: ``BruteForceBackend`` (the default, exact,
standard library only) compares with every vector; ``TurbovecBackend`` (the
``organic`` extra) is an approximate index for large stores.
"""

from __future__ import annotations

import heapq
import math
import operator
from array import array
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from ..records.entry import MemoryEntry
from ..retrieval.lexical import HashingEmbedder

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..backends.interface import Population

__all__ = [
    "AssociativeGraph",
    "Backend",
    "BruteForceBackend",
    "Embedder",
    "build_graph",
    "entry_text",
    "store_related",
]

#: Any ``text -> vector`` callable (``HashingEmbedder``, ``OllamaEmbedder``, ...).
Embedder = Callable[[str], Sequence[float]]


class Backend(Protocol):
    """A nearest-neighbour index over entry vectors, keyed by entry id."""

    def add(self, entry_id: str, vector: Sequence[float]) -> None:
        """Index ``vector`` under ``entry_id`` (replacing a vector already there)."""

    def remove(self, entry_id: str) -> None:
        """Forget ``entry_id`` (no error when it is not indexed)."""

    def search(
        self, vector: Sequence[float], k: int, exclude: str | None = None
    ) -> list[tuple[str, float]]:
        """Up to ``k`` ``(entry_id, cosine)`` pairs, best first, ties in insertion order."""


def entry_text(entry: MemoryEntry) -> str:
    """The text an entry is embedded by: its question and its answer."""
    return f"{entry.question} {entry.answer}"


def _norm(vector: Sequence[float]) -> float:
    return math.sqrt(math.fsum(map(operator.mul, vector, vector)))


def _cosine(a: Sequence[float], na: float, b: Sequence[float], nb: float) -> float:
    """Cosine of two vectors given their norms; 0.0 when either is the zero vector."""
    if na == 0.0 or nb == 0.0:
        return 0.0
    dot: float = sum(map(operator.mul, a, b))
    return dot / (na * nb)


def _clamp01(x: float) -> float:
    return min(1.0, max(0.0, x))


class BruteForceBackend:
    """Exact search: the query's cosine with every indexed vector.

    O(n) per search in pure Python (about half a second per 100k vectors of 256
    dimensions); the right choice up to a few thousand entries, and the reference the
    approximate backends are measured against. Scores are raw cosines in [-1, 1].
    """

    def __init__(self) -> None:
        # entry id -> (vector, norm), in insertion order (dict order).
        self._rows: dict[str, tuple[Sequence[float], float]] = {}
        self._dim: int | None = None

    def __len__(self) -> int:
        return len(self._rows)

    def add(self, entry_id: str, vector: Sequence[float]) -> None:
        if self._dim is not None and len(vector) != self._dim and self._rows:
            raise ValueError(f"vector has {len(vector)} dimensions, the index {self._dim}")
        self._dim = len(vector)
        self._rows[entry_id] = (vector, _norm(vector))

    def remove(self, entry_id: str) -> None:
        self._rows.pop(entry_id, None)

    def search(
        self, vector: Sequence[float], k: int, exclude: str | None = None
    ) -> list[tuple[str, float]]:
        if k <= 0 or not self._rows:
            return []
        if self._dim is not None and len(vector) != self._dim:
            raise ValueError(f"query has {len(vector)} dimensions, the index {self._dim}")
        nq = _norm(vector)
        scored = (
            (entry_id, _cosine(vector, nq, row, norm))
            for entry_id, (row, norm) in self._rows.items()
            if entry_id != exclude
        )
        # nlargest is a stable sort: equal scores keep insertion order.
        return heapq.nlargest(k, scored, key=operator.itemgetter(1))


class AssociativeGraph:
    """Entries linked by the cosine of their embeddings (see the module docstring).

    ``embedder`` defaults to ``HashingEmbedder()`` (256 dimensions, no dependency);
    ``backend`` to ``BruteForceBackend()``.
    """

    def __init__(self, embedder: Embedder | None = None, backend: Backend | None = None) -> None:
        self.embedder: Embedder = embedder if embedder is not None else HashingEmbedder()
        self.backend: Backend = backend if backend is not None else BruteForceBackend()
        self._vectors: dict[str, array[float]] = {}
        self._ordinals: dict[str, int] = {}
        self._next_ordinal = 0

    @property
    def ids(self) -> set[str]:
        """The ids in the graph (a copy)."""
        return set(self._vectors)

    def __len__(self) -> int:
        return len(self._vectors)

    def __contains__(self, entry_id: object) -> bool:
        return entry_id in self._vectors

    def _embed(self, entry: MemoryEntry) -> array[float]:
        vector = array("d", map(float, self.embedder(entry_text(entry))))
        if not vector or not all(map(math.isfinite, vector)):
            raise ValueError(f"the embedder gave no usable vector for entry {entry.id}")
        return vector

    def _keep(self, entry_id: str, vector: array[float]) -> None:
        self._vectors[entry_id] = vector
        if entry_id not in self._ordinals:
            self._ordinals[entry_id] = self._next_ordinal
            self._next_ordinal += 1

    def add(self, entry: MemoryEntry) -> None:
        """Embed ``entry`` and link it in; an entry already there is re-embedded in place."""
        vector = self._embed(entry)
        self.backend.add(entry.id, vector)
        self._keep(entry.id, vector)

    def add_many(self, entries: Iterable[MemoryEntry]) -> None:
        """``add`` each entry, in order; one batch when the backend has ``add_many``."""
        vectors = {e.id: self._embed(e) for e in entries}
        batch = getattr(self.backend, "add_many", None)
        if batch is not None:
            batch(list(vectors.items()))
        else:
            for entry_id, vector in vectors.items():
                self.backend.add(entry_id, vector)
        for entry_id, vector in vectors.items():
            self._keep(entry_id, vector)

    def vector(self, entry_id: str) -> array[float] | None:
        """The entry's vector (None when it is not in the graph)."""
        return self._vectors.get(entry_id)

    def remove(self, entry_id: str) -> None:
        """Unlink ``entry_id`` (no error when absent); re-adding it joins at the end."""
        if self._vectors.pop(entry_id, None) is not None:
            self.backend.remove(entry_id)
        self._ordinals.pop(entry_id, None)

    def ordinal(self, entry_id: str) -> int:
        """The entry's place in insertion order (what breaks ties); ``KeyError`` if absent."""
        try:
            return self._ordinals[entry_id]
        except KeyError:
            raise KeyError(f"entry {entry_id!r} is not in the graph") from None

    def related(self, entry_id: str, k: int = 5) -> list[tuple[str, float]]:
        """Up to ``k`` other entries, most similar first, cosine clamped to [0, 1].

        An id not in the graph has no relations (``[]``).
        """
        vector = self._vectors.get(entry_id)
        if vector is None or k <= 0:
            return []
        hits = self.backend.search(vector, k, exclude=entry_id)
        # The backend's order stands: equal cosines in insertion order, and cosines
        # below zero (all shown as 0.0) still in the order of their raw values.
        return [(i, _clamp01(score)) for i, score in hits if i != entry_id][:k]

    def similarity(self, a: str, b: str) -> float:
        """The clamped cosine of two entries in the graph (0.0 if either is absent)."""
        va, vb = self._vectors.get(a), self._vectors.get(b)
        if va is None or vb is None:
            return 0.0
        return _clamp01(_cosine(va, _norm(va), vb, _norm(vb)))


def build_graph(
    store: Population, embedder: Embedder | None = None, backend: Backend | None = None
) -> AssociativeGraph:
    """A graph over the store's living population, in the store's order."""
    graph = AssociativeGraph(embedder, backend)
    graph.add_many(store.alive())
    return graph


def store_related(
    store: Population,
    entry_id: str,
    k: int = 5,
    embedder: Embedder | None = None,
    backend: Backend | None = None,
) -> list[tuple[str, float]]:
    """One shot: build a graph over ``store`` and list ``entry_id``'s relations."""
    return build_graph(store, embedder, backend).related(entry_id, k)
