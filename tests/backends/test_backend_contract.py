"""The storage seam, one contract for every backend.

The same tests run over the in-memory ledger, the published JSON file, SQLite and
PostgreSQL (the throwaway cluster of ``tests/pgcluster.py``): a backend hands the
ledger the state it read (``Loaded``) or what changed since (``Refreshed``), writes a
transaction's ``Changes`` all or nothing, and turns its driver's errors into the
``errors.py`` tree. The last test reads the backends' sources: none of them touches
a ledger's private names or assigns its attributes (``ARCHITECTURE.md``: the seam is
honest; a backend that needs something of the ledger needs a method of the interface).

The in-memory ledger has no backend: it joins the tests that hold for it (operations,
the published file round trip); the others are durable by nature.
"""

from __future__ import annotations

import ast
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import pg_url
from darwin_memo.backends import open_backend
from darwin_memo.backends.interface import Loaded, Refreshed, View
from darwin_memo.backends.jsonfile import store_lock
from darwin_memo.errors import StoreError, StoreFormatError, StoreLockedError
from darwin_memo.ledger import Ledger
from darwin_memo.records.ticket import Changes, Ticket
from darwin_memo.store import MemoryStore

CACHE_Q = "Are cache chunk files safe to delete?"
CACHE_A = "Cache chunk files under cache/ are disposable and safe to delete."
LOGS_Q = "Can the worker logs be rotated while it runs?"
LOGS_A = "Rotate the worker logs with copytruncate; the worker keeps its file open."

DURABLE = ["json", "sqlite", "postgres"]
ALL = ["memory", *DURABLE]
SRC = Path(__file__).resolve().parents[2] / "src" / "darwin_memo"


