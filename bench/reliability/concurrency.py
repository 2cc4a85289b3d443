"""Many processes deciding and settling on one store at once (issue 3, part 1).

For each backend (an SQLite ``.db`` store and a published-format ``.json``
store) the store is seeded with 20 entries whose questions the workers' queries
match. Then ``--procs`` worker processes each run ``--pairs`` ``decide`` +
``settle`` pairs through the real CLI (``python -m darwin_memo ledger STORE
...``, one fresh interpreter per command; ``--mode inprocess`` calls
``darwin_memo.cli.main`` instead, which keeps the per-command store open/close
but skips the interpreter start). Each worker records every ticket it got and
every ``{"settled": true}``.

Variant ``holder`` adds one long-lived Python process that keeps
``Ledger.open(store)`` open for the whole run (as an MCP server would) and
interleaves its own decide/settle/tick calls with the workers'.

Targets (exit status 1 when any fails):

* zero failed commands (non-zero exit, or stdout that is not one JSON object);
* zero lost settlements: every settled ticket appears as a ``settle`` event in
  the journal (``Ledger.open(store).events()``) exactly once, not as an
  expiry, and none of them is still pending; no settle event for a ticket
  whose settle was not acknowledged;
* ``verify()`` reconciles (empty list), from a fresh open and, in the holder
  variant, from the long-lived handle too.

Also reported: wall time, throughput (CLI commands per second) and command
latency percentiles. Prints one JSON summary on stdout.

    python bench/reliability/concurrency.py                     # 16 x 200, db+json, plain+holder
    python bench/reliability/concurrency.py --procs 4 --pairs 15 --backends db
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as c


def _wait_for(path: Path, timeout: float = 600.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {path}")
        time.sleep(0.005)


def _run(mode: str, args: list[str]) -> c.CliResult:
    if mode == "subprocess":
        return c.run_subprocess(args)
    return c.run_inprocess(args)


# -- the worker processes ---------------------------------------------------------------


def worker_main(ns: argparse.Namespace) -> int:
    rng = random.Random(ns.seed)
    store = ns.store
    rec: dict[str, Any] = {
        "worker": ns.worker_id,
        "tickets": [],
        "settled": [],
        "settled_false": [],
        "silent": 0,
        "failures": [],
        "latency": {"decide": [], "settle": []},
        "commands": 0,
    }
    if ns.mode == "inprocess":
        import darwin_memo.cli  # noqa: F401  (import before the clock starts)
    Path(ns.ready).touch()
    _wait_for(Path(ns.go))
    rec["t0"] = time.time()
    for step in range(ns.pairs):
        topic = rng.choice(c.TOPICS[: ns.topics])
        args = ["ledger", store, "decide", c.topic_query(topic)]
        res = _run(ns.mode, args)
        rec["commands"] += 1
        rec["latency"]["decide"].append(res.elapsed)
        obj, why = c.one_json_object(res.stdout)
        if res.rc != 0 or obj is None or "error" in obj:
            rec["failures"].append(
                {
                    "op": "decide",
                    "step": step,
                    "rc": res.rc,
                    "why": why,
                    "code": (obj or {}).get("code"),
                    "out": c.short(res.text),
                }
            )
            continue
        ticket = obj.get("ticket_id")
        if not ticket:
            rec["silent"] += 1
            continue
        rec["tickets"].append(ticket)
        delta = f"{rng.uniform(-0.2, 1.0):.3f}"
        args = ["ledger", store, "settle", ticket, delta, "--detail", f"w{ns.worker_id}s{step}"]
        res = _run(ns.mode, args)
        rec["commands"] += 1
        rec["latency"]["settle"].append(res.elapsed)
        obj, why = c.one_json_object(res.stdout)
        if res.rc != 0 or obj is None or "error" in obj:
            rec["failures"].append(
                {
                    "op": "settle",
                    "step": step,
                    "rc": res.rc,
                    "why": why,
                    "code": (obj or {}).get("code"),
                    "out": c.short(res.text),
                }
            )
            continue
        if obj.get("settled") is True:
            rec["settled"].append(ticket)
        else:
            rec["settled_false"].append(ticket)
    rec["t1"] = time.time()
    c.write_json(Path(ns.out), rec)
    return 0


def holder_main(ns: argparse.Namespace) -> int:
    """One process, one ``Ledger.open`` for the whole run (MCP-style)."""
    from darwin_memo.ledger import Ledger

    rng = random.Random(ns.seed)
    rec: dict[str, Any] = {
        "worker": "holder",
        "tickets": [],
        "settled": [],
        "settled_false": [],
        "silent": 0,
        "failures": [],
        "latency": {"decide": [], "settle": [], "tick": []},
        "commands": 0,
        "ticks": 0,
    }
    ledger = Ledger.open(ns.store, create=False)
    Path(ns.ready).touch()
    _wait_for(Path(ns.go))
    rec["t0"] = time.time()
    stop = Path(ns.stop)
    step = 0
    while not stop.exists():
        step += 1
        try:
            t = time.perf_counter()
            ticket = ledger.decide(c.topic_query(rng.choice(c.TOPICS[: ns.topics])))
            rec["latency"]["decide"].append(time.perf_counter() - t)
            rec["commands"] += 1
            if ticket.provenance:
                rec["tickets"].append(ticket.id)
                t = time.perf_counter()
                ok = ledger.settle(ticket.id, round(rng.uniform(-0.2, 1.0), 3), f"holder {step}")
                rec["latency"]["settle"].append(time.perf_counter() - t)
                rec["commands"] += 1
                (rec["settled"] if ok else rec["settled_false"]).append(ticket.id)
            else:
                rec["silent"] += 1
            if step % ns.holder_tick_every == 0:
                t = time.perf_counter()
                ledger.tick()
                rec["latency"]["tick"].append(time.perf_counter() - t)
                rec["commands"] += 1
                rec["ticks"] += 1
        except Exception as exc:  # a failed library call is a failed command
            rec["failures"].append(
                {"op": "holder", "step": step, "code": type(exc).__name__, "why": repr(exc)}
            )
        time.sleep(ns.holder_interval)
    rec["t1"] = time.time()
    try:
        rec["verify_long_lived"] = ledger.verify()
        rec["stats_long_lived"] = ledger.stats()
        rec["pending_long_lived"] = sorted(t.id for t in ledger.pending())
    except Exception as exc:
        rec["failures"].append({"op": "holder-final", "why": repr(exc)})
    ledger.close()
    c.write_json(Path(ns.out), rec)
    return 0


# -- the driver -------------------------------------------------------------------------


def run_one(
    backend: str,
    variant: str,
    workdir: Path,
    procs: int,
    pairs: int,
    mode: str,
    seed: int,
    topics: int = 20,
    holder_interval: float = 0.05,
    holder_tick_every: int = 20,
    pg_url: str = "",
) -> dict[str, Any]:
    from darwin_memo.ledger import Ledger

    d = workdir / f"{backend}-{variant}"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    store: Path | str
    if backend == "pg":  # a fresh named store in the database --pg-url names
        if not pg_url:
            raise SystemExit("--backends pg needs --pg-url postgresql://user@host:port/db")
        store = f"{pg_url}{'&' if '?' in pg_url else '?'}store=bench_{variant}_{os.getpid()}"
    else:
        store = c.store_path(d, backend)
    c.seed_store(store, topics)
    me = str(Path(__file__).resolve())
    go, stop = d / "go", d / "stop"
    children: list[tuple[subprocess.Popen[bytes], Path, Path]] = []

    def spawn(extra: list[str], name: str) -> None:
        out, ready = d / f"{name}.json", d / f"{name}.ready"
        cmd = [sys.executable, me, *extra, "--store", str(store), "--out", str(out)]
        cmd += ["--ready", str(ready), "--go", str(go), "--topics", str(topics)]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        children.append((proc, out, ready))

    for w in range(procs):
        spawn(
            ["--worker", "--worker-id", str(w), "--pairs", str(pairs), "--mode", mode,
             "--seed", str(seed * 1000 + w)],
            f"worker{w}",
        )  # fmt: skip
    holder = None
    if variant == "holder":
        spawn(
            ["--holder", "--stop", str(stop), "--seed", str(seed * 1000 + 999),
             "--holder-interval", str(holder_interval),
             "--holder-tick-every", str(holder_tick_every)],
            "holder",
        )  # fmt: skip
        holder = children[-1]
    for _, _, ready in children:
        _wait_for(ready)
    t_go = time.time()
    go.touch()
    errors: list[str] = []
    for proc, _, _ in children:
        if holder is not None and proc is holder[0]:
            continue
        _, err = proc.communicate()
        if proc.returncode != 0:
            errors.append(f"worker exited {proc.returncode}: {err.decode(errors='replace')[-400:]}")
    t_workers = time.time()
    if holder is not None:
        stop.touch()
        _, err = holder[0].communicate()
        if holder[0].returncode != 0:
            errors.append(f"holder exited {holder[0].returncode}: {err.decode()[-400:]}")
    records = []
    for _, out, _ in children:
        if out.exists():
            records.append(json.loads(out.read_text(encoding="utf-8")))
        else:
            errors.append(f"{out.name} missing")

    failures = [f for r in records for f in r["failures"]]
    tickets = [t for r in records for t in r["tickets"]]
    settled = [t for r in records for t in r["settled"]]
    settled_false = [t for r in records for t in r["settled_false"]]
    commands = sum(r["commands"] for r in records)
    cli_commands = sum(r["commands"] for r in records if r["worker"] != "holder")
    wall = t_workers - t_go

    with Ledger.open(store, create=False) as ledger:
        idx = c.journal_index(ledger.events())
        pending = {t.id for t in ledger.pending()}
        problems = ledger.verify()
        final_stats = ledger.stats()
        tick = ledger.tick_count

    lost = [t for t in settled if idx.settled[t] == 0]
    duplicated = [t for t in settled if idx.settled[t] > 1]
    expired_instead = [t for t in settled if t in idx.expired]
    still_pending = [t for t in settled if t in pending]
    acked = set(settled)
    phantom = [t for t in idx.settled if t not in acked and t in set(tickets)]
    not_in_journal = [t for t in tickets if idx.decided[t] != 1]
    lat: dict[str, Any] = {}
    for op in ("decide", "settle", "tick"):
        values = [v for r in records for v in r["latency"].get(op, [])]
        if values:
            lat[op] = {
                "n": len(values),
                "p50_ms": round(1000 * c.percentile(values, 0.5), 1),
                "p95_ms": round(1000 * c.percentile(values, 0.95), 1),
                "max_ms": round(1000 * max(values), 1),
            }
    summary: dict[str, Any] = {
        "backend": backend,
        "variant": variant,
        "mode": mode,
        "procs": procs,
        "pairs": pairs,
        "wall_s": round(wall, 2),
        "commands": commands,
        "cli_commands": cli_commands,
        "throughput_cmds_per_s": round(cli_commands / wall, 1) if wall > 0 else None,
        "pairs_per_s": round(len(settled) / wall, 1) if wall > 0 else None,
        "tickets": len(tickets),
        "silent_decides": sum(r["silent"] for r in records),
        "settled_true": len(settled),
        "settled_false": len(settled_false),
        "failed_commands": len(failures),
        "failure_samples": failures[:5],
        "failure_codes": _codes(failures),
        "lost_settlements": len(lost),
        "duplicated_settlements": len(duplicated),
        "expired_instead_of_settled": len(expired_instead),
        "settled_but_pending": len(still_pending),
        "phantom_settlements": len(phantom),
        "tickets_not_decided_once": len(not_in_journal),
        "journal_events": idx.events,
        "verify": problems[:10],
        "final_tick": tick,
        "final_stats": final_stats,
        "latency": lat,
        "process_errors": errors,
    }
    if holder is not None:
        h = next(r for r in records if r["worker"] == "holder")
        summary["holder"] = {
            "commands": h["commands"],
            "ticks": h["ticks"],
            "settled": len(h["settled"]),
            "failures": len(h["failures"]),
            "verify_long_lived": h.get("verify_long_lived"),
            "long_lived_view_matches_fresh_open": (
                h.get("stats_long_lived") == final_stats
                and set(h.get("pending_long_lived", [])) == pending
            ),
        }
    checks = {
        "zero_failed_commands": not failures and not errors,
        "zero_lost_settlements": not (
            lost or duplicated or expired_instead or still_pending or phantom or not_in_journal
        ),
        "verify_reconciles": not problems,
    }
    if holder is not None:
        checks["verify_reconciles"] = (
            checks["verify_reconciles"] and not summary["holder"]["verify_long_lived"]
        )
        checks["long_lived_view_current"] = bool(
            summary["holder"]["long_lived_view_matches_fresh_open"]
        )
    summary["targets"] = checks
    summary["ok"] = all(checks.values())
    return summary


def _codes(failures: list[dict[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for f in failures:
        key = f"{f.get('op')}: {f.get('code') or f.get('why') or '?'}"
        counts[key] = counts.get(key, 0) + 1
    return counts


def run(
    backends: list[str],
    variants: list[str],
    procs: int,
    pairs: int,
    mode: str = "subprocess",
    seed: int = 1,
    workdir: Path | None = None,
    keep: bool = False,
    **kw: Any,
) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="dm-concurrency-")) if workdir is None else workdir
    tmp.mkdir(parents=True, exist_ok=True)
    results = []
    t0 = time.time()
    try:
        for backend in backends:
            for variant in variants:
                results.append(run_one(backend, variant, tmp, procs, pairs, mode, seed, **kw))
    finally:
        if not keep and workdir is None:
            shutil.rmtree(tmp, ignore_errors=True)
    return {
        "benchmark": "concurrency",
        "machine": c.machine(),
        "total_wall_s": round(time.time() - t0, 1),
        "runs": results,
        "ok": all(r["ok"] for r in results),
    }


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--procs", type=int, default=16, help="worker processes (16)")
    p.add_argument("--pairs", type=int, default=200, help="decide+settle pairs per worker (200)")
    p.add_argument("--backends", default="db,json", help="comma list of db,json,pg (db,json)")
    p.add_argument("--pg-url", default="", help="for pg: postgresql://user@host:port/db")
    p.add_argument("--variants", default="plain,holder", help="plain and/or holder (plain,holder)")
    p.add_argument(
        "--mode",
        choices=["subprocess", "inprocess"],
        default="subprocess",
        help="subprocess: python -m darwin_memo per command (default); "
        "inprocess: darwin_memo.cli.main per command inside each worker process",
    )
    p.add_argument("--seed", type=int, default=1, help="random seed (1)")
    p.add_argument("--topics", type=int, default=20, help="seeded entries (20)")
    p.add_argument("--holder-interval", type=float, default=0.05, help="holder sleep, s (0.05)")
    p.add_argument("--holder-tick-every", type=int, default=20, help="holder ticks every N (20)")
    p.add_argument("--workdir", type=Path, help="keep stores here (default: a temp dir, removed)")
    p.add_argument("--keep", action="store_true", help="keep the temp dir")
    # internal: the child processes
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--holder", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--worker-id", type=int, default=0, help=argparse.SUPPRESS)
    for name in ("--store", "--out", "--ready", "--go", "--stop"):
        p.add_argument(name, help=argparse.SUPPRESS)
    return p


def main(argv: list[str] | None = None) -> int:
    ns = build_parser().parse_args(argv)
    if ns.worker:
        return worker_main(ns)
    if ns.holder:
        return holder_main(ns)
    summary = run(
        [b.strip() for b in ns.backends.split(",") if b.strip()],
        [v.strip() for v in ns.variants.split(",") if v.strip()],
        ns.procs,
        ns.pairs,
        ns.mode,
        ns.seed,
        ns.workdir,
        ns.keep,
        topics=ns.topics,
        holder_interval=ns.holder_interval,
        holder_tick_every=ns.holder_tick_every,
        pg_url=ns.pg_url,
    )
    print(json.dumps(summary, indent=2))
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
