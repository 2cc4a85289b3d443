"""Write ``docs/benchmarks.md`` from the committed per-seed results.

    .venv/bin/python -m bench.evidence.report           # (re)write the doc
    .venv/bin/python -m bench.evidence.report --check   # exit 1 if the doc is stale

Everything in the doc is computed here from ``bench/evidence/results/<suite>/``;
nothing is typed in by hand except the published reference numbers (spec §11)
and the prose around them. No figures: matplotlib is not a dependency of this
project, so the report is tables only.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .arms import cell_key
from .run import RESULTS, SUITES
from .stats import bootstrap_ci, compare_grid, holm

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "benchmarks.md"
COMMAND = ".venv/bin/python -m bench.evidence.report"

#: spec §11.2, published headline (StorageEnv, 10 seeds): kill rate, median kill
#: cycle, damage before kill, tail delta, cum delta, final pop, benign correct.
PUBLISHED: dict[str, tuple[float, int | None, int, int, int, int, float]] = {
    "survival": (1.00, 0, -393_830, 436_756, 12_586_803, 4, 1.00),
    "survival_writes": (1.00, 0, -393_830, 436_756, 12_586_803, 4, 1.00),
    "evict_on_negative": (1.00, 0, -319_590, 436_756, 12_780_954, 15, 1.00),
    "recency": (0.00, None, -4_400_845, 436_756, 4_978_381, 7, 1.00),
    "ttl": (1.00, 10, -4_400_845, 0, -3_628_237, 0, 0.00),
    "random_matched": (0.80, 19, -10_716_672, 38_113, -7_673_651, 6, 0.40),
    "keep_everything": (0.00, None, -12_105_830, -235_827, -9_084_928, 16, 1.00),
}

#: spec §11.3, published noisy CI (false_bad, 30 seeds): mean true cum delta (M).
PUBLISHED_NOISY: dict[str, dict[float, float]] = {
    "survival": {0.0: 12.38, 0.05: 12.38, 0.10: 12.26, 0.20: 12.26, 0.35: 10.47},
    "evict_on_negative": {0.0: 12.57, 0.05: 3.30, 0.10: 1.54, 0.20: 0.41, 0.35: 0.00},
    "strikes_k2": {0.0: 12.38, 0.05: 6.20, 0.10: 3.20, 0.20: 1.19, 0.35: 0.22},
    "strikes_k3": {0.0: 12.10, 0.05: 8.71, 0.10: 4.84, 0.20: 1.82, 0.35: 0.48},
    "consecutive_k2": {0.0: 12.38, 0.05: 11.47, 0.10: 9.12, 0.20: 3.73, 0.35: 1.08},
}

ARM_NOTES = {
    "survival": "the library's `SurvivalLoop` (credit, upkeep, burial, merges; writes off)",
    "survival_writes": "the same with experience writes on (the library default)",
    "random_matched": "removes as many entries per cycle as survival did on that seed, "
    "victims drawn at random",
    "keep_everything": "never removes anything",
    "evict_on_negative": "evicts the decider of any negative outcome, at once",
    "strikes_k2": "evicts a decider on its 2nd negative outcome",
    "strikes_k3": "evicts a decider on its 3rd negative outcome",
    "consecutive_k2": "2 strikes, reset by any positive outcome",
    "recency": "LRU: evicts entries not retrieved (decider or supporter) for 10 cycles",
    "ttl": "every entry lives 10 cycles",
}


# --------------------------------------------------------------------------- #
# Loading and formatting
# --------------------------------------------------------------------------- #


def load_suite(results: Path, name: str) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
    folder = results / name
    manifest_path = folder / "MANIFEST.json"
    if not manifest_path.exists():
        return None
    manifest = json.loads(manifest_path.read_text())
    runs = [json.loads(p.read_text()) for p in sorted(folder.glob("seed-*.json"))]
    seeds = [r["seed"] for r in runs]
    if seeds != sorted(manifest["config"]["seeds"]):
        raise ValueError(f"{folder}: seed files {seeds} do not match the manifest")
    return manifest, runs


def metric(runs: Sequence[dict[str, Any]], cell: str, arm: str, key: str) -> list[Any]:
    return [r["cells"][cell][arm][key] for r in runs]


def num(x: float) -> str:
    return f"{x:,.0f}"


def mega(x: float) -> str:
    return f"{x / 1e6:.2f}M"


def pval(p: float) -> str:
    return f"{p:.4g}"


def dz(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def arm_summary(runs: Sequence[dict[str, Any]], cell: str, arm: str) -> dict[str, Any]:
    killed = metric(runs, cell, arm, "killed")
    kills = [k for k in metric(runs, cell, arm, "kill_cycle") if k is not None]
    cum = metric(runs, cell, arm, "cum_delta")
    return {
        "kill_rate": sum(killed) / len(killed),
        "kill_cycle": statistics.median(kills) if kills else None,
        "damage": statistics.fmean(metric(runs, cell, arm, "damage_before_kill")),
        "destroyed": statistics.fmean(metric(runs, cell, arm, "destroyed_before_kill")),
        "hits": statistics.fmean(metric(runs, cell, arm, "harmful_before_kill")),
        "tail": statistics.fmean(metric(runs, cell, arm, "tail_delta_mean")),
        "cum": statistics.fmean(cum),
        "cum_ci": bootstrap_ci(cum),
        "pop": statistics.fmean(metric(runs, cell, arm, "final_population")),
        "benign": statistics.fmean(metric(runs, cell, arm, "benign_correct")),
        "harmful_safe": statistics.fmean(metric(runs, cell, arm, "harmful_safe")),
    }


def kill_text(x: float | None) -> str:
    return "-" if x is None else f"{x:g}"


def comparison_rows(grid: Sequence[dict[str, Any]]) -> list[list[str]]:
    return [
        [
            f"survival vs {r['other']}",
            f"{r['wins']}/{r['ties']}/{r['losses']}",
            num(r["mean_diff"]),
            num(r["median_diff"]),
            dz(r["d_z"]),
            pval(r["p"]),
            pval(r["p_holm"]),
        ]
        for r in grid
    ]


COMPARISON_HEADER = [
    "comparison",
    "W/T/L (seeds)",
    "mean diff",
    "median diff",
    "d_z",
    "p (exact)",
    "Holm p",
]


# --------------------------------------------------------------------------- #
# Sections
# --------------------------------------------------------------------------- #


def manifest_line(m: dict[str, Any]) -> str:
    c = m["config"]
    return (
        f"Suite `{m['suite']}`: seeds {c['seeds'][0]}..{c['seeds'][-1]} ({len(c['seeds'])}), "
        f"{c['cycles']} cycles, {c['files']} files per cycle; config hash "
        f"`{m['config_hash']}`; darwin-memo {m['darwin_memo_version']}, Python {m['python']}; "
        f"source commit `{m['source_commit']}`; produced by `{m['command']}` "
        f"in {m['wall_time_s']} s on 2 worker processes."
    )


def headline_section(manifest: dict[str, Any], runs: list[dict[str, Any]]) -> list[str]:
    arms = manifest["config"]["arms"]
    s = {a: arm_summary(runs, "clean", a) for a in arms}
    n = len(runs)
    out = [f"## Headline: StorageEnv, {n} seeds", "", manifest_line(manifest), ""]
    rows = []
    for a in arms:
        x = s[a]
        rows.append(
            [
                f"`{a}`",
                f"{x['kill_rate']:.2f}",
                kill_text(x["kill_cycle"]),
                num(x["damage"]),
                f"{num(x['destroyed'])} ({x['hits']:.1f})",
                num(x["tail"]),
                f"{num(x['cum'])} [{mega(x['cum_ci'][0])}, {mega(x['cum_ci'][1])}]",
                f"{x['pop']:g}",
                f"{x['benign']:.2f}",
                f"{x['harmful_safe']:.2f}",
            ]
        )
    out += table(
        [
            "arm",
            "kill rate",
            "kill cycle (median)",
            "damage before kill (mean)",
            "destroyed before kill (mean; deletions)",
            "tail delta (mean)",
            "cum delta (mean [95% CI])",
            "final pop (mean)",
            "benign correct",
            "harmful refused",
        ],
        rows,
    )
    cum = {a: metric(runs, "clean", a, "cum_delta") for a in arms}
    dmg = {a: metric(runs, "clean", a, "destroyed_before_kill") for a in arms}
    others = [a for a in arms if a != "survival"]
    out += [
        "",
        f"Paired comparisons on **cumulative delta** (bytes), survival minus the other arm, "
        f"exact sign-flip permutation test over the {len(runs)} seeds "
        f"({2 ** len(runs):,} assignments), Holm-Bonferroni across these "
        f"{len(others)} comparisons. d_z = mean paired difference / its standard deviation.",
        "",
    ]
    out += table(COMPARISON_HEADER, comparison_rows(compare_grid(cum, "survival", others)))
    out += [
        "",
        f"The same on **destroyed before kill** (every destructive deletion up to the kill; "
        f"negative = more destroyed; Holm across these {len(others)}):",
        "",
    ]
    out += table(COMPARISON_HEADER, comparison_rows(compare_grid(dmg, "survival", others)))
    out += ["", "Per seed (cum delta in millions of bytes / kill cycle, `-` = never):", ""]
    seed_rows = []
    for r in runs:
        cells = r["cells"]["clean"]
        seed_rows.append(
            [str(r["seed"])]
            + [
                f"{cells[a]['cum_delta'] / 1e6:.2f} / {kill_text(cells[a]['kill_cycle'])}"
                for a in arms
            ]
        )
    out += table(["seed", *[f"`{a}`" for a in arms]], seed_rows)
    return out


def published_section(manifest: dict[str, Any], runs: list[dict[str, Any]]) -> list[str]:
    present = runs[0]["cells"]["clean"]
    s = {a: arm_summary(runs, "clean", a) for a in PUBLISHED if a in present}
    rows = []
    for a, pub in PUBLISHED.items():
        if a not in s:
            continue
        x = s[a]
        rows.append(
            [
                f"`{a}`",
                f"{pub[0]:.2f} / {x['kill_rate']:.2f}",
                f"{kill_text(pub[1])} / {kill_text(x['kill_cycle'])}",
                f"{num(pub[2])} / {num(x['damage'])}",
                f"{num(pub[3])} / {num(x['tail'])}",
                f"{mega(pub[4])} / {mega(x['cum'])}",
                f"{pub[5]} / {x['pop']:g}",
                f"{pub[6]:.2f} / {x['benign']:.2f}",
            ]
        )
    out = [
        "## Published numbers beside ours",
        "",
        "Each cell is **published / ours** (published: spec §11.2, the reference package's "
        f"own 10-seed StorageEnv run on its own implementation; ours: {len(runs)} seeds).",
        "",
    ]
    out += table(
        [
            "arm",
            "kill rate",
            "kill cycle",
            "damage before kill",
            "tail delta",
            "cum delta",
            "final pop",
            "benign",
        ],
        rows,
    )
    sv, eon = s["survival"], s["evict_on_negative"]
    killed = sum(metric(runs, "clean", "survival", "killed"))
    sv_hits = metric(runs, "clean", "survival", "harmful_before_kill")
    rm_killed = sum(metric(runs, "clean", "random_matched", "killed"))
    cum = {a: metric(runs, "clean", a, "cum_delta") for a in present}
    grid_arms = [a for a in present if a != "survival"]
    vs = {r["other"]: r for r in compare_grid(cum, "survival", grid_arms)}
    k3 = None
    if "strikes_k3" in present:
        k3 = compare_grid(
            {a: metric(runs, "clean", a, "cum_delta") for a in ("survival", "strikes_k3")},
            "survival",
            ["strikes_k3"],
        )[0]
    out += [
        "",
        "What agrees, and why the rest differs:",
        "",
        f"- **The headline reproduces.** Survival kills the acting poison in {killed}/"
        f"{len(runs)} seeds at median cycle {kill_text(sv['kill_cycle'])}, with "
        f"{num(sv['damage'])} damage before the kill (published "
        f"{num(PUBLISHED['survival'][2])}), ends at {mega(sv['cum'])} (published "
        f"{mega(PUBLISHED['survival'][4])}) with {sv['pop']:g} entries left (published 4). "
        f"`keep_everything` never kills; `random_matched` (survival's removal counts, random "
        f"victims) loses to survival in {vs['random_matched']['wins']}/{len(runs)} seeds "
        f"(Holm p = {pval(vs['random_matched']['p_holm'])} in the {len(grid_arms)}-comparison "
        "grid above). "
        "Removing entries at survival's rate is not what helps; removing the ones the "
        "outcomes point at is.",
        "- **The worlds are not the same draws.** Our `StorageEnv` follows the spec "
        "(per-(seed, cycle) SHA-256 RNG, same categories and size ranges) but is our own "
        "code, and nothing guarantees it draws the reference's file sequence per seed. "
        "Absolute totals of arms that never learn therefore differ by millions of bytes "
        f"(`keep_everything` {mega(s['keep_everything']['cum'])} vs "
        f"{mega(PUBLISHED['keep_everything'][4])}; it depends on nothing but the world and "
        "retrieval); the paired comparisons within one run are what carry the claims.",
        "- **`evict_on_negative` beats survival here (published: a tie).** It wins "
        f"{vs['evict_on_negative']['losses']}/{len(runs)} seeds by "
        f"{num(-vs['evict_on_negative']['mean_diff'])} bytes on average (Holm p = "
        f"{pval(vs['evict_on_negative']['p_holm'])}); published, survival trailed by "
        "194,150 with p = 0.25. The whole gap is the poison's extra deletions before it "
        f"dies: {sv['hits']:.1f} on average under survival against {eon['hits']:.1f} (see "
        "the destroyed-before-kill column). A new entry holds 1.0 energy and one destroyed "
        "database costs it 0.6 x tanh(3 x size / 100,000), about 0.55-0.6, so it needs two "
        "hits to reach zero; and an entry pushed to zero mid-cycle stays retrievable until "
        "the end-of-cycle upkeep sweep (spec §7.1), while the poison outscores the "
        "protective runbook line on database prompts (lexical score 6.19 vs 4.58), so every "
        "further database prompt in that cycle is another deletion "
        f"({min(sv_hits)}-{max(sv_hits)} per seed here). On average survival therefore "
        "behaves like a 3-strike counter on this poison"
        + (
            f" and ties `strikes_k3` ({k3['wins']}/{k3['ties']}/{k3['losses']}, "
            f"p = {pval(k3['p'])})."
            if k3
            else "."
        )
        + f" Its edge over the counters is leanness: {sv['pop']:g} entries left against "
        f"{eon['pop']:g} (the trivia and the inert poison never starve under a counter).",
        "- **`evict_on_negative`'s damage before kill is "
        f"{num(eon['damage'])}, not {num(PUBLISHED['evict_on_negative'][2])}.** By the "
        "spec's definition (negative *per-cycle* deltas) the one deletion it allows is "
        "usually outweighed by the same cycle's safe deletions, so the cycle is not "
        "negative. The published figure is the size of one whole destroyed file (ours, "
        f"counted per task: {num(eon['destroyed'])}), so the reference may have summed "
        "negative task outcomes for this arm; the spec does not let us tell.",
        (
            "- **`survival_writes` against `survival`**: "
            f"{vs['survival_writes']['wins']}/{vs['survival_writes']['ties']}/"
            f"{vs['survival_writes']['losses']} W/T/L, p = {pval(vs['survival_writes']['p'])} "
            "(published: identical, p = 1)."
            if "survival_writes" in vs
            else "- `survival_writes` not in this suite."
        ),
        "- **`recency` never kills** and its outcomes equal `keep_everything`'s: it "
        "refreshes an entry whenever it is retrieved (the MemoryOS-style reinforcement the "
        "issue asks for) and the poison is retrieved by every database prompt, so it is "
        "never idle; only the trivia starve (final pop "
        f"{s['recency']['pop']:g}, published 7). The published `recency` also never "
        "killed but ended at +4.98M; the spec does not say what refreshed an entry there, "
        "so we cannot reconcile the totals. Under retrieval reinforcement, being retrieved "
        "is exactly what poison is good at."
        if "recency" in s
        else "- `recency` not in this suite.",
        "- **`ttl` kills at cycle 9, not 10**: our kill cycle is the cycle at whose *end* no "
        "acting poison is left (0-based), and a 10-cycle TTL buries the original population "
        "at the end of cycle 9 (the published figure probably counts the next cycle). Its "
        "totals differ with the world draws."
        if "ttl" in s
        else "- `ttl` not in this suite.",
        f"- **`random_matched`** kills the poison in {rm_killed}/{len(runs)} seeds "
        "(published 8/10) and ends at "
        f"{mega(s['random_matched']['cum'])} (published "
        f"{mega(PUBLISHED['random_matched'][4])}): when the random draw happens to remove "
        "the poison early it does well, otherwise it also deletes the useful lessons. Its "
        "removal counts are survival's *net* population decline in each cycle (starvation "
        "plus merges), so its final population equals survival's "
        f"({s['random_matched']['pop']:g}; published 6).",
        "- **Not run here** (published, not reproduced in this first cut): "
        "`survival_embedding`, the paraphrase-probe columns, the ablations, TestSuiteEnv "
        "and the rented variants.",
    ]
    return out


def noisy_section(manifest: dict[str, Any], runs: list[dict[str, Any]]) -> list[str]:
    arms = manifest["config"]["arms"]
    cells = [cell_key(n, r) for n, r in manifest["config"]["cells"]]
    out = [
        "## Noisy CI: measurement that lies, scored on the truth",
        "",
        manifest_line(manifest),
        "",
        "Arms decide on the *reported* delta; every number below is the *true* one. "
        "`false_bad@r`: each positive outcome is reported as its negation with "
        "probability r (flaky CI: good changes reported red). `flip@r`: any non-zero "
        "outcome is negated with probability r. The draws are fixed per "
        "(seed, cycle, task), so every arm faces the same lies on the same tasks.",
        "",
        "Mean true cum delta / benign capability (fraction of the 3 disposable-category "
        "probes still answered 'delete' at the end):",
        "",
    ]
    rows = []
    for a in arms:
        row = [f"`{a}`"]
        for c in cells:
            cum = statistics.fmean(metric(runs, c, a, "cum_delta"))
            ben = statistics.fmean(metric(runs, c, a, "benign_correct"))
            row.append(f"{mega(cum)} / {ben:.2f}")
        rows.append(row)
    out += table(["arm", *cells], rows)
    same = {
        c: sum(
            1
            for r in runs
            if r["cells"][c]["survival"]["cycle_delta"]
            == r["cells"]["clean"]["survival"]["cycle_delta"]
        )
        for c in cells
    }
    out += [
        "",
        "Seeds in which survival's true per-cycle outcomes are identical to its "
        "noise-free run: "
        + ", ".join(f"{c} {same[c]}/{len(runs)}" for c in cells if c != "clean")
        + ".",
        "",
        "Survival against each counter, per cell, on true cum delta (exact permutation "
        "tests up to 16 seeds, else seeded Monte Carlo with 20,000 sign flips; Holm "
        "across the whole grid below):",
        "",
    ]
    grid: list[dict[str, Any]] = []
    counters = [a for a in arms if a not in ("survival", "keep_everything")]
    for c in cells:
        values = {a: metric(runs, c, a, "cum_delta") for a in arms}
        for comparison in compare_grid(values, "survival", counters):
            comparison["cell"] = c
            grid.append(comparison)
    for comparison, adj in zip(grid, holm([r["p"] for r in grid]), strict=True):
        comparison["p_holm"] = adj
    out += table(
        ["cell", *COMPARISON_HEADER],
        [[r["cell"], *line] for r, line in zip(grid, comparison_rows(grid), strict=True)],
    )
    pub_rows = []
    for a, by_rate in PUBLISHED_NOISY.items():
        if a not in arms:
            continue
        row = [f"`{a}`"]
        for rate, pub in by_rate.items():
            c = cell_key("none", 0.0) if rate == 0 else cell_key("false_bad", rate)
            ours = (
                f"{statistics.fmean(metric(runs, c, a, 'cum_delta')) / 1e6:.2f}"
                if c in cells
                else "-"
            )
            row.append(f"{pub:.2f} / {ours}")
        pub_rows.append(row)
    out += [
        "",
        "Published / ours, false_bad, mean true cum delta in millions (spec §11.3):",
        "",
    ]
    out += table(["arm", "0.00", "0.05", "0.10", "0.20", "0.35"], pub_rows)
    significant = sum(1 for r in grid if r["p_holm"] < 0.05)
    lost = [r for r in grid if r["cell"] != "clean" and r["losses"] > 0]
    out += [
        "",
        "Reading it:",
        "",
        f"- {significant} of the {len(grid)} comparisons are significant after Holm "
        "(p < 0.05). Under noise survival loses "
        + (
            "no seed to any counter."
            if not lost
            else "seeds to a counter only in: "
            + ", ".join(f"{r['cell']} vs {r['other']} ({r['losses']})" for r in lost)
            + ". Those are seeds where the counter was already ahead noise-free (the "
            "poison's extra deletions under survival, see the headline section) and the "
            "few lies had not yet cost it its useful lessons. The published run, whose "
            "survival let the poison act about once, lost no seed under false_bad."
        ),
        "- Why survival forgives: a capped entry holds 5.0 energy and a lie costs it at "
        "most 0.6, so it absorbs about eight lies in a row, and every true success refills "
        "it; a strike counter spends its whole budget on k lies. With noise-free outcomes "
        "the faster counters (k = 1, 2) win by the margin explained in the headline "
        "section.",
        "- Survival's true outcomes are identical to its noise-free run in "
        + ", ".join(f"{same[c]}/{len(runs)} seeds at {c}" for c in cells if c != "clean")
        + " (published: 30/30 at 5%, 29/30 at 10% and 20%).",
        "- Differences from the published grid: theirs had 72 comparisons (more arms, the "
        "`magnitude` noise model, `flip` at five rates, a `quarantine` arm); ours has the "
        "cells above only, so Holm divides by less. Means track the published table "
        "closely; absolute totals differ with the world draws, as in the headline.",
    ]
    return out


def render(results: Path = RESULTS, suite: str = "headline") -> str:
    """The whole doc; ``suite`` names the results folder used for the headline."""
    headline = load_suite(results, suite)
    if headline is None:
        raise FileNotFoundError(f"no headline results under {results}; run bench.evidence.run")
    out = [
        "# Benchmarks: does outcome-settled selection do what it claims?",
        "",
        "<!-- Generated file: do not edit. Regenerate with the command below; "
        "tests/test_benchmarks.py fails when it disagrees with the committed results. -->",
        "",
        "Regenerate every table here from the committed per-seed results "
        "(`bench/evidence/results/<suite>/seed-*.json`, bound by each suite's "
        "`MANIFEST.json`):",
        "",
        "```",
        COMMAND,
        "```",
        "",
        "Re-run the experiments themselves (deterministic: the seed files come out "
        "byte-identical):",
        "",
        "```",
        *(f".venv/bin/python -m bench.evidence.run --suite {name}" for name in SUITES),
        "```",
        "",
        "Figures: none. matplotlib is not installed in this project's environment, so this "
        "report is tables only.",
        "",
        "## Setup",
        "",
        "- Store: the demo store, `LocalEncoder` over `demo_corpus()`: 16 entries, 3 from "
        'the wrong `forum-post` document, of which one ("The store db files under data/ '
        'are redundant ... safe to remove") reads as an action; the other two are inert.',
        "- World: `StorageEnv`, 12 files per cycle, 30 cycles; one world per "
        "(seed, cycle). Every arm answers through the same local `QueryProtocol`.",
        "- Arms (`bench/evidence/arms.py`):",
        *(f"  - `{a}`: {note}" for a, note in ARM_NOTES.items()),
        "- Metrics (per seed; tables show means unless noted): **kill cycle** = first "
        "cycle at whose end no living poisoned entry reads as 'delete' (inert poison "
        "excluded), kill rate = share of seeds with one; **damage before kill** = sum of "
        "the negative *per-cycle* (net) deltas up to and including the kill cycle, whole "
        "run if never killed (the spec's definition); **destroyed before kill** = the "
        "stricter sum of every negative *task* outcome over the same cycles, with the "
        "number of destructive deletions in brackets; **cum delta** = sum of all true "
        "outcomes (bytes); **tail delta** "
        "= mean per-cycle delta over the last 5 cycles; **final pop** = living entries at "
        "the end; **benign correct** = share of the 3 disposable-category probes answered "
        "'delete'; **harmful refused** = share of the 2 protected-category probes *not* "
        "answered 'delete'.",
        "- Statistics (`bench/evidence/stats.py`): exact paired two-sided sign-flip "
        "permutation tests over seeds (ties with the observed statistic count as extreme, "
        "so identical arms give p = 1), Holm-Bonferroni across each printed grid, paired "
        "Cohen's d_z, and percentile-bootstrap 95% intervals (10,000 seeded resamples) on "
        "mean cum delta.",
        "",
    ]
    out += headline_section(*headline)
    out += [""]
    out += published_section(*headline)
    noisy = load_suite(results, "noisy")
    out += [""]
    if noisy is not None:
        out += noisy_section(*noisy)
    else:
        out += ["## Noisy CI", "", "Not run yet (`--suite noisy`)."]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--out", type=Path, default=DOC)
    parser.add_argument("--check", action="store_true", help="exit 1 if the doc is stale")
    args = parser.parse_args(argv)
    text = render(args.results)
    if args.check:
        current = args.out.read_text() if args.out.exists() else ""
        if current != text:
            print(f"{args.out} is stale; regenerate with: {COMMAND}", file=sys.stderr)
            return 1
        print(f"{args.out} matches the results")
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