@pytest.fixture
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a store of the parametrized kind lives (a fresh one per test)."""
    kind = str(request.param)
    if kind == "postgres":
        return pg_url(request.getfixturevalue("pg_cluster"))
    if kind == "json":
        return str(tmp_path / "store.json")
    if kind == "sqlite":
        return str(tmp_path / "store.db")
    return str(tmp_path / "memory.json")  # the in-memory ledger's published file


def _kind(location: str) -> str:
    if location.startswith("postgresql://"):
        return "postgres"
    return "sqlite" if location.endswith(".db") else "json"


@pytest.fixture
def opener(location: str) -> Iterator[Callable[[], Ledger]]:
    """Opens a ledger on the store (the in-memory kind: reads its published file)."""
    opened: list[Ledger] = []

    def open_one() -> Ledger:
        if location.endswith("memory.json"):
            ledger = Ledger.load(location) if Path(location).exists() else Ledger(MemoryStore())
        else:
            ledger = Ledger.open(location, lock_timeout=0.5)
        opened.append(ledger)
        return ledger

    yield open_one
    for ledger in opened:
        ledger.close()


def _persist(ledger: Ledger, location: str) -> None:
    """The in-memory ledger writes only when told (published); the others did."""
    if ledger.backend is None:
        ledger.save(location)


def _ticket_ids(tickets: Any) -> set[str]:
    return {t.id for t in (tickets() if callable(tickets) else tickets)}


def _durable(kinds: list[str]) -> Any:
    return pytest.mark.parametrize("location", kinds, indirect=True)


# -- what every ledger does, whatever holds it --------------------------------------


@_durable(ALL)
def test_operations_survive_a_reopen(opener: Callable[[], Ledger], location: str) -> None:
    ledger = opener()
    kept = ledger.add(CACHE_Q, CACHE_A)
    ledger.add(LOGS_Q, LOGS_A)
    paid = ledger.decide(CACHE_Q)
    assert paid.deciding_entry == kept.id
    open_ticket = ledger.decide(LOGS_Q)
    assert ledger.settle(paid.id, 2.0, "ci run 7")
    ledger.tick()
    balance = ledger.store.get(kept.id).energy  # type: ignore[union-attr]
    _persist(ledger, location)

    again = opener()
    assert again.tick_count == 1
    assert {t.id for t in again.pending()} == {open_ticket.id}
    assert again.store.get(kept.id).energy == pytest.approx(balance)  # type: ignore[union-attr]
    assert len(again.store) == 2
    assert again.verify() == [] or again.backend is None


# -- load and refresh hand state to the ledger ---------------------------------------


@_durable(DURABLE)
def test_load_returns_the_stored_state(opener: Callable[[], Ledger], location: str) -> None:
    ledger = opener()
    entry = ledger.add(CACHE_Q, CACHE_A)
    ticket = ledger.decide(CACHE_Q)
    ledger.tick()
    backend = open_backend(location, create=False)
    try:
        picked: list[str | None] = []

        def pick(recorded: str | None) -> None:
            picked.append(recorded)

        loaded = backend.load(pick)
        assert isinstance(loaded, Loaded)
        assert picked == [None]  # asked once, with what the store recorded
        assert loaded.tick_count == 1
        assert _ticket_ids(loaded.tickets) == {ticket.id}
        assert loaded.store.get(entry.id).question == CACHE_Q
        assert len(loaded.store) == 1 and loaded.damaged == set()
        assert loaded.needs_snapshot is False  # our journal covers the store
    finally:
        backend.close()


@_durable(DURABLE)
def test_refresh_hands_over_what_another_writer_did(
    opener: Callable[[], Ledger], location: str
) -> None:
    ours, theirs = opener(), opener()
    ours.add(LOGS_Q, LOGS_A)
    backend = open_backend(location, create=False)  # a view of its own, handed out here
    try:
        view = View(retriever=backend.load(lambda _recorded: None).store.retriever)
        assert backend.refresh(view) is None  # nothing new: nothing read but a version
        entry = theirs.add(CACHE_Q, CACHE_A)
        ticket = theirs.decide(CACHE_Q)
        theirs.tick()
        seen = backend.refresh(view)
        assert isinstance(seen, (Loaded, Refreshed))
        assert seen.tick_count == 1
        if isinstance(seen, Refreshed):
            assert seen.tickets is not None and [i for i, _ in seen.tickets] == [ticket.id]
        assert backend.refresh(view) is None  # handed over once
    finally:
        backend.close()

    # Through the ledger: it applies what the backend found, and writes on top of it.
    assert ours.stats()["alive"] == 2 and ours.tick_count == 1
    assert [t.id for t in ours.pending()] == [ticket.id]
    assert ours.settle(ticket.id, -1.0, "broke the build")
    assert theirs.pending() == []
    assert entry.id in theirs.damaged


@_durable(DURABLE)
def test_a_view_not_read_yet_gets_no_ticket_delta(
    opener: Callable[[], Ledger], location: str
) -> None:
    ours, theirs = opener(), opener()
    backend = ours.backend
    assert backend is not None
    theirs.add(CACHE_Q, CACHE_A)
    theirs.decide(CACHE_Q)
    seen = backend.refresh(View(retriever=ours.store.retriever, tickets_read=False))
    if isinstance(seen, Refreshed):  # (JSON reads its file whole: a Loaded)
        assert seen.tickets is None
    stale = backend.refresh(View(retriever=ours.store.retriever, stale=True))
    assert isinstance(stale, Loaded)  # a stale view is read whole


# -- transactions are all or nothing --------------------------------------------------


@_durable(DURABLE)
def test_a_failed_operation_writes_nothing(opener: Callable[[], Ledger], location: str) -> None:
    ledger = opener()
    kept = ledger.add(CACHE_Q, CACHE_A)
    events = len(list(ledger.events()))
    with pytest.raises(RuntimeError, match="disk on fire"), ledger.operation() as record:
        ledger.add(LOGS_Q, LOGS_A)  # joins the operation
        ledger.decide(CACHE_Q)
        record("organic_note", entry=kept.id)
        raise RuntimeError("disk on fire")
    # The ledger's view is read again (at its next read): what the store holds, no more.
    ledger.refresh()
    assert len(ledger.store) == 1 and ledger.pending() == []
    assert len(list(ledger.events())) == events
    other = opener()
    assert len(other.store) == 1 and other.pending() == []
    written = ledger.add(LOGS_Q, LOGS_A)  # and it writes again
    other.refresh()
    assert written.id in other.store


@_durable(["sqlite", "postgres"])
def test_a_population_write_outside_an_operation_is_a_transaction_others_see(
    opener: Callable[[], Ledger], location: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A library caller's ``ledger.store.credit`` (or ``add``) outside an operation: one
    transaction with a version of its own. Before, each statement committed alone under
    the store's old version, so another handle holding the entry wrote its old balance
    back over the credit at its next operation."""
    ours, theirs = opener(), opener()
    entry = ours.add(CACHE_Q, CACHE_A)
    ticket = theirs.decide(CACHE_Q)  # theirs holds the entry, balance 1.0
    ours.store.credit(entry.id, 2.0, 0)
    assert theirs.settle(ticket.id, 0.5)
    kept = opener().store.get(entry.id)
    assert kept is not None and kept.energy > 3.0  # the credit survived the settle
    held = theirs.store.get(entry.id)
    assert held is not None and held.energy == kept.energy

    # And it starts from the rows as other writers left them, ticks included.
    ticket = theirs.decide(CACHE_Q)
    assert theirs.settle(ticket.id, 0.5)
    theirs.tick()
    settled = opener().store.get(entry.id)
    assert settled is not None
    ours.store.credit(entry.id, 1.0, 0)  # ours still holds the entry as it credited it
    now = opener().store.get(entry.id)
    assert now is not None and now.energy == pytest.approx(settled.energy + 1.0)

    # All or nothing: an add that fails after its row is written leaves no trace.
    from darwin_memo.backends import sqlstore
    from darwin_memo.records.entry import MemoryEntry

    real = sqlstore.write_entry

    def write_then_fail(*args: Any, **kwargs: Any) -> Any:
        real(*args, **kwargs)
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(sqlstore, "write_entry", write_then_fail)
    doomed = MemoryEntry(LOGS_Q, LOGS_A)
    with pytest.raises(RuntimeError, match="disk on fire"):
        ours.store.add(doomed)
    monkeypatch.setattr(sqlstore, "write_entry", real)
    assert ours.store.get(doomed.id) is None
    assert opener().store.get(doomed.id) is None and len(opener().store) == 1
    assert ours.store.add(doomed).id == doomed.id  # and it writes again
    theirs.refresh()
    assert theirs.store.get(doomed.id) is not None


