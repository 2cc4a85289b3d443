"""Retriever variants measured on LoCoMo and not shipped (docs/retrieval.md says why).

``RRFHybrid``: ``HybridRetriever`` with reciprocal-rank fusion (Cormack, Clarke and
Buettcher, SIGIR 2009) in place of the weighted blend: the sum over the lexical
and the dense ranking of ``1 / (rrf_k + rank)``, divided by its largest possible
value so that an entry first in both scores 1.0. Scale-free (only each
retriever's order counts), and on LoCoMo's dev half no better than the blend.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from darwin_memo.retrieval.embedding import HybridRetriever

__all__ = ["RRF_K", "RRFHybrid"]

#: The rank offset the paper proposed, not tuned here.
RRF_K = 60


class RRFHybrid(HybridRetriever):
    """``HybridRetriever`` fused by reciprocal rank (see the module docstring)."""

    def __init__(self, embed: Any | None = None, *, rrf_k: int = RRF_K, **kwargs: Any) -> None:
        if isinstance(rrf_k, bool) or not isinstance(rrf_k, int) or rrf_k < 1:
            raise ValueError(f"rrf_k must be a positive integer, got {rrf_k!r}")
        super().__init__(embed, **kwargs)
        self.rrf_k = rrf_k

    def _blend(
        self, lexical: Iterable[tuple[str, float]], dense: Iterable[tuple[str, float]]
    ) -> dict[str, float]:
        lex, den = dict(lexical), dict(dense)
        fused = dict.fromkeys([*den, *lex], 0.0)
        top = 2.0 / (self.rrf_k + 1)
        for scores in (lex, den):
            ranked = sorted(scores, key=lambda entry_id: -scores[entry_id])  # ties: as given
            for rank, entry_id in enumerate(ranked, 1):
                fused[entry_id] += 1.0 / (self.rrf_k + rank) / top
        return fused
