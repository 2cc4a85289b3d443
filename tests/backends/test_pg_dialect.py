"""PostgreSQL gets PostgreSQL's SQL: no SQLite-only syntax reaches the server.

The SQL stores write each statement once (``backends.dialect``); ``PgConnection``
changes only its placeholders. These tests hold both: the server's own statement log
over a workload that runs every kind of write and read (add, decide, settle, tick with
consolidation, organic recalls, the dashboard's pages and search, a copy into the
store), and the placeholder conversion on its own. Each fragment of each dialect is
also run on its own database.
"""

from __future__ import annotations

import re
import sqlite3
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from conftest import pg_url
from darwin_memo.backends.dialect import POSTGRES, SQLITE, Dialect
from darwin_memo.backends.postgres import PgConnection, parse_url, qmark_to_format
from darwin_memo.ledger import Ledger
from darwin_memo.organic import OrganicMemory
from darwin_memo.transfer import copy_store

LESSONS = [
    ("How do I restart worker {}?", "Drain it first, then restart worker {}."),
    ("Are cache files under cache/{} safe to delete?", "Yes, cache/{} is rebuilt on demand."),
    ("Who owns the payroll database {}?", "The finance team owns payroll database {}."),
]

#: A server log line that starts a logged statement: ``statement: ...`` (simple
#: protocol) or ``execute <name>: ...`` (extended protocol, with parameters).
_LOGGED = re.compile(r"LOG:\s+(?:statement|execute [^:]*):\s(.*)$")


def scalar_min_max(sql: str) -> list[str]:
    """The ``MAX(...)``/``MIN(...)`` calls in ``sql`` with more than one argument
    (SQLite's row-wise form; PostgreSQL's are aggregates of one)."""
    found = []
    for match in re.finditer(r"\b(MAX|MIN)\s*\(", sql, re.IGNORECASE):
        depth, start = 1, match.end()
        i = start
        commas = 0
        while i < len(sql) and depth:
            ch = sql[i]
            if ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
            elif ch == "," and depth == 1:
                commas += 1
            i += 1
        if commas:
            found.append(sql[match.start() : i])
    return found


def sqlite_only(sql: str) -> list[str]:
    """What in ``sql`` is SQLite's own syntax (empty: nothing)."""
    problems = re.findall(r"\bINSERT\s+OR\s+\w+|\+\s*alive\b", sql, re.IGNORECASE)
    return problems + scalar_min_max(sql)


def test_the_check_itself_finds_sqlite_only_syntax() -> None:
    assert sqlite_only("INSERT OR REPLACE INTO meta (key, value) VALUES ($1, $2)")
    assert sqlite_only("insert or ignore into settled (entry_rowid) values ($1)")
    assert sqlite_only("SELECT id FROM entries WHERE rowid IN ($1) AND +alive = 1")
    assert sqlite_only("UPDATE t SET w = MIN(1.0, t.w + excluded.w)")
    assert sqlite_only("SELECT MAX(COALESCE(a, 0), b) FROM t")
    assert not sqlite_only("SELECT MAX(version) FROM schema_migrations")
    assert not sqlite_only("SELECT COALESCE(MAX(id), 0), MIN(anchor) FROM tokens")
    assert not sqlite_only("UPDATE t SET w = GREATEST(t.w, excluded.w) WHERE alive = 1")


# -- the placeholders: the one change PgConnection makes --------------------------------


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT 1", "SELECT 1"),
        ("SELECT id FROM entries WHERE id = ?", "SELECT id FROM entries WHERE id = %s"),
        ("VALUES (?, ?, ?)", "VALUES (%s, %s, %s)"),
        ("SELECT ? || '100%'", "SELECT %s || '100%%'"),
        ("SELECT 5 % ?", "SELECT 5 %% %s"),
        ("SELECT '?' , ?", "SELECT '?' , %s"),  # a ? inside a literal is text
        ("SELECT 'it''s ?', \"odd?col\" FROM t WHERE x = ?", None),
        (
            "INSERT INTO meta (key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            "INSERT INTO meta (key, value) VALUES (%s, %s) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        ),
    ],
)
def test_pg_connection_changes_only_placeholders(sql: str, expected: str | None) -> None:
    out = qmark_to_format(sql)
    if expected is not None:
        assert out == expected
    else:
        assert out == "SELECT 'it''s ?', \"odd?col\" FROM t WHERE x = %s"
    # Undoing the two changes gives the statement back, character for character.
    assert out.replace("%%", "\0").replace("%s", "?").replace("\0", "%") == sql


def _fragments_work(d: Dialect, run: Any) -> None:
    """Each fragment of ``d``, run on its database through ``run(sql, params)``."""
    assert run(f"SELECT {d.greatest('1.5', '?', '0.5')}", (2.5,)) == [(2.5,)]
    assert run(f"SELECT {d.least('1.0', '?')}", (0.25,)) == [(0.25,)]
    assert run(f"SELECT x FROM t WHERE {d.unindexed('x')} = 1", ()) == [(1,)]
    assert run(f"SELECT {d.json_number('uses', 0)} FROM t ORDER BY x", ()) == [(3,), (0,)]
    assert run(f"SELECT x FROM t WHERE {d.contains('name')}", ("bc",)) == [(1,)]
    assert run(f"SELECT name FROM t ORDER BY name{d.collate_c}", ()) == [("B",), ("aBc",)]


