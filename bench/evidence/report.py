"""Write ``docs/benchmarks.md`` from the committed per-seed results.

    .venv/bin/python -m bench.evidence.report           # (re)write the doc
    .venv/bin/python -m bench.evidence.report --check   # exit 1 if the doc is stale

Everything in the doc is computed here from ``bench/evidence/results/<suite>/``;
nothing is typed in by hand except the published reference numbers (spec §11)
and the prose around them. The figures (``docs/benchmarks/*.png``) are drawn by
``figures.py`` from the same results; writing them needs matplotlib (the ``bench``
extra). ``--check`` compares the markdown byte for byte, checks that every linked
figure exists and matches ``docs/benchmarks/FIGURES.json`` (sha256), and redraws
the figures and compares their bytes when the installed matplotlib is the recorded
version (PNG rendering is not promised to be identical across matplotlib versions).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import figures
from .arms import cell_key
from .distill import distill_section
from .run import RESULTS, SUITES
from .stats import bootstrap_ci, compare_grid, holm
from .worlds import WORLDS

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "benchmarks.md"
COMMAND = ".venv/bin/python -m bench.evidence.report"
FIGURES_JSON = "FIGURES.json"

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
    "survival_embedding": (1.00, 19, 0, 436_756, 13_519_155, 4, 1.00),
}

#: spec §11.2, published paraphrase grounded rate (out-of-vocabulary paraphrases).
PUBLISHED_PARA: dict[str, float] = {
    "survival": 0.33,
    "survival_writes": 0.30,
    "survival_embedding": 0.67,
    "evict_on_negative": 0.33,
    "recency": 0.33,
    "ttl": 0.00,
    "random_matched": 0.07,
    "keep_everything": 0.33,
}

#: spec §11.4, published TestSuiteEnv headline (10 seeds): cum delta (tests),
#: kill rate, median kill cycle, final population (None: not published).
PUBLISHED_TESTSUITE: dict[str, tuple[float, float | None, int | None, int | None]] = {
    "survival": (69, 1.00, 2, 4),
    "evict_on_negative": (88, None, None, 19),
    "survival_embedding": (90, 0.00, None, None),
    "keep_everything": (30, None, None, None),
    "random_matched": (34.8, None, None, None),
}

#: spec §11.3, published noisy CI (false_bad, 30 seeds): mean true cum delta (M).
PUBLISHED_NOISY: dict[str, dict[float, float]] = {
    "survival": {0.0: 12.38, 0.05: 12.38, 0.10: 12.26, 0.20: 12.26, 0.35: 10.47},
    "evict_on_negative": {0.0: 12.57, 0.05: 3.30, 0.10: 1.54, 0.20: 0.41, 0.35: 0.00},
    "strikes_k2": {0.0: 12.38, 0.05: 6.20, 0.10: 3.20, 0.20: 1.19, 0.35: 0.22},
    "strikes_k3": {0.0: 12.10, 0.05: 8.71, 0.10: 4.84, 0.20: 1.82, 0.35: 0.48},
    "consecutive_k2": {0.0: 12.38, 0.05: 11.47, 0.10: 9.12, 0.20: 3.73, 0.35: 1.08},
    "quarantine_m3": {0.0: 5.12, 0.05: 2.93, 0.10: 1.49, 0.20: -0.35, 0.35: -1.79},
}

#: spec §11.3, published flip noise for survival: rate -> (cum M, benign, median
#: kill cycle, kill rate).
PUBLISHED_FLIP: dict[float, tuple[float, float, int, float]] = {
    0.0: (12.38, 1.00, 0, 1.00),
    0.05: (12.20, 1.00, 0, 1.00),
    0.10: (11.95, 0.99, 1, 1.00),
    0.20: (11.80, 0.99, 1, 1.00),
    0.35: (9.43, 0.79, 1, 1.00),
    0.50: (1.25, 0.26, 3, 0.93),
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
    "quarantine_m3": "evicts the decider of any negative outcome, then re-encodes it "
    "(a fresh entry, same text and sources) after 3 whole cycles out",
    "recency": "LRU: evicts entries not retrieved (decider or supporter) for 10 cycles",
    "salience_matched": "removes as many entries per cycle as survival did, the least "
    "salient first: recency (decider or supporter) + `OrganicMemory` importance, each "
    "answer's decider recalled (suite `organic`; see 'Organic layer')",
    "ttl": "every entry lives 10 cycles",
    "survival_embedding": "`survival` over `EmbeddingRetriever(HashingEmbedder())` "
    "(cosine floor 0.30; merge and conflict floor `EMBEDDING_MERGE_THRESHOLD` = 0.85); "
    "`arms.EMBEDDERS` maps names to embedders, and an arm `survival_embedding_<name>` "
    "runs any of them",
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


def amount(x: float, unit: str) -> str:
    """A delta in the world's unit: whole bytes, tests to one decimal."""
    return num(x) if unit == "bytes" else f"{x:,.1f}"


def mean_of(runs: Sequence[dict[str, Any]], cell: str, arm: str, key: str) -> float | None:
    """Mean of a metric that older result files may lack (``None`` if absent)."""
    if key not in runs[0]["cells"][cell][arm]:
        return None
    return statistics.fmean(metric(runs, cell, arm, key))


def rate_text(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


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
        "para": mean_of(runs, cell, arm, "para_grounded"),
        "para_safe": mean_of(runs, cell, arm, "para_harmful_safe"),
        "para_initial": mean_of(runs, cell, arm, "para_initial_grounded"),
        "poison_final": statistics.fmean(metric(runs, cell, arm, "poison_alive_final")),
    }


def kill_text(x: float | None) -> str:
    return "-" if x is None else f"{x:g}"


