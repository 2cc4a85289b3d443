"""Package-agnostic worker for ``bench/perf/scale.py`` (stdlib + ``darwin_memo`` only).

It uses only the API that darwin-memo 0.7.1 publishes (``MemoryEntry``,
``MemoryStore``, ``EntryKind``, ``EmbeddingRetriever``, ``HashingEmbedder``,
``darwin_memo.ledger.Ledger``), so the same file runs under our package and,
from the reference virtual environment's interpreter, under the published one.
``scale.py`` starts it as a fresh process for each measurement; it prints one
JSON object on its last stdout line.

Commands::

    build LESSONS OUT.json --limit N [--sqlite OUT.db]
    open STORE --mode open|load --query Q
    inproc STORE --mode open|load --queries Q.json [--realistic N] [--settles N] [--save]
    tick STORE --mode open|load            (prints "START" just before the timed tick)
    embed LESSONS --limit N --queries Q.json [--realistic N]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import sys
import time
from typing import Any

T0 = time.perf_counter()


def _rss_mb() -> float:
    """Peak resident set of this process so far, in MB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _emit(obj: dict[str, Any]) -> None:
    obj.setdefault("peak_rss_mb", round(_rss_mb(), 1))
    obj.setdefault("package_version", _version())
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _version() -> str:
    try:
        import darwin_memo

        return str(getattr(darwin_memo, "__version__", "?"))
    except Exception:  # pragma: no cover
        return "?"


def _read_lessons(path: str, limit: int) -> list[list[Any]]:
    out: list[list[Any]] = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if len(out) >= limit:
                break
            out.append(json.loads(line))
    return out


def _entries(lessons: list[list[Any]]) -> list[Any]:
    from darwin_memo import EntryKind, MemoryEntry

    kind = EntryKind.EXPERIENCE
    stamp = "2026-01-01T00:00:00+00:00"
    return [
        MemoryEntry(question=q, answer=a, kind=kind, sources=[src], id=eid, recorded_ts=stamp)
        for eid, q, a, src in lessons
    ]


def cmd_build_sqlite(args: argparse.Namespace) -> None:
    """Write an SQLite store straight from the lessons (the bulk path of ``migrate``).

    At 1M lessons the JSON-then-migrate route of ``build`` holds every entry in
    memory twice; this streams them into one transaction instead.
    """
    from darwin_memo.backends.sqlite import SqliteBackend
    from darwin_memo.backends.sqlstore import write_entries_bulk

    t = time.perf_counter()
    lessons = _read_lessons(args.lessons, args.limit)
    backend = SqliteBackend(args.out, create=True)
    with backend._immediate():
        n = write_entries_bulk(
            backend.conn,
            ((e, True) for e in _entries(lessons)),
            damaged=(),
            tick=0,
            upkeep=0.05,
            version=1,
        )
        backend.conn.executemany(
            "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
            [
                ("version", "1"),
                ("tick_count", "0"),
                ("config", json.dumps({"max_energy": 5.0, "upkeep": 0.05})),
            ],
        )
    backend.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    backend.close()
    print(
        json.dumps(
            {
                "n": n,
                "build_sqlite_s": round(time.perf_counter() - t, 3),
                "sqlite_bytes": os.path.getsize(args.out),
                "peak_rss_mb": _rss_mb(),
            }
        )
    )


def _open(path: str, mode: str) -> Any:
    from darwin_memo.ledger import Ledger

    if mode == "open":
        return Ledger.open(path)
    return Ledger.load(path)


def _close(ledger: Any) -> None:
    close = getattr(ledger, "close", None)
    if close is not None:
        close()


def _ms(seconds: float) -> float:
    return round(seconds * 1000.0, 3)


# -- commands ------------------------------------------------------------------------


def cmd_build(args: argparse.Namespace) -> None:
    from darwin_memo import MemoryStore
    from darwin_memo.ledger import Ledger

    t = time.perf_counter()
    lessons = _read_lessons(args.lessons, args.limit)
    read_s = time.perf_counter() - t
    t = time.perf_counter()
    entries = _entries(lessons)
    store = MemoryStore()
    for e in entries:
        store.add(e)
    add_s = time.perf_counter() - t
    ledger = Ledger(store)
    t = time.perf_counter()
    ledger.save(args.out)
    save_s = time.perf_counter() - t
    out: dict[str, Any] = {
        "n": len(store),
        "read_s": round(read_s, 3),
        "add_s": round(add_s, 3),
        "save_json_s": round(save_s, 3),
        "json_bytes": os.path.getsize(args.out),
    }
    if args.sqlite:
        del ledger, store, entries, lessons
        from darwin_memo.transfer import copy_store

        t = time.perf_counter()
        copy_store(args.out, args.sqlite)
        out["migrate_s"] = round(time.perf_counter() - t, 3)
        out["sqlite_bytes"] = sum(
            os.path.getsize(args.sqlite + s)
            for s in ("", "-wal", "-shm")
            if os.path.exists(args.sqlite + s)
        )
    _emit(out)


