"""PostgreSQL at scale: open, decide, settle and tick, beside SQLite.

    .venv/bin/python bench/perf/pg_scale.py --sizes 10000 [--pg-url postgresql://...]
    .venv/bin/python bench/perf/pg_scale.py --from-sqlite /path/s1m.db --queries-file q.json

Two ways to get the stores:

* ``--sizes N,...``: the same seeded lessons as ``scale.py`` (``lessons.py``) are
  built in memory, saved as JSON and copied with ``copy_store`` (``darwin-memo
  migrate``) into an SQLite file and into a fresh PostgreSQL store.
* ``--from-sqlite DB``: an existing SQLite store (e.g. the 1M-entry store that
  ``scale.py`` builds) is first copied with SQLite's backup API (the source is
  never written), then its tables are loaded into a fresh PostgreSQL store with
  ``COPY``, row for row (the two schemas are the same, column for column), and
  the sequences and planner statistics are set. This is ``migrate``'s result
  without building a million ``MemoryEntry`` objects first; ``--check-copy``
  also compares every table's row count and a digest of its rows.

Each backend then runs, in one process with one ``Ledger.open`` handle: the
open, ``--queries`` decides over the realistic queries, a settle of every
ticket, and three upkeep ticks (consolidation off: a store whose tick count makes
one due is measured like any other). The decides must pick the same deciding entries on both
backends (``same_decisions``). Without ``--pg-url`` a throwaway cluster is
started from the machine's server programs (``tests/pgcluster.py``) with
``--shared-buffers``. Every phase reports wall time, this process's CPU time,
the PostgreSQL server's CPU time (a throwaway cluster only) and the load
average, because the machines these run on are shared. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent.parent / "tests"))

#: The tables of a store, with the columns copied (``rowid`` explicit on both sides).
TABLES = {
    "meta": "key, value",
    "entries": "rowid, id, alive, energy, kind, damaged, data, version, anchor, pinned, "
    "death_tick, toks",
    "tickets": "id, open, born_tick, data, version",
    "notes": "seq, entry_id, data",
    "events": "seq, event, tick, ts, data",
    "tokens": "id, token, df",
    "postings": "token_id, entry_rowid",
    "lineage": "member, heir",
    "counters": "name, value",
}
SEQUENCES = (("entries", "rowid"), ("tokens", "id"), ("notes", "seq"), ("events", "seq"))

#: CPU seconds of the PostgreSQL server (postmaster plus its exited backends), if known.
_server_cpu: Callable[[], float | None] = lambda: None  # noqa: E731


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


@contextmanager
def phase(into: dict[str, Any], name: str) -> Iterator[None]:
    """Record wall time, CPU time (ours and the server's) and the load average."""
    t, c, s = time.perf_counter(), _cpu(), _server_cpu()
    load = os.getloadavg()[0]
    yield
    s1 = _server_cpu()
    into[name] = {
        "wall_s": round(time.perf_counter() - t, 2),
        "cpu_s": round(_cpu() - c, 2),
        "server_cpu_s": round(s1 - s, 2) if s is not None and s1 is not None else None,
        "load1_before_after": [round(load, 2), round(os.getloadavg()[0], 2)],
    }


def _ms(values: list[float]) -> dict[str, float]:
    values = sorted(values)
    p95 = values[min(len(values) - 1, int(0.95 * len(values)))]
    return {"p50_ms": round(1000 * statistics.median(values), 1), "p95_ms": round(1000 * p95, 1)}


def measure(store: str | Path, queries: list[str]) -> dict[str, Any]:
    from darwin_memo.economy.config import SurvivalConfig
    from darwin_memo.ledger import Ledger

    cost: dict[str, Any] = {}
    # Upkeep ticks only: a consolidating tick at 1M does not finish on either backend yet
    # (docs/performance.md), and a store's tick count decides when one is due.
    config = SurvivalConfig(consolidate_every=None)
    with phase(cost, "open"):
        t = time.perf_counter()
        ledger = Ledger.open(store, create=False, config=config)
        open_s = time.perf_counter() - t
    decides, tickets, deciding = [], [], []
    with phase(cost, "decides"):
        for q in queries:
            t = time.perf_counter()
            ticket = ledger.decide(q)
            decides.append(time.perf_counter() - t)
            deciding.append(ticket.deciding_entry)
            if ticket.provenance:
                tickets.append(ticket.id)
    settles = []
    with phase(cost, "settles"):
        for tid in tickets:
            t = time.perf_counter()
            ledger.settle(tid, 1.0)
            settles.append(time.perf_counter() - t)
    ticks = []
    with phase(cost, "ticks"):
        for _ in range(3):
            t = time.perf_counter()
            ledger.tick()
            ticks.append(time.perf_counter() - t)
    alive = len(ledger.store)
    ledger.close()
    per_op = {}
    for name, n in (("decides", len(decides)), ("settles", len(settles)), ("ticks", len(ticks))):
        spent = cost[name]["cpu_s"] + (cost[name]["server_cpu_s"] or 0.0)
        per_op[name] = round(1000 * spent / n, 1) if n else None
    return {
        "alive": alive,
        "open_ms": round(1000 * open_s, 1),
        "decide": _ms(decides),
        "speaking_decides": len(tickets),
        "settle": _ms(settles) if settles else None,
        "tick_ms": [round(1000 * s, 1) for s in ticks],
        "cost": cost,
        "cpu_ms_per_op_client_plus_server": per_op,
        "_deciding": deciding,
    }


def _compare(out: dict[str, Any]) -> None:
    a, b = out["sqlite"].pop("_deciding"), out["postgres"].pop("_deciding")
    out["same_decisions"] = a == b
    out["decisions_differing"] = sum(1 for x, y in zip(a, b, strict=True) if x != y)


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
    cost: dict[str, Any] = {}
    with phase(cost, "migrate_sqlite"):
        copy_store(src, workdir / f"s{n}.db")
    url = f"{pg_base}?store=scale_{n}_{int(time.time())}"
    with phase(cost, "migrate_postgres"):
        copy_store(src, url)
    qs = L.queries(1, n, count)["realistic"][:count]
    out = {
        "n": n,
        "migrate_s": {
            "sqlite": cost["migrate_sqlite"]["wall_s"],
            "postgres": cost["migrate_postgres"]["wall_s"],
        },
        "cost": cost,
        "sqlite": measure(workdir / f"s{n}.db", qs),
        "postgres": measure(url, qs),
    }
    _compare(out)
    return out


def _digest(rows: Any) -> tuple[int, str]:
    h = hashlib.sha256()
    n = 0
    for row in rows:
        h.update(repr(tuple(float(v) if isinstance(v, float) else v for v in row)).encode())
        n += 1
    return n, h.hexdigest()[:16]


def load_sqlite(db: Path, url: str, check: bool) -> dict[str, Any]:
    """Load an SQLite store's tables into a fresh PostgreSQL store with COPY."""
    from darwin_memo.backends.postgres import PostgresBackend

    backend = PostgresBackend(url, create=True)
    if not backend.is_empty():
        raise SystemExit(f"{backend.path} is not empty")
    raw = backend.pg.raw()
    src = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    rows: dict[str, int] = {}
    with raw.transaction():
        for table, columns in TABLES.items():
            raw.execute(f"DELETE FROM {table}")  # the fresh store's own meta rows
            with raw.cursor() as cur, cur.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                count = 0
                for row in src.execute(f"SELECT {columns} FROM {table}"):
                    copy.write_row(row)
                    count += 1
            rows[table] = count
        for table, column in SEQUENCES:
            raw.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', '{column}'), "
                f"GREATEST((SELECT MAX({column}) FROM {table}), 1))"
            )
    # The running sums (``energy_sums``) of the rows just copied, as the migration fills them.
    from darwin_memo.backends.sums import scan_sums

    backend.pg.execute("BEGIN")
    backend.pg.execute("DELETE FROM energy_sums")
    scan_sums(backend.pg).write(backend.pg)  # type: ignore[arg-type]
    backend.pg.execute("COMMIT")
    raw.execute("ANALYZE")
    out: dict[str, Any] = {"rows": rows}
    if check:
        raw.execute("BEGIN")  # a named (server-side) cursor lives in a transaction
        same = {}
        for table, columns in TABLES.items():
            order = columns.split(",")[0]
            if table == "postings":
                order = "token_id, entry_rowid"
            mine = _digest(src.execute(f"SELECT {columns} FROM {table} ORDER BY {order}"))
            with raw.cursor(name=f"dump_{table}") as cur:
                # PostgreSQL sorts text by its collation: compare as unordered multisets
                # by sorting both sides in Python for the text-keyed tables.
                cur.execute(f"SELECT {columns} FROM {table} ORDER BY {order}")
                theirs = _digest(cur)
            if mine != theirs and table in ("meta", "tickets", "lineage", "counters", "entries"):
                a = sorted(src.execute(f"SELECT {columns} FROM {table}"))
                b = sorted(raw.execute(f"SELECT {columns} FROM {table}").fetchall())
                mine, theirs = _digest(a), _digest(b)
            same[table] = mine == theirs
        raw.execute("COMMIT")
        out["tables_identical"] = same
    src.close()
    backend.close()
    return out