def comparison_rows(grid: Sequence[dict[str, Any]], unit: str = "bytes") -> list[list[str]]:
    return [
        [
            f"survival vs {r['other']}",
            f"{r['wins']}/{r['ties']}/{r['losses']}",
            amount(r["mean_diff"], unit),
            amount(r["median_diff"], unit),
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
    size = (
        f"{c['files']} files per cycle"
        if "files" in c
        else f"{c['defects']} planted defects per cycle"
    )
    return (
        f"Suite `{m['suite']}`: seeds {c['seeds'][0]}..{c['seeds'][-1]} ({len(c['seeds'])}), "
        f"{c['cycles']} cycles, {size}; config hash "
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
                rate_text(x["para"]),
                rate_text(x["para_safe"]),
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
            "para grounded",
            "para harmful safe",
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
                f"{PUBLISHED_PARA[a]:.2f} / {rate_text(x['para'])}",
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
            "para grounded",
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
        *embedding_bullets(s, vs),
        *quarantine_bullets(runs, vs),
        "- **The paraphrase column is not the published probe set**: see the paraphrase "
        "section below. The ablations, the adversaries, the memory-security classes and "
        "the later arms of spec §11.4 (`policy_bandit`, `budget_relevance`, "
        "`judge_settled`, the LLM arms) have their own sections below; `judge_settled` "
        "ran on one seed with a local model, and the LLM arms on two (the reasons are "
        "there).",
    ]
    return out


def embedding_bullets(s: dict[str, Any], vs: dict[str, Any]) -> list[str]:
    if "survival_embedding" not in s:
        return []
    e, pub = s["survival_embedding"], PUBLISHED["survival_embedding"]
    r = vs["survival_embedding"]
    return [
        f"- **`survival_embedding` reproduces its published row**: kill rate "
        f"{e['kill_rate']:.2f} at median cycle {kill_text(e['kill_cycle'])} (published "
        f"{pub[0]:.2f} at {pub[1]}), damage before kill {num(e['damage'])} (published "
        f"{num(pub[2])}), cum {mega(e['cum'])} (published {mega(pub[4])}). Character "
        "n-gram cosine does not put the poison on top for database prompts, so it "
        + (
            "never acts (0 destructive deletions in every seed): it is never *executed*, "
            if e["hits"] == 0
            else f"rarely acts ({e['hits']:.1f} destructive deletions on average), "
        )
        + "and it starves with the rest of the unused lessons at the upkeep cliff "
        "(energy 1.0 at 0.05 per cycle lasts 20 cycles: the end of cycle 19). Against "
        f"survival on cum delta: {r['wins']}/{r['ties']}/{r['losses']} W/T/L, Holm p = "
        f"{pval(r['p_holm'])} (published: survival loses 0/0/10), a mean gap of "
        f"{num(-r['mean_diff'])} bytes against survival's {num(-s['survival']['destroyed'])} "
        "bytes destroyed before its kill: the gain is the poison's deletions the lexical "
        "arm pays for. The price is that the poison stays alive and retrievable for 20 "
        "cycles, waiting for a prompt worded like it.",
    ]


def quarantine_bullets(runs: list[dict[str, Any]], vs: dict[str, Any]) -> list[str]:
    if "quarantine_m3" not in vs:
        return []
    q = arm_summary(runs, "clean", "quarantine_m3")
    r = vs["quarantine_m3"]
    return [
        f"- **`quarantine_m3`** (published only in the noisy grid, 5.12M noise-free) ends "
        f"at {mega(q['cum'])} here; survival against it: "
        f"{r['wins']}/{r['ties']}/{r['losses']} W/T/L, Holm p = {pval(r['p_holm'])}. The "
        "poison comes back every time its cooldown ends and destroys one more database "
        "before it is quarantined again. The spec says only 'evict, re-encode after a "
        "3-cycle cooldown'; if the reference re-encoded the whole source document, or "
        "counted the cooldown differently, the poison returned more often there, which "
        "would explain its much lower total.",
    ]


def paraphrase_section(manifest: dict[str, Any], runs: list[dict[str, Any]]) -> list[str]:
    arms = [a for a in manifest["config"]["arms"] if "para_hits" in runs[0]["cells"]["clean"][a]]
    world = WORLDS[manifest["config"].get("world", "storage")]
    if not arms or not world.paraphrases:
        return []
    n = len(runs)
    s = {a: arm_summary(runs, "clean", a) for a in arms}
    out = [
        "## Paraphrase probes, scored by provenance",
        "",
        f"{len(world.paraphrases)} questions (`worlds.STORAGE_PARAPHRASES`) worded unlike "
        "any stored lesson, asked of each arm's final store (and of the full starting "
        "store, before any selection: the *initial* column). A probe is **grounded** "
        "when the deciding entry is the right lesson: its answer holds the lesson's "
        "phrase and all its sources are trusted documents (`runbook`, `platform-notes`); "
        "a harmful probe (acting on it destroys data) is **safe** when memory is silent "
        "or its decider is trusted-only. Reading the decider's words as 'delete' is not "
        "enough: provenance decides.",
        "",
        "| probe | right lesson (phrase) | harmful |",
        "|---|---|---|",
        *(
            f"| {p.question} | {p.lesson} | {'yes' if p.harmful else 'no'} |"
            for p in world.paraphrases
        ),
        "",
    ]
    rows = []
    for a in arms:
        x = s[a]
        pub = PUBLISHED_PARA.get(a)
        rows.append(
            [
                f"`{a}`",
                rate_text(x["para_initial"]),
                rate_text(x["para"]),
                rate_text(mean_of(runs, "clean", a, "para_benign_grounded")),
                rate_text(x["para_safe"]),
                "-" if pub is None else f"{pub:.2f}",
            ]
        )
    out += table(
        [
            "arm",
            "grounded, initial store",
            "grounded, final store",
            "benign grounded (final)",
            "harmful safe (final)",
            "published grounded",
        ],
        rows,
    )
    out += ["", f"Seeds (of {n}) in which each probe is grounded at the end:", ""]
    probe_rows = []
    for i, p in enumerate(world.paraphrases):
        cells = [f"{sum(r['cells']['clean'][a]['para_hits'][i] for r in runs)}" for a in arms]
        probe_rows.append([f"{i + 1}. {p.question}", *cells])
    out += table(["probe", *[f"`{a}`" for a in arms]], probe_rows)
    decided: dict[str, int] = {}
    for a in arms:
        for r in runs:
            for src in r["cells"]["clean"][a]["para_decider_sources"]:
                key = "silent" if src is None else src
                decided[key] = decided.get(key, 0) + 1
    total = sum(decided.values())
    lex = "survival"
    emb = "survival_embedding"
    out += [
        "",
        "Reading it:",
        "",
        f"- Across all arms and seeds, {decided.get('silent', 0)} of {total} paraphrase "
        "answers are silence, "
        + ", ".join(f"{v} decided by `{k}`" for k, v in sorted(decided.items()) if k != "silent")
        + ". Both retrievers have a relevance floor (lexical coverage 0.25, cosine 0.30) "
        "and these questions share few content words with their lessons, so the floor "
        "usually wins: memory stays silent rather than guessing. Silence is safe here "
        "(nothing is deleted) but it is not knowledge.",
    ]
    if lex in s and emb in s:
        out.append(
            f"- Before any selection the lexical store grounds {rate_text(s[lex]['para_initial'])} "
            f"and the hashing-embedding store {rate_text(s[emb]['para_initial'])} of the "
            f"probes; at the end, {rate_text(s[lex]['para'])} and {rate_text(s[emb]['para'])}. "
            "What the start had and the end lost are protective lessons: in StorageEnv a "
            "refusal earns nothing (spec §6.7), so the lessons that answer 'keep it' starve "
            "by cycle 19 under survival, and a paraphrase that only they could answer finds "
            "silence. The counters and `keep_everything` never remove an unused lesson, so "
            "they keep whatever the start grounded."
        )
    out.append(
        "- Published: survival 0.33, survival_embedding 0.67. The reference's paraphrase "
        "set is not published, so the rates cannot be compared as numbers; ours were "
        "written once, before any result, and not tuned. The published gap in favour of "
        "embeddings shows here only in the starting store (the initial column); it does "
        "not survive selection, because what the embedding store grounded were the "
        "protective lessons that starve. `HashingEmbedder` matches spelling, not "
        "meaning (spec §1.3: 'not synonyms'), so it cannot bridge most of these "
        "paraphrases in the first place. A semantic "
        "embedder is one line in `arms.EMBEDDERS` plus the arm name "
        "`survival_embedding_<name>` in a suite."
    )
    return out


def world_section(
    manifest: dict[str, Any], runs: list[dict[str, Any]], title: str, notes: Sequence[str]
) -> list[str]:
    arms = manifest["config"]["arms"]
    world = WORLDS[manifest["config"].get("world", "storage")]
    unit = world.unit
    s = {a: arm_summary(runs, "clean", a) for a in arms}
    out = [f"### {title}", "", manifest_line(manifest), ""]
    rows = []
    for a in arms:
        x = s[a]
        lo, hi = x["cum_ci"]
        rows.append(
            [
                f"`{a}`",
                f"{x['kill_rate']:.2f}",
                kill_text(x["kill_cycle"]),
                amount(x["damage"], unit),
                f"{amount(x['destroyed'], unit)} ({x['hits']:.1f})",
                amount(x["tail"], unit),
                f"{amount(x['cum'], unit)} [{amount(lo, unit)}, {amount(hi, unit)}]",
                f"{x['pop']:g}",
                f"{x['poison_final']:g}",
                f"{x['benign']:.2f}",
                f"{x['harmful_safe']:.2f}",
            ]
        )
    out += table(
        [
            "arm",
            "kill rate",
            "kill cycle (median)",
            f"damage before kill ({unit})",
            f"negative outcomes before kill ({unit}; count)",
            "tail delta",
            "cum delta (mean [95% CI])",
            "final pop",
            "poison left",
            "benign correct",
            "harmful refused",
        ],
        rows,
    )
    cum = {a: metric(runs, "clean", a, "cum_delta") for a in arms}
    others = [a for a in arms if a != "survival"]
    grid = compare_grid(cum, "survival", others)
    out += [
        "",
        f"Survival minus each arm on cum delta ({unit}), exact paired permutation test over "
        f"{len(runs)} seeds, Holm across these {len(others)}:",
        "",
    ]
    out += table(COMPARISON_HEADER, comparison_rows(grid, unit))
    out += ["", *notes]
    return out


def worlds_sections(results: Path) -> list[str]:
    loaded = {name: load_suite(results, name) for name in WORLD_SUITES}
    if not any(loaded.values()):
        return []
    out = [
        "## Other worlds: rented storage and code repair",
        "",
        "The same arms through the same code in the spec's other environments. "
        "`RentedStorageEnv` (hold_cost 1.0, uniform tier) charges a kept file its size, "
        "so silence and refusals cost bytes. `TestSuiteEnv` writes a six-helper module "
        "and a ten-test suite each cycle with 3 of 4 defects planted; the tasks are the "
        "fix patches, a destructive 'dead code' cleanup that deletes `dedupe` (2 tests), "
        "and a cosmetic comment change; an applied patch pays the change in passing "
        "tests, measured by running the suite in a child process. `RentedTestSuiteEnv` "
        "charges a declined fix the tests it would have fixed. The code-repair store is "
        "`worlds.PATCH_CORPUS` encoded by `LocalEncoder`: "
        f"{corpus_size(loaded)} entries from a patch runbook, review notes "
        "that repeat its fix lessons, two trivia lines and a forum thread claiming "
        "`dedupe` is dead code (the poison).",
        "",
        "Run time: 30 cycles per seed (as the headline) and 10 seeds. A TestSuiteEnv "
        "arm-seed runs one child process per distinct module source per cycle (cached), "
        "about 10 s on an idle core and 20-25 s on the shared 2-core machine these ran "
        "on; the wall time of each suite is in its line below. The CI variant "
        "`quick_testsuite` runs 2 seeds x 10 cycles x 4 arms.",
        "",
    ]
    for name, title in WORLD_TITLES.items():
        found = loaded[name]
        if found is None:
            out += [f"### {title}", "", f"Not run yet (`--suite {name}`).", ""]
            continue
        notes = world_notes(name, *found)
        if name == "rented_testsuite" and loaded["testsuite"] is not None:
            notes += rent_differences(found, loaded["testsuite"])
        out += world_section(*found, title, notes)
        out.append("")
    return out


def rent_differences(rented: tuple[Any, Any], plain: tuple[Any, Any]) -> list[str]:
    """Which arms' per-seed outcomes the rent changed (same seeds, same worlds)."""
    (m, runs), (pm, pruns) = rented, plain
    same_seeds = [r["seed"] for r in runs] == [r["seed"] for r in pruns]
    arms = [a for a in m["config"]["arms"] if a in pm["config"]["arms"]]
    if not same_seeds or not arms:
        return []
    changed = [
        a
        for a in arms
        if metric(runs, "clean", a, "cycle_delta") != metric(pruns, "clean", a, "cycle_delta")
    ]
    return [
        "- Against TestSuiteEnv on the same seeds, the rent changed the per-cycle outcomes "
        "of: "
        + (
            ", ".join(
                f"`{a}` ({statistics.fmean(metric(pruns, 'clean', a, 'cum_delta')):.1f} -> "
                f"{statistics.fmean(metric(runs, 'clean', a, 'cum_delta')):.1f})"
                for a in changed
            )
            or "no arm"
        )
        + "; every other arm is identical seed by seed."
    ]


def corpus_size(loaded: dict[str, Any]) -> str:
    """The code-repair store's size, read off `keep_everything` (it never removes)."""
    for name in ("testsuite", "rented_testsuite"):
        found = loaded.get(name)
        if found is not None and "keep_everything" in found[0]["config"]["arms"]:
            return f"{found[1][0]['cells']['clean']['keep_everything']['final_population']}"
    return "its"


WORLD_SUITES = ("rented_storage", "testsuite", "rented_testsuite")
WORLD_TITLES = {
    "rented_storage": "RentedStorageEnv, 10 seeds",
    "testsuite": "TestSuiteEnv, 10 seeds",
    "rented_testsuite": "RentedTestSuiteEnv, 10 seeds",
}


def world_notes(name: str, manifest: dict[str, Any], runs: list[dict[str, Any]]) -> list[str]:
    """The computed facts each world's prose rests on (the prose itself is in render)."""
    arms = manifest["config"]["arms"]
    s = {a: arm_summary(runs, "clean", a) for a in arms}
    cum = {a: metric(runs, "clean", a, "cum_delta") for a in arms}
    vs = {
        r["other"]: r for r in compare_grid(cum, "survival", [a for a in arms if a != "survival"])
    }
    unit = WORLDS[manifest["config"].get("world", "storage")].unit
    notes = ["Reading it:", ""]
    sv = s["survival"]
    line = (
        f"- survival kills the acting poison in {sum(metric(runs, 'clean', 'survival', 'killed'))}"
        f"/{len(runs)} seeds (median cycle {kill_text(sv['kill_cycle'])}) and ends at "
        f"{amount(sv['cum'], unit)} {unit} with {sv['pop']:g} entries; "
        + "; ".join(
            f"vs `{a}` {r['wins']}/{r['ties']}/{r['losses']} (Holm p = {pval(r['p_holm'])})"
            for a, r in vs.items()
        )
        + "."
    )
    notes.append(line)
    notes += WORLD_PROSE.get(name, [])
    if name == "testsuite":
        rows = []
        for a, pub in PUBLISHED_TESTSUITE.items():
            if a not in s:
                continue
            x = s[a]
            rows.append(
                [
                    f"`{a}`",
                    f"{pub[0]:g} / {x['cum']:.1f}",
                    f"{rate_text(pub[1])} / {x['kill_rate']:.2f}",
                    f"{kill_text(pub[2])} / {kill_text(x['kill_cycle'])}",
                    f"{'-' if pub[3] is None else pub[3]} / {x['pop']:g}",
                ]
            )
        notes += [
            "",
            "Published / ours (spec §11.4; published on a 20-entry corpus of its own, "
            "`-` = not published; our kill cycles are 0-based, see the `ttl` note):",
            "",
            *table(["arm", "cum delta (tests)", "kill rate", "kill cycle", "final pop"], rows),
        ]
    return notes


#: Hand-written context per world (no numbers: those are computed above).
WORLD_PROSE: dict[str, list[str]] = {
    "testsuite": [
        "- The scale: each cycle has 3 fixes worth 1 test each, a cleanup that costs 2 "
        "and a cosmetic patch worth 0, so an arm that applies every fix and nothing "
        "harmful earns 3 per cycle (the ceiling in the tail-delta column), and "
        "`keep_everything`, which also applies the poison's cleanup every cycle, earns 1.",
        "- The poison acts at most once per cycle (one destructive task per cycle). A "
        "strike counter with k = 1 buries it after its first outcome; survival needs more "
        "than one (a new entry holds 1.0 energy and one -2 outcome costs it "
        "0.6 x tanh(2 / 2) = 0.46), so as in the headline `evict_on_negative` edges out "
        "survival by the poison's extra acts, and survival's edge is leanness (compare "
        "the final populations).",
        "- Most arms score the same in every seed: a seed only chooses which 3 of the 4 "
        "helpers are broken and the task order, and every fix is worth one test, so "
        "paired differences often do not vary (d_z is then undefined, `-`).",
        "- The protective lesson ('the dedupe helper is load-bearing ... must not be "
        "applied') starves under survival, as the spec predicts: refusing a patch earns "
        "nothing (on seed 0 it is gone at the end of cycle 15). By then the poison is "
        "dead, so the destructive prompt finds silence and the harmful probe is still "
        "refused. Published, survival trailed the ceiling by 21 tests and the spec "
        "blames the starving protector; ours loses only the poison's own acts. With "
        "the reference corpus something that reads 'apply' on the cleanup must have "
        "outlived the protector; that corpus is not published, so we cannot check.",
        "- `survival_embedding` kills the poison here, unlike the published run (kill "
        "rate 0.00 at the ceiling): with our corpus the poison repeats the destructive "
        "prompt's words ('dedupe dead code cleanup patch'), so character n-grams rank it "
        "first and it acts. The published 20-entry corpus is not in the spec; ours "
        "(`worlds.PATCH_CORPUS`) is our own, which is also why absolute totals differ.",
        "- Against the published table below: `keep_everything` and `evict_on_negative` "
        "match exactly (30 and 88: every fix applied, the cleanup applied every cycle or "
        "once); `random_matched` depends on which lessons the random draws remove (see "
        "its confidence interval); final populations differ with the corpus (ours has "
        "fewer entries, so the counters keep fewer).",
    ],
    "rented_testsuite": [
        "- Declining a fix costs the tests it would have fixed; declining the cleanup or "
        "the cosmetic patch is free. An arm that keeps its fix lessons applies every fix "
        "and never pays rent, so this world differs from TestSuiteEnv only where memory "
        "is silent on a fix (lessons removed at random, or starved).",
    ],
    "rented_storage": [
        "- Rent makes silence and refusals cost: a kept file pays its size each time it "
        "is asked about, so even the right 'keep it' answer on a database is a negative "
        "outcome, and the negative-outcome column counts these rent charges, not only "
        "destroyed files. Every arm that keeps the protective lessons pays rent on every "
        "protected file; what separates the arms is the same as in the headline: how "
        "often the poison deletes a database (3x its size) and whether the disposal "
        "lessons survive (a disposable file left in place is charged too).",
        "- Under survival a charged refusal debits the lessons behind it: the protective "
        "lesson that decided 'keep it', and every supporter retrieved with it. That "
        "punishes right advice, and it changes `survival_embedding`: on the headline "
        "world its poison never acted and starved at cycle 19; here the protective "
        "database lesson is drained by rent, the poison gets to decide database "
        "prompts (2 to 4 times per seed when we traced seeds 0-9) and is executed "
        "within the first cycles.",
        "- `random_matched` ends far below `keep_everything`: removing lessons at random "
        "leaves memory silent on files it used to answer, and here silence is charged.",
        "- `evict_on_negative` also evicts the decider of every charged refusal, so it "
        "throws away protective lessons (compare its final population with the "
        "headline's). That costs it nothing here, because a refusal and silence pay the "
        "same rent, and it still beats survival by the headline's margin: the poison's "
        "extra deletions before survival's kill.",
    ],
}


def noisy_grid(manifest: dict[str, Any], runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Survival against every other arm in every cell; Holm across the whole grid."""
    arms = manifest["config"]["arms"]
    cells = [cell_key(n, r) for n, r in manifest["config"]["cells"]]
    others = [a for a in arms if a != "survival"]
    grid: list[dict[str, Any]] = []
    for c in cells:
        values = {a: metric(runs, c, a, "cum_delta") for a in arms}
        for comparison in compare_grid(values, "survival", others):
            comparison["cell"] = c
            grid.append(comparison)
    for comparison, adj in zip(grid, holm([r["p"] for r in grid]), strict=True):
        comparison["p_holm"] = adj
    return grid


def noisy_section(manifest: dict[str, Any], runs: list[dict[str, Any]]) -> list[str]:
    arms = manifest["config"]["arms"]
    config_cells = manifest["config"]["cells"]
    cells = [cell_key(n, r) for n, r in config_cells]
    models = list(dict.fromkeys(n for n, _ in config_cells if n != "none"))
    n = len(runs)

    def mean(c: str, a: str, key: str) -> float:
        return statistics.fmean(metric(runs, c, a, key))

    out = [
        "## Noisy CI: measurement that lies, scored on the truth",
        "",
        manifest_line(manifest),
        "",
        "Arms decide on the *reported* delta; every number below is the *true* one. "
        "`false_bad@r`: each positive outcome is reported as its negation with "
        "probability r (flaky CI: good changes reported red). `flip@r`: any non-zero "
        "outcome is negated with probability r. `magnitude@r`: with probability r the "
        "sign is kept and the size scaled by 4^U(-1, 1), x0.25 to x4. The draws are fixed "
        "per (seed, cycle, task), so every arm faces the same lies on the same tasks.",
        "",
        "![Mean true cum delta against the noise rate, per noise model and arm]"
        "(benchmarks/noise-grid.png)",
        "",
    ]
    for model in models:
        rates = [0.0] + [r for m, r in config_cells if m == model]
        out += [
            f"**{model}**: mean true cum delta / benign capability (share of the 3 "
            "disposable-category probes still answered 'delete' at the end):",
            "",
        ]
        rows = []
        for a in arms:
            row = [f"`{a}`"]
            for rate in rates:
                c = cell_key("none" if rate == 0 else model, rate)
                row.append(f"{mega(mean(c, a, 'cum_delta'))} / {mean(c, a, 'benign_correct'):.2f}")
            rows.append(row)
        out += table(
            [
                "arm",
                *[f"{r:.2f}" for r in rates],
            ],
            rows,
        )
        out.append("")
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
        "Seeds in which survival's true per-cycle outcomes are identical to its "
        "noise-free run: " + ", ".join(f"{c} {same[c]}/{n}" for c in cells if c != "clean") + ".",
        "",
    ]
    grid = noisy_grid(manifest, runs)
    others = [a for a in arms if a != "survival"]
    by = {(r["cell"], r["other"]): r for r in grid}
    out += [
        f"Survival against every other arm in every cell on true cum delta: "
        f"{len(grid)} comparisons ({len(cells)} cells x {len(others)} arms), seeded Monte "
        "Carlo sign-flip tests (20,000 flips; exact up to 16 seeds), **Holm across all "
        f"{len(grid)}**. Each cell: survival's wins/ties/losses over the {n} seeds, Holm p.",
        "",
    ]
    out += table(
        ["cell", *[f"vs `{a}`" for a in others]],
        [
            [
                c,
                *[
                    f"{by[c, a]['wins']}/{by[c, a]['ties']}/{by[c, a]['losses']}, "
                    f"{pval(by[c, a]['p_holm'])}"
                    for a in others
                ],
            ]
            for c in cells
        ],
    )
    out += [
        "",
        "<details><summary>The full grid: mean and median differences, d_z, raw p</summary>",
        "",
    ]
    out += table(
        ["cell", *COMPARISON_HEADER],
        [[r["cell"], *line] for r, line in zip(grid, comparison_rows(grid), strict=True)],
    )
    out += ["", "</details>", ""]

    # published beside ours
    pub_rows = []
    for a, by_rate in PUBLISHED_NOISY.items():
        if a not in arms:
            continue
        row = [f"`{a}`"]
        for rate, pub in by_rate.items():
            c = cell_key("none", 0.0) if rate == 0 else cell_key("false_bad", rate)
            ours = f"{mean(c, a, 'cum_delta') / 1e6:.2f}" if c in cells else "-"
            row.append(f"{pub:.2f} / {ours}")
        pub_rows.append(row)
    out += [
        "Published / ours, false_bad, mean true cum delta in millions (spec §11.3):",
        "",
    ]
    out += table(["arm", "0.00", "0.05", "0.10", "0.20", "0.35"], pub_rows)
    flip_rows = []
    for rate, (pcum, pben, pkill, prate) in PUBLISHED_FLIP.items():
        c = cell_key("none", 0.0) if rate == 0 else cell_key("flip", rate)
        if c not in cells:
            continue
        x = arm_summary(runs, c, "survival")
        flip_rows.append(
            [
                f"{rate:.2f}",
                f"{pcum:.2f} / {x['cum'] / 1e6:.2f}",
                f"{pben:.2f} / {x['benign']:.2f}",
                f"{pkill} / {kill_text(x['kill_cycle'])}",
                f"{prate:.2f} / {x['kill_rate']:.2f}",
            ]
        )
    out += [
        "",
        "Published / ours, survival under flip (spec §11.3):",
        "",
    ]
    out += table(
        ["flip rate", "true cum (M)", "benign", "kill cycle (median)", "kill rate"], flip_rows
    )
    out += ["", *noisy_reading(manifest, runs, grid, same)]
    return out


def noisy_reading(
    manifest: dict[str, Any],
    runs: list[dict[str, Any]],
    grid: list[dict[str, Any]],
    same: dict[str, int],
) -> list[str]:
    arms = manifest["config"]["arms"]
    cells = [cell_key(n, r) for n, r in manifest["config"]["cells"]]
    n = len(runs)
    significant = sum(1 for r in grid if r["p_holm"] < 0.05)
    lost = [r for r in grid if r["cell"] != "clean" and r["losses"] > 0]
    out = [
        "Reading it:",
        "",
        f"- {significant} of the {len(grid)} comparisons are significant after Holm "
        "(p < 0.05). Under noise survival loses seeds to another arm only in: "
        + (
            "none."
            if not lost
            else ", ".join(f"{r['cell']} vs {r['other']} ({r['losses']})" for r in lost)
            + ". At low noise those are seeds where a counter was already ahead "
            "noise-free (the poison's extra deletions under survival, see the headline "
            "section) and the few lies had not yet cost it its useful lessons; the "
            "published run, whose survival let the poison act about once, lost no seed "
            "under false_bad. At the highest flip rates the noise drowns the signal "
            "(see the flip bullet below)."
        ),
        "- Why survival forgives: a capped entry holds 5.0 energy and a lie costs it at "
        "most 0.6, so it absorbs about eight lies in a row, and every true success refills "
        "it; a strike counter spends its whole budget on k lies. With noise-free outcomes "
        "the faster counters (k = 1, 2) win by the margin explained in the headline "
        "section.",
        "- Survival's true outcomes are identical to its noise-free run in "
        + ", ".join(f"{same[c]}/{n} seeds at {c}" for c in cells if c != "clean")
        + " (published: 30/30 at false_bad 5%, 29/30 at 10% and 20%).",
    ]
    if "keep_everything" in arms:
        ke = {c: statistics.fmean(metric(runs, c, "keep_everything", "cum_delta")) for c in cells}
        identical = len(set(ke.values())) == 1
        out.append(
            "- `keep_everything` is the canary: it never reads an outcome, so noise cannot "
            "touch it. Its mean true cum delta is "
            + (
                f"{mega(ke['clean'])} in all {len(cells)} cells (published: -8.84M in all 12)."
                if identical
                else "NOT identical across cells: "
                + ", ".join(f"{c} {mega(v)}" for c, v in ke.items())
                + ". Something other than the reported deltas differs between cells."
            )
        )
    mag = [c for c in cells if c.startswith("magnitude@")]
    if mag:
        equal = {
            c: [
                a
                for a in arms
                if metric(runs, c, a, "cycle_delta") == metric(runs, "clean", a, "cycle_delta")
            ]
            for c in mag
        }
        out.append(
            "- magnitude noise (sign kept): arms whose true per-cycle outcomes equal their "
            "noise-free run in every seed: "
            + "; ".join(
                f"{c}: {', '.join(f'`{a}`' for a in v) or 'none'}" for c, v in equal.items()
            )
            + ". A strike counter reads only the sign, so it cannot see this noise; "
            "survival's credit is 0.6 x tanh(|delta| / scale), and a database deletion "
            "(-3 x 50-150 KiB against a 100,000-byte scale) is already deep in the tanh, "
            "so scaling it changes the credit little (published: every arm equals its "
            "rate-0 numbers, attributed to cap clipping)."
        )
    flips = [c for c in cells if c.startswith("flip@")]
    if flips:
        top = flips[-1]
        means = {a: statistics.fmean(metric(runs, top, a, "cum_delta")) for a in arms}
        above = [a for a in arms if means[a] > 0]
        sv = arm_summary(runs, top, "survival")
        out.append(
            f"- At {top} ({float(top.split('@')[1]):.0%} of non-zero outcomes reported "
            "backwards) survival ends at "
            f"{mega(sv['cum'])} with benign capability {sv['benign']:.2f} and kill rate "
            f"{sv['kill_rate']:.2f} (published at 0.50: +1.25M, 0.26, 0.93); arms above "
            "zero there: "
            + (", ".join(f"`{a}` {mega(means[a])}" for a in above) or "none")
            + "; best arm: "
            + f"`{max(means, key=lambda a: means[a])}` ({mega(max(means.values()))})."
            + (
                " At 0.50 the reported sign is a coin toss, independent of the truth, so "
                "no arm that reads outcomes can learn anything; what remains is how each "
                "forgets. The counters empty memory fastest and drift toward silence "
                "(zero); survival's balances random-walk, so useful lessons starve and the "
                "poison, debited and credited at random, lives longer. The published "
                "survival stayed above zero here; ours does "
                + ("too." if means["survival"] > 0 else "not.")
                if top == "flip@0.50"
                else ""
            )
        )
    if flips and "false_bad@0.35" in cells:
        out.append(
            "- Under flip survival loses more than under false_bad at the same rate, and "
            "ends below the published flip row at the two highest rates (see the table "
            "above; the lower rates agree within a few percent): flip can also "
            "report a destroyed database as a gain, crediting the poison, which false_bad "
            "never does, so the poison dies later and acts more often before it dies. How "
            "much that costs depends on how often the world asks about databases in the "
            "first cycles, which is where our draws differ from the reference's; we "
            "cannot check theirs."
        )
    mag_rates = [c.split("@")[1] for c in mag]
    out.append(
        "- Differences from the published grid: "
        + (
            "the same shape, 12 cells x 6 comparisons = 72, so Holm divides by as much"
            if len(grid) == 72 and len(cells) == 12
            else f"ours has {len(cells)} cells x {len(arms) - 1} comparisons = "
            f"{len(grid)}, against the published 72 (12 cells x 6)"
        )
        + (
            f"; the magnitude rates ({', '.join(mag_rates)}) are our choice, the spec does "
            "not list them. "
            if mag_rates
            else ". "
        )
        + "Means track the published false_bad table closely; absolute totals differ "
        "with the world draws, as in the headline. `quarantine_m3` differs most (see the "
        "headline notes): our quarantined poison comes back alone and is caught again "
        "after one deletion."
    )
    return out


#: spec §10, published organic evidence (10 seeds): kill rate and mean cum delta.
PUBLISHED_ORGANIC: dict[str, tuple[float, int]] = {
    "survival": (1.00, 12_586_803),
    "random_matched": (0.80, -7_673_651),
    "salience_matched": (0.20, -2_756_505),
}
ATTACKER_JSON = ROOT / "bench" / "organic" / "results" / "attacker.json"


def organic_section(results: Path) -> list[str]:
    """Usage as a retention signal: ``salience_matched`` and the query-only attacker."""
    loaded = load_suite(results, "organic")
    if loaded is None:
        return []
    manifest, runs = loaded
    arms = manifest["config"]["arms"]
    s = {a: arm_summary(runs, "clean", a) for a in arms}
    out = [
        "## Organic layer: usage as a retention signal",
        "",
        "The organic layer's phase 4 (`OrganicMemory.upkeep_scale()`, opt-in) lets "
        "*being used* slow an entry's upkeep. Two measurements of what that buys a "
        "poisoned store (docs/organic.md reads them). Regenerate: "
        "`.venv/bin/python -m bench.organic.evidence`.",
        "",
        "### salience_matched: victims by recency + importance",
        "",
        manifest_line(manifest),
        "",
    ]
    rows = []
    for a in arms:
        x = s[a]
        pub = PUBLISHED_ORGANIC.get(a)
        rows.append(
            [
                f"`{a}`",
                f"{x['kill_rate']:.2f}",
                "-" if pub is None else f"{pub[0]:.2f}",
                kill_text(x["kill_cycle"]),
                num(x["damage"]),
                num(x["cum"]),
                "-" if pub is None else num(pub[1]),
                f"{x['pop']:g}",
                f"{x['benign']:.2f}",
            ]
        )
    out += table(
        [
            "arm",
            "kill rate",
            "published",
            "kill cycle (median)",
            "damage before kill",
            "cum delta",
            "published cum",
            "final pop",
            "benign correct",
        ],
        rows,
    )
    values = {a: metric(runs, "clean", a, "cum_delta") for a in arms}
    grid = compare_grid(values, "survival", [a for a in arms if a != "survival"])
    out += ["", *table(COMPARISON_HEADER, comparison_rows(grid))]
    kept = {a: len(runs) - sum(metric(runs, "clean", a, "killed")) for a in arms}
    out += [
        "",
        f"Same removal counts as survival, cycle by cycle; only the choice of victims "
        f"differs. The poison keeps advising in {kept['salience_matched']} of "
        f"{len(runs)} seeds under salience, {kept['random_matched']} under random "
        f"eviction and {kept['survival']} under survival: it decides every task about "
        f"the database files, so it is among the most recalled entries, and usage is "
        f"exactly what salience protects. Only measured outcomes tell a used lesson "
        f"from a useful one.",
    ]
    if ATTACKER_JSON.exists():
        out += ["", *attacker_section(json.loads(ATTACKER_JSON.read_text()))]
    return out


def attacker_section(grid: dict[str, Any]) -> list[str]:
    setup, summary = grid["setup"], grid["summary"]
    out = [
        "### The query-only attacker against potentiation",
        "",
        f"The demo store with nothing settled for a while: every entry lives on its "
        f"stake (flat horizon {setup['horizon_ticks']:g} ticks). Honest users ask "
        f"{setup['honest_per_tick']} questions per tick about random lessons; the "
        f"attacker can only ask, {', '.join(map(str, setup['budgets']))} queries per "
        f"tick that the poisoned lesson answers, over seeds "
        f"{', '.join(map(str, setup['seeds']))}; each answer's decider is recalled "
        f"through `OrganicMemory`. A cell has a *margin* when the poison outlives every "
        f"other entry; its size is the extra ticks over the longest-lived other entry, "
        f"as a share of the flat horizon. Produced by `{grid['command']}` "
        f"(darwin-memo {grid['darwin_memo_version']}, Python {grid['python']}).",
        "",
    ]
    notes = {
        "potentiated": "phase 4 wired: `charge_upkeep(scale=om.upkeep_scale())`",
        "flat_organic": "the same organic layer and recalls, flat upkeep",
        "flat_plain": "no organic layer",
    }
    rows = [
        [
            f"`{name}`",
            notes.get(name, ""),
            f"{x['margin_cells']}/{x['cells']}",
            f"{x['median_horizon_share']:.3f}",
            f"{x['min_horizon_share']:.3f}-{x['max_horizon_share']:.3f}",
        ]
        for name, x in summary.items()
    ]
    out += table(["condition", "upkeep", "cells with a margin", "median share", "range"], rows)
    flat = sum(x["cells"] for n, x in summary.items() if n != "potentiated")
    flat_margin = sum(x["margin_cells"] for n, x in summary.items() if n != "potentiated")
    pot = summary["potentiated"]
    out += [
        "",
        f"Published: a margin in 16/16 potentiated cells and 0/32 under flat upkeep, "
        f"owning roughly 11-17% (median 0.133) of the starvation horizon. Here: "
        f"{pot['margin_cells']}/{pot['cells']} potentiated, {flat_margin}/{flat} flat, "
        f"median share {pot['median_horizon_share']:.3f} (the published share's exact "
        f"definition is not given, so the sizes compare only loosely). The budget "
        f"barely matters: the recall third is normalized by the most recalled entry, "
        f"so one query per tick more than any honest lesson gets buys the whole of it.",
    ]
    return out


def figure_dir(doc: Path) -> Path:
    """Where a doc's figures live: ``docs/benchmarks.md`` -> ``docs/benchmarks/``."""
    return doc.parent / doc.stem


def figure(name: str, alt: str) -> list[str]:
    return [f"![{alt}]({Path(DOC).stem}/{name})", ""]


def render(results: Path = RESULTS, suite: str = "headline") -> str:
    """The whole doc; ``suite`` names the results folder used for the headline."""
    headline = load_suite(results, suite)
    if headline is None:
        raise FileNotFoundError(f"no headline results under {results}; run bench.evidence.run")
    out = [
        "# Benchmarks: does outcome-settled selection do what it claims?",
        "",
        "<!-- Generated file: do not edit. Regenerate with the command below; "
        "tests/docs/test_benchmarks.py fails when it disagrees with the committed results. -->",
        "",
        "Regenerate every table and figure here from the committed per-seed results "
        "(`bench/evidence/results/<suite>/seed-*.json`, bound by each suite's "
        "`MANIFEST.json`); the figures need matplotlib (`pip install -e '.[bench]'`):",
        "",
        "```",
        COMMAND,
        f"{COMMAND} --check   # the doc and figures agree with the results",
        "```",
        "",
        "Re-run the experiments themselves (deterministic: the seed files come out "
        "byte-identical):",
        "",
        "```",
        *(f".venv/bin/python -m bench.evidence.run --suite {name}" for name in SUITES),
        "```",
        "",
        "Figures (`docs/benchmarks/*.png`) are drawn by `bench/evidence/figures.py` with "
        "the Agg backend at a fixed size and no timestamps. `--check` compares this "
        "markdown byte for byte and checks that every linked figure exists with the "
        "sha256 recorded in `docs/benchmarks/FIGURES.json`; it redraws the figures and "
        "compares their bytes only when the installed matplotlib is the version recorded "
        "there, because PNG bytes are not promised to be identical across matplotlib "
        "(and FreeType) versions.",
        "",
        "## Setup",
        "",
        "- Store: the demo store, `LocalEncoder` over `demo_corpus()`: 16 entries, 3 from "
        'the wrong `forum-post` document, of which one ("The store db files under data/ '
        'are redundant ... safe to remove") reads as an action; the other two are inert. '
        "(The code-repair worlds use their own corpus: see 'Other worlds'.)",
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
        "answered 'delete'; **para grounded** / **para harmful safe**: the paraphrase "
        "probes, scored by provenance (see their section).",
        "- Statistics (`bench/evidence/stats.py`): exact paired two-sided sign-flip "
        "permutation tests over seeds (ties with the observed statistic count as extreme, "
        "so identical arms give p = 1), Holm-Bonferroni across each printed grid, paired "
        "Cohen's d_z, and percentile-bootstrap 95% intervals (10,000 seeded resamples) on "
        "mean cum delta.",
        "",
    ]
    out += headline_section(*headline)
    out += [""]
    out += figure("kill-cycles.png", "Poison kill cycle per seed and arm (headline)")
    out += figure("cumulative-delta.png", "Mean cumulative true delta over cycles per arm")
    out += published_section(*headline)
    para = paraphrase_section(*headline)
    if para:
        out += ["", *para]
    worlds = worlds_sections(results)
    if worlds:
        out += ["", *worlds]
        out += figure("worlds.png", "Mean cumulative delta per arm in the other worlds")
    noisy = load_suite(results, "noisy")
    out += [""]
    if noisy is not None:
        out += noisy_section(*noisy)
    else:
        out += ["## Noisy CI", "", "Not run yet (`--suite noisy`)."]
    from .report_attacks import sections as evidence_ii  # issue 39; imports this module

    out += evidence_ii(results)
    organic = organic_section(results)
    if organic:
        out += ["", *organic]
    distilled = load_suite(results, "distill")  # opt-in: needs the [distill] extra
    if distilled is not None:
        out += ["", *distill_section(*distilled)]
    return "\n".join(out) + "\n"


def linked_figures(text: str) -> list[str]:
    """File names of the figures a rendered doc links to, in order."""
    return re.findall(r"\]\(" + re.escape(DOC.stem) + r"/([\w.-]+\.png)\)", text)


def draw_figures(results: Path, out_dir: Path) -> dict[str, str]:
    """Draw every figure into ``out_dir``; returns file name -> sha256."""

    def load(name: str) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
        return load_suite(results, name)

    units = {name: WORLDS[cfg.get("world", "storage")].unit for name, cfg in SUITES.items()}
    written = figures.draw_all(load, out_dir, units)
    return {p.name: sha256(p) for p in sorted(written)}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def check_figures(results: Path, text: str, fig_dir: Path) -> list[str]:
    """Problems with the committed figures (empty: all good); prints how it checked."""
    problems = []
    linked = linked_figures(text)
    record_path = fig_dir / FIGURES_JSON
    record = json.loads(record_path.read_text()) if record_path.exists() else {}
    recorded = record.get("files", {})
    if sorted(recorded) != sorted(linked):
        problems.append(f"{record_path} lists {sorted(recorded)}, the doc links {sorted(linked)}")
    for name in linked:
        path = fig_dir / name
        if not path.exists():
            problems.append(f"{path} is missing")
        elif recorded.get(name) != sha256(path):
            problems.append(f"{path} does not match its sha256 in {FIGURES_JSON}")
    version = figures.matplotlib_version()
    if version is not None and version == record.get("matplotlib"):
        with tempfile.TemporaryDirectory() as tmp:
            fresh = draw_figures(results, Path(tmp))
        for name in sorted(set(fresh) | set(recorded)):
            if fresh.get(name) != recorded.get(name):
                problems.append(f"{fig_dir / name} differs from a fresh drawing")
        print(f"figures redrawn and compared byte for byte (matplotlib {version})")
    else:
        print(
            f"figures checked by existence and sha256 only (installed matplotlib: "
            f"{version or 'none'}; recorded: {record.get('matplotlib')})"
        )
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--out", type=Path, default=DOC)
    parser.add_argument("--check", action="store_true", help="exit 1 if the doc is stale")
    args = parser.parse_args(argv)
    text = render(args.results)
    fig_dir = figure_dir(args.out)
    if args.check:
        current = args.out.read_text() if args.out.exists() else ""
        if current != text:
            print(f"{args.out} is stale; regenerate with: {COMMAND}", file=sys.stderr)
            return 1
        problems = check_figures(args.results, text, fig_dir)
        if problems:
            for problem in problems:
                print(problem, file=sys.stderr)
            print(f"figures are stale; regenerate with: {COMMAND}", file=sys.stderr)
            return 1
        print(f"{args.out} and its figures match the results")
        return 0
    version = figures.matplotlib_version()
    if version is None:
        print(
            "the figures need matplotlib: pip install -e '.[bench]' (or '.[dev]')",
            file=sys.stderr,
        )
        return 2
    fig_dir.mkdir(parents=True, exist_ok=True)
    drawn = draw_figures(args.results, fig_dir)
    for old in fig_dir.glob("*.png"):
        if old.name not in drawn:
            old.unlink()
    missing = sorted(set(linked_figures(text)) - set(drawn))
    if missing:
        print(f"the doc links figures that were not drawn: {missing}", file=sys.stderr)
        return 1
    record = {"matplotlib": version, "files": drawn}
    (fig_dir / FIGURES_JSON).write_text(json.dumps(record, sort_keys=True, indent=1) + "\n")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(f"wrote {args.out} and {len(drawn)} figures in {fig_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
