"""The PostgreSQL backend: URLs and secrets, named stores, migrations, copying,
concurrency from many processes, and a server that goes away and comes back.

The backend-neutral semantics run in ``test_ledger.py`` (parametrized over
``postgres``); these tests start the same throwaway cluster (``pg_cluster``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import new_store, pg_url
from darwin_memo import MemoryEntry, StoreError, StoreFormatError
from darwin_memo.backends import backend_kind
from darwin_memo.backends.postgres import parse_url
from darwin_memo.errors import StoreLockedError, StoreNotFound
from darwin_memo.ledger import Ledger
from darwin_memo.transfer import copy_store

pytestmark = pytest.mark.postgres

CACHE_Q = "Are cache chunk files safe to delete?"
CACHE_A = "Cache chunk files under cache/ are disposable and safe to delete."


def test_urls_pick_postgres_and_never_show_the_password() -> None:
    url = "postgresql://ann:s3cret@db.example:5433/team?store=lessons&sslmode=require"
    assert backend_kind(url) == "postgres"
    assert backend_kind("postgres://h/db") == "postgres"
    conninfo, store, display = parse_url(url)
    assert store == "lessons"
    assert "store=" not in conninfo and "sslmode=require" in conninfo and "s3cret" in conninfo
    assert display == "postgresql://ann@db.example:5433/team?store=lessons&sslmode=require"
    _, store, display = parse_url("postgresql://h/db?password=s3cret")
    assert store == "darwin_memo" and "s3cret" not in display
    for bad in ("Lessons", "pg_x", "public", "a-b", "1a", "x" * 64):
        with pytest.raises(StoreError, match="store name"):
            parse_url(f"postgresql://h/db?store={bad}")


def test_unreachable_server_is_one_redacted_line() -> None:
    with pytest.raises(StoreError) as info:
        Ledger.open("postgresql://ann:s3cret@127.0.0.1:1/db?store=x&connect_timeout=2")
    message = str(info.value)
    assert "s3cret" not in message and "\n" not in message
    assert message.startswith("postgresql://ann@127.0.0.1:1/db")
    assert "cannot connect" in message
    with pytest.raises(StoreError) as info:  # libpq echoes bad parameters, never the password
        Ledger.open("postgresql://ann:s3cret@127.0.0.1:1/db?bogus=s3cret&password=s3cret")
    assert "s3cret" not in str(info.value)


def test_named_stores_share_a_database_not_rows(pg_cluster: Any) -> None:
    a, b = pg_url(pg_cluster), pg_url(pg_cluster)
    with Ledger.open(a) as first, Ledger.open(b) as second:
        first.add(CACHE_Q, CACHE_A)
        assert len(first.store) == 1 and len(second.store) == 0
        assert second.decide(CACHE_Q).provenance == []
    with pytest.raises(StoreNotFound):
        Ledger.open(pg_url(pg_cluster), create=False)


def test_migrations_are_recorded_per_store_and_newer_refused(pg_cluster: Any) -> None:
    import psycopg

    url = pg_url(pg_cluster)
    Ledger.open(url).close()
    schema = parse_url(url)[1]
    dsn = pg_cluster.url("x").split("?")[0]
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(f"SELECT version, name FROM {schema}.schema_migrations").fetchall()
        assert [name for _, name in rows] == [
            "m001_initial",
            "m002_compact_rows",
            "m003_energy_sums",
            "m004_lesson_rows_as_lists",
            "m005_readable_rows",
            "m006_organic",
        ]
        assert [version for version, _ in rows] == [1, 2, 3, 4, 5, 6]
        conn.execute(f"INSERT INTO {schema}.schema_migrations VALUES (999, 'm999', 'later')")
    with pytest.raises(StoreFormatError, match="schema version 999"):
        Ledger.open(url)


def test_lexical_retrieval_ranks_as_the_other_backends(pg_cluster: Any) -> None:
    texts = [
        ("cache chunk files", "delete cache chunk files freely"),
        ("log files rotation", "old log files are rotated weekly"),
        ("cache warmup", "warm the cache before load tests"),
        ("chunk size", "chunk files are 4 MiB each"),
        ("cafeteria", "the menu rotates every two weeks"),
    ]
    stores = [new_store(kind) for kind in ("memory", "sqlite", "postgres")]
    for store in stores:
        for i, (q, a) in enumerate(texts):
            store.add(MemoryEntry(q, a, id=f"e{i:02d}", energy=1.0 + i / 10, recorded_ts="t"))
    for query in ("cache chunk files", "log files", "chunk", "zebra"):
        results = [[(e.id, round(s, 9)) for e, s in st.retrieve(query, k=3)] for st in stores]
        assert results[0] == results[1] == results[2], query
    stores[2].backend.close()


def test_a_held_store_lock_times_out_as_store_locked(pg_cluster: Any) -> None:
    import psycopg

    url = pg_url(pg_cluster)
    ledger = Ledger.open(url, lock_timeout=0.5)
    schema = parse_url(url)[1]
    with psycopg.connect(pg_cluster.url("x").split("?")[0]) as other:
        other.execute(f"SELECT pg_advisory_xact_lock(hashtextextended('darwin-memo:{schema}', 0))")
        with pytest.raises(StoreLockedError, match="locked"):
            ledger.add(CACHE_Q, CACHE_A)
    ledger.add(CACHE_Q, CACHE_A)  # the lock went with the other transaction
    assert ledger.verify() == []
    ledger.close()


@pytest.mark.parametrize("via", ["a.db", "a.json"])
def test_migrate_to_and_from_postgres_is_lossless(
    pg_cluster: Any, tmp_path: Path, via: str
) -> None:
    src = tmp_path / via
    ledger = Ledger.open(src)
    keep = ledger.add(CACHE_Q, CACHE_A)
    gone = ledger.add("trivia?", "The cafeteria menu rotates every two weeks.")
    ledger.forget(gone.id)
    pending = ledger.decide(CACHE_Q)
    ledger.tick()
    ledger.close()
    url = pg_url(pg_cluster)
    summary = copy_store(src, url)
    assert summary["format"] == "postgres"
    back = tmp_path / "back.json"
    copy_store(url, back)
    with pytest.raises(StoreError, match="already exists"):
        copy_store(src, url)
    copy_store(src, url, overwrite=True)  # --force: drop and refill
    other = pg_url(pg_cluster)
    copy_store(url, other)  # between two stores of one database
    copies = (url, back, other)
    for copy in (Ledger.open(c, create=False) for c in copies):
        original = Ledger.open(src)
        assert copy.verify() == []
        assert [t.id for t in copy.pending()] == [pending.id]
        assert copy.tick_count == 1
        assert copy.history(keep.id) == original.history(keep.id)
        assert len(list(copy.events())) == len(list(original.events()))
        assert copy.to_payload()["entries"] == original.to_payload()["entries"]
        assert copy.to_payload()["graveyard"] == original.to_payload()["graveyard"]
        original.close()
        copy.close()
    with Ledger.open(url) as ledger:  # the copy keeps working: new rows get fresh ids
        ledger.add("one more question?", "and its answer.")
        assert ledger.decide("one more question").provenance and ledger.verify() == []
        # The copy left the planner its statistics (a table never analyzed: -1 rows).
        (tuples,) = ledger.backend.conn.execute(  # type: ignore[union-attr]
            "SELECT reltuples FROM pg_class WHERE oid = to_regclass('entries')"
        ).fetchone()
        assert tuples >= 1


WORKER = """
import json, sys
from darwin_memo.ledger import Ledger
url, me, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
acked = []
with Ledger.open(url) as ledger:
    for i in range(rounds):
        q = f"what does worker {me} know about topic {i}?"
        ledger.add(q, f"worker {me} topic {i} answer.")
        ticket = ledger.decide(q)
        if ticket.provenance and ledger.settle(ticket.id, 1.0, f"{me}/{i}"):
            acked.append(ticket.id)
        if i % 5 == 4:
            ledger.tick()
