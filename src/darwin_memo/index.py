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
2. Survivors are scored exactly as the published scan does (same token order,
   same float sums), so scores are bit-identical to a brute-force ``rank``.

This is the "MaxScore" idea from search engines. Queries made only of common
words still finish: the bar rises as soon as k entries hold most of the mass.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Hashable, Sequence
from typing import TypeVar

__all__ = ["top_candidates"]

K = TypeVar("K", bound=Hashable)


def top_candidates(
    qtokens: Sequence[str],
    n: int,
    df: Callable[[str], int],
    postings: Callable[[str], Collection[K]],
    has_token: Callable[[K, str], bool],
    min_coverage: float,
    k: int | None,
    prefetch: Callable[[Collection[K]], None] | None = None,
) -> list[tuple[K, float]]:
    """Keys whose exact score qualifies and ties or beats the k-th best (``k=None``: all).

    ``qtokens`` are the query's distinct tokens in query order; ``n`` the number
    of indexed entries; ``df(t)`` how many contain ``t``; ``postings(t)`` their
    keys; ``has_token(key, t)`` a membership test. Returns ``(key, score)`` best
    first (ties in no particular order).
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

    partial: dict[K, float] = {}
    bar = floor
    for i, token in enumerate(order):
        open_to_new = remaining[i] + eps >= bar and remaining[i] > 0
        weight = idf[token]
        if open_to_new:
            for key in postings(token):
                partial[key] = partial.get(key, 0.0) + weight
        else:
            if not partial:
                break
            if df(token) < 4 * len(partial):  # cheaper to walk the (short) postings list
                plist = postings(token)
                members = plist if isinstance(plist, (set, frozenset, dict)) else set(plist)
                for key in partial:
                    if key in members:
                        partial[key] += weight
            else:
                if prefetch is not None:
                    prefetch(partial.keys())
                for key in partial:
                    if has_token(key, token):
                        partial[key] += weight
        # Raise the bar to the k-th best partial score (a lower bound of final scores),
        # then drop whoever cannot reach it even with every unvisited token.
        if k is not None and len(partial) >= k:
            kth = _kth_largest(partial.values(), k)
            bar = max(bar, kth)
        ceiling = remaining[i + 1] + eps
        if bar > 0:
            partial = {key: s for key, s in partial.items() if s + ceiling >= bar}

    # Exact scores, summed in query order as the published scan sums them.
    if prefetch is not None:
        prefetch(partial.keys())
    out: list[tuple[K, float]] = []
    for key in partial:
        score = sum(w for t, w in idf.items() if has_token(key, t))
        if score > 0 and score / mass >= min_coverage:
            out.append((key, score))
    out.sort(key=lambda pair: pair[1], reverse=True)
    if k is not None and len(out) > k:
        kth_score = out[k - 1][1]
        out = [pair for pair in out if pair[1] >= kth_score]
    return out


def _kth_largest(values: Collection[float], k: int) -> float:
    import heapq

    return heapq.nlargest(k, values)[-1]
