"""Cost of one-shot `darwin-memo ledger STORE decide|settle` processes.

    python bench/perf/cold_cli.py STORE QUERIES.json [--runs 20] [--tree SRC ...]
        [--callgrind]

Each run copies nothing: it decides one query of QUERIES.json (``bench/perf/lessons.py``
writes them) as a fresh process, then settles the ticket it got as another, and records
the CPU time (user + system, from ``wait4``) and peak RSS of each process. Work on a copy
of your store: every run leaves a settled ticket behind.

``--tree SRC`` runs ``python -m darwin_memo`` with ``PYTHONPATH=SRC`` (repeatable: two
source trees side by side, alternating); without it, the ``darwin-memo`` script next to
this Python. ``--callgrind`` instead counts the instructions of one decide and one
settle under ``valgrind --tool=callgrind`` (deterministic, so a busy machine does not
change it). Compile the bytecode first (``python -m compileall SRC``), as an installed
package has it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path


def _command(tree: str | None) -> tuple[list[str], dict[str, str]]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if tree is None:
        script = Path(sys.executable).with_name("darwin-memo")
        return [str(script)], env
    return [sys.executable, "-m", "darwin_memo"], dict(env, PYTHONPATH=tree)


def _run(argv: list[str], env: dict[str, str]) -> tuple[float, float, float, bytes]:
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, _, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, out


def _ms(values: list[float], q: float) -> str:
    return f"{values[min(len(values) - 1, int(len(values) * q))] * 1e3:.0f}"


def _instructions(argv: list[str], env: dict[str, str]) -> tuple[int, bytes]:
    proc = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv],
        env=env,
        capture_output=True,
    )
    found = re.search(rb"Collected : (\d+)", proc.stderr)
    if not found:
        raise SystemExit(f"valgrind gave no count: {proc.stderr[-500:]!r}")
    return int(found.group(1)), proc.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store")
    ap.add_argument("queries")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--tree", action="append", help="a source tree to run with -m")
    ap.add_argument("--callgrind", action="store_true")
    args = ap.parse_args()
    queries = json.loads(Path(args.queries).read_text())["realistic"]
    trees: list[str | None] = list(args.tree) if args.tree else [None]
    if args.callgrind:
        for tree in trees:
            head, env = _command(tree)
            count, out = _instructions([*head, "ledger", args.store, "decide", queries[0]], env)
            ticket = json.loads(out).get("ticket_id")
            print(f"{tree or 'script'}: decide {count / 1e6:.0f}M instructions")
            if ticket:
                settle = [*head, "ledger", args.store, "settle", ticket, "0.5"]
                count, _ = _instructions(settle, env)
                print(f"{tree or 'script'}: settle {count / 1e6:.0f}M instructions")
        return
    Samples = dict[str | None, dict[str, list[float]]]
    cpu: Samples = {t: {"decide": [], "settle": []} for t in trees}
    wall: Samples = {t: {"decide": [], "settle": []} for t in trees}
    rss: dict[str | None, float] = dict.fromkeys(trees, 0.0)
    for i in range(args.runs):
        for tree in trees:
            head, env = _command(tree)
            query = queries[i % len(queries)]
            w, c, r, out = _run([*head, "ledger", args.store, "decide", query], env)
            wall[tree]["decide"].append(w)
            cpu[tree]["decide"].append(c)
            rss[tree] = max(rss[tree], r)
            ticket = json.loads(out).get("ticket_id")
            if ticket:
                w, c, r, _ = _run([*head, "ledger", args.store, "settle", ticket, "0.5"], env)
                wall[tree]["settle"].append(w)
                cpu[tree]["settle"].append(c)
                rss[tree] = max(rss[tree], r)
    for tree in trees:
        for op, values in cpu[tree].items():
            if not values:
                continue
            values.sort()
            walls = sorted(wall[tree][op])
            print(
                f"{tree or 'script'}: {op} n={len(values)}: wall min / median / p90 "
                f"{_ms(walls, 0)} / {_ms(walls, 0.5)} / {_ms(walls, 0.9)} ms, "
                f"CPU min / median {_ms(values, 0)} / {_ms(values, 0.5)} ms"
            )
        print(f"{tree or 'script'}: peak RSS {rss[tree]:.0f} MB")
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    if "--callgrind" in sys.argv and shutil.which("valgrind") is None:
        raise SystemExit("--callgrind needs valgrind")
    main()