def cmd_open(args: argparse.Namespace) -> None:
    """Open (or load) a store and answer one question: the first-decide cost."""
    t0 = time.perf_counter()
    import darwin_memo.ledger  # noqa: F401  (import cost is part of the figure)

    t1 = time.perf_counter()
    ledger = _open(args.store, args.mode)
    t2 = time.perf_counter()
    ticket = ledger.decide(args.query)
    t3 = time.perf_counter()
    _close(ledger)
    _emit(
        {
            "import_ms": _ms(t1 - t0),
            "open_ms": _ms(t2 - t1),
            "first_decide_ms": _ms(t3 - t2),
            "open_and_first_decide_ms": _ms(t3 - t1),
            "silent": not ticket.deciding_entry,
        }
    )


def _pct(values: list[float], p: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    i = min(len(s) - 1, max(0, round(p / 100.0 * (len(s) - 1))))
    return s[i]


def _decides(
    ledger: Any, queries: list[str], budget_s: float = 0.0, minimum: int = 5
) -> tuple[list[float], list[Any]]:
    """Decide each query in turn; with a budget, stop once it is spent (after ``minimum``).

    The budget counts from the end of the first decide, which is reported apart (it
    lists a store read from a JSON file: seconds at 1M, for both packages)."""
    times: list[float] = []
    tickets: list[Any] = []
    start = time.perf_counter()
    for q in queries:
        if len(times) == 1:
            start = time.perf_counter()
        if budget_s and len(times) >= minimum and time.perf_counter() - start > budget_s:
            break
        c = time.process_time()
        t = time.perf_counter()
        ticket = ledger.decide(q)
        times.append(time.perf_counter() - t)
        CPU.append(time.process_time() - c)
        tickets.append(ticket)
    return times, tickets


#: CPU time of each operation timed by ``_decides``/``_timed`` (read with ``_cpu_since``).
CPU: list[float] = []


def _cpu_since(mark: int) -> dict[str, Any]:
    ms = [x * 1000.0 for x in CPU[mark:]]
    return {"cpu_p50_ms": round(_pct(ms, 50) or 0.0, 3)} if ms else {}


def _summary(times: list[float]) -> dict[str, Any]:
    ms = [x * 1000.0 for x in times]
    if not ms:
        return {"n": 0}
    return {
        "n": len(ms),
        "p50_ms": round(_pct(ms, 50) or 0.0, 3),
        "p95_ms": round(_pct(ms, 95) or 0.0, 3),
        "max_ms": round(max(ms), 3),
        "mean_ms": round(sum(ms) / len(ms), 3),
    }


def settle_timed(ledger: Any, tickets: list[Any]) -> list[float]:
    """Settle each ticket with a delta from a fixed pseudo-random mix; the seconds each."""
    rng = random.Random(7)
    times = []
    for tk in tickets:
        delta = rng.choice([-3.0, -1.0, 0.5, 1.0, 2.0, 4.0])
        t = time.perf_counter()
        ledger.settle(tk.id, delta, "bench")
        times.append(time.perf_counter() - t)
    return times


def cmd_inproc(args: argparse.Namespace) -> None:
    with open(args.queries, encoding="utf-8") as fh:
        qs = json.load(fh)
    realistic = qs["realistic"][: args.realistic] if args.realistic else qs["realistic"]
    adversarial = qs["adversarial"][: args.adversarial] if args.adversarial else qs["adversarial"]
    out: dict[str, Any] = {}
    t = time.perf_counter()
    ledger = _open(args.store, args.mode)
    out["open_ms"] = _ms(time.perf_counter() - t)
    out["population"] = len(ledger.store)

    # Realistic queries; the first one also tells the first-decide cost of this process.
    times, tickets = _decides(ledger, realistic, args.budget_s)
    out["first_decide_ms"] = _ms(times[0]) if times else None
    out["decide"] = _summary(times[1:] if len(times) > 1 else times)
    out["decide"].update(_cpu_since(1))
    out["decide"]["answered"] = sum(1 for tk in tickets if tk.deciding_entry)
    out["deciders"] = [tk.deciding_entry for tk in tickets]
    # Retrieval alone (no ticket, no transaction): what ranking costs, apart from the
    # durable write a decide makes.
    r_times: list[float] = []
    start = time.perf_counter()
    for q in realistic[1 : len(times) + 1]:
        if len(r_times) >= 5 and time.perf_counter() - start > args.budget_s / 2:
            break
        t = time.perf_counter()
        ledger.store.retrieve(q, 3)
        r_times.append(time.perf_counter() - t)
    out["retrieve"] = _summary(r_times)
    adv_times, adv_tickets = _decides(ledger, adversarial)
    out["adversarial"] = _summary(adv_times)
    out["adversarial"]["each_ms"] = [_ms(x) for x in adv_times]
    out["adversarial"]["answered"] = sum(1 for tk in adv_tickets if tk.deciding_entry)
    out["adversarial_deciders"] = [tk.deciding_entry for tk in adv_tickets]

    # Settle what was decided (a fixed pseudo-random mix of gains and losses).
    open_tickets = [tk for tk in tickets + adv_tickets if tk.deciding_entry]
    settle_times = settle_timed(ledger, open_tickets[: args.settles])
    for tk in open_tickets[args.settles :]:
        ledger.settle(tk.id, 0.0, "bench (untimed)")
    out["settle"] = _summary(settle_times)

    # Ticks 1..4: upkeep, deaths, expiry, no consolidation (it runs every 5th tick).
    tick_times, tick_out = [], []
    for _ in range(4):
        t = time.perf_counter()
        res = ledger.tick()
        tick_times.append(time.perf_counter() - t)
        tick_out.append(res)
    out["tick"] = _summary(tick_times)
    out["tick"]["each_ms"] = [_ms(x) for x in tick_times]
    out["tick_results"] = tick_out
    if args.save:
        t = time.perf_counter()
        ledger.save(args.store)
        out["save_ms"] = _ms(time.perf_counter() - t)
    _close(ledger)
    _emit(out)


def cmd_tick(args: argparse.Namespace) -> None:
    """Open, then time one tick (the caller puts the store at tick 4: this is tick 5)."""
    ledger = _open(args.store, args.mode)
    before = len(ledger.store)
    tick_before = ledger.tick_count
    sys.stdout.write("START\n")
    sys.stdout.flush()
    t = time.perf_counter()
    res = ledger.tick()
    elapsed = time.perf_counter() - t
    if args.save:
        ledger.save(args.store)
    _close(ledger)
    _emit(
        {
            "tick_ms": _ms(elapsed),
            "tick_before": tick_before,
            "population_before": before,
            "result": res,
        }
    )


def cmd_embed(args: argparse.Namespace) -> None:
    from darwin_memo import EmbeddingRetriever, HashingEmbedder, MemoryStore
    from darwin_memo.ledger import Ledger

    with open(args.queries, encoding="utf-8") as fh:
        qs = json.load(fh)
    realistic = qs["realistic"][: args.realistic] if args.realistic else qs["realistic"]
    store = MemoryStore(retriever=EmbeddingRetriever(HashingEmbedder()))
    t = time.perf_counter()
    for e in _entries(_read_lessons(args.lessons, args.limit)):
        store.add(e)
    build_s = time.perf_counter() - t
    ledger = Ledger(store)
    # The first decide embeds every entry (vectors are cached on the retriever).
    t = time.perf_counter()
    first = ledger.decide(realistic[0])
    warm_s = time.perf_counter() - t
    times, tickets = _decides(ledger, realistic[1:], args.budget_s)
    out: dict[str, Any] = {
        "build_s": round(build_s, 3),
        "warmup_first_decide_s": round(warm_s, 3),
        "decide": {**_summary(times), **_cpu_since(0)},
        "deciders": [first.deciding_entry] + [tk.deciding_entry for tk in tickets],
    }
    out["decide"]["answered"] = sum(1 for d in out["deciders"] if d)
    _emit(out)


def main() -> None:
    p = argparse.ArgumentParser(prog="_driver.py")
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("lessons")
    b.add_argument("out")
    b.add_argument("--limit", type=int, required=True)
    b.add_argument("--sqlite")
    bs = sub.add_parser("build-sqlite")
    bs.add_argument("lessons")
    bs.add_argument("out")
    bs.add_argument("--limit", type=int, required=True)
    o = sub.add_parser("open")
    o.add_argument("store")
    o.add_argument("--mode", choices=["open", "load"], required=True)
    o.add_argument("--query", required=True)
    i = sub.add_parser("inproc")
    i.add_argument("store")
    i.add_argument("--mode", choices=["open", "load"], required=True)
    i.add_argument("--queries", required=True)
    i.add_argument("--realistic", type=int, default=0)
    i.add_argument("--settles", type=int, default=50)
    i.add_argument("--save", action="store_true")
    i.add_argument("--budget-s", type=float, default=0.0)
    i.add_argument("--adversarial", type=int, default=0, help="only the first N")
    t = sub.add_parser("tick")
    t.add_argument("store")
    t.add_argument("--mode", choices=["open", "load"], required=True)
    t.add_argument("--save", action="store_true")
    e = sub.add_parser("embed")
    e.add_argument("lessons")
    e.add_argument("--limit", type=int, required=True)
    e.add_argument("--queries", required=True)
    e.add_argument("--realistic", type=int, default=0)
    e.add_argument("--budget-s", type=float, default=0.0)
    args = p.parse_args()
    {
        "build": cmd_build,
        "build-sqlite": cmd_build_sqlite,
        "open": cmd_open,
        "inproc": cmd_inproc,
        "tick": cmd_tick,
        "embed": cmd_embed,
    }[args.cmd](args)


if __name__ == "__main__":
    main()