print(json.dumps(acked))
"""


def test_concurrent_processes_lose_no_settlement(pg_cluster: Any) -> None:
    url = pg_url(pg_cluster)  # not created yet: the workers race to create it
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, url, f"w{n}", "10"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(6)
    ]
    acked: list[str] = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        acked += json.loads(out)
    assert len(acked) == len(set(acked)) == 60
    with Ledger.open(url) as ledger:
        settled = [e["ticket"] for e in ledger.events() if e["event"] == "settle"]
        assert sorted(settled) == sorted(acked)  # each exactly once
        assert sum(1 for e in ledger.events() if e["event"] == "tick") == 12
        assert ledger.tick_count == 12
        assert ledger.pending() == []
        assert ledger.verify() == []


def test_server_restart_fails_one_call_then_recovers(pg_cluster: Any) -> None:
    url = pg_url(pg_cluster)
    ledger = Ledger.open(url)
    entry = ledger.add(CACHE_Q, CACHE_A)
    ticket = ledger.decide(CACHE_Q)
    assert ledger.settle(ticket.id, 2.0)  # acknowledged before the server goes
    pg_cluster.stop()
    try:
        with pytest.raises(StoreError) as info:
            ledger.decide(CACHE_Q)
        assert "\n" not in str(info.value) and "PostgreSQL" in str(info.value)
        with pytest.raises(StoreError):
            ledger.stats()
    finally:
        pg_cluster.start()
    again = ledger.decide(CACHE_Q)  # the next call connects again
    assert again.deciding_entry == entry.id
    assert not ledger.settle(ticket.id, 2.0)  # the settlement survived: not applied twice
    assert ledger.settle(again.id, 1.0)
    assert ledger.verify() == []
    ledger.close()
    with Ledger.open(url) as fresh:
        settled = [e["ticket"] for e in fresh.events() if e["event"] == "settle"]
        assert settled == [ticket.id, again.id]
        assert fresh.verify() == []


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "darwin_memo", *args], capture_output=True, text=True, timeout=120
    )


def test_cli_takes_a_url_wherever_it_takes_a_path(pg_cluster: Any, tmp_path: Path) -> None:
    url = pg_url(pg_cluster)
    assert _cli("ledger", url, "add", CACHE_Q, CACHE_A).returncode == 0
    decided = _cli("ledger", url, "decide", "Is it safe to delete cache chunk files?")
    assert decided.returncode == 0, decided.stderr
    ticket = json.loads(decided.stdout)["ticket_id"]
    assert _cli("ledger", url, "settle", ticket, "2").returncode == 0
    other = pg_url(pg_cluster)
    adopted = _cli("import", url, other)
    assert adopted.returncode == 0, adopted.stderr
    assert json.loads(adopted.stdout)["imported"] == 1
    moved = _cli("migrate", url, str(tmp_path / "copy.db"))
    assert moved.returncode == 0, moved.stderr
    assert json.loads(moved.stdout)["verify"] == "ok"
    failed = _cli("ledger", "postgresql://ann:s3cret@127.0.0.1:1/db?store=x", "stats")
    assert failed.returncode != 0
    assert "s3cret" not in failed.stderr + failed.stdout
    error = json.loads(failed.stdout)["error"]  # the ledger CLI reports errors as JSON
    assert "cannot connect" in error and "ann@127.0.0.1:1/db" in error


def test_cli_reports_a_lost_server_as_store_unavailable(pg_cluster: Any) -> None:
    url = pg_url(pg_cluster)
    assert _cli("ledger", url, "add", CACHE_Q, CACHE_A).returncode == 0
    pg_cluster.stop()
    try:
        for op in (["stats"], ["decide", CACHE_Q], ["tick"]):
            failed = _cli("ledger", url, *op)
            assert failed.returncode == 1, (op, failed.stdout, failed.stderr)
            assert "Traceback" not in failed.stdout + failed.stderr
            lines = failed.stdout.splitlines()
            assert len(lines) == 1, failed.stdout
            answer = json.loads(lines[0])
            assert answer["code"] == "store_unavailable", answer
            assert "cannot connect to PostgreSQL" in answer["error"]
    finally:
        pg_cluster.start()
    decided = _cli("ledger", url, "decide", CACHE_Q)  # the next call, server back: works
    assert decided.returncode == 0, decided.stdout
    ticket = json.loads(decided.stdout)["ticket_id"]
    settled = _cli("ledger", url, "settle", ticket, "1")
    assert json.loads(settled.stdout) == {"settled": True}
    verified = _cli("ledger", url, "verify")
    assert verified.returncode == 0 and json.loads(verified.stdout)["ok"] is True
    # Nobody listening at all: the same code. A server that answers "no": not unavailable.
    gone = _cli(
        "ledger", "postgresql://ann:s3cret@127.0.0.1:1/db?store=x&connect_timeout=2", "stats"
    )
    assert json.loads(gone.stdout)["code"] == "store_unavailable"
    assert "s3cret" not in gone.stdout + gone.stderr
    no_db = url.replace("/postgres?", "/no_such_database?")
    refused = json.loads(_cli("ledger", no_db, "stats").stdout)
    assert refused["code"] == "bad_input" and "does not exist" in refused["error"]


def test_a_lost_server_mid_operation_is_store_unavailable(pg_cluster: Any) -> None:
    from darwin_memo.errors import StoreUnavailableError

    url = pg_url(pg_cluster)
    with Ledger.open(url) as ledger:
        ledger.add(CACHE_Q, CACHE_A)
        pg_cluster.stop()  # the ledger's connection is open: it breaks under the next call
        try:
            with pytest.raises(StoreUnavailableError, match="lost the PostgreSQL server"):
                ledger.decide(CACHE_Q)
        finally:
            pg_cluster.start()
        assert ledger.decide(CACHE_Q).provenance


def test_darwin_memo_path_may_be_a_url(pg_cluster: Any, tmp_path: Path) -> None:
    """``$DARWIN_MEMO_PATH`` takes a URL as ``--memory`` does (the MCP server's default)."""
    pytest.importorskip("mcp", reason="the MCP server needs the mcp extra (in .[dev])")
    import os

    import anyio
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    from darwin_memo.mcp.server import default_memory_path

    url = pg_url(pg_cluster)
    os.environ["DARWIN_MEMO_PATH"] = url
    try:
        assert default_memory_path() == url  # kept as written: Path() would fold its //
    finally:
        del os.environ["DARWIN_MEMO_PATH"]
    env = {
        k: v for k, v in os.environ.items() if k not in ("DARWIN_MEMO_DEBUG", "DARWIN_MEMO_HOME")
    }
    env["DARWIN_MEMO_PATH"] = url
    env["HOME"] = str(tmp_path)  # a fallback store would land here, not in the database

    async def run() -> Any:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "darwin_memo.mcp_server"], env=env
        )
        with (tmp_path / "server.log").open("w+", encoding="utf-8") as errlog:
            async with Client(
                stdio_client(params, errlog=errlog), read_timeout_seconds=120
            ) as client:
                await client.call_tool("memory_add", {"question": CACHE_Q, "answer": CACHE_A})
                return await client.call_tool("memory_query", {"query": CACHE_Q})

    result = anyio.run(run)
    assert not result.is_error and result.structured_content["ticket_id"]
    with Ledger.open(url, create=False) as ledger:
        assert len(ledger.store) == 1 and [t.id for t in ledger.pending()] == [
            result.structured_content["ticket_id"]
        ]
    assert not (tmp_path / ".darwin-memo").exists()


