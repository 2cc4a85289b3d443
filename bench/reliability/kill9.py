"""``kill -9`` at a random moment, then check the store (issue 3, part 2).

Each run copies a seeded store (20 entries, 30 open tickets) into a fresh
folder and starts a child process that loops over settle / tick / decide /
abandon on it, as fast as it can. Even runs keep one ``Ledger.open`` handle for
the whole loop (MCP-style); odd runs go through ``darwin_memo.cli.main`` for
every operation (each one opens and closes the store, as the CLI does). In a
third of the runs the loop also runs ``darwin-memo migrate STORE NEW_PATH``
(into the other format, alternately the same one) every few operations.

The child appends one line to a side log after each call returns (``D`` ticket
decided, ``S`` settle result, ``T`` tick, ``M-``/``M+`` migrate started/done), and
says ``ready`` once imported and open. The driver waits for ``ready``, sleeps a
random 0 to ``--max-delay-ms`` ms, sends SIGKILL, and then checks the store:

* it opens, and ``verify()`` is ``[]`` straight away (target ``verify_on_open``);
  after one more write (a ``tick``) it must verify too (reported);
* no settlement is half-applied: decided tickets (journal ``decide`` events) are
  partitioned into settled (``settle`` events, each exactly once) and pending
  (``ledger.pending()``), with nothing else on either side; ``verify`` covers
  the credits;
* nothing acknowledged is lost: every ticket the child saw decided is in the
  journal, every settle/abandon that returned true is settled, and the tick is
  not behind the last acknowledged one;
* migrate: each destination is either absent or complete (opens, verifies, and
  matches the counts ``migrate`` printed when that was acknowledged); the
  source is intact (the checks above);
* post-mortem: ``migrate`` of the killed store, as it lies, into the other
  format gives a destination that verifies.

Reported too: whether ``verify()`` passes after one more write (a ``tick``),
temporary files left behind, and, for JSON, whether the kill landed between the
store write and the journal append (``unjournaled_txn_at_open``).

Prints a JSON summary; exits 1 if any target fails in any run.

    python bench/reliability/kill9.py                       # 200 runs per backend
    python bench/reliability/kill9.py --runs 10 --backends json
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as c

OPEN_TICKETS = 30


# -- the child ----------------------------------------------------------------------------


def child_main(ns: argparse.Namespace) -> int:
    from darwin_memo.cli import main as cli_main
    from darwin_memo.ledger import Ledger

    rng = random.Random(ns.seed)
    store = ns.store
    fd = os.open(ns.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def log(line: str) -> None:
        os.write(fd, (line + "\n").encode("utf-8"))

    with Ledger.open(store, create=False) as probe:
        pending = [t.id for t in probe.pending()]

    def cli(*args: str) -> dict[str, Any] | None:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            cli_main(list(args))
        obj, _ = c.one_json_object(out.getvalue().encode())
        return obj

    handle = Ledger.open(store, create=False) if ns.style == "handle" else None
    k = 0
    log("ready")
    while True:
        r = rng.random()
        if r < 0.45 and pending:
            ticket = pending.pop(rng.randrange(len(pending)))
            delta = round(rng.uniform(-1.0, 1.5), 3)
            if handle is not None:
                ok = handle.settle(ticket, delta, "kill9")
            else:
                ok = bool((cli("ledger", store, "settle", ticket, str(delta)) or {}).get("settled"))
            log(f"S {ticket} {int(ok)}")
        elif r < 0.65:
            if handle is not None:
                tick = handle.tick()["tick"]
            else:
                tick = (cli("ledger", store, "tick") or {}).get("tick", -1)
            log(f"T {tick}")
        elif r < 0.92 or not pending:
            query = c.topic_query(rng.choice(c.TOPICS))
            if handle is not None:
                t = handle.decide(query)
                ticket = t.id if t.provenance else None
            else:
                ticket = (cli("ledger", store, "decide", query) or {}).get("ticket_id")
            if ticket:
                pending.append(ticket)
                log(f"D {ticket}")
        else:
            ticket = pending.pop(rng.randrange(len(pending)))
            if handle is not None:
                ok = handle.abandon(ticket)
            else:
                ok = bool((cli("ledger", store, "abandon", ticket) or {}).get("abandoned"))
            log(f"S {ticket} {int(ok)}")
        if ns.migrate_to and rng.random() < 0.3:
            k += 1
            dest = f"{ns.migrate_to}{k}{ns.migrate_suffix}"
            log(f"M- {dest}")
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                rc = cli_main(["migrate", store, dest])
            obj, _ = c.one_json_object(out.getvalue().encode())
            log(f"M+ {dest} {rc} {json.dumps(obj)}")


# -- the checks ---------------------------------------------------------------------------


def _parse_log(path: Path) -> dict[str, Any]:
    out: dict[str, Any] = {
        "ready": False,
        "decided": set(),
        "settled_true": set(),
        "last_tick": 0,
        "migrate_started": [],
        "migrate_done": {},
        "ops": 0,
    }
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return out
    for line in lines:
        parts = line.split(" ", 3)
        tag = parts[0]
        if tag == "ready":
            out["ready"] = True
        elif tag == "D":
            out["decided"].add(parts[1])
            out["ops"] += 1
        elif tag == "S":
            if parts[2] == "1":
                out["settled_true"].add(parts[1])
            out["ops"] += 1
        elif tag == "T":
            out["last_tick"] = max(out["last_tick"], int(parts[1]))
            out["ops"] += 1
        elif tag == "M-":
            out["migrate_started"].append(parts[1])
        elif tag == "M+":
            out["migrate_done"][parts[1]] = (int(parts[2]), json.loads(parts[3]))
    return out


def _journal_txn_unjournaled(store: Path) -> bool | None:
    """JSON stores: whether the store holds a transaction the journal lacks
    (the kill landed between the store write and the journal append)."""
    if store.suffix != ".json":
        return None
    try:
        payload = json.loads(store.read_text(encoding="utf-8"))
        txn = payload["ledger"]["journal_txn"]["id"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    journal = store.with_name(store.stem + ".events.jsonl")
    try:
        return f'"txn": "{txn}"' not in journal.read_text(encoding="utf-8")
    except FileNotFoundError:
        return True


def check_store(store: Path) -> dict[str, Any]:
    """Open, verify, and index a store; never raises."""
    from darwin_memo.ledger import Ledger

    res: dict[str, Any] = {"opened": False}
    try:
        ledger = Ledger.open(store, create=False)
    except Exception as exc:
        res["open_error"] = f"{type(exc).__name__}: {exc}"
        return res
    with ledger:
        res["opened"] = True
        try:
            res["verify"] = ledger.verify()
            idx = c.journal_index(ledger.events())
            res["idx"] = idx
            res["pending"] = {t.id for t in ledger.pending()}
            res["tick"] = ledger.tick_count
            res["alive"] = len(ledger.store)
        except Exception as exc:
            res["read_error"] = f"{type(exc).__name__}: {exc}"
    return res


CATEGORIES = {
    "open": "the store opens and can be read",
    "verify_on_open": "verify() == [] on the first open after the kill",
    "half_applied": "decided tickets = settled (once each) + pending, nothing else",
    "lost_acks": "every acknowledged decide/settle/tick is in the store",
    "migrate_dest": "each migrate destination is absent or complete (opens, verifies, counts)",
    "postmortem_migrate": "migrating the killed store yields a destination that verifies",
    "child": "the child was still running when killed",
}


def _migrate_inprocess(src: Path, dest: Path) -> tuple[int, str]:
    from darwin_memo.cli import main as cli_main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        rc = cli_main(["migrate", str(src), str(dest)])
    return rc, out.getvalue()


def check_run(run_dir: Path, store: Path, log: dict[str, Any], backend: str) -> dict[str, Any]:
    from darwin_memo.ledger import Ledger

    fails: list[tuple[str, str]] = []
    info: dict[str, Any] = {}
    info["unjournaled_txn_at_open"] = _journal_txn_unjournaled(store)
    st = check_store(store)
    if not st["opened"]:
        fails.append(("open", f"store does not open: {st.get('open_error')}"))
    elif "read_error" in st:
        fails.append(("open", f"store opens but cannot be read: {st['read_error']}"))
    else:
        if st["verify"]:
            fails.append(("verify_on_open", f"verify on open: {st['verify'][:3]}"))
        idx: c.JournalIndex = st["idx"]
        decided, settled, pending = set(idx.decided), set(idx.settled), st["pending"]
        dup_d = [t for t, n in idx.decided.items() if n > 1]
        dup_s = [t for t, n in idx.settled.items() if n > 1]
        half = "half_applied"
        if dup_d or dup_s:
            fails.append((half, f"tickets decided/settled twice: {dup_d[:3]} {dup_s[:3]}"))
        if settled & pending:
            fails.append((half, f"settled yet pending: {sorted(settled & pending)[:3]}"))
        if decided - settled - pending:
            lost = sorted(decided - settled - pending)[:3]
            fails.append((half, f"decided but neither settled nor pending: {lost}"))
        if (settled | pending) - decided:
            extra = sorted((settled | pending) - decided)[:3]
            fails.append((half, f"settled/pending but never decided: {extra}"))
        if log["decided"] - decided:
            lost = sorted(log["decided"] - decided)[:3]
            fails.append(("lost_acks", f"acknowledged decides lost: {lost}"))
        if log["settled_true"] - settled:
            lost = sorted(log["settled_true"] - settled)[:3]
            fails.append(("lost_acks", f"acknowledged settlements lost: {lost}"))
        if st["tick"] < log["last_tick"]:
            fails.append(("lost_acks", f"tick {st['tick']} behind acknowledged {log['last_tick']}"))
        info["decided"], info["settled"], info["pending"] = len(decided), len(settled), len(pending)
        # Post-mortem: copy the killed store (before anything writes to it) to the other format.
        other = "json" if backend == "db" else "db"
        dest = run_dir / f"postmortem{c.SUFFIX[other]}"
        try:
            rc, out = _migrate_inprocess(store, dest)
            d = check_store(dest) if dest.exists() else {"opened": False, "open_error": "absent"}
            if rc != 0 or not d["opened"] or d.get("verify"):
                why = d.get("verify") or d.get("open_error") or d.get("read_error") or out
                fails.append(("postmortem_migrate", f"migrate {store.name} -> {dest.name}: "
                              f"exit {rc}; {c.short(why, 200)}"))  # fmt: skip
        except Exception as exc:
            fails.append(("postmortem_migrate", f"migrate raised {type(exc).__name__}: {exc}"))
        # Recovery: one more write, then the books must balance.
        try:
            with Ledger.open(store, create=False) as ledger:
                ledger.tick()
                info["verify_after_write"] = ledger.verify()
        except Exception as exc:
            info["verify_after_write"] = [f"write failed: {type(exc).__name__}: {exc}"]
    # Migrate destinations written by the child: absent, or complete.
    mig: dict[str, int] = {"attempted": 0, "present": 0, "acknowledged": 0, "orphan_journal": 0}
    for dest_s in log["migrate_started"]:
        dest = Path(dest_s)
        mig["attempted"] += 1
        done = log["migrate_done"].get(dest_s)
        if done is not None:
            mig["acknowledged"] += 1
        if not dest.exists():
            if done is not None and done[0] == 0:
                fails.append(("migrate_dest", f"migrate to {dest.name} acknowledged but absent"))
            journal = dest.with_name(dest.stem + ".events.jsonl")
            if dest.suffix == ".json" and journal.exists():
                mig["orphan_journal"] += 1
            continue
        mig["present"] += 1
        d = check_store(dest)
        if not d["opened"] or "read_error" in d:
            why = d.get("open_error") or d.get("read_error")
            fails.append(("migrate_dest", f"destination {dest.name} incomplete: {why}"))
            continue
        if d["verify"]:
            fails.append(
                ("migrate_dest", f"destination {dest.name} fails verify: {d['verify'][:2]}")
            )
        if done is not None and done[0] == 0 and isinstance(done[1], dict):
            summary = done[1]
            got = {"alive": d["alive"], "pending": len(d["pending"]), "events": d["idx"].events}
            want = {k: summary.get(k) for k in got}
            if got != want:
                fails.append(("migrate_dest", f"destination {dest.name}: {got} != printed {want}"))
    info["migrate"] = mig
    # temporary files: NAME.<hex>.tmp, and SQLite's NAME.<hex>.tmp.<pid>.<id>.new(-wal, -shm)
    info["tmp_leftovers"] = sum(1 for p in run_dir.iterdir() if ".tmp" in p.name)
    return {"fails": fails, "info": info}


# -- the driver ---------------------------------------------------------------------------


def make_template(directory: Path, backend: str) -> Path:
    from darwin_memo.ledger import Ledger

    store = c.store_path(directory, backend)
    c.seed_store(store, 20)
    rng = random.Random(7)
    with Ledger.open(store) as ledger:
        opened = 0
        while opened < OPEN_TICKETS:
            if ledger.decide(c.topic_query(rng.choice(c.TOPICS))).provenance:
                opened += 1
    return store


def run(
    backends: list[str],
    runs: int,
    max_delay_ms: float = 300.0,
    seed: int = 1,
    migrate_every: int = 3,
    workdir: Path | None = None,
    keep: str = "failures",
) -> dict[str, Any]:
    base = Path(tempfile.mkdtemp(prefix="dm-kill9-")) if workdir is None else workdir
    base.mkdir(parents=True, exist_ok=True)
    me = str(Path(__file__).resolve())
    rng = random.Random(seed)
    t0 = time.time()
    results = []
    for backend in backends:
        template = base / f"template-{backend}"
        shutil.rmtree(template, ignore_errors=True)
        make_template(template, backend)
        agg: dict[str, Any] = {
            "backend": backend,
            "runs": 0,
            "failed_runs": 0,
            "migrate_runs": 0,
            "handle_runs": 0,
            "child_died_early": 0,
            "ops_before_kill": [],
            "unjournaled_txn_at_open": 0,
            "failures_by_target": {k: 0 for k in CATEGORIES},
            "verify_after_write_failures": 0,
            "tmp_leftovers": 0,
            "migrate": {"attempted": 0, "present": 0, "acknowledged": 0, "orphan_journal": 0},
            "failure_samples": [],
        }
        for i in range(runs):
            run_dir = base / f"{backend}-{i:04d}"
            shutil.rmtree(run_dir, ignore_errors=True)
            shutil.copytree(template, run_dir)
            store = c.store_path(run_dir, backend)
            logf = run_dir / "child.log"
            style = "handle" if i % 2 == 0 else "cli"
            migrate = migrate_every > 0 and i % migrate_every == migrate_every - 1
            cmd = [sys.executable, me, "--child", "--store", str(store), "--log", str(logf)]
            cmd += ["--style", style, "--seed", str(rng.randrange(1 << 30))]
            if migrate:  # alternately into the other format and into the same one
                same = (i // migrate_every) % 2 == 1
                other = backend if same else ("json" if backend == "db" else "db")
                cmd += ["--migrate-to", str(run_dir / "migrated-")]
                cmd += ["--migrate-suffix", c.SUFFIX[other]]
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            deadline = time.monotonic() + 60
            while proc.poll() is None and time.monotonic() < deadline:
                if logf.exists() and logf.read_bytes().startswith(b"ready\n"):
                    break
                time.sleep(0.002)
            time.sleep(rng.uniform(0, max_delay_ms) / 1000.0)
            early = proc.poll() is not None
            if not early:
                os.kill(proc.pid, signal.SIGKILL)
            _, err = proc.communicate()
            log = _parse_log(logf)
            res = check_run(run_dir, store, log, backend)
            if early:
                agg["child_died_early"] += 1
                why = err.decode(errors="replace")[-300:]
                res["fails"].append(("child", f"exited {proc.returncode} before the kill: {why}"))
            info = res["info"]
            agg["runs"] += 1
            agg["migrate_runs"] += int(migrate)
            agg["handle_runs"] += int(style == "handle")
            agg["ops_before_kill"].append(log["ops"])
            agg["unjournaled_txn_at_open"] += int(bool(info.get("unjournaled_txn_at_open")))
            for category in {cat for cat, _ in res["fails"]}:
                agg["failures_by_target"][category] += 1
            agg["verify_after_write_failures"] += int(bool(info.get("verify_after_write")))
            agg["tmp_leftovers"] += info["tmp_leftovers"]
            for k2, v in info["migrate"].items():
                agg["migrate"][k2] += v
            if res["fails"]:
                agg["failed_runs"] += 1
                samples = agg["failure_samples"]
                if len(samples) < 12:
                    samples.append({
                        "run": i, "style": style, "migrate": migrate,
                        "fails": [f"{k}: {m}" for k, m in res["fails"][:4]],
                        "unjournaled_txn_at_open": info.get("unjournaled_txn_at_open"),
                        "dir": str(run_dir) if keep != "none" else None,
                    })  # fmt: skip
            if keep == "none" or (keep == "failures" and not res["fails"]):
                shutil.rmtree(run_dir, ignore_errors=True)
        ops = agg.pop("ops_before_kill")
        agg["ops_before_kill"] = {
            "min": min(ops, default=0),
            "median": c.percentile([float(o) for o in ops], 0.5),
            "max": max(ops, default=0),
            "runs_killed_before_first_op": sum(1 for o in ops if o == 0),
        }
        agg["targets"] = {k: agg["failures_by_target"][k] == 0 for k in CATEGORIES}
        agg["ok"] = all(agg["targets"].values())
        results.append(agg)
        if keep == "none":
            shutil.rmtree(template, ignore_errors=True)
    if workdir is None and keep == "none":
        shutil.rmtree(base, ignore_errors=True)
    return {
        "benchmark": "kill9",
        "machine": c.machine(),
        "runs_per_backend": runs,
        "max_delay_ms": max_delay_ms,
        "targets": CATEGORIES,
        "total_wall_s": round(time.time() - t0, 1),
        "workdir": str(base) if (workdir is not None or keep != "none") else None,
        "results": results,
        "ok": all(r["ok"] for r in results),
    }


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--runs", type=int, default=200, help="kill runs per backend (200)")
    p.add_argument("--backends", default="db,json", help="comma list of db,json (db,json)")
    p.add_argument("--max-delay-ms", type=float, default=300.0, help="kill after 0..N ms (300)")
    p.add_argument(
        "--migrate-every", type=int, default=3, help="every Nth run also migrates (3); 0 = never"
    )
    p.add_argument("--seed", type=int, default=1, help="random seed (1)")
    p.add_argument("--workdir", type=Path, help="put run folders here (default: a temp dir)")
    p.add_argument(
        "--keep",
        choices=["none", "failures", "all"],
        default="failures",
        help="which run folders to keep for inspection (failures)",
    )
    # internal: the child
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--store", help=argparse.SUPPRESS)
    p.add_argument("--log", help=argparse.SUPPRESS)
    p.add_argument("--style", default="handle", help=argparse.SUPPRESS)
    p.add_argument("--migrate-to", help=argparse.SUPPRESS)
    p.add_argument("--migrate-suffix", default=".db", help=argparse.SUPPRESS)
    return p


def main(argv: list[str] | None = None) -> int:
    ns = build_parser().parse_args(argv)
    if ns.child:
        return child_main(ns)
    summary = run(
        [b.strip() for b in ns.backends.split(",") if b.strip()],
        ns.runs,
        ns.max_delay_ms,
        ns.seed,
        ns.migrate_every,
        ns.workdir,
        ns.keep,
    )
    print(json.dumps(summary, indent=2))
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
