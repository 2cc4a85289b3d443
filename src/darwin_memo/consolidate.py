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

import bisect
import itertools
import math
from collections import Counter
from collections.abc import Callable, Collection

from .records import record
from .types import EntryKind, MemoryEntry

TYPE_CHECKING = False
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


@record(frozen=True)
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
    """Same groups as the pairwise scan, without comparing every pair."""
    candidates = _candidates(store, exclude)
    stored = getattr(store, "token_sets", None)  # a database store keeps them per row
    tokens = stored(candidates) if stored else [retriever.tokens(e) for e in candidates]
    if weighted:
        partners = _weighted_partners(tokens, threshold)
    else:
        partners = _jaccard_partners(tokens, threshold)
    consumed: set[int] = set()
    groups: list[list[MemoryEntry]] = []
    for i, anchor in enumerate(candidates):
        if i in consumed:
            continue
        if source_policy != "off" and not anchor.sources:
            continue
        if not tokens[i]:
            continue  # an empty token set is similar to nothing
        group = [anchor]
        shared = set(anchor.sources)
        for j in partners(i, consumed):
            if j == i:
                continue
            other = candidates[j]
            if not _joins(anchor, other, source_policy, shared):
                continue
            group.append(other)
            consumed.add(j)
            if source_policy == "shared":
                shared &= set(other.sources)
        if len(group) >= 2:
            consumed.add(i)
            groups.append(group)
    return groups


