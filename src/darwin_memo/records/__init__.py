"""Layer 1, the records: plain dataclasses with dict round trips in the published JSON shape.

``entry``: ``MemoryEntry`` (a question/answer lesson with its energy and lifecycle
counters), ``EntryKind``, and the loop's records (``Outcome``, ``Task``, ``Trajectory``,
``CycleStats``). The published path ``darwin_memo.types`` re-exports the same names.
``ticket``: ``Ticket`` (a decision awaiting its measurement) and ``Changes`` (what one
ledger operation did, for a backend to write in one transaction).
"""

from .entry import (
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
from .ticket import Changes, Ticket

__all__ = [
    "ALIVE_EPSILON",
    "Changes",
    "CycleStats",
    "EntryKind",
    "MemoryEntry",
    "Outcome",
    "Task",
    "Ticket",
    "Trajectory",
    "new_id",
    "utc_now_iso",
]
