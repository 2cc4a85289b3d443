"""Compatibility path: this module moved to ``darwin_memo.sim.survival``.

``darwin_memo.survival`` is a published module path, so it stays importable; code inside
the package imports from the new home.
"""

from .sim.survival import (
    EXPERIENCE_DEDUP,
    SurvivalConfig,
    SurvivalLoop,
    SurvivalReport,
    advance_lifecycle,
    assign_credit,
    death_cause,
    is_silent,
)

__all__ = [
    "EXPERIENCE_DEDUP",
    "SurvivalConfig",
    "SurvivalLoop",
    "SurvivalReport",
    "advance_lifecycle",
    "assign_credit",
    "death_cause",
    "is_silent",
]
