"""Exact lexical top-k through an inverted index, without scanning the population.

The published ranking scores every entry: the IDF mass (``log(1 + N/(1 + df))``)
of the query tokens it contains, qualifying at ``min_coverage`` of the query's
mass. ``top_candidates`` returns exactly the entries that ranking would put in
the top ``k`` (all of those tied with the k-th score included, so the caller's
energy tie-break sees every contender), reading only postings lists:

1. Tokens are visited rarest first. An entry that contains none of the tokens
   visited so far can score at most the IDF mass of the tokens still unvisited;
   once that bound falls below the bar, no new entry can qualify, and the
   remaining (common, long) postings lists are only probed for entries already
   in hand. The bar starts at the relevance floor and rises to the k-th best
   score known so far (partial scores are lower bounds of final ones).
2. Before reading a postings list much longer than the set of candidates in
   hand, those candidates are scored in full (``has_token``): the k-th best exact
   score is a lower bound of the final k-th score, and for a typical question
   (one or two rare terms among common words) it closes every common list at
   once, so a decide reads a few short lists and a few hundred rows.
3. Survivors are scored exactly as the published scan does (same token order,
   same float sums), so scores are bit-identical to a brute-force ``rank``.

This is the "MaxScore" idea from search engines. Queries made only of common
words still finish: the bar rises as soon as k entries hold most of the mass.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from itertools import compress, filterfalse
from operator import or_

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Protocol, TypeVar

    K = TypeVar("K", bound=Hashable)

    class _Lookup(Protocol):
        def __getitem__(self, code: int, /) -> float: ...


__all__ = ["bits_to_ids", "top_by_codes", "top_by_combinations", "top_candidates"]


def top_candidates(
    qtokens: Sequence[str],
    n: int,
    df: Callable[[str], int],
    postings: Callable[[str], Collection[K]],
    contains: Callable[[str, Collection[K]], Collection[K]],
    min_coverage: float,
    k: int | None,
    cheap: Callable[[str], bool] | None = None,
) -> list[tuple[K, float]]:
    """Keys whose exact score qualifies and ties or beats the k-th best (``k=None``: all).

    ``qtokens`` are the query's distinct tokens in query order; ``n`` the number
    of indexed entries; ``df(t)`` how many contain ``t``; ``postings(t)`` their
    keys; ``contains(t, keys)`` those of ``keys`` that contain ``t`` (a batched
    membership test, so a database can answer it with one indexed probe per key).
    ``cheap(t)`` says a membership test of ``t`` costs less per key than reading its
    list (a bitmap): such a list is never read just to test membership.
    Returns ``(key, score)`` best first (ties in no particular order).
    """
    if not qtokens or n <= 0:
        return []
    idf = {t: math.log(1.0 + n / (1.0 + df(t))) for t in qtokens}
    mass = sum(idf.values())
    if mass <= 0:
        return []
    floor = min_coverage * mass
    order = sorted((t for t in qtokens if df(t) > 0), key=lambda t: idf[t], reverse=True)
    remaining = [0.0] * (len(order) + 1)
    for i in range(len(order) - 1, -1, -1):
        remaining[i] = remaining[i + 1] + idf[order[i]]
    # Pad bounds by a relative epsilon: pruning must never drop an exact tie.
    eps = 1e-9 * mass
    loaded: dict[str, Collection[K]] = {}  # postings read in full, for membership tests

    def members(token: str, keys: Collection[K]) -> Collection[K]:
        plist = loaded.get(token)
        if plist is not None:
            if not isinstance(plist, (set, frozenset, dict)):
                plist = loaded[token] = set(plist)
            return [key for key in keys if key in plist]
        return contains(token, keys) if keys else ()

    def exact_scores(keys: Collection[K], bar: float) -> dict[K, float]:
        """Exact scores of ``keys``, leaving out those that cannot reach ``bar`` or the k-th.

        Tokens are tested rarest first; after each, a key whose score so far plus every
        untested token's weight falls below the k-th best score so far (or ``bar``) can
        no longer matter and is not tested again (fewer index probes).
        """
        alive = list(keys)
        lower = dict.fromkeys(alive, 0.0)
        having: dict[str, set[K]] = {}
        rest = remaining[0]
        for t in order:
            weight = idf[t]
            rest -= weight
            hit = having[t] = set(members(t, alive))
            for key in hit:
                lower[key] += weight
            cut = bar
            if k is not None and len(lower) >= k:
                cut = max(cut, _kth_bound(lower.values(), k))
            if cut > 0 and min(lower.values(), default=cut) + rest + eps < cut:
                alive = [key for key in alive if lower[key] + rest + eps >= cut]
                lower = {key: lower[key] for key in alive}
        # Summed in query order, as the published scan sums them: bit-identical.
        return {key: sum(w for t, w in idf.items() if key in having.get(t, ())) for key in alive}

    # Score the candidates in hand before reading a list `spread` times longer; with
    # cheap membership tests, scoring is cheaper than reading a list of equal length.
    spread = 1 if cheap is not None and all(cheap(t) for t in order) else 4
    exact: dict[K, float] = {}  # keys scored in full
    partial: dict[K, float] = {}  # keys with a lower bound from the lists read so far
    bar = floor
    for i, token in enumerate(order):
        open_to_new = remaining[i] + eps >= bar and remaining[i] > 0
        if open_to_new and partial and k is not None and spread * len(partial) < df(token):
            # Before reading a list much longer than the candidates in hand, score
            # those in full: the k-th best exact score is a far higher bar than the
            # partial one, and usually closes every remaining (common) list.
            exact.update(exact_scores(list(partial), bar))
            partial = {}
            bar = max(bar, _kth_bound(exact.values(), k))
            exact = {key: s for key, s in exact.items() if s + eps >= bar}
            open_to_new = remaining[i] + eps >= bar
        weight = idf[token]
        if open_to_new:
            plist = loaded[token] = postings(token)
            # dict and set operations in C; Python only loops over keys seen before.
            fresh = dict.fromkeys(plist, weight)
            for key in exact.keys() & fresh.keys():
                del fresh[key]
            if partial:
                for key in partial.keys() & fresh.keys():
                    fresh[key] += partial[key]  # weight + s is the float s + weight
                partial.update(fresh)
            else:
                partial = fresh
        else:
            if not partial:
                break
            if (
                token not in loaded
                and df(token) < 2 * len(partial)
                and not (cheap is not None and cheap(token))
            ):
                loaded[token] = postings(token)  # cheaper to read the list than to probe
            for key in members(token, list(partial)):
                partial[key] += weight
        # Raise the bar to the k-th best lower bound (partial scores are lower bounds
        # of final ones), then drop whoever cannot reach it even with every unvisited
        # token.
        if k is not None and len(partial) + len(exact) >= k:
            bar = max(bar, _kth_bound([*partial.values(), *exact.values()], k))
        ceiling = remaining[i + 1] + eps
        if bar > 0:
            # Rebuild only when someone falls below the bar (min() runs in C).
            if partial and min(partial.values()) + ceiling < bar:
                partial = {key: s for key, s in partial.items() if s + ceiling >= bar}
            if exact and min(exact.values()) + eps < bar:
                exact = {key: s for key, s in exact.items() if s + eps >= bar}

    if partial:
        exact.update(exact_scores(list(partial), bar))
    return _ranked(exact, mass, min_coverage, k)


def _ranked(
    scores: dict[K, float], mass: float, min_coverage: float, k: int | None
) -> list[tuple[K, float]]:
    """Scores that clear the floor, best first (stable), the top ``k`` and its ties."""
    out = [(key, s) for key, s in scores.items() if s > 0 and s / mass >= min_coverage]
    out.sort(key=lambda pair: pair[1], reverse=True)
    if k is not None and len(out) > k:
        kth_score = out[k - 1][1]
        out = [pair for pair in out if pair[1] >= kth_score]
    return out


def _kth_bound(values: Collection[float], k: int) -> float:
    """The k-th largest value, or 0 when there are fewer than k."""
    if len(values) < k:
        return 0.0
    return heapq.nlargest(k, values)[-1]


#: Queries with more distinct indexed tokens than this are not searched by codes.
MAX_CODE_TOKENS = 32


def top_by_codes(
    qtokens: Sequence[str],
    n: int,
    df: Callable[[str], int],
    postings: Callable[[str], Sequence[K]],
    flags: Callable[[str, Sequence[K]], bytes],
    min_coverage: float,
    k: int | None,
) -> list[tuple[K, float]] | None:
    """What ``top_candidates`` returns, scoring candidates with byte operations in C.

    For stores whose membership tests are cheap in bulk: ``flags(t, keys)`` gives one
    byte per key, 1 if it holds ``t`` and 0 if not. ``postings(t)`` returns keys in
    ascending order, and ``flags`` is given ascending keys: a whole list as returned
    (the same object, so a store may keep what it derived from it) or a part of one.
    An entry's score depends only on which query tokens it holds, so each candidate
    carries a code (bit ``i``: it holds the ``i``-th rarest token), kept in a ``bytes``
    beside the candidates; adding a token's flags is one big-integer OR (a key's byte
    never carries into the next), and dropping the candidates that can no longer reach
    the bar is a ``translate`` of the codes and a ``compress``, so no Python loop runs
    per candidate and token.

    Lists are read rarest first, as in ``top_candidates``, while an entry holding
    none of the tokens read so far could still reach the bar (the relevance floor,
    raised to the k-th best lower bound known). The candidates a list brings (those
    not in an earlier list) are scored against the later tokens one at a time, and
    after each those that cannot reach the bar even with every untested token are
    dropped. Exact scores are summed in query order per code, as the published scan
    sums them. Past 8 indexed tokens a code no longer fits a byte: candidates then
    carry an int each, updated with ``map`` (still no loop in Python). Returns None
    when the query has more than ``MAX_CODE_TOKENS`` indexed tokens (the caller falls
    back to ``top_candidates``).
    """
    present = [t for t in qtokens if df(t) > 0]
    if not present or n <= 0:
        return []
    if len(present) > MAX_CODE_TOKENS:
        return None
    idf = {t: math.log(1.0 + n / (1.0 + df(t))) for t in qtokens}
    mass = sum(idf.values())
    if mass <= 0:
        return []
    order = sorted(present, key=lambda t: idf[t], reverse=True)
    m = len(order)
    remaining = [0.0] * (m + 1)
    for i in range(m - 1, -1, -1):
        remaining[i] = remaining[i + 1] + idf[order[i]]
    # Lower bounds of a code's score, any summation order (pruning pads by eps): a
    # table of every code for one byte of codes, else computed for the codes met.
    wide = m > 8
    lower: _Lookup
    if wide:
        lower = _Sums([idf[t] for t in order])
    else:
        sums = [0.0]
        for t in order:
            weight = idf[t]
            sums += [s + weight for s in sums]
        lower = sums
    eps = 1e-9 * mass
    exact_of: dict[int, float] = {}

    def exact(code: int) -> float:
        got = exact_of.get(code)
        if got is None:
            held = {order[i] for i in range(m) if code >> i & 1}
            # Summed in query order over every query token, as the published scan sums.
            got = exact_of[code] = sum(w for t, w in idf.items() if t in held)
        return got

    bar = min_coverage * mass
    found: dict[K, float] = {}  # candidates scored in full
    read: list[Sequence[K]] = []  # the lists read so far
    seen: set[K] | None = None
    for j, token in enumerate(order):
        if not (remaining[j] > 0 and remaining[j] + eps >= bar):
            break  # no entry outside the lists read can reach the bar
        plist = postings(token)
        batch: Sequence[K] = plist
        if read:
            if seen is None:
                seen = set().union(*read)
            batch = list(filterfalse(seen.__contains__, plist))
            seen.update(batch)
        read.append(plist)
        size = len(batch)
        # One byte per candidate while the query has at most 8 tokens, else an int.
        codes: bytes | list[int] = [1 << j] * size if wide else bytes([1 << j]) * size
        for i in range(j + 1, m):
            if not size:
                break
            held = flags(order[i], batch)
            ceiling = remaining[i + 1] + eps
            if isinstance(codes, list):
                if 1 in held:
                    codes = list(map(or_, codes, map((1 << i).__mul__, held)))
                counts = Counter(codes)
                if k is not None:
                    bar = max(bar, _kth_counted(counts, lower, k))
                keep_of = {code: lower[code] + ceiling >= bar for code in counts}
                if not all(keep_of.values()):
                    kept = bytes(map(keep_of.__getitem__, codes))
                    batch = list(compress(batch, kept))
                    codes = list(compress(codes, kept))
                    size = len(batch)
                continue
            both = int.from_bytes(codes, "little") | int.from_bytes(held, "little") << i
            codes = both.to_bytes(size, "little")
            if k is not None:
                bar = max(bar, _kth_coded(codes, lower, k))
            keep = bytearray(256)
            dropped = False
            for code in set(codes):
                if lower[code] + ceiling >= bar:
                    keep[code] = 1
                else:
                    dropped = True
            if dropped:
                kept = codes.translate(keep)
                batch = list(compress(batch, kept))
                codes = bytes(compress(codes, kept))
                size = len(batch)
        if size:
            table = {code: exact(code) for code in set(codes)}
            found.update(zip(batch, map(table.__getitem__, codes), strict=True))
        if k is not None and len(found) >= k:
            bar = max(bar, _kth_bound(found.values(), k))
        if found and min(found.values()) + eps < bar:
            found = {key: s for key, s in found.items() if s + eps >= bar}

    return _ranked(found, mass, min_coverage, k)


class _Sums:
    """``sums[code]``: the sum of ``weights[i]`` over the bits ``i`` of ``code`` (cached)."""

    def __init__(self, weights: list[float]) -> None:
        self.weights = weights
        self.known: dict[int, float] = {}

    def __getitem__(self, code: int) -> float:
        got = self.known.get(code)
        if got is None:
            got = self.known[code] = sum(w for i, w in enumerate(self.weights) if code >> i & 1)
        return got


def _kth_counted(counts: Mapping[int, int], value: _Lookup, k: int) -> float:
    """The k-th largest of ``value[c]``, each code ``c`` counted ``counts[c]`` times."""
    got = 0
    for code in sorted(counts, key=value.__getitem__, reverse=True):
        got += counts[code]
        if got >= k:
            return value[code]
    return 0.0


def _kth_coded(codes: bytes, value: _Lookup, k: int) -> float:
    """The k-th largest of ``value[c]`` over the bytes ``c`` of ``codes`` (0 under k)."""
    if len(codes) < k:
        return 0.0
    got = 0
    for code in sorted(set(codes), key=value.__getitem__, reverse=True):
        got += codes.count(code)
        if got >= k:
            return value[code]
    return 0.0


#: Queries with more distinct indexed tokens than this are not searched by combinations.
MAX_COMBINATION_TOKENS = 8
_BYTE_BITS: list[tuple[int, ...]] = []  # the set bits of each byte value, filled on first use
_NONZERO = bytes([0] + [1] * 255)


def bits_to_ids(bits: bytes, base: int = 0) -> list[int]:
    """The positions of the set bits (bit ``j`` of byte ``i`` is ``base + 8 i + j``)."""
    table = _BYTE_BITS
    if not table:
        table.extend(tuple(j for j in range(8) if b >> j & 1) for b in range(256))
    flags = bits.translate(_NONZERO)  # 1 where a byte has a set bit
    if flags.count(1) * SPARSE_BYTES >= len(bits):
        nonzero: Iterable[int] = compress(range(len(bits)), flags)
    else:
        # Few nonzero bytes (a combination's fresh entries in a million-bit map):
        # ``find`` skips the zeros in C instead of visiting every byte.
        nonzero = _positions(flags)
    return [base + (i << 3) + j for i in nonzero for j in table[bits[i]]]


#: ``bits_to_ids`` looks for nonzero bytes one ``find`` at a time under one in this many.
SPARSE_BYTES = 32


def _positions(flags: bytes) -> list[int]:
    """Where ``flags`` (bytes of 0 and 1) holds a 1."""
    out: list[int] = []
    find = flags.find
    at = find(1)
    while at >= 0:
        out.append(at)
        at = find(1, at + 1)
    return out


def top_by_combinations(
    qtokens: Sequence[str],
    n: int,
    df: Callable[[str], int],
    bitmap: Callable[[str], int],
    min_coverage: float,
    k: int,
) -> list[tuple[int, float]] | None:
    """What ``top_candidates`` returns, from postings held as bitmaps (bit ``r`` = key ``r``).

    For queries made of common words, where every list is long: the score of an entry
    depends only on which query tokens it holds, so the combinations of tokens are
    visited best score first, and the entries holding exactly a combination are the
    bitwise AND of its tokens' bitmaps less everyone found before (an entry holding a
    larger combination scored higher and was found with it). The walk stops below the
    relevance floor, or below the k-th score once k entries are found, so it reads a
    handful of ANDs instead of every entry of every list. Returns None when the query
    has more than ``MAX_COMBINATION_TOKENS`` indexed tokens (the caller falls back).
    """
    present = [t for t in qtokens if df(t) > 0]
    if not present:
        return []
    if len(present) > MAX_COMBINATION_TOKENS or n <= 0:
        return None
    idf = {t: math.log(1.0 + n / (1.0 + df(t))) for t in qtokens}
    mass = sum(idf.values())
    if mass <= 0:
        return []
    m = len(present)
    # Every combination's score, summed in query order as the published scan sums:
    # ``present`` is in query order, and a mask's sum is the sum of the mask without
    # its highest bit plus that token's weight, so the additions happen in that order.
    sums = [0.0]
    for t in present:
        weight = idf[t]
        sums += [s + weight for s in sums]
    combos = sorted(zip(sums[1:], range(1, 1 << m), strict=True), key=lambda c: c[0], reverse=True)
    bits: list[int | None] = [None] * m  # read when a combination first needs them
    seen = 0
    out: list[tuple[int, float]] = []
    kth: float | None = None
    for score, mask in combos:
        if not (score > 0 and score / mass >= min_coverage):
            break  # sorted: everything after is under the floor too
        if kth is not None and score < kth:
            break
        acc = -1
        for i in range(m):
            if mask >> i & 1:
                have = bits[i]
                if have is None:
                    have = bits[i] = bitmap(present[i])
                acc &= have
                if not acc:
                    break
        fresh = acc & ~seen if acc and seen else acc
        if not fresh:
            continue
        seen |= fresh
        out.extend(
            (key, score)
            for key in bits_to_ids(fresh.to_bytes((fresh.bit_length() + 7) // 8, "little"))
        )
        if kth is None and len(out) >= k:
            kth = score  # the k-th best; entries tied with it are still collected
    return out
