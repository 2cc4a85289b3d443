"""Compatibility path: this module moved to ``darwin_memo.sim.diagnose``.

``darwin_memo.diagnose`` is a published module path, so it stays importable; code inside
the package imports from the new home.
"""

from .sim.diagnose import (
    MIN_DEATHS,
    MIN_DECIDES,
    MIN_QUIET_TICKS,
    MIN_SETTLES,
    SILENCE_LIMIT,
    STALE_TICKET_TICKS,
    STARVED_SHARE,
    Finding,
    selection_findings,
)

__all__ = [
    "MIN_DEATHS",
    "MIN_DECIDES",
    "MIN_QUIET_TICKS",
    "MIN_SETTLES",
    "SILENCE_LIMIT",
    "STALE_TICKET_TICKS",
    "STARVED_SHARE",
    "Finding",
    "selection_findings",
]
