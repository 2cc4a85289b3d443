"""An approximate nearest-neighbour backend for the associative graph: turbovec.

``TurbovecBackend(dim, bit_width=4)`` keeps every vector quantized to ``bit_width``
bits per coordinate in a ``turbovec.IdMapIndex`` and answers a search from the
compressed codes: a 100k-entry graph of 256-dimensional vectors fits in about 13 MB
instead of 200 MB, and a search is milliseconds instead of the brute-force scan's
half second (``bench/organic/scale.py`` measures both, and the recall). Scores are
approximate cosines (vectors are normalized on the way in), so two entries close in
score may swap places; use ``BruteForceBackend`` where exact order matters.

Needs the ``organic`` extra (``pip install 'darwin-memo[organic]'``: turbovec and
numpy). turbovec requires ``dim`` to be a multiple of 8 (``HashingEmbedder``'s 256 is).
Entry ids map to integer keys in insertion order; ties go by that order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

__all__ = ["TurbovecBackend"]


def _modules() -> tuple[Any, Any]:
    try:
        import numpy
        import turbovec  # type: ignore[import-untyped,import-not-found,unused-ignore]
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "TurbovecBackend needs the organic extra: pip install 'darwin-memo[organic]'"
        ) from exc
    return numpy, turbovec


class TurbovecBackend:
    """A turbovec index keyed by entry id (see the module docstring)."""

    def __init__(self, dim: int, bit_width: int = 4) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim <= 0 or dim % 8:
            raise ValueError(f"dim must be a positive multiple of 8, got {dim!r}")
        if isinstance(bit_width, bool) or not isinstance(bit_width, int):
            raise ValueError(f"bit_width must be an integer, got {bit_width!r}")
        self._np, turbovec = _modules()
        try:
            self._index = turbovec.IdMapIndex(dim=dim, bit_width=bit_width)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"turbovec refused bit_width={bit_width}: {exc}") from None
        self.dim = dim
        self.bit_width = bit_width
        self._keys: dict[str, int] = {}
        self._ids: dict[int, str] = {}
        self._next_key = 0

    def __len__(self) -> int:
        return len(self._keys)

    def _row(self, vector: Sequence[float]) -> Any:
        """``vector`` as a unit float32 row of shape (1, dim)."""
        if len(vector) != self.dim:
            raise ValueError(f"vector has {len(vector)} dimensions, the index {self.dim}")
        row = self._np.asarray(vector, dtype=self._np.float64).reshape(1, self.dim)
        norm = float(math.sqrt(float((row * row).sum())))
        if norm > 0.0:
            row = row / norm
        return row.astype(self._np.float32)

    def add(self, entry_id: str, vector: Sequence[float]) -> None:
        row = self._row(vector)
        key = self._keys.get(entry_id)
        if key is None:
            key = self._next_key
            self._next_key += 1
        else:
            self._index.remove(key)  # re-added: new vector, same place in the order
        self._index.add_with_ids(row, self._np.asarray([key], dtype=self._np.uint64))
        self._keys[entry_id] = key
        self._ids[key] = entry_id

    def add_many(self, items: Sequence[tuple[str, Sequence[float]]]) -> None:
        """Index many new entries in one batch (much faster than one ``add`` each)."""
        fresh = [(i, v) for i, v in items if i not in self._keys]
        for entry_id, vector in items:
            if entry_id in self._keys:
                self.add(entry_id, vector)
        if not fresh:
            return
        rows = self._np.vstack([self._row(v) for _, v in fresh])
        keys = list(range(self._next_key, self._next_key + len(fresh)))
        self._index.add_with_ids(rows, self._np.asarray(keys, dtype=self._np.uint64))
        for (entry_id, _), key in zip(fresh, keys, strict=True):
            self._keys[entry_id] = key
            self._ids[key] = entry_id
        self._next_key += len(fresh)

    def remove(self, entry_id: str) -> None:
        key = self._keys.pop(entry_id, None)
        if key is not None:
            del self._ids[key]
            self._index.remove(key)

    def search(
        self, vector: Sequence[float], k: int, exclude: str | None = None
    ) -> list[tuple[str, float]]:
        if k <= 0 or not self._keys:
            return []
        want = min(len(self._keys), k + (1 if exclude in self._keys else 0))
        scores, keys = self._index.search(self._row(vector), want)
        hits = [
            (int(key), float(score))
            for score, key in zip(scores[0], keys[0], strict=True)
            if self._ids.get(int(key)) not in (None, exclude)
        ]
        hits.sort(key=lambda pair: (-pair[1], pair[0]))  # ties: insertion order
        return [(self._ids[key], score) for key, score in hits[:k]]
