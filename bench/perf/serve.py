"""A decide round trip through ``ledger STORE serve`` against the one-shot command.

    python bench/perf/serve.py [--n 100000] [--runs 40] [--workdir /tmp/dm-serve-bench]
        [--plugin] [--out bench/perf/results-serve.json]

Builds (once, cached in the workdir) an SQLite store of ``n`` synthetic lessons
(``bench/perf/lessons.py``, seed 1), then on a copy of it measures the wall time from
"request written" to "reply read" of

- ``decide`` and ``settle`` as one-shot processes (``darwin-memo ledger STORE ...``);
- the same requests through one ``serve`` process that stays up.

Each request is one transaction in both, so the difference is the interpreter start
and the imports that ``serve`` pays once. ``--plugin`` also times a recall plus its
settlement through the OpenClaw plugin's own code (``bench/perf/serve_plugin.mjs``,
Node 20+), once over ``serve`` and once over one-shot commands. Prints and writes one
JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))

import lessons as gen  # noqa: E402

DM = str(Path(sys.executable).with_name("darwin-memo"))


def _stats(seconds: list[float]) -> dict[str, float]:
    ms = sorted(s * 1e3 for s in seconds)
    return {
        "runs": len(ms),
        "p50_ms": round(statistics.median(ms), 2),
        "p90_ms": round(ms[min(len(ms) - 1, int(len(ms) * 0.9))], 2),
        "min_ms": round(ms[0], 2),
    }


def build_store(work: Path, n: int) -> Path:
    """The pristine store of n lessons (built once; later runs reuse it)."""
    store = work / f"pristine-{n}.db"
    if store.exists():
        return store
    lessons = work / f"lessons-{n}.jsonl"
    with lessons.open("w", encoding="utf-8") as fh:
        for row in gen.lessons(1, n):
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    tmp = work / f"building-{n}.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{tmp}{suffix}").unlink(missing_ok=True)
    subprocess.run(
        [
            sys.executable,
            str(HERE / "_driver.py"),
            "build-sqlite",
            str(lessons),
            str(tmp),
            "--limit",
            str(n),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    tmp.rename(store)
    return store


def one_shot(store: Path, args: list[str]) -> tuple[float, dict[str, Any]]:
    t = time.perf_counter()
    proc = subprocess.run([DM, "ledger", str(store), *args], capture_output=True, check=False)
    wall = time.perf_counter() - t
    return wall, json.loads(proc.stdout)


class Serve:
    def __init__(self, store: Path) -> None:
        self.proc = subprocess.Popen(
            [DM, "ledger", str(store), "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )

    def ask(self, args: list[str]) -> tuple[float, dict[str, Any]]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        t = time.perf_counter()
        self.proc.stdin.write(json.dumps(args).encode() + b"\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        wall = time.perf_counter() - t
        return wall, json.loads(line)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def measure(store: Path, queries: list[str], runs: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    # One-shot: decide, then settle the ticket it opened.
    dec, sett = [], []
    for i in range(runs):
        w, res = one_shot(store, ["decide", queries[i % len(queries)]])
        dec.append(w)
        if res.get("ticket_id"):
            w, _ = one_shot(store, ["settle", res["ticket_id"], "1"])
            sett.append(w)
    out["one_shot"] = {"decide": _stats(dec), "settle": _stats(sett)}
    # serve: one process; its start (interpreter, imports) is reported apart.
    t = time.perf_counter()
    s = Serve(store)
    s.ask(["stats"])
    start = time.perf_counter() - t
    dec, sett = [], []
    for i in range(runs):
        w, res = s.ask(["decide", queries[i % len(queries)]])
        dec.append(w)
        if res.get("ticket_id"):
            w, _ = s.ask(["settle", res["ticket_id"], "1"])
            sett.append(w)
    s.close()
    out["serve"] = {
        "start_and_first_reply_ms": round(start * 1e3, 1),
        "decide": _stats(dec),
        "settle": _stats(sett),
    }
    out["decide_speedup_p50"] = round(
        out["one_shot"]["decide"]["p50_ms"] / out["serve"]["decide"]["p50_ms"], 1
    )
    return out


def plugin(store: Path, runs: int) -> dict[str, Any]:
    """Recall + settlement through the OpenClaw plugin's code, serve vs one-shot."""
    node = shutil.which("node")
    if node is None:
        return {"skipped": "node is not on PATH"}
    env = dict(os.environ, PATH=f"{Path(DM).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    proc = subprocess.run(
        [node, str(HERE / "serve_plugin.mjs"), str(store), str(runs)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"serve_plugin.mjs failed: {proc.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--workdir", default="/tmp/dm-serve-bench")
    ap.add_argument("--plugin", action="store_true")
    ap.add_argument("--out", default=str(HERE / "results-serve.json"))
    args = ap.parse_args()
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    pristine = build_store(work, args.n)
    store = work / "work.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{store}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(pristine, store)
    queries = gen.queries(1, args.n, 50)["realistic"]

    result: dict[str, Any] = {
        "what": "wall time from request written to reply read; SQLite store",
        "entries": args.n,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "loadavg_before": [round(x, 2) for x in os.getloadavg()],
        },
    }
    result.update(measure(store, queries, args.runs))
    if args.plugin:
        result["plugin_recall_settle"] = plugin(store, max(10, args.runs // 2))
    result["machine"]["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    text = json.dumps(result, indent=2)
    print(text)
    Path(args.out).write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
