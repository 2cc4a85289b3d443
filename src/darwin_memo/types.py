"""Compatibility path: this module moved to ``darwin_memo.records.entry``.

``darwin_memo.types`` is a published module path, so it stays importable; code inside
the package imports from the new home.
"""

from .records.entry import (
    ALIVE_EPSILON,
    CycleStats,
    EntryKind,
    MemoryEntry,
    Outcome,
    Task,
    Trajectory,
    new_id,
    utc_now_iso,
)

__all__ = [
    "ALIVE_EPSILON",
    "CycleStats",
    "EntryKind",
    "MemoryEntry",
    "Outcome",
    "Task",
    "Trajectory",
    "new_id",
    "utc_now_iso",
]
