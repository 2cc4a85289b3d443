"""A first PostgreSQL scale figure: open, decide, settle and tick, beside SQLite.

    .venv/bin/python bench/perf/pg_scale.py --sizes 10000 [--pg-url postgresql://...]

The same seeded lessons as ``scale.py`` (``lessons.py``) are built in memory,
saved as JSON and copied with ``copy_store`` (``darwin-memo migrate``) into an
SQLite file and into a fresh PostgreSQL store. Each backend then runs, in one
process with one ``Ledger.open`` handle: the open, ``--queries`` decides over
the realistic queries, a settle of every ticket, and three ticks (no
consolidation is due). Without ``--pg-url`` a throwaway cluster is started from
the machine's server programs (``tests/pgcluster.py``). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent.parent / "tests"))


def _ms(values: list[float]) -> dict[str, float]:
    values = sorted(values)
    p95 = values[min(len(values) - 1, int(0.95 * len(values)))]
    return {"p50_ms": round(1000 * statistics.median(values), 1), "p95_ms": round(1000 * p95, 1)}


def measure(store: str | Path, queries: list[str]) -> dict[str, Any]:
    from darwin_memo.ledger import Ledger

    t = time.perf_counter()
    ledger = Ledger.open(store, create=False)
    open_s = time.perf_counter() - t
    decides, tickets = [], []
    for q in queries:
        t = time.perf_counter()
        ticket = ledger.decide(q)
        decides.append(time.perf_counter() - t)
        if ticket.provenance:
            tickets.append(ticket.id)
    settles = []
    for tid in tickets:
        t = time.perf_counter()
        ledger.settle(tid, 1.0)
        settles.append(time.perf_counter() - t)
    ticks = []
    for _ in range(3):
        t = time.perf_counter()
        ledger.tick()
        ticks.append(time.perf_counter() - t)
    ledger.close()
    return {
        "open_ms": round(1000 * open_s, 1),
        "decide": _ms(decides),
        "settle": _ms(settles) if settles else None,
        "tick_ms": [round(1000 * s, 1) for s in ticks],
    }


def run_size(n: int, pg_base: str, workdir: Path, count: int) -> dict[str, Any]:
    import lessons as L

    from darwin_memo import MemoryEntry, MemoryStore
    from darwin_memo.ledger import Ledger
    from darwin_memo.transfer import copy_store

    store = MemoryStore()
    for eid, q, a, source in L.lessons(1, n):
        store.add(MemoryEntry(q, a, sources=[source], id=eid))
    src = workdir / f"s{n}.json"
    Ledger(store).save(src)
    t = time.perf_counter()
    copy_store(src, workdir / f"s{n}.db")
    to_sqlite = time.perf_counter() - t
    url = f"{pg_base}?store=scale_{n}_{int(time.time())}"
    t = time.perf_counter()
    copy_store(src, url)
    to_pg = time.perf_counter() - t
    qs = L.queries(1, n, count)["realistic"][:count]
    return {
        "n": n,
        "migrate_s": {"sqlite": round(to_sqlite, 1), "postgres": round(to_pg, 1)},
        "sqlite": measure(workdir / f"s{n}.db", qs),
        "postgres": measure(url, qs),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--sizes", default="10000")
    p.add_argument("--queries", type=int, default=50)
    p.add_argument("--pg-url", default="", help="postgresql://user@host:port/db (no store=)")
    ns = p.parse_args()
    cluster = None
    base = ns.pg_url
    if not base:
        from pgcluster import PgCluster, find_bindir

        bindir = find_bindir()
        if bindir is None:
            raise SystemExit("no PostgreSQL server programs found; pass --pg-url")
        cluster = PgCluster(bindir)
        cluster.init()
        cluster.start()
        base = cluster.url("x").split("?")[0]
    try:
        with tempfile.TemporaryDirectory(prefix="dm-pg-scale-") as d:
            results = [
                run_size(int(s), base, Path(d), ns.queries) for s in ns.sizes.split(",") if s
            ]
    finally:
        if cluster is not None:
            cluster.destroy()
    print(json.dumps({"benchmark": "pg_scale", "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
