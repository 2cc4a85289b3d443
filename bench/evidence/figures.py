"""Figures for ``docs/benchmarks.md`` (matplotlib, the ``bench`` extra).

Every figure is drawn from the committed per-seed results, with the Agg backend,
a fixed size and resolution, the DejaVu Sans font that ships with matplotlib, and
no timestamp or software tag in the PNG metadata, so the same results and the same
matplotlib version give byte-identical files. Across matplotlib (or FreeType)
versions the pixels may differ; ``report --check`` therefore compares the PNG bytes
only when the installed matplotlib is the version recorded in
``docs/benchmarks/FIGURES.json`` and otherwise checks that every figure the doc links
to exists and is the file recorded there (sha256).

``FIGURES`` lists each figure's file name, the suite it needs and what it shows;
``report.py`` links only those whose suite is present.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from itertools import accumulate
from pathlib import Path
from typing import Any

from .arms import cell_key

Runs = list[dict[str, Any]]
Manifest = dict[str, Any]

WIDTH, HEIGHT, DPI = 8.0, 4.5, 100  # 800 x 450 pixels

#: A fixed colour per arm, so an arm looks the same in every figure.
COLORS = {
    "survival": "#1b9e77",
    "survival_writes": "#66c2a5",
    "survival_embedding": "#7570b3",
    "random_matched": "#d95f02",
    "keep_everything": "#666666",
    "evict_on_negative": "#e7298a",
    "strikes_k2": "#f781bf",
    "strikes_k3": "#a6761d",
    "consecutive_k2": "#e6ab02",
    "quarantine_m3": "#1f78b4",
    "recency": "#b2df8a",
    "ttl": "#999999",
}


#: The arms drawn in the cumulative-delta figure (``recency`` equals ``keep_everything``
#: and the strike counters lie between survival and ``evict_on_negative``).
CUMULATIVE_ARMS = (
    "survival",
    "survival_embedding",
    "evict_on_negative",
    "quarantine_m3",
    "ttl",
    "random_matched",
    "keep_everything",
)
BANDED = ("survival", "random_matched", "keep_everything")


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    plt.rcParams.update(
        {
            "font.family": "DejaVu Sans",
            "font.size": 9,
            "axes.titlesize": 10,
            "svg.hashsalt": "darwin-memo",
            "path.simplify": False,
        }
    )
    return plt


def matplotlib_version() -> str | None:
    try:
        import matplotlib
    except ImportError:
        return None
    return str(matplotlib.__version__)


def _save(fig: Any, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=DPI, metadata={"Software": None})


def _color(arm: str) -> str:
    return COLORS.get(arm, "#000000")


def kill_cycles(manifest: Manifest, runs: Runs, path: Path) -> None:
    """Each seed's kill cycle per arm; seeds that never kill sit on the 'never' row."""
    plt = _pyplot()
    arms = manifest["config"]["arms"]
    cycles = manifest["config"]["cycles"]
    never = cycles + 2
    fig, ax = plt.subplots(figsize=(WIDTH, HEIGHT))
    for i, arm in enumerate(arms):
        ks = [r["cells"]["clean"][arm]["kill_cycle"] for r in runs]
        ys = [never if k is None else k for k in ks]
        # spread equal values sideways so every seed is visible
        seen: dict[int, int] = {}
        xs = []
        for y in ys:
            n = seen.get(y, 0)
            seen[y] = n + 1
            xs.append(i + (n % 10 - 4.5) * 0.06)
        ax.scatter(xs, ys, s=14, color=_color(arm), alpha=0.8, linewidths=0)
        done = [k for k in ks if k is not None]
        if done:
            m = statistics.median(done)
            ax.plot([i - 0.35, i + 0.35], [m, m], color="black", linewidth=1.2)
    ax.axhline(cycles + 0.5, color="#cccccc", linewidth=0.8)
    ax.set_xticks(range(len(arms)))
    ax.set_xticklabels(arms, rotation=30, ha="right")
    ax.set_yticks([0, 5, 10, 15, 20, 25, never])
    ax.set_yticklabels(["0", "5", "10", "15", "20", "25", "never"])
    ax.set_ylim(-1, never + 1)
    ax.set_ylabel("poison kill cycle (bar: median of killed seeds)")
    ax.set_title(f"Kill cycle per seed, {manifest['suite']} ({len(runs)} seeds)")
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


