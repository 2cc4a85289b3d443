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

import math
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .types import EntryKind, MemoryEntry

if TYPE_CHECKING:
    from .retrieval import LexicalRetriever
    from .store import MemoryStore

__all__ = [
    "DEFAULT_MERGE_THRESHOLD",
    "MERGE_SIMILARITIES",
    "SOURCE_POLICIES",
    "Merge",
    "consolidate",
    "merge_groups",
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


def _candidates(store: MemoryStore, exclude: Collection[str]) -> list[MemoryEntry]:
    candidates = [
        e
        for e in store.alive()
        if e.id not in exclude and not e.pinned and e.probation <= 0 and e.juvenile <= 0
    ]
    candidates.sort(key=lambda e: e.energy, reverse=True)
    return candidates


def _joins(anchor: MemoryEntry, other: MemoryEntry, source_policy: str, shared: set[str]) -> bool:
    if source_policy == "shared":
        return bool(other.sources) and bool(shared & set(other.sources))
    if source_policy == "identical":
        return set(other.sources) == set(anchor.sources)
    return True


def _groups(
    store: MemoryStore,
    threshold: float,
    exclude: Collection[str],
    source_policy: str,
    similarity: str = "jaccard",
) -> list[list[MemoryEntry]]:
    """The published greedy clustering; lexical stores find partners through an index."""
    from .retrieval import LexicalRetriever

    if isinstance(store.retriever, LexicalRetriever) and threshold > 0:
        return _groups_indexed(
            store,
            store.retriever,
            threshold,
            exclude,
            source_policy,
            weighted=similarity == "weighted",
        )
    if similarity == "weighted":
        raise ValueError("merge similarity 'weighted' needs the lexical retriever")
    return _groups_pairwise(store, threshold, exclude, source_policy)


def _groups_indexed(
    store: MemoryStore,
    retriever: LexicalRetriever,
    threshold: float,
    exclude: Collection[str],
    source_policy: str,
    *,
    weighted: bool = False,
) -> list[list[MemoryEntry]]:
    """Same groups as the pairwise scan, without comparing every pair.

    Jaccard(a, b) >= t needs |a & b| >= t * max(|a|, |b|), so b must share one of
    a's ``|a| - ceil(t |a|) + 1`` rarest tokens (the prefix filter) and have a size
    between ``t |a|`` and ``|a| / t``. Only such partners are compared, exactly.
    """
    candidates = _candidates(store, exclude)
    tokens = [retriever.tokens(e) for e in candidates]
    df: dict[str, int] = {}
    for ts in tokens:
        for t in ts:
            df[t] = df.get(t, 0) + 1
    postings: dict[str, list[int]] = {}
    for i, ts in enumerate(tokens):
        for t in ts:
            postings.setdefault(t, []).append(i)
    n = len(candidates)
    weight = {t: (math.log(1.0 + n / (1.0 + c)) if weighted else 1.0) for t, c in df.items()}
    mass = [math.fsum(weight[t] for t in ts) for ts in tokens]
    consumed = [False] * len(candidates)
    groups: list[list[MemoryEntry]] = []
    for i, anchor in enumerate(candidates):
        if consumed[i]:
            continue
        if source_policy != "off" and not anchor.sources:
            continue
        ta = tokens[i]
        if not ta:
            continue  # an empty token set is similar to nothing
        size = mass[i]
        # Rarest first; stop once the tokens left out weigh less than t * size: a partner
        # missing every token of the prefix could not reach the threshold.
        prefix: list[str] = []
        left = size
        for t in sorted(ta, key=lambda t: (df[t], t)):
            if left < threshold * size - 1e-9 * size:
                break
            prefix.append(t)
            left -= weight[t]
        partners: set[int] = set()
        for t in prefix:
            partners.update(postings[t])
        group = [anchor]
        shared = set(anchor.sources)
        for j in sorted(partners):
            if j == i or consumed[j]:
                continue
            tb = tokens[j]
            slack = 1e-9 * (size + mass[j])
            if threshold * size > mass[j] + slack or mass[j] > size / threshold + slack:
                continue
            other = candidates[j]
            if not _joins(anchor, other, source_policy, shared):
                continue
            if weighted:
                inter = math.fsum(weight[t] for t in ta & tb)
                sim = inter / (size + mass[j] - inter)
            else:
                sim = len(ta & tb) / len(ta | tb)
            if sim >= threshold:
                group.append(other)
                consumed[j] = True
                if source_policy == "shared":
                    shared &= set(other.sources)
        if len(group) >= 2:
            consumed[i] = True
            groups.append(group)
    return groups


def _groups_pairwise(
    store: MemoryStore, threshold: float, exclude: Collection[str], source_policy: str
) -> list[list[MemoryEntry]]:
    candidates = _candidates(store, exclude)
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
            if not _joins(anchor, other, source_policy, shared):
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
    similarity: str = "jaccard",
) -> list[Merge]:
    """Find and perform every merge; returns what happened."""
    if source_policy not in SOURCE_POLICIES:
        raise ValueError(
            f"unknown source_policy {source_policy!r} (choose from {', '.join(SOURCE_POLICIES)})"
        )
    if similarity not in MERGE_SIMILARITIES:
        raise ValueError(
            f"unknown merge similarity {similarity!r} (choose from {', '.join(MERGE_SIMILARITIES)})"
        )
    merges: list[Merge] = []
    for group in _groups(store, threshold, exclude, source_policy, similarity):
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
    similarity: str = "jaccard",
) -> int:
    """Merge near-duplicates; returns the number of merges performed."""
    return len(merge_groups(store, cycle, threshold, exclude, source_policy, similarity))
