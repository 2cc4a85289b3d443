"""Run a benchmark suite and write one JSON file per seed plus a MANIFEST.json.

    .venv/bin/python -m bench.evidence.run --suite headline   # 10 seeds, every arm
    .venv/bin/python -m bench.evidence.run --suite quick      # 3 seeds, 4 arms (CI)
    .venv/bin/python -m bench.evidence.run --suite noisy      # 30 seeds, lying CI
    .venv/bin/python -m bench.evidence.run --suite testsuite  # TestSuiteEnv, 10 seeds
    .venv/bin/python -m bench.evidence.run --suite organic    # usage-based retention
    .venv/bin/python -m bench.evidence.run --suite adversary  # attacks, controls, ablations
    (also withholding_30, withholding_60, memsec, injection, controls, ablations; the
    opt-in judge, llm and noisy_testsuite need a model or an idle machine: issue 39)
    .venv/bin/python -m bench.evidence.run --suite all        # every suite (~1 h on 2 cores)
    python -m bench.evidence.run --suite distill  # opt-in: with the [distill] extra

Suites name their world (``worlds.WORLDS``; ``storage`` when absent): the rented
variants and the code-repair worlds run the same arms through the same code.

Seeds run in parallel processes (``--workers``, default 2). Results are
deterministic: the same suite gives byte-identical seed files on any run.
``StorageEnv`` writes real files; ``TMPDIR=/dev/shm`` makes runs faster and changes
nothing in the results.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import darwin_memo

from .arms import ARMS, run_suite_seed

RESULTS = Path(__file__).resolve().parent / "results"

NOISY_ARMS = (
    "survival",
    "evict_on_negative",
    "strikes_k2",
    "strikes_k3",
    "consecutive_k2",
    "quarantine_m3",
    "keep_everything",
)
NOISY_RATES = (0.05, 0.10, 0.20, 0.35)
FLIP_RATES = (0.05, 0.10, 0.20, 0.35, 0.50)
MAGNITUDE_RATES = (0.20, 0.50)
QUICK_ARMS = ["survival", "random_matched", "keep_everything", "evict_on_negative"]
#: Strike counters and quarantine: the arms the adversaries are measured against.
#: (k = 2 and quarantine are left out to fit the 2-core machine: see docs/benchmarks.md.)
COUNTER_ARMS = ["evict_on_negative", "strikes_k3", "consecutive_k2"]
LIAR_BUDGETS = (1, 2, 4, 8)
WITHHOLD_ARMS = [
    "survival",
    "survival_paced",
    "evict_on_negative",
    "consecutive_k2",
    "keep_everything",
]
#: A budget of 12 (the tasks per cycle) is total suppression.
WITHHOLD_CELLS = [
    ["none", 0.0],
    ["withhold", 4.0],
    ["withhold", 8.0],
    ["withhold", 12.0],
    ["withhold_positive", 8.0],
]
ABLATION_ARMS = [
    "survival@credit_gain=0.15",
    "survival@credit_gain=0.3",
    "survival@credit_gain=1.2",
    "survival@min_coverage=0.15",
    "survival@min_coverage=0.4",
    "survival@upkeep=0.01",
    "survival@upkeep=0.1",
    "survival@upkeep=0.2",
    "survival@merge_threshold=0.4",
    "survival@merge_threshold=0.7",
    "survival@consolidate_every=0",
    "survival@resource_scale=25000",
    "survival@resource_scale=400000",
]
#: The arms of the other worlds' suites (the issue's four, plus k = 3 and embeddings).
WORLD_ARMS = [*QUICK_ARMS, "strikes_k3", "survival_embedding"]

SUITES: dict[str, dict[str, Any]] = {
    "headline": {"seeds": list(range(10)), "arms": list(ARMS), "cycles": 30, "files": 12},
    "quick": {"seeds": [0, 1, 2], "arms": QUICK_ARMS, "cycles": 30, "files": 12},
    "noisy": {
        "seeds": list(range(30)),
        "arms": list(NOISY_ARMS),
        "cycles": 30,
        "files": 12,
        "cells": [["none", 0.0]]
        + [["false_bad", r] for r in NOISY_RATES]
        + [["flip", r] for r in FLIP_RATES]
        + [["magnitude", r] for r in MAGNITUDE_RATES],
    },
    "rented_storage": {
        "world": "rented_storage",
        "seeds": list(range(10)),
        "arms": WORLD_ARMS,
        "cycles": 30,
        "files": 12,
    },
    # TestSuiteEnv runs its suite in a child process per distinct source (about 10 s
    # per arm and seed for 30 cycles here), so 10 seeds x 6 arms is ~5 min on 2 workers.
    "testsuite": {
        "world": "testsuite",
        "seeds": list(range(10)),
        "arms": WORLD_ARMS,
        "cycles": 30,
        "defects": 3,
    },
    "rented_testsuite": {
        "world": "rented_testsuite",
        "seeds": list(range(10)),
        "arms": WORLD_ARMS,
        "cycles": 30,
        "defects": 3,
    },
    # Usage as a retention signal (the organic layer's phase 4, docs/organic.md):
    # victims by recency + importance, at survival's per-cycle removal counts.
    "organic": {
        "seeds": list(range(10)),
        "arms": ["survival", "random_matched", "salience_matched"],
        "cycles": 30,
        "files": 12,
    },
    # The CI variant of the code-repair world: 2 seeds, 10 cycles, the four arms.
    "quick_testsuite": {
        "world": "testsuite",
        "seeds": [0, 1],
        "arms": QUICK_ARMS,
        "cycles": 10,
        "defects": 3,
    },
    # ---- Evidence II (issue 39): attacks, controls, ablations -------------------------
    # Curation-targeted liar: the first b positive outcomes of each cycle reported negated.
    "adversary": {
        "seeds": list(range(30)),
        "arms": ["survival", *COUNTER_ARMS, "keep_everything"],
        "cycles": 30,
        "files": 12,
        "cells": [["none", 0.0]] + [["liar", float(b)] for b in LIAR_BUDGETS],
    },
    # Withholding: the first b non-zero (or, sign-reading, positive) outcomes suppressed.
    "withholding_30": {
        "seeds": list(range(10)),
        "arms": WITHHOLD_ARMS,
        "cycles": 30,
        "files": 12,
        "cells": WITHHOLD_CELLS,
    },
    "withholding_60": {
        "seeds": list(range(10)),
        "arms": WITHHOLD_ARMS,
        "cycles": 60,
        "files": 12,
        "cells": WITHHOLD_CELLS,
    },
    # Attack classes: explicit (+ inert) poison and policy-conformant poison; defences.
    "memsec": {
        "runner": "worlds",
        "memsec": True,
        "seeds": list(range(10)),
        "worlds": ["storage", "storage_conformant"],
        "arms": ["survival", "keep_everything", "evict_on_negative", "content_filter"],
        "cycles": 30,
        "files": 12,
    },
    # Query-only injection through the agent's own memory writes (attacks.py).
    "injection": {
        "runner": "injection",
        "seeds": list(range(30)),
        "conditions": ["control", "plain", "admission", "probation"],
        "plant_cycles": [2, 9, 16],
        "cycles": 30,
        "files": 12,
    },
    # Controls: a bandit over entries and a fixed relevance budget, clean and noisy.
    "controls": {
        "seeds": list(range(10)),
        "arms": ["survival", "policy_bandit", "budget_relevance", "keep_everything"],
        "cycles": 30,
        "files": 12,
        "cells": [
            ["none", 0.0],
            ["false_bad", 0.10],
            ["false_bad", 0.35],
            ["flip", 0.20],
            ["flip", 0.50],
        ],
    },
    # Ablations of survival's knobs, one at a time (spec §11.2), 5 seeds.
    "ablations": {
        "seeds": list(range(5)),
        "arms": ["survival", *ABLATION_ARMS],
        "cycles": 30,
        "files": 12,
    },
    # TestSuiteEnv under flaky CI, the published grid: 30 seeds, 30 cycles, false_bad
    # 0-0.20, the noisy suite's seven arms (about 25 minutes with TMPDIR=/dev/shm).
    "noisy_testsuite": {
        "opt_in": True,  # the child processes keep two cores busy for the whole run
        "world": "testsuite",
        "seeds": list(range(30)),
        "arms": list(NOISY_ARMS),
        "cycles": 30,
        "defects": 3,
        "cells": [
            ["none", 0.0],
            ["false_bad", 0.05],
            ["false_bad", 0.10],
            ["false_bad", 0.15],
            ["false_bad", 0.20],
        ],
    },
    # A local LLM judge settles every action (llm_arms.py; needs llama.cpp, so opt-in).
    # Five seeds, as published: about 80 s a seed with SmolLM2-135M on 2 threads.
    "judge": {
        "runner": "llm",
        "opt_in": True,
        "seeds": list(range(5)),
        "arms": ["survival", "judge_settled"],
        "cycles": 12,
        "files": 8,
        "max_tokens": 16,
    },
    # LLM-mode arms (QueryProtocol with a model): few seeds, the model is slow on CPU.
    "llm": {
        "runner": "llm",
        "opt_in": True,
        "seeds": [0, 1],
        "arms": ["survival_llm", "keep_everything_llm", "evict_on_negative_llm"],
        "cycles": 10,
        "files": 6,
    },
    # Survivors into a LoRA adapter (bench/evidence/distill.py; needs the [distill] extra,
    # so `all` skips it): each cell is [noise, rate, arms whose final set is distilled].
    "distill": {
        "runner": "distill",
        "opt_in": True,
        "seeds": list(range(10)),
        "cycles": 30,
        "files": 12,
        "epochs": 80,
        "lr": 0.005,
        "rank": 16,
        "cells": [
            ["none", 0.0, ["survival", "raw", "judge"]],
            [
                "flip",
                0.2,
                ["survival", "evict_on_negative", "strikes_k3", "consecutive_k2", "quarantine_m3"],
            ],
        ],
    },
}


def _git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "src"], capture_output=True, text=True
        ).stdout.strip()
        return out + (" (src modified)" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def config_hash(suite: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(suite, sort_keys=True).encode()).hexdigest()[:16]


def run_suite(name: str, out_dir: Path, workers: int = 2, command: str | None = None) -> Path:
    suite = SUITES[name]
    target = out_dir / name
    target.mkdir(parents=True, exist_ok=True)
    for old in target.glob("seed-*.json"):
        old.unlink()
    start = time.perf_counter()
    # spawn, not fork: safe under threads and the same on every platform.
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=max(1, min(2, workers)), mp_context=context) as pool:
        worker = run_suite_seed
        if suite.get("runner") == "distill":
            from .distill import run_distill_seed as worker
        elif suite.get("runner") == "llm":
            from .llm_arms import run_llm_seed as worker
        elif suite.get("runner") is not None:
            from .attacks import RUNNERS

            worker = RUNNERS[suite["runner"]]
        for result in pool.map(worker, [(s, suite) for s in suite["seeds"]]):
            path = target / f"seed-{result['seed']:02d}.json"
            path.write_text(json.dumps(result, sort_keys=True, indent=1) + "\n")
    manifest = {
        "suite": name,
        "config": suite,
        "config_hash": config_hash(suite),
        "command": command or f".venv/bin/python -m bench.evidence.run --suite {name}",
        "darwin_memo_version": darwin_memo.__version__,
        "python": sys.version.split()[0],
        "source_commit": _git_commit(),
        "wall_time_s": round(time.perf_counter() - start, 1),
    }
    (target / "MANIFEST.json").write_text(json.dumps(manifest, sort_keys=True, indent=1) + "\n")
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", choices=[*sorted(SUITES), "all"], default="headline")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--workers", type=int, default=2, help="at most 2")
    args = parser.parse_args(argv)
    everyday = [name for name in SUITES if not SUITES[name].get("opt_in")]
    for name in everyday if args.suite == "all" else [args.suite]:
        target = run_suite(name, args.out, args.workers)
        print(f"wrote {target}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