def cumulative(
    manifest: Manifest, runs: Runs, path: Path, *, unit: str, scale: float = 1.0
) -> None:
    """Mean cumulative true delta over cycles per arm (``CUMULATIVE_ARMS`` where present).

    The seed range (min-max) is shaded for ``BANDED`` arms only, to keep it readable.
    """
    plt = _pyplot()
    arms = [a for a in CUMULATIVE_ARMS if a in manifest["config"]["arms"]]
    fig, ax = plt.subplots(figsize=(WIDTH, HEIGHT))
    for arm in arms:
        series = [
            [x / scale for x in accumulate(r["cells"]["clean"][arm]["cycle_delta"])] for r in runs
        ]
        cycles = range(len(series[0]))
        mean = [statistics.fmean(s[c] for s in series) for c in cycles]
        lo = [min(s[c] for s in series) for c in cycles]
        hi = [max(s[c] for s in series) for c in cycles]
        if arm in BANDED:
            ax.fill_between(list(cycles), lo, hi, color=_color(arm), alpha=0.12, linewidth=0)
        ax.plot(list(cycles), mean, color=_color(arm), linewidth=1.5, label=arm)
    ax.axhline(0, color="#999999", linewidth=0.8)
    ax.set_xlabel("cycle")
    ax.set_ylabel(f"cumulative true delta ({unit})")
    ax.set_title(
        f"Cumulative delta, {manifest['suite']} (mean of {len(runs)} seeds; "
        "bands: min-max over seeds)"
    )
    ax.legend(loc="upper left", fontsize=7, ncol=2, frameon=False)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


def noise_grid(manifest: Manifest, runs: Runs, path: Path) -> None:
    """Mean true cum delta against the noise rate, one panel per noise model."""
    plt = _pyplot()
    arms = manifest["config"]["arms"]
    cells = [(n, r) for n, r in manifest["config"]["cells"] if n != "none"]
    models = list(dict.fromkeys(n for n, _ in cells))
    fig, axes = plt.subplots(1, len(models), figsize=(WIDTH + 3, HEIGHT), sharey=True)
    for ax, model in zip(axes, models, strict=True):
        rates = [0.0] + [r for n, r in cells if n == model]
        for arm in arms:
            ys = [
                statistics.fmean(
                    run["cells"][cell_key("none" if rate == 0 else model, rate)][arm]["cum_delta"]
                    for run in runs
                )
                / 1e6
                for rate in rates
            ]
            ax.plot(rates, ys, marker="o", markersize=3, color=_color(arm), label=arm)
        ax.axhline(0, color="#999999", linewidth=0.8)
        ax.set_title(model)
        ax.set_xlabel("noise rate")
    axes[0].set_ylabel("mean true cum delta (M bytes)")
    axes[0].legend(loc="lower left", bbox_to_anchor=(0.0, 0.1), fontsize=7, frameon=False)
    fig.suptitle(f"Noisy CI, {len(runs)} seeds: arms decide on reported deltas, scored on truth")
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


def worlds_panel(loaded: Sequence[tuple[str, Manifest, Runs, str]], path: Path) -> None:
    """Mean cumulative true delta over cycles, one panel per (non-headline) world."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(loaded), figsize=(WIDTH + 3, HEIGHT))
    axes = list(axes) if len(loaded) > 1 else [axes]
    for ax, (title, manifest, runs, unit) in zip(axes, loaded, strict=True):
        scale = 1e6 if unit == "bytes" else 1.0
        for arm in manifest["config"]["arms"]:
            series = [
                [x / scale for x in accumulate(r["cells"]["clean"][arm]["cycle_delta"])]
                for r in runs
            ]
            cycles = range(len(series[0]))
            mean = [statistics.fmean(s[c] for s in series) for c in cycles]
            ax.plot(list(cycles), mean, color=_color(arm), linewidth=1.4, label=arm)
        ax.axhline(0, color="#999999", linewidth=0.8)
        ax.set_title(title)
        ax.set_xlabel("cycle")
        ax.set_ylabel(f"cumulative true delta ({'M bytes' if unit == 'bytes' else unit})")
    axes[0].legend(loc="upper left", fontsize=7, frameon=False)
    fig.suptitle("Other worlds: mean cumulative delta per arm")
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


Loader = Callable[[str], tuple[Manifest, Runs] | None]


def draw_all(load: Loader, out_dir: Path, units: dict[str, str]) -> list[Path]:
    """Draw every figure whose suites are present; returns the files written."""
    written: list[Path] = []
    headline = load("headline")
    if headline is not None:
        path = out_dir / "kill-cycles.png"
        kill_cycles(*headline, path)
        written.append(path)
        path = out_dir / "cumulative-delta.png"
        cumulative(*headline, path, unit="M bytes", scale=1e6)
        written.append(path)
    noisy = load("noisy")
    if noisy is not None:
        path = out_dir / "noise-grid.png"
        noise_grid(*noisy, path)
        written.append(path)
    others = []
    for suite, title in WORLD_PANELS:
        found = load(suite)
        if found is not None:
            others.append((title, found[0], found[1], units[suite]))
    if others:
        path = out_dir / "worlds.png"
        worlds_panel(others, path)
        written.append(path)
    return written


WORLD_PANELS = (
    ("rented_storage", "RentedStorageEnv"),
    ("testsuite", "TestSuiteEnv"),
    ("rented_testsuite", "RentedTestSuiteEnv"),
)