def test_a_missing_store_is_named_without_its_password(pg_cluster: Any) -> None:
    from darwin_memo.backends.postgres import shown

    url = pg_url(pg_cluster).replace(f"://{pg_cluster.user}@", f"://{pg_cluster.user}:s3cret@")
    for args in (["ledger", url, "stats"], ["top", url], ["why", url, "abc"], ["audit", url]):
        done = _cli(*args)
        assert "s3cret" not in done.stdout + done.stderr, args
        assert shown(url) in done.stdout + done.stderr, args
    assert "s3cret" not in shown("postgresql://ann:s3cret@h/db?store=Bad-Name")


def _sums_sound(store: Any) -> None:
    from darwin_memo.backends.sums import read_sums, scan_sums

    assert store._sums_kept and store.sums_problems() == []
    assert read_sums(store.conn) == scan_sums(store.conn)
    rows = store.conn.execute("SELECT energy, anchor, pinned FROM entries WHERE alive = 1")
    total = sum(store._energy_now(float(e), int(a), bool(p)) for e, a, p in rows)
    assert abs(store.total_energy() - total) < 1e-9


def test_running_sums_on_postgres_stay_those_of_the_rows(pg_cluster: Any) -> None:
    """Writes in ledger transactions (settles, pins, ticks with merges), a store used
    without a ledger, and a second host: the sums stay a scan's, and the totals match."""
    url = pg_url(pg_cluster)
    with Ledger.open(url) as a, Ledger.open(url) as b:
        a.config.consolidate_every = b.config.consolidate_every = 2
        for i in range(8):
            (a if i % 2 else b).add(f"How do I restart worker {i % 3}?", f"Drain it first ({i}).")
        a.pin(a.store.alive()[0].id)
        for i in range(8):
            ledger = a if i % 2 else b
            ticket = ledger.decide(f"How do I restart worker {i % 3}?")
            if ticket.deciding_entry:
                ledger.settle(ticket.id, 0.6 * i - 2.0, "test")
            (b if i % 2 else a).tick()
        _sums_sound(a.store)
        _sums_sound(b.store)
        assert a.stats() == b.stats() and a.verify() == []
    store = new_store("postgres")
    store.add(MemoryEntry(CACHE_Q, CACHE_A, energy=2.5))
    store.add(MemoryEntry("How do I rotate keys?", "Run rotate.", energy=1.25))
    store.charge_upkeep()
    store.bury(store.alive()[0].id)
    _sums_sound(store)


