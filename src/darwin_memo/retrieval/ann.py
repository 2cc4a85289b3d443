"""An approximate nearest-neighbour index for ``EmbeddingRetriever``: an inverted file.

The exact search multiplies the query by every row of the store's float32 matrix,
which is memory-bound: about 10 ms per 100k rows of 256 dimensions. ``IvfIndex``
clusters the rows (spherical k-means on a sample, ``nlist`` centroids) and keeps,
per centroid, the rows nearest to it; a search compares the query with the
centroids and scans only the ``nprobe`` nearest lists. It is approximate: an entry
whose row sits in an unprobed list is missed (``bench/perf/ann_recall.py`` measures
recall against the exact search). Whatever it finds is scored exactly, as the exact
path scores it, so a result is never wrong, only possibly incomplete. The lists hold
a copy of their rows' vectors (the index doubles the matrix's memory).

Opt in with ``EmbeddingRetriever(embed, ann=IvfIndex())``. Below ``min_rows`` rows
the retriever searches exactly. Rows added after training are assigned to their
nearest centroid at the next search; the index retrains when the store has grown
to ``retrain_growth`` times the rows it was trained on. numpy is imported by the
retriever, never here.
"""

from __future__ import annotations

import math

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["IvfIndex"]


class IvfIndex:
    """Inverted lists over k-means centroids (see the module docstring).

    ``nlist``: the number of centroids (default ``2 * sqrt(rows)``); ``nprobe``: how
    many of the nearest lists a search scans (default a tenth of them, at least 8);
    ``min_rows``: below this many rows the retriever does not use the index;
    ``sample``: rows used to train the centroids; ``iterations``: k-means rounds;
    ``seed``: for the sample and the initial centroids.
    """

    def __init__(
        self,
        *,
        nlist: int | None = None,
        nprobe: int | None = None,
        min_rows: int = 20_000,
        sample: int = 50_000,
        iterations: int = 8,
        retrain_growth: float = 2.0,
        seed: int = 0,
    ) -> None:
        if nlist is not None and nlist < 1:
            raise ValueError(f"nlist must be at least 1, got {nlist}")
        if nprobe is not None and nprobe < 1:
            raise ValueError(f"nprobe must be at least 1, got {nprobe}")
        if min_rows < 1 or sample < 1 or iterations < 0 or retrain_growth <= 1:
            raise ValueError(
                "min_rows and sample must be positive, iterations >= 0, retrain_growth > 1"
            )
        self.nlist = nlist
        self.nprobe = nprobe
        self.min_rows = min_rows
        self.sample = sample
        self.iterations = iterations
        self.retrain_growth = retrain_growth
        self.seed = seed
        self._centroids: Any = None
        # Per centroid: the row numbers in it (int64) and a copy of their vectors, stored
        # together so a probe multiplies one contiguous block (gathering scattered rows
        # of the big matrix costs several times more per row than reading them in order).
        self._lists: list[Any] = []
        self._blocks: list[Any] = []
        self._pending: list[list[tuple[Any, Any]]] = []  # per centroid: (rows, vectors)
        self._gone: set[int] = set()  # rows removed since they were copied into a list
        self._trained_rows = 0
        self._assigned = 0  # rows [0, _assigned) are in a list

    @property
    def trained(self) -> bool:
        return self._centroids is not None

    def __repr__(self) -> str:
        return (
            f"IvfIndex(nlist={self.nlist}, nprobe={self.nprobe}, min_rows={self.min_rows}, "
            f"trained_rows={self._trained_rows}, assigned={self._assigned})"
        )

    def reset(self) -> None:
        """Forget the centroids and lists (the next search trains again)."""
        self._centroids = None
        self._lists, self._blocks, self._pending = [], [], []
        self._gone = set()
        self._trained_rows = self._assigned = 0

    def forget(self, row: int) -> None:
        """Row ``row`` was removed (its copy in a list must no longer be found)."""
        if self._centroids is not None:
            self._gone.add(row)

    def scores(self, np: Any, matrix: Any, rows: int, query: Any) -> tuple[Any, Any]:
        """Rows (below ``rows``) of the ``nprobe`` lists nearest to ``query``, and their
        float32 similarities, in row order.

        ``matrix`` holds unit rows (zero rows are removed entries: their copies here
        may still score, and the caller drops rows it no longer holds); ``query`` is a
        unit float32 vector. Trains or extends the index first when it needs to.
        """
        if self._centroids is None or rows >= self.retrain_growth * self._trained_rows:
            self._train(np, matrix, rows)
        elif rows > self._assigned:
            self._assign(np, matrix, self._assigned, rows)
        elif rows < self._assigned:  # the matrix was rebuilt smaller: start again
            self._train(np, matrix, rows)
        near = self._centroids @ query
        probe = min(self.nprobe or max(8, len(self._lists) // 10), len(self._lists))
        nearest = np.argpartition(-near, probe - 1)[:probe]
        found, sims = [], []
        for c in nearest.tolist():
            if self._pending[c]:
                self._lists[c] = np.concatenate([self._lists[c], *(r for r, _ in self._pending[c])])
                self._blocks[c] = np.concatenate(
                    [self._blocks[c], *(v for _, v in self._pending[c])]
                )
                self._pending[c] = []
            if len(self._lists[c]):
                found.append(self._lists[c])
                sims.append(self._blocks[c] @ query)
        if not found:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        rows_found, sims_found = np.concatenate(found), np.concatenate(sims)
        if self._gone:
            live = ~np.isin(rows_found, np.fromiter(self._gone, dtype=np.int64))
            rows_found, sims_found = rows_found[live], sims_found[live]
        order = np.argsort(rows_found, kind="stable")  # row order: ties keep insertion order
        return rows_found[order], sims_found[order]

    # -- building ----------------------------------------------------------------------

    def _train(self, np: Any, matrix: Any, rows: int) -> None:
        rng = np.random.default_rng(self.seed)
        live = np.flatnonzero(np.any(matrix[:rows] != 0, axis=1))
        nlist = self.nlist or max(1, int(2 * math.sqrt(max(len(live), 1))))
        nlist = max(1, min(nlist, len(live)))
        take = live if len(live) <= self.sample else rng.choice(live, self.sample, replace=False)
        data = matrix[np.sort(take)]
        if len(data) == 0:
            centroids = np.zeros((1, matrix.shape[1]), dtype=np.float32)
        else:
            nlist = min(nlist, len(data))
            centroids = data[rng.choice(len(data), nlist, replace=False)].copy()
            for _ in range(self.iterations):
                nearest = np.argmax(data @ centroids.T, axis=1)
                order = np.argsort(nearest, kind="stable")
                members = np.flatnonzero(np.bincount(nearest, minlength=nlist))
                starts = np.searchsorted(nearest[order], members)
                sums = np.add.reduceat(data[order], starts, axis=0)
                norms = np.linalg.norm(sums, axis=1)
                keep = norms > 0  # an empty cluster keeps its centroid
                centroids[members[keep]] = sums[keep] / norms[keep, None]
        self._centroids = centroids.astype(np.float32, copy=False)
        dims = matrix.shape[1]
        self._lists = [np.zeros(0, dtype=np.int64) for _ in range(len(centroids))]
        self._blocks = [np.zeros((0, dims), dtype=np.float32) for _ in range(len(centroids))]
        self._pending = [[] for _ in range(len(centroids))]
        self._trained_rows = max(rows, 1)
        self._assigned = 0
        self._gone = set()  # removed rows are zero in the matrix, so in the new copies
        self._assign(np, matrix, 0, rows)

    def _assign(self, np: Any, matrix: Any, start: int, stop: int) -> None:
        step = 8192  # bounded temporaries: step x nlist scores at a time
        for lo in range(start, stop, step):
            hi = min(stop, lo + step)
            nearest = np.argmax(matrix[lo:hi] @ self._centroids.T, axis=1)
            order = np.argsort(nearest, kind="stable")
            bounds = np.searchsorted(nearest[order], np.arange(len(self._lists) + 1))
            rows = np.arange(lo, hi, dtype=np.int64)[order]
            vectors = matrix[lo:hi][order]
            for c in np.flatnonzero(np.diff(bounds)).tolist():
                a, b = bounds[c], bounds[c + 1]
                self._pending[c].append((rows[a:b], vectors[a:b]))
        self._assigned = stop
