"""Statistics for paired arm comparisons over seeds (stdlib only).

* ``paired_permutation_p``: two-sided sign-flip permutation test on paired
  differences. Exact (all ``2**n`` sign assignments) up to ``exact_max`` pairs,
  otherwise a seeded Monte Carlo estimate. Assignments whose statistic ties the
  observed one count as extreme, so all-zero differences give ``p = 1.0``.
* ``holm``: Holm-Bonferroni step-down adjustment (monotone, capped at 1).
* ``effect``: mean and median difference, wins/ties/losses, paired Cohen's d_z.
* ``bootstrap_ci``: seeded percentile bootstrap of the mean.
"""

from __future__ import annotations

import itertools
import math
import random
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

EXACT_MAX = 16  # 65,536 assignments
MC_PERMUTATIONS = 20_000


def _diffs(a: Sequence[float], b: Sequence[float]) -> list[float]:
    if len(a) != len(b):
        raise ValueError(f"paired samples differ in length ({len(a)} vs {len(b)})")
    return [x - y for x, y in zip(a, b, strict=True)]


def paired_permutation_p(
    a: Sequence[float],
    b: Sequence[float],
    *,
    exact_max: int = EXACT_MAX,
    permutations: int = MC_PERMUTATIONS,
    seed: int = 0,
) -> float:
    """Two-sided p-value of ``mean(a - b) == 0`` under random sign flips."""
    d = _diffs(a, b)
    if not d:
        return 1.0
    observed = abs(math.fsum(d))
    scale = max(abs(x) for x in d)
    if scale == 0:
        return 1.0
    tol = 1e-9 * scale * len(d)  # float noise must not break exact ties
    if len(d) <= exact_max:
        extreme = total = 0
        for signs in itertools.product((1, -1), repeat=len(d)):
            total += 1
            if abs(math.fsum(s * x for s, x in zip(signs, d, strict=True))) >= observed - tol:
                extreme += 1
        return extreme / total
    rng = random.Random(seed)
    extreme = 0
    for _ in range(permutations):
        stat = abs(math.fsum(x if rng.random() < 0.5 else -x for x in d))
        if stat >= observed - tol:
            extreme += 1
    return (extreme + 1) / (permutations + 1)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in the input order."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def effect(a: Sequence[float], b: Sequence[float]) -> dict[str, Any]:
    """Paired effect of ``a`` over ``b``: mean/median diff, W/T/L, Cohen's d_z."""
    d = _diffs(a, b)
    wins = sum(1 for x in d if x > 0)
    losses = sum(1 for x in d if x < 0)
    mean = statistics.fmean(d) if d else 0.0
    sd = statistics.stdev(d) if len(d) > 1 else 0.0
    dz: float | None = mean / sd if sd > 0 else None
    return {
        "mean_diff": mean,
        "median_diff": statistics.median(d) if d else 0.0,
        "wins": wins,
        "ties": len(d) - wins - losses,
        "losses": losses,
        "d_z": dz,
    }


def bootstrap_ci(
    values: Sequence[float], *, resamples: int = 10_000, seed: int = 0, level: float = 0.95
) -> tuple[float, float]:
    """Percentile bootstrap interval for the mean of ``values``."""
    if not values:
        return (math.nan, math.nan)
    rng = random.Random(seed)
    n = len(values)
    means = sorted(statistics.fmean(rng.choices(values, k=n)) for _ in range(resamples))
    lo = means[math.floor((1 - level) / 2 * resamples)]
    hi = means[min(resamples - 1, math.ceil((1 + level) / 2 * resamples) - 1)]
    return (lo, hi)


def compare_grid(
    values: Mapping[str, Sequence[float]], base: str, others: Sequence[str], **kw: Any
) -> list[dict[str, Any]]:
    """``base`` vs each of ``others`` (paired by seed), Holm-adjusted across the grid."""
    rows = []
    for other in others:
        row = {"base": base, "other": other, **effect(values[base], values[other])}
        row["p"] = paired_permutation_p(values[base], values[other], **kw)
        rows.append(row)
    for row, adj in zip(rows, holm([r["p"] for r in rows]), strict=True):
        row["p_holm"] = adj
    return rows
