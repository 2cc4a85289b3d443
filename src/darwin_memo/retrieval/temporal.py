"""Time on the consult surface: age lines, conflict groups, recency weights.

Survival culls a stale entry only after it causes damage, so every answer shown
to an agent carries its age (when recorded, born tick, last settled tick), and
near-duplicate entries surface together, newest first, instead of one being
silently preferred. Ticks drive the economy; timestamps are for people, and a
missing timestamp is shown as "age unknown", never faked.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..records.entry import MemoryEntry

__all__ = [
    "CONFLICT_HEADER",
    "CONFLICT_LABEL",
    "age_annotation",
    "conflict_clusters",
    "newest_first",
    "recency_weight",
    "render_consult",
]

CONFLICT_LABEL = "conflicting/overlapping advice, newest first"
CONFLICT_HEADER = CONFLICT_LABEL + ":"

Similarity = Callable[[MemoryEntry, MemoryEntry], float]


def age_annotation(entry: MemoryEntry) -> str:
    """``[recorded <ts>; born tick <n>; last settled tick <m>]``."""
    recorded = f"recorded {entry.recorded_ts}" if entry.recorded_ts else "age unknown"
    settled = (
        f"last settled tick {entry.last_used_cycle}"
        if entry.last_used_cycle >= 0
        else "never settled"
    )
    return f"[{recorded}; born tick {entry.born_cycle}; {settled}]"


def newest_first(entries: Sequence[MemoryEntry]) -> list[MemoryEntry]:
    """Sort by (recorded_ts, born_cycle), newest first; unknown ages sort oldest."""
    return sorted(entries, key=lambda e: (e.recorded_ts, e.born_cycle), reverse=True)


def recency_weight(entry: MemoryEntry, now_cycle: int, half_life: float) -> float:
    """``0.5 ** (age / half_life)``, age counted from the last settlement (or birth)."""
    if half_life <= 0:
        raise ValueError(f"half_life must be positive, got {half_life!r}")
    anchor = entry.last_used_cycle if entry.last_used_cycle >= 0 else entry.born_cycle
    age = now_cycle - anchor
    if age <= 0:
        return 1.0
    return float(0.5 ** (age / half_life))


def conflict_clusters(
    entries: Sequence[MemoryEntry], similarity: Similarity, threshold: float
) -> list[list[MemoryEntry]]:
    """Groups of near-duplicates (similarity >= threshold to the group's anchor).

    Anchors are taken in input order; each group has at least two members and is
    sorted newest first.
    """
    consumed: set[int] = set()
    clusters: list[list[MemoryEntry]] = []
    for i, anchor in enumerate(entries):
        if i in consumed:
            continue
        group = [anchor]
        for j in range(i + 1, len(entries)):
            if j not in consumed and similarity(anchor, entries[j]) >= threshold:
                group.append(entries[j])
                consumed.add(j)
        if len(group) >= 2:
            consumed.add(i)
            clusters.append(newest_first(group))
    return clusters


def render_consult(
    hits: Sequence[MemoryEntry] | Sequence[tuple[MemoryEntry, float]],
    similarity: Similarity,
    threshold: float,
) -> str:
    """The consult text: the top answer with its age, or its conflict group.

    ``hits`` is what ``MemoryStore.retrieve`` returns, ``(entry, score)`` pairs (the
    published form), or plain entries; either way in rank order, the top one first.
    Scores are not shown: the text carries answers and ages only.
    """
    hits = _entries(hits)
    if not hits:
        return ""
    top = hits[0]
    for cluster in conflict_clusters(hits, similarity, threshold):
        if any(member.id == top.id for member in cluster):
            if len({m.answer for m in cluster}) < 2:
                break  # the same advice twice is not a conflict
            lines = [CONFLICT_HEADER]
            lines += [f"- {m.answer} {age_annotation(m)}" for m in cluster]
            return "\n".join(lines)
    return f"{top.answer}\n{age_annotation(top)}"


def _entries(
    hits: Sequence[MemoryEntry] | Sequence[tuple[MemoryEntry, float]],
) -> list[MemoryEntry]:
    """The entries of ``hits``, whether given bare or as ``(entry, score)`` pairs."""
    return [hit[0] if isinstance(hit, tuple) else hit for hit in hits]