def test_sqlite_fragments_run_on_sqlite() -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (x INTEGER, name TEXT, data TEXT)")
    conn.execute("""INSERT INTO t VALUES (1, 'aBc', '{"uses": 3}'), (2, 'B', '{}')""")
    _fragments_work(SQLITE, lambda sql, params: conn.execute(sql, params).fetchall())
    cur = conn.execute(f"INSERT INTO t (x) VALUES (7){SQLITE.returning_rowid()}")
    assert SQLITE.inserted_rowid(cur) == 3


@pytest.mark.postgres
def test_postgres_fragments_run_on_postgres(pg_cluster: Any) -> None:
    conninfo, schema, display = parse_url(pg_url(pg_cluster))
    conn = PgConnection(conninfo, schema, display)
    try:
        conn.execute(f"CREATE SCHEMA {schema}")
        conn.execute(
            "CREATE TABLE t (rowid BIGSERIAL PRIMARY KEY, x INTEGER, name TEXT, data TEXT)"
        )
        conn.execute(
            """INSERT INTO t (x, name, data) VALUES (1, 'aBc', '{"uses": 3}'), (2, 'B', '{}')"""
        )
        _fragments_work(POSTGRES, lambda sql, params: conn.execute(sql, params).fetchall())
        cur = conn.execute(f"INSERT INTO t (x) VALUES (?){POSTGRES.returning_rowid()}", (7,))
        assert POSTGRES.inserted_rowid(cur) == 3
    finally:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        conn.close()


def test_url_parameters_reach_libpq_as_written() -> None:
    """A space in a parameter's value is %20 to libpq, which reads no + as a space."""
    conninfo = parse_url("postgresql://h/db?store=x&options=-c%20log_statement%3Dall")[0]
    assert conninfo == "postgresql://h/db?options=-c%20log_statement%3Dall"


# -- the workload, as the server logs it -------------------------------------------------


def _logged_statements(text: str) -> list[str]:
    """The statements a server log's text records (continuation lines joined)."""
    statements: list[str] = []
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("\t") and current is not None:
            current.append(line.strip())
            continue
        if current is not None:
            statements.append(" ".join(current))
            current = None
        found = _LOGGED.search(line)
        if found:
            current = [found.group(1)]
    if current is not None:
        statements.append(" ".join(current))
    return statements


def _workload(url: str, source: Path) -> None:
    """Every kind of statement the stores run: a copy into the store, writes of each
    kind, the organic layer, consolidation, and the dashboard's pages and search."""
    with Ledger.open(source) as ledger:
        for i in range(3):
            for q, a in LESSONS:
                ledger.add(q.format(i), a.format(i))
    copy_store(source, url)  # migrate: the bulk copy
    with Ledger.open(url) as ledger:
        ledger.config.consolidate_every = 1
        for q, a in LESSONS:
            ledger.add(q.format("x"), a.format("x"))  # near-copies: a merge at the tick
        pinned = ledger.store.alive()[0].id
        ledger.pin(pinned)
        for i in range(6):
            ticket = ledger.decide(LESSONS[i % 3][0].format(i % 3))
            if ticket.deciding_entry:
                ledger.settle(ticket.id, 1.0 if i % 2 else -0.5, "test")
            ledger.tick()
        ledger.unpin(pinned)
        om = OrganicMemory.open(ledger)
        ids = [e.id for e in ledger.store.alive()]
        om.recall(ids[0], k=3)
        om.recall(ids[0], k=3)
        ledger.tick()  # decays the organic rows
        store = ledger.store
        for sort in ("balance", "ticks_to_starvation", "uses", "question", "kind", "id"):
            store.page_entries(sort=sort, order="asc", limit=5)
        store.page_entries(search="worker restart", limit=5)
        store.page_entries(search="rebuilt on", limit=5)
        store.page_entries(flag="probation", limit=5)
        store.page_graveyard(search="worker", limit=5)
        store.page_graveyard()
        assert ledger.verify() == []
    with Ledger.open(url) as ledger:  # a fresh handle reads single rows
        assert ledger.store.get(ids[1]) is not None
        assert ledger.store.get_dead(ids[1]) is None


@pytest.mark.postgres
def test_no_sqlite_only_sql_reaches_postgres(pg_cluster: Any, tmp_path: Path) -> None:
    """The server logs every statement of this store's connections (``log_statement``,
    set per connection through the URL); none is SQLite's own syntax."""
    url = pg_url(pg_cluster) + "&options=" + quote("-c log_statement=all")
    log = Path(pg_cluster.root) / "log"
    start = log.stat().st_size
    _workload(url, tmp_path / "source.json")
    time.sleep(0.2)  # the server writes its log as it goes; let the last lines land
    with log.open("rb") as fh:
        fh.seek(start)
        statements = _logged_statements(fh.read().decode("utf-8", "replace"))
    joined = "\n".join(statements)
    # The log holds the workload: each dialect-dependent path ran.
    for expected in (
        "RETURNING rowid",  # write_entry's new row
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",  # meta
        "ON CONFLICT (member) DO UPDATE",  # lineage: a merge happened
        "GREATEST(organic_state.activation",  # an organic recall
        'COLLATE "C"',  # a page sorted by id
        "INSERT INTO entries (rowid,",  # the copy's bulk insert
    ):
        assert expected in joined, f"the workload never ran {expected!r}"
    bad = {s: sqlite_only(s) for s in statements if sqlite_only(s)}
    assert bad == {}
