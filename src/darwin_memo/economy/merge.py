"""The merge rule of consolidation: what a group of near-duplicates becomes.

A group of two or more becomes one ``consolidated`` entry: the anchor's question,
the first three distinct answers, the union of sources, the members' summed energy
up to the cap, their summed uses, and their ids as lineage. The members go to the
graveyard. Which entries form a group is the similarity join's business
(``darwin_memo.retrieval.simjoin``); this module holds the rule and its knobs.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..records.entry import EntryKind, MemoryEntry

__all__ = [
    "DEFAULT_MERGE_THRESHOLD",
    "MERGE_SIMILARITIES",
    "SOURCE_POLICIES",
    "Merge",
    "heir",
]

DEFAULT_MERGE_THRESHOLD = 0.55
SOURCE_POLICIES = ("off", "shared", "identical")
#: "jaccard": the published token-set overlap (the default). "weighted": the same
#: overlap with every token weighted by its rarity (IDF over the candidates), so
#: lessons written from one template do not count as duplicates because of it.
MERGE_SIMILARITIES = ("jaccard", "weighted")


@dataclass(frozen=True)
class Merge:
    """One merge: the heir, the member ids it absorbed, and energy clipped at the cap."""

    heir: MemoryEntry
    members: tuple[str, ...]
    clipped: float


def heir(group: list[MemoryEntry], cycle: int) -> tuple[MemoryEntry, list[str]]:
    """The heir of a group (its anchor first) and the ids it absorbs."""
    answers: list[str] = []  # the first three distinct answers (a group may hold thousands)
    for m in group:
        if m.answer not in answers:
            answers.append(m.answer)
            if len(answers) == 3:
                break
    sources = dict.fromkeys(s for m in group for s in m.sources)  # distinct, first seen first
    heir = MemoryEntry(
        question=group[0].question,
        answer=" ".join(answers),
        kind=EntryKind.CONSOLIDATED,
        sources=list(sources),
        born_cycle=cycle,
        recorded_ts=max((m.recorded_ts for m in group), default=""),
        uses=sum(m.uses for m in group),
        lineage=[m.id for m in group],
    )
    return heir, [m.id for m in group]
