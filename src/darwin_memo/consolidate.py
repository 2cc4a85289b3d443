"""Consolidation: near-duplicate entries merge into one heir.

Candidates are living entries that are free to merge: not escrowed by an open
ticket (``exclude``), not pinned, not on probation, not juvenile. Taking
candidates by energy, highest first, each unconsumed anchor gathers every other
unconsumed candidate at least ``threshold`` similar to it (and, under a strict
source policy, agreeing on provenance). A group of two or more becomes one
``consolidated`` entry: the anchor's question, the first three distinct
answers, the union of sources, the members' summed energy up to the cap, their
summed uses, and their ids as lineage. The members go to the graveyard.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .types import EntryKind, MemoryEntry

if TYPE_CHECKING:
    from .store import MemoryStore

__all__ = ["DEFAULT_MERGE_THRESHOLD", "SOURCE_POLICIES", "Merge", "consolidate", "merge_groups"]

DEFAULT_MERGE_THRESHOLD = 0.55
SOURCE_POLICIES = ("off", "shared", "identical")


@dataclass(frozen=True)
class Merge:
    """One merge: the heir, the member ids it absorbed, and energy clipped at the cap."""

    heir: MemoryEntry
    members: tuple[str, ...]
    clipped: float


def _groups(
    store: MemoryStore, threshold: float, exclude: Collection[str], source_policy: str
) -> list[list[MemoryEntry]]:
    candidates = [
        e
        for e in store.alive()
        if e.id not in exclude and not e.pinned and e.probation <= 0 and e.juvenile <= 0
    ]
    candidates.sort(key=lambda e: e.energy, reverse=True)
    consumed: set[str] = set()
    groups: list[list[MemoryEntry]] = []
    for anchor in candidates:
        if anchor.id in consumed:
            continue
        if source_policy != "off" and not anchor.sources:
            continue
        group = [anchor]
        shared = set(anchor.sources)
        for other in candidates:
            if other.id == anchor.id or other.id in consumed:
                continue
            if source_policy == "shared":
                if not other.sources or not (shared & set(other.sources)):
                    continue
            elif source_policy == "identical" and set(other.sources) != set(anchor.sources):
                continue
            if store.similarity(anchor, other) >= threshold:
                group.append(other)
                consumed.add(other.id)
                if source_policy == "shared":
                    shared &= set(other.sources)
        if len(group) >= 2:
            consumed.add(anchor.id)
            groups.append(group)
    return groups


def merge_groups(
    store: MemoryStore,
    cycle: int,
    threshold: float = DEFAULT_MERGE_THRESHOLD,
    exclude: Collection[str] = frozenset(),
    source_policy: str = "off",
) -> list[Merge]:
    """Find and perform every merge; returns what happened."""
    if source_policy not in SOURCE_POLICIES:
        raise ValueError(
            f"unknown source_policy {source_policy!r} (choose from {', '.join(SOURCE_POLICIES)})"
        )
    merges: list[Merge] = []
    for group in _groups(store, threshold, exclude, source_policy):
        answers: list[str] = []
        for m in group:
            if m.answer not in answers:
                answers.append(m.answer)
        sources: list[str] = []
        for m in group:
            sources.extend(s for s in m.sources if s not in sources)
        heir = MemoryEntry(
            question=group[0].question,
            answer=" ".join(answers[:3]),
            kind=EntryKind.CONSOLIDATED,
            sources=sources,
            born_cycle=cycle,
            recorded_ts=max((m.recorded_ts for m in group), default=""),
            uses=sum(m.uses for m in group),
            lineage=[m.id for m in group],
        )
        clipped = store.merge_into(heir, [m.id for m in group])
        merges.append(Merge(heir, tuple(m.id for m in group), clipped))
    return merges


def consolidate(
    store: MemoryStore,
    cycle: int,
    threshold: float = DEFAULT_MERGE_THRESHOLD,
    exclude: Collection[str] = frozenset(),
    source_policy: str = "off",
) -> int:
    """Merge near-duplicates; returns the number of merges performed."""
    return len(merge_groups(store, cycle, threshold, exclude, source_policy))
