"""The knobs of a selection run: ``SurvivalConfig``, one dataclass, validated on creation.

The defaults are the published ones. The survival loop (``darwin_memo.sim.survival``)
and the ledger read it; it lives with the economy because every knob is an economic one
(credit gain, supporter share, merge rule, admission window).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from . import rules as economy
from .merge import DEFAULT_MERGE_THRESHOLD, MERGE_SIMILARITIES, SOURCE_POLICIES

__all__ = ["SurvivalConfig"]


@dataclass
class SurvivalConfig:
    """The knobs of a selection run (defaults are the published ones)."""

    cycles: int = 30
    credit_gain: float = economy.CREDIT_GAIN
    supporting_share: float = economy.SUPPORTING_SHARE
    consolidate_every: int | None = 5
    merge_threshold: float = DEFAULT_MERGE_THRESHOLD
    conflict_threshold: float | None = None
    write_experience: bool = True
    resource_scale: float | None = None
    admission_window: int = 0
    upkeep_requires_settlement: bool = False
    merge_source_policy: str = "off"
    #: "jaccard" (published) or "weighted" (tokens weighted by rarity; see consolidate).
    merge_similarity: str = "jaccard"

    def __post_init__(self) -> None:
        if self.cycles < 0:
            raise ValueError(f"cycles must be >= 0, got {self.cycles}")
        for name in ("credit_gain", "supporting_share", "merge_threshold"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        if self.resource_scale is not None and (
            not math.isfinite(self.resource_scale) or self.resource_scale <= 0
        ):
            raise ValueError(f"resource_scale must be positive, got {self.resource_scale!r}")
        if self.merge_source_policy not in SOURCE_POLICIES:
            raise ValueError(
                f"unknown merge_source_policy {self.merge_source_policy!r} "
                f"(choose from {', '.join(SOURCE_POLICIES)})"
            )

        if self.merge_similarity not in MERGE_SIMILARITIES:
            raise ValueError(
                f"unknown merge_similarity {self.merge_similarity!r} "
                f"(choose from {', '.join(MERGE_SIMILARITIES)})"
            )

    @property
    def effective_conflict_threshold(self) -> float:
        if self.conflict_threshold is None:
            return self.merge_threshold
        return self.conflict_threshold