@_durable(DURABLE)
def test_a_backend_transaction_yields_what_it_saw_and_rolls_back(
    opener: Callable[[], Ledger], location: str
) -> None:
    writer = opener()
    writer.add(LOGS_Q, LOGS_A)
    backend = open_backend(location, create=False)
    try:
        backend.load(lambda _recorded: None)
        writer.add(CACHE_Q, CACHE_A)
        changes = Changes()
        changes.events.append({"event": "tick", "tick": 5, "ts": "2026-01-01T00:00:00+00:00"})
        changes.opened.append(Ticket("q", "a", None, ["e"], 5))
        with pytest.raises(KeyError), backend.transaction(changes, View()) as seen:
            assert isinstance(seen, (Loaded, Refreshed))  # the other writer's add
            raise KeyError("body failed")
        after = backend.load(lambda _recorded: None)
        assert _ticket_ids(after.tickets) == set() and after.tick_count == 0
        assert [e["event"] for e in backend.events()] == ["add", "add"]
    finally:
        backend.close()


# -- errors are the store's own ---------------------------------------------------------


def _hold_lock(location: str, held: threading.Event, release: threading.Event) -> None:
    kind = _kind(location)
    if kind == "json":
        with store_lock(location):
            held.set()
            release.wait(10)
    elif kind == "sqlite":
        conn = sqlite3.connect(location, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        held.set()
        release.wait(10)
        conn.execute("ROLLBACK")
        conn.close()
    else:
        import psycopg

        from darwin_memo.backends.postgres import _lock_sql, parse_url

        conninfo, schema, _ = parse_url(location)
        with psycopg.connect(conninfo) as conn:
            conn.execute(_lock_sql(schema))
            held.set()
            release.wait(10)


@_durable(DURABLE)
def test_a_held_store_is_a_store_locked_error(opener: Callable[[], Ledger], location: str) -> None:
    ledger = opener()
    ledger.add(CACHE_Q, CACHE_A)
    held, release = threading.Event(), threading.Event()
    holder = threading.Thread(target=_hold_lock, args=(location, held, release))
    holder.start()
    try:
        assert held.wait(10)
        with pytest.raises(StoreLockedError) as info:
            ledger.add(LOGS_Q, LOGS_A)
        assert "\n" not in str(info.value)
    finally:
        release.set()
        holder.join()
    assert ledger.add(LOGS_Q, LOGS_A).id in ledger.store  # free again: it writes


@_durable(DURABLE)
def test_translate_claims_only_its_drivers_errors(location: str) -> None:
    backend = open_backend(location)
    try:
        assert backend.translate(ValueError("not a driver's")) is None
        if _kind(location) == "sqlite":
            error = backend.translate(sqlite3.OperationalError("database is locked"))
            assert isinstance(error, StoreLockedError)
            error = backend.translate(sqlite3.DatabaseError("database disk image is malformed"))
            assert isinstance(error, StoreFormatError)
        if _kind(location) == "postgres":
            import psycopg

            error = backend.translate(psycopg.errors.LockNotAvailable("lock timeout"))
            assert isinstance(error, StoreLockedError)
    finally:
        backend.close()


@_durable(["sqlite", "postgres"])
def test_a_read_outside_a_transaction_meets_the_stores_error(
    opener: Callable[[], Ledger], location: str
) -> None:
    """A driver error in a plain read (here: the notes table gone) is a ``StoreError``
    in one line, never the driver's exception."""
    ledger = opener()
    entry = ledger.add(CACHE_Q, CACHE_A)
    if _kind(location) == "sqlite":
        conn = sqlite3.connect(location)
        conn.execute("ALTER TABLE notes RENAME TO notes_gone")
        conn.commit()
        conn.close()
    else:
        import psycopg

        from darwin_memo.backends.postgres import parse_url

        conninfo, schema, _ = parse_url(location)
        with psycopg.connect(conninfo, autocommit=True) as pg:
            pg.execute(f"ALTER TABLE {schema}.notes RENAME TO notes_gone")
    with pytest.raises(StoreError) as info:
        ledger.history(entry.id)
    assert not isinstance(info.value, sqlite3.Error)
    assert "notes" in str(info.value) and "\n" not in str(info.value)


@_durable(["json", "sqlite"])
def test_a_file_that_is_no_store_is_a_store_format_error(location: str) -> None:
    Path(location).write_bytes(b"\x00garbage that no darwin-memo wrote\n" * 8)
    with pytest.raises(StoreFormatError):
        Ledger.open(location)


# -- the population is a protocol ---------------------------------------------------------


def _protocol_members() -> list[str]:
    from darwin_memo.backends.interface import Population

    return sorted(
        name
        for name in [*vars(Population), *Population.__annotations__]
        if not name.startswith("_") or name in ("__len__", "__contains__")
    )


def test_both_populations_implement_the_protocol_without_inheriting() -> None:
    import inspect

    from darwin_memo.backends.sqlstore import SqlStore

    assert not issubclass(SqlStore, MemoryStore) and not issubclass(MemoryStore, SqlStore)
    members = _protocol_members()
    assert {"alive", "retrieve", "charge_upkeep", "merge_into", "books"} <= set(members)
    for name in members:
        mine = getattr(MemoryStore, name, None)
        theirs = getattr(SqlStore, name, None)
        if callable(mine) or callable(theirs):
            assert inspect.signature(mine) == inspect.signature(theirs), name  # type: ignore[arg-type]
    # The published JSON persistence stays with the in-memory population.
    assert not hasattr(SqlStore, "save") and not hasattr(SqlStore, "from_payload")


@_durable(ALL)
def test_a_ledger_holds_a_population(opener: Callable[[], Ledger], location: str) -> None:
    ledger = opener()
    entry = ledger.add(CACHE_Q, CACHE_A)
    store = ledger.store
    for name in _protocol_members():
        assert hasattr(store, name), name
    if _kind(location) == "json" or ledger.backend is None:
        assert type(store) is MemoryStore  # published: a JSON ledger's store
    assert [e.id for e, _ in store.retrieve(CACHE_Q)] == [entry.id]
    assert store.total_energy() == pytest.approx(store.books.balance())


# -- the seam is honest: read from the sources ----------------------------------------

#: Names a backend's code might give a ledger.
_LEDGER_NAMES = {"ledger", "led", "source"}


def _ledger_reaches(path: Path) -> list[str]:
    """Each place in ``path`` that reads a ledger's private name, assigns a ledger's
    attribute, or takes a ``Ledger`` as an argument."""
    tree = ast.parse(path.read_text(), str(path))
    found: list[str] = []
    names = set(_LEDGER_NAMES)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for arg in [*node.args.args, *node.args.kwonlyargs, *node.args.posonlyargs]:
                if arg.annotation is not None and "Ledger" in ast.unparse(arg.annotation):
                    found.append(f"{path.name}:{node.lineno} {node.name} takes a Ledger")
                    names.add(arg.arg)
        if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("ledger"):
            found.append(f"{path.name}:{node.lineno} imports from the ledger module")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id in names and node.attr.startswith("_"):
                found.append(f"{path.name}:{node.lineno} reads {node.value.id}.{node.attr}")
            if node.value.id in names and isinstance(node.ctx, (ast.Store, ast.Del)):
                found.append(f"{path.name}:{node.lineno} assigns {node.value.id}.{node.attr}")
    return found


def test_the_reach_detector_finds_reaches(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from ..ledger import Ledger\n"
        "def load(self, target: Ledger) -> None:\n"
        "    target.store = 1\n"
        "    ledger._stale = True\n"
        "    ledger._begin_journal(None)\n"
    )
    found = _ledger_reaches(bad)
    assert [r.split(" ", 1)[1] for r in found] == [
        "imports from the ledger module",
        "load takes a Ledger",
        "assigns target.store",
        "reads ledger._stale",
        "assigns ledger._stale",
        "reads ledger._begin_journal",
    ]


def test_no_backend_reaches_into_the_ledger() -> None:
    modules = sorted((SRC / "backends").glob("*.py"))
    assert len(modules) > 5
    found = [reach for path in modules for reach in _ledger_reaches(path)]
    assert found == []


def test_replay_and_transfer_read_the_ledger_through_public_names() -> None:
    found = [r for name in ("replay.py", "transfer.py") for r in _ledger_reaches(SRC / name)]
    assert [r for r in found if " reads " in r] == []


# -- what a reader that follows the store (the dashboard) asks of a backend ----------


@_durable(DURABLE)
def test_the_version_token_moves_with_another_writer(
    opener: Callable[[], Ledger], location: str
) -> None:
    reader, writer = opener(), opener()
    assert reader.backend is not None
    before = reader.backend.version_token()
    assert reader.backend.version_token() == before  # reading moves nothing
    writer.add(CACHE_Q, CACHE_A)
    writer.close()
    assert reader.backend.version_token() != before


@_durable(["sqlite", "postgres"])
def test_events_after_follows_the_journal(opener: Callable[[], Ledger]) -> None:
    ledger = opener()
    assert ledger.backend is not None
    ledger.add(CACHE_Q, CACHE_A)
    found = ledger.backend.events_after(0)
    assert found is not None
    top, first = found
    assert [seq for seq, _ in first] == sorted(seq for seq, _ in first)
    assert first[-1][0] == top and first[-1][1]["event"] == "add"
    ledger.decide(CACHE_Q)
    found = ledger.backend.events_after(top)
    assert found is not None
    later_top, later = found
    assert later_top > top
    assert [event["event"] for _, event in later] == ["decide"]


@_durable(["json"])
def test_a_json_journal_is_read_whole(opener: Callable[[], Ledger]) -> None:
    ledger = opener()
    assert ledger.backend is not None
    ledger.add(CACHE_Q, CACHE_A)
    assert ledger.backend.events_after(0) is None
    assert [e["event"] for e in ledger.events()][-1] == "add"