def run_from_sqlite(
    source: Path, pg_base: str, workdir: Path, queries: list[str], check: bool
) -> dict[str, Any]:
    cost: dict[str, Any] = {}
    db = workdir / "copy.db"
    with phase(cost, "sqlite_backup"):
        src = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
        dst = sqlite3.connect(db)
        src.backup(dst)
        dst.close()
        src.close()
    url = f"{pg_base}?store=scale_bulk_{int(time.time())}"
    with phase(cost, "load_postgres_copy"):
        loaded = load_sqlite(db, url, check)
    out = {
        "n": loaded["rows"]["entries"],
        "source": str(source),
        "loaded": loaded,
        "cost": cost,
        "sqlite": measure(db, queries),
        "postgres": measure(url, queries),
    }
    _compare(out)
    return out


def main() -> int:
    global _server_cpu
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--sizes", default="10000")
    p.add_argument("--queries", type=int, default=50)
    p.add_argument("--pg-url", default="", help="postgresql://user@host:port/db (no store=)")
    p.add_argument("--from-sqlite", type=Path, help="load this SQLite store instead of --sizes")
    p.add_argument("--queries-file", type=Path, help='JSON {"realistic": [...]} for --from-sqlite')
    p.add_argument("--check-copy", action="store_true", help="compare every table after COPY")
    p.add_argument("--shared-buffers", default="1GB", help="throwaway cluster's (1GB)")
    p.add_argument("--workdir", type=Path, help="where the SQLite copies go (a temp dir)")
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
        with (cluster.data / "postgresql.conf").open("a") as fh:
            fh.write(
                f"shared_buffers = {ns.shared_buffers}\nmax_wal_size = 8GB\n"
                "maintenance_work_mem = 512MB\n"
            )
        cluster.start()
        base = cluster.url("x").split("?")[0]
        pid = int((cluster.data / "postmaster.pid").read_text().split()[0])

        def server_cpu() -> float | None:
            """The postmaster's CPU, its exited children's, and its live backends'."""
            total = 0.0
            for proc in Path("/proc").iterdir():
                if not proc.name.isdigit():
                    continue
                try:
                    fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                if proc.name == str(pid):
                    total += sum(int(x) for x in fields[11:15])
                elif fields[1] == str(pid):
                    total += int(fields[11]) + int(fields[12])
            return total / os.sysconf("SC_CLK_TCK")

        _server_cpu = server_cpu
    machine = {"cpus": os.cpu_count(), "load_avg_at_start": [round(x, 2) for x in os.getloadavg()]}
    try:
        with tempfile.TemporaryDirectory(prefix="dm-pg-scale-", dir=ns.workdir) as d:
            if ns.from_sqlite:
                if ns.queries_file is None:
                    raise SystemExit("--from-sqlite needs --queries-file")
                qs = json.loads(ns.queries_file.read_text())["realistic"][: ns.queries]
                results = [run_from_sqlite(ns.from_sqlite, base, Path(d), qs, ns.check_copy)]
            else:
                results = [
                    run_size(int(s), base, Path(d), ns.queries) for s in ns.sizes.split(",") if s
                ]
    finally:
        if cluster is not None:
            cluster.destroy()
    machine["load_avg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps({"benchmark": "pg_scale", "machine": machine, "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
