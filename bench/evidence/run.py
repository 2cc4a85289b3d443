"""Run a benchmark suite and write one JSON file per seed plus a MANIFEST.json.

    .venv/bin/python -m bench.evidence.run --suite headline   # 10 seeds, every arm
    .venv/bin/python -m bench.evidence.run --suite quick      # 3 seeds, 4 arms (CI)
    .venv/bin/python -m bench.evidence.run --suite noisy      # 30 seeds, lying CI

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

NOISY_ARMS = ("survival", "evict_on_negative", "strikes_k2", "strikes_k3", "consecutive_k2")
NOISY_RATES = (0.05, 0.10, 0.20, 0.35)

SUITES: dict[str, dict[str, Any]] = {
    "headline": {"seeds": list(range(10)), "arms": list(ARMS), "cycles": 30, "files": 12},
    "quick": {
        "seeds": [0, 1, 2],
        "arms": ["survival", "random_matched", "keep_everything", "evict_on_negative"],
        "cycles": 30,
        "files": 12,
    },
    "noisy": {
        "seeds": list(range(30)),
        "arms": list(NOISY_ARMS),
        "cycles": 30,
        "files": 12,
        "cells": [["none", 0.0]] + [["false_bad", r] for r in NOISY_RATES] + [["flip", 0.20]],
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
        for result in pool.map(run_suite_seed, [(s, suite) for s in suite["seeds"]]):
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
    parser.add_argument("--suite", choices=sorted(SUITES), default="headline")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--workers", type=int, default=2, help="at most 2")
    args = parser.parse_args(argv)
    target = run_suite(args.suite, args.out, args.workers)
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