def _jaccard_partners(
    tokens: list[frozenset[str]], threshold: float
) -> Callable[[int, set[int]], list[int]]:
    """``partners(i, skip)``: each j not in ``skip`` (ascending) with Jaccard >= threshold.

    A set-similarity join (prefix, size and positional filters, as in AllPairs and
    PPJoin). Tokens are put in one global order, rarest first, and renamed by their
    rank (small ints). If two sets reach the threshold, their overlap is at least
    ``need(|x|) = ceil(t |x|)`` of either, so the first token they share lies among
    the first ``|x| - need(|x|) + 1`` tokens (the prefix) of both: only prefixes are
    indexed. Where that first shared token sits at position ``i`` of ``a`` and ``j``
    of ``b``, the overlap is at most ``1 + min(|a| - i - 1, |b| - j - 1)``, which must
    reach ``alpha = t (|a| + |b|) / (1 + t)``: lessons written from one template share
    their common words late in the order and are pruned here by the block, without
    being compared.

    Survivors then meet PPJoin's prefix-overlap bound before being compared: every
    token the two share up to the end of the prefix that ends first (in the global
    order) lies in both prefixes, and after it at most the rest of that set can be
    shared, so ``overlap <= |P_a & P_b| + (|s| - |P_s|)`` for that set ``s``. The
    prefix overlaps of all partners are counted at once (``Counter`` over the
    index's blocks). Survivors are compared exactly. Every bound is rounded towards
    keeping a pair.
    """
    df = Counter(itertools.chain.from_iterable(tokens))
    names = sorted(df, key=lambda t: (df[t], t))
    rank = {t: r for r, t in enumerate(names)}
    del names
    ordered = [sorted(map(rank.__getitem__, ts)) for ts in tokens]
    del rank
    sets = [frozenset(seq) for seq in ordered]
    set_size = [len(seq) for seq in ordered]

    def prefix_len(size: int) -> int:
        need = math.ceil(threshold * size - 1e-9 * size)
        return max(0, min(size, size - need + 1))

    plen = [prefix_len(size) for size in set_size]
    # the rank of each set's last prefix token (-1 for an empty prefix)
    last = [seq[p - 1] if p else -1 for seq, p in zip(ordered, plen, strict=True)]
    # A token in one prefix only pairs nobody: only tokens two prefixes hold are indexed.
    in_prefixes = Counter(
        itertools.chain.from_iterable(seq[:p] for seq, p in zip(ordered, plen, strict=True))
    )
    # token -> (set sizes ascending, [(positions ascending, member ids aligned)])
    staged: dict[int, dict[int, list[int]]] = {}
    n = len(ordered)
    #: each set's prefix tokens that are indexed, with their positions
    probes: list[list[tuple[int, int]]] = []
    for j, seq in enumerate(ordered):
        size = len(seq)
        mine = []
        for pos in range(plen[j]):
            t = seq[pos]
            if in_prefixes[t] < 2:
                continue
            mine.append((pos, t))
            by_size = staged.get(t)
            if by_size is None:
                staged[t] = {size: [pos * n + j]}
            else:
                block = by_size.get(size)
                if block is None:
                    by_size[size] = [pos * n + j]
                else:
                    block.append(pos * n + j)
        probes.append(mine)
    del in_prefixes
    index: dict[int, tuple[list[int], list[tuple[list[int], list[int]]]]] = {}
    for t, by_size in staged.items():
        sizes = sorted(by_size)
        blocks = []
        for size in sizes:
            keys = by_size[size]
            keys.sort()
            blocks.append(([k // n for k in keys], [k % n for k in keys]))
        index[t] = (sizes, blocks)
    del staged
    ratio = threshold / (1.0 + threshold)
    shrink, grow = 1 - 1e-9, 1 + 1e-9
    bisect_left, bisect_right = bisect.bisect_left, bisect.bisect_right

    def partners(i: int, skip: set[int]) -> list[int]:
        seq = ordered[i]
        sa = len(seq)
        pa_len = plen[i]
        lo, hi = threshold * sa * shrink, sa / threshold * grow
        found: set[int] = set()
        met: list[list[int]] = []  # every block in the size range, for the prefix overlaps
        for pos_a, tok in probes[i]:
            room_a = sa - pos_a  # this token and every token of a after it
            # alpha = ratio (sa + sb) must not exceed room_a: a bound on sb too
            top = min(hi, room_a / ratio * grow - sa)
            sizes, blocks = index[tok]
            first = bisect_left(sizes, lo)
            end = bisect_right(sizes, hi)
            cut_end = bisect_right(sizes, top, first, end) if top >= lo else first
            for b in range(first, end):
                positions, members = blocks[b]
                met.append(members)
                if b >= cut_end:
                    continue
                sb = sizes[b]
                alpha = ratio * (sa + sb) * shrink
                if room_a < alpha:
                    continue
                # b's own room, sb - pos_b, must reach alpha too: pos_b <= sb - alpha
                cut = bisect_right(positions, sb - alpha)
                if cut:
                    found.update(members[:cut])
        found -= skip
        found.discard(i)
        if not found:
            return []
        shared = Counter(itertools.chain.from_iterable(met))  # |P_a & P_b| for each b met
        last_a = last[i]
        rest_a = sa - pa_len
        ta = sets[i]
        out = []
        for j in found:
            sb = set_size[j]
            rest = rest_a if last_a <= last[j] else sb - plen[j]
            if shared[j] + rest < ratio * (sa + sb) * shrink:
                continue
            # Exact Jaccard, as the pairwise scan computes it (same float expression).
            inter = len(ta & sets[j])
            if inter / (sa + sb - inter) >= threshold:
                out.append(j)
        out.sort()
        return out

    return partners


def _weighted_partners(
    tokens: list[frozenset[str]], threshold: float
) -> Callable[[int, set[int]], list[int]]:
    """``partners(i, skip)`` under rarity-weighted Jaccard (prefix and size filters on mass).

    A partner missing every token of ``i``'s rarest-first prefix (the tokens whose
    weight is needed to reach ``t`` of its mass) could not reach the threshold.
    """
    df: dict[str, int] = {}
    for ts in tokens:
        for t in ts:
            df[t] = df.get(t, 0) + 1
    postings: dict[str, list[int]] = {}
    for i, ts in enumerate(tokens):
        for t in ts:
            postings.setdefault(t, []).append(i)
    n = len(tokens)
    weight = {t: math.log(1.0 + n / (1.0 + c)) for t, c in df.items()}
    mass = [math.fsum(weight[t] for t in ts) for ts in tokens]

    def partners(i: int, skip: set[int]) -> list[int]:
        ta = tokens[i]
        size = mass[i]
        prefix: list[str] = []
        left = size
        for t in sorted(ta, key=lambda t: (df[t], t)):
            if left < threshold * size - 1e-9 * size:
                break
            prefix.append(t)
            left -= weight[t]
        found: set[int] = set()
        for t in prefix:
            found.update(postings[t])
        found -= skip
        out = []
        for j in sorted(found):
            slack = 1e-9 * (size + mass[j])
            if threshold * size > mass[j] + slack or mass[j] > size / threshold + slack:
                continue
            inter = math.fsum(weight[t] for t in ta & tokens[j])
            if inter / (size + mass[j] - inter) >= threshold:
                out.append(j)
        return out

    return partners


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
    planned: list[tuple[MemoryEntry, list[str]]] = []
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
        planned.append((heir, [m.id for m in group]))
    many = getattr(store, "merge_many", None)  # a database store writes the members in bulk
    if many is not None:
        clipped = many(planned)
    else:
        clipped = [store.merge_into(heir, ids) for heir, ids in planned]
    return [
        Merge(heir, tuple(ids), clip) for (heir, ids), clip in zip(planned, clipped, strict=True)
    ]


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