def test_a_postgres_store_from_before_its_schema_3_is_summed_when_opened(
    pg_cluster: Any,
) -> None:
    import psycopg

    url = pg_url(pg_cluster)
    with Ledger.open(url) as ledger:
        for i in range(5):
            ledger.add(f"How do I restart worker {i}?", f"Drain it first ({i}).")
        ledger.tick()
        stats = ledger.stats()
    schema = parse_url(url)[1]
    with psycopg.connect(pg_cluster.url("x").split("?")[0], autocommit=True) as conn:
        # The rows as before its schema 5: the text in ``data`` (a lesson: a list)
        conn.execute(
            f"UPDATE {schema}.entries SET data = (data::jsonb || jsonb_build_object("
            "'question', question, 'answer', answer, 'sources', sources::jsonb))::text"
        )
        conn.execute(
            f"UPDATE {schema}.entries SET data = json_build_array(question, answer, "
            f"sources::json, data::json->>'recorded_ts')::text WHERE rowid = "
            f"(SELECT MIN(rowid) FROM {schema}.entries)"
        )
        conn.execute(
            f"ALTER TABLE {schema}.entries DROP COLUMN question, DROP COLUMN answer, "
            "DROP COLUMN sources"
        )
        conn.execute(f"DROP TABLE {schema}.energy_sums")
        conn.execute(f"DROP TABLE {schema}.organic_links, {schema}.organic_state")  # (6)
        conn.execute(f"DELETE FROM {schema}.schema_migrations WHERE version >= 3")
    with Ledger.open(url) as ledger:
        assert ledger.stats() == stats
        rows = ledger.store.conn.execute(
            "SELECT question, answer, data FROM entries ORDER BY rowid"
        ).fetchall()
        assert rows[0][:2] == ("How do I restart worker 0?", "Drain it first (0).")
        assert all(q.startswith("How do I") and "question" not in d for q, _, d in rows)
        _sums_sound(ledger.store)
