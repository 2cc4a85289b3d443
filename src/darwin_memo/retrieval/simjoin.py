"""The similarity join of consolidation: which near-duplicates merge, found fast.

Candidates are living entries that are free to merge: not escrowed by an open
ticket (``exclude``), not pinned, not on probation, not juvenile. Taking
candidates by energy, highest first, each unconsumed anchor gathers every other
unconsumed candidate at least ``threshold`` similar to it (and, under a strict
source policy, agreeing on provenance). This module finds those groups (through
the lexical index, the compiled join or a pairwise scan) and ``merge_groups``
hands each to the merge rule (``darwin_memo.economy.merge``: the heir and its
energy), then to the store.

At over 1,000 lines this module is long on purpose: the join is one algorithm (the
greedy grouping over a prefix-filtered similarity search, the settled-entries shortcut,
the rarity-weighted variant and the Python twin of the compiled join), and its helpers
share private state and invariants that would have to become public to be split apart.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import math
import operator
from array import array
from collections import Counter
from collections.abc import Callable, Collection, Generator, Iterator

from .. import collector, native
from ..economy.merge import (
    DEFAULT_MERGE_THRESHOLD,
    MERGE_SIMILARITIES,
    SOURCE_POLICIES,
    Merge,
    heir,
)
from ..records.entry import MemoryEntry

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Hashable, Iterable, Mapping, Sequence
    from typing import TypeVar

    K = TypeVar("K", bound=Hashable)

    from ..backends.interface import Population
    from .lexical import LexicalRetriever

__all__ = ["consolidate", "merge_groups"]


def _candidates(store: Population, exclude: Collection[str]) -> list[MemoryEntry]:
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


def _group_batches(
    store: Population,
    threshold: float,
    exclude: Collection[str],
    source_policy: str,
    similarity: str = "jaccard",
) -> Generator[list[list[MemoryEntry]], None, None]:
    """The published greedy clustering (lexical stores find partners through an index),
    in batches, in order: with the compiled join, a batch as soon as the join (on another
    thread) has found it, so that its members are read meanwhile."""
    from .lexical import LexicalRetriever

    weighted = similarity == "weighted"
    if isinstance(store.retriever, LexicalRetriever) and (threshold > 0 or weighted):
        yield from _gather(store, store.retriever, threshold, exclude, source_policy, weighted)
        return
    if weighted:
        raise ValueError("merge similarity 'weighted' needs the lexical retriever")
    yield _groups_pairwise(store, threshold, exclude, source_policy)


def _groups_indexed(
    store: Population,
    retriever: LexicalRetriever,
    threshold: float,
    exclude: Collection[str],
    source_policy: str,
    *,
    weighted: bool = False,
) -> list[list[MemoryEntry]]:
    """Same groups as the pairwise scan, without comparing every pair."""
    with collector.paused():  # the join allocates millions of small containers
        batches = _gather(store, retriever, threshold, exclude, source_policy, weighted)
        return [group for batch in batches for group in batch]


class MergeCandidates:
    """The candidates of one consolidation, in the greedy order (energy, highest first).

    ``ids``, ``tokens`` (each one's lexical token set) and ``sources`` are aligned;
    ``entries(indices)`` gives the entries at those positions, read only for the
    members of a group. A database store builds this from its rows without
    materializing every entry (``SqlStore.merge_candidates``).

    With a store that remembers settled entries (see ``SETTLED``): ``settled`` says
    whether each candidate is settled, ``others`` holds the token sets of the living
    entries that are not candidates (excluded, pinned, on probation, juvenile) and
    ``others_settled`` whether each of those is, and ``settle(indices)`` marks
    candidates settled. ``settled`` and ``settle`` are None otherwise.
    (A plain class, not a record: the one-shot ledger path imports this module.)
    """

    __slots__ = (
        "_tokens",
        "entries",
        "ids",
        "others",
        "others_settled",
        "settle",
        "settled",
        "sources",
        "texts",
    )

    def __init__(
        self,
        ids: list[str],
        tokens: list[frozenset[str]] | None,
        sources: list[tuple[str, ...]],
        entries: Callable[[list[int]], list[MemoryEntry]],
        settled: list[bool] | None = None,
        others: list[frozenset[str]] | None = None,
        others_settled: list[bool] | None = None,
        settle: Callable[[list[int]], None] | None = None,
        texts: list[str] | None = None,
    ) -> None:
        if tokens is None and texts is None:
            raise ValueError("MergeCandidates needs tokens or texts")
        self.ids = ids
        #: Each candidate's tokens as one whitespace-separated text, where the store
        #: keeps them so (the compiled join splits them itself); ``tokens`` then makes
        #: the sets from them when first asked.
        self.texts = texts
        self._tokens = tokens
        self.sources = sources
        self.entries = entries
        self.settled = settled
        self.others = others if others is not None else []
        self.others_settled = others_settled if others_settled is not None else []
        self.settle = settle

    @property
    def tokens(self) -> list[frozenset[str]]:
        if self._tokens is None:
            assert self.texts is not None
            self._tokens = [frozenset(text.split()) for text in self.texts]
        return self._tokens

    def join_input(self) -> list[str] | list[frozenset[str]]:
        """What the compiled join reads: the texts where there are any, else the sets."""
        if self._tokens is None and self.texts:
            return self.texts
        return self.tokens


def _read_candidates(
    store: Population,
    retriever: LexicalRetriever,
    exclude: Collection[str],
    need_sources: bool,
    rule: str | None = None,
) -> MergeCandidates:
    reader = getattr(store, "merge_candidates", None)  # a database store reads its rows
    if reader is not None:
        found: MergeCandidates | None = reader(exclude, need_sources, rule)
        if found is not None:
            return found
    candidates = _candidates(store, exclude)
    stored = getattr(store, "token_sets", None)  # a database store keeps them per row
    tokens = stored(candidates) if stored else [retriever.tokens(e) for e in candidates]
    return MergeCandidates(
        ids=[e.id for e in candidates],
        tokens=tokens,
        sources=[tuple(e.sources) for e in candidates] if need_sources else [],
        entries=lambda indices: [candidates[i] for i in indices],
    )


def _joins_sources(
    anchor: tuple[str, ...], other: tuple[str, ...], policy: str, shared: set[str]
) -> bool:
    """``_joins`` on the sources alone."""
    if policy == "shared":
        return bool(other) and bool(shared.intersection(other))
    if policy == "identical":
        return set(other) == set(anchor)
    return True


def _gather(
    store: Population,
    retriever: LexicalRetriever,
    threshold: float,
    exclude: Collection[str],
    source_policy: str,
    weighted: bool,
) -> Generator[list[list[MemoryEntry]], None, None]:
    # Settled entries are kept for the published rule with no source policy only.
    rule = settled_rule(threshold) if source_policy == "off" and not weighted else None
    found = _read_candidates(store, retriever, exclude, source_policy != "off", rule)
    if found.settled is not None and found.settle is not None:
        for batch in _gather_settled(found, threshold):
            yield _as_entries(found, batch)
        return
    if source_policy == "off" and not weighted:
        stream = _native_stream(found.join_input(), threshold)
        if stream is not None:
            with contextlib.closing(stream):
                for batch in stream:
                    yield _as_entries(found, batch)
            return
    tokens, sources = found.tokens, found.sources
    if weighted:
        partners = _weighted_partners(tokens, threshold, growing=True)
    else:
        partners = _jaccard_partners(tokens, threshold, growing=True)
    consumed: set[int] = set()
    # Without a source policy, an earlier anchor left standing is no partner of a later
    # one: similarity is symmetric, so it would have taken the later one into its
    # group. Skipping those spares comparing every such pair a second time.
    skip: set[int] = set() if source_policy == "off" else consumed
    groups: list[list[int]] = []
    for i in range(len(tokens)):
        if i in consumed:
            continue
        if source_policy != "off" and not sources[i]:
            continue
        if not tokens[i]:
            continue  # an empty token set is similar to nothing
        group = [i]
        mine = sources[i] if source_policy != "off" else ()
        shared = set(mine)
        for j in partners(i, skip):
            if j == i:
                continue
            if source_policy != "off":
                if not _joins_sources(mine, sources[j], source_policy, shared):
                    continue
                if source_policy == "shared":
                    shared.intersection_update(sources[j])
            group.append(j)
            consumed.add(j)
            if skip is not consumed:
                skip.add(j)
        if skip is not consumed:
            skip.add(i)
        if len(group) >= 2:
            consumed.add(i)
            groups.append(group)
    yield _as_entries(found, groups)


def _as_entries(found: MergeCandidates, groups: list[list[int]]) -> list[list[MemoryEntry]]:
    """Only the members of a group are read whole, all at once."""
    flat = found.entries([i for group in groups for i in group])
    out: list[list[MemoryEntry]] = []
    at = 0
    for group in groups:
        out.append(flat[at : at + len(group)])
        at += len(group)
    return out


def settled_rule(threshold: float) -> str:
    """The rule settled entries were found under (see ``SETTLED``)."""
    return f"jaccard {threshold!r} off"


SETTLED = """Settled entries (a store that keeps them: SQLite's ``settled`` table).

After a consolidation under the published rule with no source policy, no two of
the anchors left standing are similar: whichever came first in the greedy order
took the other into its group. Similarity does not change while both live, so a
store can remember those entries as *settled* (pairwise below the threshold) and a
later consolidation needs only the pairs that touch an unsettled candidate (new
entries, heirs, edited or revived ones): the greedy pass over those pairs gives
exactly the published groups. An entry stops being settled when its tokens change
or it comes back to life, and a standing anchor similar to a settled entry left out
of the candidates (escrowed, pinned, on probation, juvenile) is not settled.
"""


def _gather_settled(
    found: MergeCandidates, threshold: float
) -> Generator[list[list[int]], None, None]:
    """The published groups (no source policy) using what the store knows is settled,
    in batches; the standing entries are settled once the last batch is taken."""
    settled = found.settled
    assert settled is not None and found.settle is not None
    n = len(found.ids)
    fresh = [i for i in range(n) if not settled[i]]
    watched = [n + k for k, s in enumerate(found.others_settled) if s]
    groups: list[list[int]] = []
    standing: list[int] = []
    # Unless they are few enough to look up one by one, the compiled pass over every
    # candidate beats probing from the unsettled ones.
    stream = None
    if len(fresh) * COMPILED_JOIN_TARGETS > n + len(found.others):
        stream = _native_stream(found.join_input(), threshold)
    if stream is not None:
        grouped: set[int] = set()
        with contextlib.closing(stream):
            for batch in stream:
                grouped.update(itertools.chain.from_iterable(batch))
                yield batch
        standing = [i for i in range(n) if i not in grouped]
        near = {}
        if watched:  # a standing entry similar to a settled one left out stays unsettled
            near = _pairs_touching(found.tokens + found.others, watched, threshold)
    elif len(fresh) * 4 <= n + len(found.others):
        # Few unsettled candidates: every pair touches one of them (or a settled entry
        # left out, for the check below), so the greedy pass runs over those pairs.
        tokens = found.tokens
        near = _pairs_touching(tokens + found.others, fresh, threshold)
        processed: set[int] = set()
        for i in range(n):
            if i in processed:
                continue
            processed.add(i)
            partners = sorted(j for j in near.get(i, ()) if j < n and j not in processed)
            if not partners or not tokens[i]:
                standing.append(i)
                continue
            processed.update(partners)
            groups.append([i, *partners])
    else:
        tokens = found.tokens
        partners_of = _jaccard_partners(tokens, threshold, growing=True)
        skip: set[int] = set()
        for i in range(n):
            if i in skip:
                continue
            skip.add(i)
            found_partners = [j for j in partners_of(i, skip) if j != i] if tokens[i] else []
            if not found_partners:
                standing.append(i)
                continue
            skip.update(found_partners)
            groups.append([i, *found_partners])
        near = _pairs_touching(tokens + found.others, watched, threshold) if watched else {}
    if stream is None:
        yield groups
    # A standing newcomer similar to a settled entry that sat this one out stays unsettled.
    watch = set(watched)
    found.settle(
        [i for i in standing if not settled[i] and not watch.intersection(near.get(i, ()))]
    )


def _pairs_touching(
    tokens: list[frozenset[str]], targets: list[int], threshold: float
) -> dict[int, set[int]]:
    """Every pair with Jaccard >= threshold that includes one of ``targets``, both ways.

    The filters of ``_jaccard_partners`` (one global order, rarest first; size,
    two-token prefix and positional bounds) with only the targets' extended prefixes
    indexed: every set probes with its own, and one sharing no indexed token is
    passed over without sorting it. Pairs are compared exactly, with the pairwise
    scan's expression.
    """
    near: dict[int, set[int]] = {}
    if not targets:
        return near
    if len(targets) * FEW_TARGETS <= len(tokens):
        return _pairs_touching_few(tokens, targets, threshold)
    df = Counter(itertools.chain.from_iterable(tokens))
    names = sorted(df, key=lambda t: (df[t], t))
    rank = {t: r for r, t in enumerate(names)}
    by_rank = rank.__getitem__
    # each set's tokens as ranks, ascending: the targets' now, a prober's when it probes
    ordered: list[list[int]] = [[] for _ in tokens]
    for x in targets:
        ordered[x] = sorted(map(by_rank, tokens[x]))
    overlaps = _overlaps(ordered, [df[t] for t in names], targets)

    def indexed_len(size: int) -> int:
        need = math.ceil(threshold * size - 1e-9 * size)
        return max(0, min(size, size - need + 2))

    n = len(tokens)
    staged: dict[int, dict[int, list[int]]] = {}
    for x in targets:
        size = len(ordered[x])
        for pos, t in enumerate(ordered[x][: indexed_len(size)]):
            staged.setdefault(t, {}).setdefault(size, []).append(pos * n + x)
    index: dict[int, tuple[list[int], list[tuple[list[int], list[int]]]]] = {}
    for t, by_size in staged.items():
        sizes = sorted(by_size)
        blocks = []
        for size in sizes:
            keys = sorted(by_size[size])
            blocks.append(([k // n for k in keys], [k % n for k in keys]))
        index[t] = (sizes, blocks)
    del staged
    indexed = frozenset(names[r] for r in index)  # as tokens, for ``isdisjoint``
    del names
    needs = _NeededOverlaps(max(map(len, tokens), default=0), threshold)
    sizes_of = list(map(len, tokens))
    for y, ts in enumerate(tokens):
        if not ts or ts.isdisjoint(indexed):
            continue
        sa = len(ts)
        if not ordered[y]:
            ordered[y] = sorted(map(by_rank, ts))
        mine = [
            (pos, t)
            for pos, t in enumerate(ordered[y][: indexed_len(sa)])
            if t in index  # the others pair with no target
        ]
        if not mine:
            continue
        found = _prefix_meets(index, mine, sa, threshold)
        found.discard(y)
        if not found:
            continue
        cands = list(found)
        # Exact overlaps against the least overlap each size needs, in C loops.
        needed = map(needs[sa].__getitem__, map(sizes_of.__getitem__, cands))
        for x in itertools.compress(cands, map(operator.ge, overlaps(y, cands), needed)):
            near.setdefault(x, set()).add(y)
            near.setdefault(y, set()).add(x)
    return near


#: ``_pairs_touching`` probes from the targets when there are at most one per this many sets.
FEW_TARGETS = 32
#: The most candidates the compiled join takes (more go to the Python join).
COMPILED_JOIN_MAX = 1 << 24
#: A consolidation of a store that keeps settled entries runs the compiled join over
#: every candidate (where it is built) when more than one per this many is unsettled.
COMPILED_JOIN_TARGETS = 32


def _pairs_touching_few(
    tokens: list[frozenset[str]], targets: list[int], threshold: float
) -> dict[int, set[int]]:
    """``_pairs_touching`` for a few targets: each looks up who holds its rarest tokens.

    A set ``y`` reaching the threshold with a target ``x`` holds at least
    ``need = ceil(t |x|)`` of its tokens, so it holds one of any ``|x| - need + 1`` of
    them: each target takes its rarest ones (fewest holders), and only the sets
    holding those are compared, exactly. Nothing is sorted or indexed for the sets
    that share no token with a target, which is what makes a consolidation with
    few new entries cheap.
    """
    wanted = frozenset().union(*(tokens[x] for x in targets))
    # how many sets hold each target token, counted in C loops
    df = Counter(itertools.chain.from_iterable(map(wanted.intersection, tokens)))
    prefixes: dict[int, list[str]] = {}
    for x in targets:
        size = len(tokens[x])
        if not size:
            continue
        keep = size - math.ceil(threshold * size - 1e-9 * size) + 1
        prefixes[x] = sorted(tokens[x], key=lambda t: (df[t], t))[: max(1, keep)]
    probed = frozenset().union(*prefixes.values())
    holders: dict[str, list[int]] = {}
    for y, ts in enumerate(tokens):
        shared = ts.intersection(probed)
        for t in shared:
            held = holders.get(t)
            if held is None:
                holders[t] = [y]
            else:
                held.append(y)
    needs = _NeededOverlaps(max(map(len, tokens), default=0), threshold)
    sizes_of = list(map(len, tokens))
    near: dict[int, set[int]] = {}
    for x, prefix in prefixes.items():
        found: set[int] = set()
        for t in prefix:
            found.update(holders[t])
        found.discard(x)
        if not found:
            continue
        cands = list(found)
        mine = tokens[x]
        overlaps = map(len, map(mine.intersection, map(tokens.__getitem__, cands)))
        needed = map(needs[len(mine)].__getitem__, map(sizes_of.__getitem__, cands))
        for y in itertools.compress(cands, map(operator.ge, overlaps, needed)):
            near.setdefault(x, set()).add(y)
            near.setdefault(y, set()).add(x)
    return near


def _prefix_meets(
    index: Mapping[K, tuple[list[int], list[tuple[list[int], list[int]]]]],
    mine: Sequence[tuple[int, K]],
    sa: int,
    threshold: float,
) -> set[int]:
    """The sets a set of ``sa`` tokens may reach ``threshold`` with (``_jaccard_partners``).

    ``mine``: its extended prefix as ``(position, token)``; ``index``: each token's
    ``(sizes, blocks)``, a block being the ``(positions, members)`` of the indexed sets
    of one size holding the token, by position. Returns the members two of these
    tokens meet within the positional bound, and those one shared token could pair
    (met on the first token alone). Every bound is rounded towards keeping a pair.
    """
    ratio = threshold / (1.0 + threshold)
    shrink, grow = 1 - 1e-9, 1 + 1e-9
    bisect_left, bisect_right = bisect.bisect_left, bisect.bisect_right
    lo, hi = threshold * sa * shrink, sa / threshold * grow
    once: set[int] = set()  # met through one token of a
    twice: set[int] = set()  # met through two
    sure: set[int] = set()  # pairs one shared token can make, met on the first
    final = mine[-1][0] if mine else -1  # nobody first met here can be met again
    if ratio * (sa + math.ceil(lo)) * shrink > 1.0:
        # Every pair needs two shared tokens: the loop below without its rare cases, each
        # size's positional bound worked out once.
        bound = [0.0] * (int(hi) + 1)
        for sb in range(math.ceil(lo), int(hi) + 1):
            bound[sb] = sb - ratio * (sa + sb) * shrink + 1
        for pos_a, tok in mine:
            top = min(hi, (sa - pos_a + 1) / ratio * grow - sa)
            if top < lo:
                break  # the room only shrinks from here on
            sizes, blocks = index[tok]
            first, last = bisect_left(sizes, lo), bisect_right(sizes, top)
            for sb, (positions, members) in zip(sizes[first:last], blocks[first:last], strict=True):
                cut = bisect_right(positions, bound[sb])
                if cut:
                    met = members if cut == len(members) else members[:cut]
                    twice.update(once.intersection(met))
                    if pos_a != final:
                        once.update(met)
        return twice
    for pos_a, tok in mine:
        room = sa - pos_a + 1  # the tokens of a from here on, plus one
        # alpha = ratio (sa + sb) must not exceed room: a bound on sb too
        top = min(hi, room / ratio * grow - sa)
        if top < lo:
            continue
        sizes, blocks = index[tok]
        for b in range(bisect_left(sizes, lo), bisect_right(sizes, top)):
            sb = sizes[b]
            alpha = ratio * (sa + sb) * shrink
            if room < alpha:
                continue
            positions, members = blocks[b]
            if alpha <= 1.0:  # one shared token may do: the first token's bound
                if room - 1 >= alpha:
                    cut = bisect_right(positions, sb - alpha)
                    if cut:
                        sure.update(members[:cut])
                continue
            # b's own room, sb - pos_b, plus one must reach alpha too
            cut = bisect_right(positions, sb - alpha + 1)
            if cut:
                met = members[:cut]
                twice.update(once.intersection(met))
                if pos_a != final:
                    once.update(met)
    return twice | sure if sure else twice


def _ranked(tokens: list[frozenset[str]]) -> tuple[list[list[int]], list[int]]:
    """Each set's tokens as ranks in one global order, rarest first (ties by the token),
    ascending; and how many sets hold each rank."""
    df = Counter(itertools.chain.from_iterable(tokens))
    names = sorted(df, key=lambda t: (df[t], t))
    rank = {t: r for r, t in enumerate(names)}
    counts = [df[t] for t in names]
    del names
    return [sorted(map(rank.__getitem__, ts)) for ts in tokens], counts


#: Set ``DARWIN_MEMO_PURE_PYTHON=1`` to run the join in Python even where the
#: compiled one is installed (the two give the same groups; tests compare them).
PURE_PYTHON_ENV = native.PURE_PYTHON_ENV


def _native_stream(
    tokens: Sequence[str] | Sequence[frozenset[str]], threshold: float
) -> Generator[list[list[int]], None, None] | None:
    """The published rule's greedy groups (no source policy) from the compiled join
    (``darwin_memo._cjoin``), or None where it is not built or not wanted.

    The join runs on a thread of its own (it holds the GIL only to hand over a batch)
    and the groups come in batches, in order, as it finds them: the caller reads the
    members of the first groups while it looks for the next. Closing the generator
    early stops the join; an error in the join is raised here.
    """
    if not threshold > 0 or len(tokens) >= COMPILED_JOIN_MAX:
        return None
    cjoin = native.compiled("_cjoin")
    if cjoin is None:
        return None
    return _streamed(cjoin.greedy_groups, tokens, threshold)


class _Stopped(Exception):
    """Raised into the compiled join by its sink when nobody waits for it any more."""


def _streamed(
    join: Callable[..., object], tokens: Sequence[str] | Sequence[frozenset[str]], threshold: float
) -> Generator[list[list[int]], None, None]:
    import queue
    import threading

    batches: queue.SimpleQueue[list[list[int]] | BaseException | None] = queue.SimpleQueue()
    stop = threading.Event()

    def sink(batch: list[list[int]]) -> None:
        if stop.is_set():
            raise _Stopped
        batches.put(batch)

    def run() -> None:
        try:
            join(tokens, threshold, sink)
        except BaseException as exc:  # handed to the caller's thread, raised there
            batches.put(exc)
        else:
            batches.put(None)

    worker = threading.Thread(target=run, name="darwin-memo-join", daemon=True)
    worker.start()
    try:
        while (item := batches.get()) is not None:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        worker.join()


def _jaccard_partners(
    tokens: list[frozenset[str]], threshold: float, growing: bool = False
) -> Callable[[int, set[int]], list[int]]:
    """``partners(i, skip)``: each j not in ``skip`` (ascending) with Jaccard >= threshold.

    ``growing``: the caller's ``skip`` only ever gains entries from one call to the
    next (the greedy pass: anchors done and members taken). Then its entries are
    taken out of the long lists now and then (whenever a sixty-fourth of the store has
    joined it since the last time), so that later searches do not meet them again and
    again.

    A set-similarity join (prefix, size and positional filters, as in AllPairs and
    PPJoin, with the two-token prefix of AdaptJoin). Tokens are put in one global
    order, rarest first, and renamed by their rank (small ints). If two sets reach
    the threshold their overlap ``o`` is at least ``alpha = t (|a| + |b|) / (1 + t)``,
    and at least ``need(|x|) = ceil(t |x|)`` of either. The ``k``-th token they share
    has ``o - k`` shared tokens after it in both sets, so it sits at a position
    ``p <= |x| - alpha + k - 1`` of each: the first shared token lies in the first
    ``|x| - need(|x|) + 1`` tokens (the prefix) and the second in one more.

    So only those extended prefixes are indexed (by token, set size and position),
    and a pair needing two shared tokens (``alpha > 1``) is a candidate only where
    two of ``a``'s tokens each find ``b`` at a position within that bound: lessons
    written from one template share one rare word with many others, and common
    words only late in the order, and are dropped without being compared. A pair
    that one shared token could make (tiny sets) is kept on the first token alone.
    Candidates are compared exactly. Every bound is rounded towards keeping a pair.
    """
    ordered, counts = _ranked(tokens)
    overlaps = _overlaps(ordered, counts)
    del counts
    set_size = [len(seq) for seq in ordered]

    def indexed_len(size: int) -> int:
        """The prefix and one token more (where a second shared token may sit)."""
        need = math.ceil(threshold * size - 1e-9 * size)
        return max(0, min(size, size - need + 2))

    plen = [indexed_len(size) for size in set_size]
    # A token in one extended prefix only pairs nobody: only tokens two hold are indexed.
    held = Counter(
        itertools.chain.from_iterable(seq[:p] for seq, p in zip(ordered, plen, strict=True))
    )
    # token -> (set sizes ascending, [(positions ascending, member ids aligned)])
    staged: dict[int, dict[int, list[int]]] = {}
    n = len(ordered)
    #: each set's indexed tokens, with their positions
    probes: list[list[tuple[int, int]]] = []
    for j, seq in enumerate(ordered):
        size = len(seq)
        mine = []
        for pos in range(plen[j]):
            t = seq[pos]
            if held[t] < 2:
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
    del held
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

    needs = _NeededOverlaps(max(set_size, default=0), threshold)
    skipped = _Skipped(n)
    long_lists = [
        (blocks, b)
        for _, blocks in index.values()
        for b, (_, members) in enumerate(blocks)
        if len(members) >= COMPACTED_LIST
    ]

    def drop(skip: set[int]) -> None:
        """Take skip's entries out of the long lists that hold enough of them."""
        skipped.absorb(skip)
        for blocks, b in long_lists:
            positions, members = blocks[b]
            flags = skipped.kept(members)
            if flags is not None:
                blocks[b] = (
                    list(itertools.compress(positions, flags)),
                    list(itertools.compress(members, flags)),
                )

    def partners(i: int, skip: set[int]) -> list[int]:
        if growing and skipped.due(skip):
            drop(skip)
        sa = set_size[i]
        found = _prefix_meets(index, probes[i], sa, threshold)
        found -= skip
        found.discard(i)
        if not found:
            return []
        cands = sorted(found)
        # Exact overlaps against the least overlap each size needs, every step a C loop.
        needed = map(needs[sa].__getitem__, map(set_size.__getitem__, cands))
        return list(itertools.compress(cands, map(operator.ge, overlaps(i, cands), needed)))

    return partners


#: The shortest list of the join that a growing skip compacts (see ``_jaccard_partners``).
COMPACTED_LIST = 32


class _Skipped:
    """The entries of a growing skip set that the join's lists have been told of.

    A join compacts its long lists (a short one costs little to walk past) when
    ``due``: a sixty-fourth of the sets have joined the skip since the last time.
    ``absorb`` takes in the new ones; ``kept(members)`` gives one flag per member (1:
    not skipped) once an eighth of the list is skipped, else None (left as it is).
    """

    __slots__ = ("alive", "n", "seen")

    def __init__(self, n: int) -> None:
        self.n = n
        self.seen: set[int] = set()
        self.alive = bytearray(b"\x01") * n

    def due(self, skip: set[int]) -> bool:
        return (len(skip) - len(self.seen)) * 64 > self.n

    def absorb(self, skip: set[int]) -> None:
        gone = skip - self.seen
        self.seen.update(gone)
        alive = self.alive
        for j in gone:
            alive[j] = 0

    def kept(self, members: Sequence[int]) -> bytes | None:
        flags = bytes(map(self.alive.__getitem__, members))
        return flags if (len(flags) - flags.count(1)) * 8 >= len(flags) else None


#: Tokens held by at least this many sets count overlaps as bits (see ``_overlaps``).
COMMON_TOKEN_SETS = 64


def _overlaps(
    ordered: Sequence[list[int]], counts: list[int], members: Iterable[int] | None = None
) -> Callable[[int, list[int]], Iterator[int]]:
    """``overlaps(i, js)``: how many tokens set ``i`` shares with each set of ``js``.

    ``ordered`` holds each set's tokens as ranks, ascending; ``counts[r]`` is how many
    sets hold rank ``r`` (ascending too: rarest first). A token held by many sets
    is a bit of one small integer per set (the most common token is bit 0), so its
    share of an overlap is the popcount of an AND; a rarer one is counted through
    its list of holders, which is short. Both are C loops: comparing a pair costs
    a few dozen nanoseconds instead of intersecting two hash sets far apart in
    memory. ``members`` (default: every set) are the sets ``js`` may name; ``i`` may
    be any set whose ``ordered`` row is filled in by the time it asks.
    """
    parts = _overlap_parts(ordered, counts, members)[0]

    def overlaps(i: int, js: list[int]) -> Iterator[int]:
        rare, ones = parts(i, js)
        return ones if rare is None else map(operator.add, rare, ones)

    return overlaps


def _overlap_parts(
    ordered: Sequence[list[int]], counts: list[int], members: Iterable[int] | None = None
) -> tuple[Callable[[int, list[int]], tuple[Iterator[int] | None, Iterator[int]]], int]:
    """``_overlaps`` in two parts: ``parts(i, js)`` gives the shared counts of the rare
    tokens (None when ``i`` has none) and of the common ones (the bits), and the first
    rank that is a bit.
    """
    common = bisect.bisect_left(counts, COMMON_TOKEN_SETS)  # ranks from here are bits
    top = len(counts) - 1
    value = [0] * common + [1 << (top - r) for r in range(common, top + 1)]  # each rank's bit
    bits: list[int] = [0] * len(ordered)
    rare: list[list[int] | None] = [None] * len(ordered)
    holders: dict[int, list[int]] = {}
    for j in range(len(ordered)) if members is None else members:
        seq = ordered[j]
        cut = bisect.bisect_left(seq, common)
        mine = rare[j] = seq[:cut]
        for r in mine:
            held = holders.get(r)
            if held is None:
                holders[r] = [j]
            else:
                held.append(j)
        bits[j] = sum(map(value.__getitem__, seq[cut:]))
    zeros = itertools.repeat(0)

    def parts(i: int, js: list[int]) -> tuple[Iterator[int] | None, Iterator[int]]:
        mine = rare[i]
        mask = bits[i]
        if mine is None:  # not a member: split its tokens now
            seq = ordered[i]
            cut = bisect.bisect_left(seq, common)
            mine = seq[:cut]
            mask = sum(map(value.__getitem__, seq[cut:]))
        ones = map(int.bit_count, map(mask.__and__, map(bits.__getitem__, js)))
        if not mine:
            return None, ones
        shared = Counter(
            itertools.chain.from_iterable(map(holders.get, mine, itertools.repeat(())))
        )
        return map(shared.get, js, zeros), ones

    return parts, common


class _NeededOverlaps(dict[int, list[int]]):
    """``needs[a][b]``: the least overlap two sets of ``a`` and ``b`` tokens reach the
    threshold with, as the pairwise scan's own float expression decides (it grows with
    the overlap, so the least one that passes is exact); more than ``min(a, b)`` when
    none does. A row is made the first time a set of ``a`` tokens asks.
    """

    def __init__(self, largest: int, threshold: float) -> None:
        super().__init__()
        self.largest = largest
        self.threshold = threshold

    def __missing__(self, sa: int) -> list[int]:
        t = self.threshold
        row = []
        for sb in range(self.largest + 1):
            total = sa + sb
            need = max(1, math.ceil(t * total / (1.0 + t)) - 1)
            while need > 1 and (need - 1) / (total - need + 1) >= t:
                need -= 1
            while need <= min(sa, sb) and need / (total - need) < t:
                need += 1
            row.append(need)
        self[sa] = row
        return row


def _weighted_partners(
    tokens: list[frozenset[str]], threshold: float, growing: bool = False
) -> Callable[[int, set[int]], list[int]]:
    """``partners(i, skip)`` under rarity-weighted Jaccard: each j not in ``skip``
    (ascending, ``i`` left out) whose weighted similarity with ``i`` reaches ``threshold``.

    A token held by ``c`` of the ``n`` sets weighs ``log(1 + n / (1 + c))``; a set's
    mass is the sum of its weights, and two sets reach the threshold when their shared
    mass ``s`` gives ``s / (|a| + |b| - s) >= t``, that is ``s >= alpha = t (|a| + |b|) /
    (1 + t)``, which is at least ``t`` times either mass.

    Prefix and positional filters on mass, as ``_jaccard_partners`` does on counts.
    Tokens are put in one global order, heaviest (rarest) first. Every shared token
    lies at or after the first one the two sets share, so the mass a set has left from
    that token on (its *room* there) is at least ``alpha`` in both. Only the positions
    whose room reaches ``t`` times the set's mass (its prefix) are indexed. An entry
    (set ``b``, room ``R`` there) leaves room for a partner of mass ``|a|`` when ``R >=
    t (|a| + |b|) / (1 + t)``, so each token's entries are ordered by ``t |b| / (1 + t) -
    R`` and a set probes with its own prefix, takes the entries up to its own bound
    (one bisection; they all weigh at least ``t |a|``), and of those the partners whose
    mass its own room there allows. Before weighing a candidate, the numbers of rare
    and common tokens the two share (``_overlap_parts``) bound the shared mass by the
    anchor's heaviest tokens of each kind. Candidates left are compared exactly
    (``math.fsum`` of the shared weights, the pairwise definition's expression). Every
    bound is rounded towards keeping a pair.
    """
    n = len(tokens)
    df = Counter(itertools.chain.from_iterable(tokens))
    weight = {t: math.log(1.0 + n / (1.0 + c)) for t, c in df.items()}
    mass = [math.fsum(map(weight.__getitem__, ts)) for ts in tokens]
    if threshold <= 0:
        # Every pair reaches a threshold of zero (sets that share nothing score 0).
        def everyone(i: int, skip: set[int]) -> list[int]:
            return [j for j in range(n) if j != i and j not in skip and tokens[j]]

        return everyone
    names = sorted(df, key=lambda t: (df[t], t))
    rank = {t: r for r, t in enumerate(names)}
    by_rank = [weight[t] for t in names]
    counts = [df[t] for t in names]
    del names
    ratio = threshold / (1.0 + threshold)
    shrink, grow = 1 - 1e-9, 1 + 1e-9
    #: each set's tokens as ranks (heaviest first) and its room at each position
    ordered: list[list[int]] = []
    rooms: list[array[float]] = []  # doubles: about a third of a list of floats
    staged: dict[int, list[tuple[float, int]]] = {}
    for j, ts in enumerate(tokens):
        seq = sorted(map(rank.__getitem__, ts))
        room = array("d", itertools.accumulate(map(by_rank.__getitem__, reversed(seq))))
        room.reverse()
        ordered.append(seq)
        rooms.append(room)
        floor = threshold * mass[j] * shrink
        own = ratio * mass[j] * shrink
        for r, left in zip(seq, room, strict=True):
            if left * grow < floor:
                break  # the prefix ends here
            # key: ratio times the entry's mass, minus its room (it leaves room for a
            # partner of mass ma when key <= -ratio ma)
            entry = (own - left * grow, j)
            listed = staged.get(r)
            if listed is None:
                staged[r] = [entry]
            else:
                listed.append(entry)
    del rank
    #: token -> (keys ascending, members aligned, their masses aligned)
    index: dict[int, tuple[list[float], list[int], array[float]]] = {}
    for r, listed in staged.items():
        if len(listed) < 2:
            continue  # a token in one prefix only pairs nobody
        listed.sort()
        members = [j for _, j in listed]
        index[r] = ([key for key, _ in listed], members, array("d", map(mass.__getitem__, members)))
    del staged
    bisect_right = bisect.bisect_right
    # How many rare and common tokens two sets share, counted in C loops (``_overlaps``):
    # o shared rare tokens weigh at most the o heaviest rare ones of the anchor that some
    # other set holds too, and the same for the common ones.
    parts, common = _overlap_parts(ordered, counts)
    unique = bisect.bisect_right(counts, 1)  # ranks below this are held by one set
    del counts

    def heaviest(seq: list[int], start: int, stop: int) -> list[float]:
        """The running sums of the weights of ``seq``'s ranks in [start, stop)."""
        first, last = bisect.bisect_left(seq, start), bisect.bisect_left(seq, stop)
        return [0.0, *itertools.accumulate(map(by_rank.__getitem__, seq[first:last]))]

    end = len(by_rank)
    # With a growing skip, its entries are taken out of the long lists now and then.
    skipped = _Skipped(n)
    long_lists = [r for r, (_, members, _) in index.items() if len(members) >= COMPACTED_LIST]

    def drop(skip: set[int]) -> None:
        skipped.absorb(skip)
        for r in long_lists:
            keys, members, masses = index[r]
            flags = skipped.kept(members)
            if flags is not None:
                index[r] = (
                    list(itertools.compress(keys, flags)),
                    list(itertools.compress(members, flags)),
                    array("d", itertools.compress(masses, flags)),
                )

    def partners(i: int, skip: set[int]) -> list[int]:
        if growing and skipped.due(skip):
            drop(skip)
        seq, room, mx = ordered[i], rooms[i], mass[i]
        floor = threshold * mx * shrink
        hi = mx / threshold * grow
        need = -(ratio * mx * shrink)  # entries leaving room for mx: key <= need
        found: set[int] = set()
        for r, left in zip(seq, room, strict=True):
            if left * grow < floor:
                break
            listed = index.get(r)
            if listed is None:
                continue
            keys, members, masses = listed
            cut = bisect_right(keys, need)
            if not cut:
                continue
            # This token's room bounds the partner's mass: my <= left / ratio - mx. (The
            # cut keeps only partners of at least t mx: their room, at most their mass,
            # reaches ratio (mx + my).)
            top = min(hi, left / ratio - mx + 1e-9 * (left / ratio + mx))
            found.update(
                [y for y, my in zip(members[:cut], masses[:cut], strict=True) if my <= top]
            )
        found -= skip
        found.discard(i)
        if not found:
            return []
        ascending = sorted(found)
        cands: Iterable[int] = ascending
        if len(ascending) >= BOUNDED_CANDIDATES:
            # Ruled out in C loops: the mass the shared counts could weigh at most (their
            # heaviest rare and common tokens of the anchor) falls short of alpha.
            rare, ones = parts(i, ascending)
            bounds = map(heaviest(seq, max(common, unique), end).__getitem__, ones)
            if rare is not None:
                heavy = heaviest(seq, unique, common)
                bounds = map(operator.add, map(heavy.__getitem__, rare), bounds)
            bounds = map(grow.__mul__, bounds)
            alphas = map(
                (ratio * shrink).__mul__, map(mx.__add__, map(mass.__getitem__, ascending))
            )
            cands = itertools.compress(ascending, map(operator.ge, bounds, alphas))
        mine = tokens[i]
        out = []
        for j in cands:
            inter = math.fsum(map(weight.__getitem__, mine & tokens[j]))
            if inter / (mx + mass[j] - inter) >= threshold:
                out.append(j)
        return out

    return partners


#: ``_weighted_partners`` bounds the shared mass by the shared count from this many candidates.
BOUNDED_CANDIDATES = 16


def _groups_pairwise(
    store: Population, threshold: float, exclude: Collection[str], source_policy: str
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
    store: Population,
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
    # The join, the members read whole and their writes allocate millions of small
    # containers while the store is alive: the collector would walk it again and again.
    with collector.paused():
        return _merge_groups(store, cycle, threshold, exclude, source_policy, similarity)


def _merge_groups(
    store: Population,
    cycle: int,
    threshold: float,
    exclude: Collection[str],
    source_policy: str,
    similarity: str,
) -> list[Merge]:
    planned: list[tuple[MemoryEntry, list[str]]] = []
    batches = _group_batches(store, threshold, exclude, source_policy, similarity)

    def made() -> Iterator[list[tuple[MemoryEntry, list[str]]]]:
        for batch in batches:
            heirs = [heir(group, cycle) for group in batch]
            planned.extend(heirs)
            yield heirs

    # With the compiled join on another thread, the members of the groups found so far
    # are read, their heirs made and (a database store) their rows written while it
    # looks for the next.
    many = getattr(store, "merge_batches", None)
    with contextlib.closing(batches):  # an error here stops a join still running
        if many is not None:
            clipped = many(made())
        else:
            planned += [heir(group, cycle) for batch in batches for group in batch]
            clipped = [store.merge_into(heir, ids) for heir, ids in planned]
    return [
        Merge(heir, tuple(ids), clip) for (heir, ids), clip in zip(planned, clipped, strict=True)
    ]


def consolidate(
    store: Population,
    cycle: int,
    threshold: float = DEFAULT_MERGE_THRESHOLD,
    exclude: Collection[str] = frozenset(),
    source_policy: str = "off",
    similarity: str = "jaccard",
) -> int:
    """Merge near-duplicates; returns the number of merges performed."""
    return len(merge_groups(store, cycle, threshold, exclude, source_policy, similarity))
