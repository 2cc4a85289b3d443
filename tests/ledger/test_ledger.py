"""Ledger semantics, run against every backend: in memory, JSON file, SQLite, PostgreSQL."""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from darwin_memo import MemoryEntry, MemoryStore, StoreFormatError, SurvivalConfig
from darwin_memo.ledger import Ledger, LedgerInputError, Ticket
from darwin_memo.transfer import copy_store

BACKENDS = ["memory", "json", "sqlite", "postgres"]

CACHE_Q = "Are cache chunk files safe to delete?"
CACHE_A = "Cache chunk files under cache/ are disposable and safe to delete."
LOG_Q = "Is it safe to delete old log files?"

Factory = Callable[..., Ledger]


@pytest.fixture(params=BACKENDS)
def make(request: pytest.FixtureRequest, tmp_path: Path) -> Factory:
    kind = request.param
    url = ""
    if kind == "postgres":
        from conftest import pg_url

        url = pg_url(request.getfixturevalue("pg_cluster"))

    def factory(**kwargs: object) -> Ledger:
        if kind == "memory":
            return Ledger(MemoryStore(), event_log=tmp_path / "mem.events.jsonl", **kwargs)  # type: ignore[arg-type]
        if kind == "postgres":
            return Ledger.open(url, **kwargs)  # type: ignore[arg-type]
        suffix = ".json" if kind == "json" else ".db"
        return Ledger.open(tmp_path / f"store{suffix}", **kwargs)  # type: ignore[arg-type]

    factory.kind = kind  # type: ignore[attr-defined]
    return factory


def reopen(make: Factory, ledger: Ledger) -> Ledger:
    return make() if make.kind != "memory" else ledger  # type: ignore[attr-defined]


def test_decide_settle_credit_and_published_numbers(make: Factory) -> None:
    ledger = make()
    decider = ledger.add(CACHE_Q, CACHE_A)
    ticket = ledger.decide("Is it safe to delete cache chunk files?")
    assert ticket.deciding_entry == decider.id
    assert ticket.answer.startswith(CACHE_A + "\n[recorded ")
    assert len(ticket.id) == 24  # 96 random bits
    assert ledger.settle(ticket.id, 3.0, "run 42: 3 tests fixed")
    assert not ledger.settle(ticket.id, 3.0)  # already settled
    ledger = reopen(make, ledger)
    entry = ledger.store.get(decider.id)
    assert entry is not None
    assert entry.energy == pytest.approx(1 + 0.6 * math.tanh(3.0))
    assert "tick 0: credit +0.597 (measured delta +3, run 42: 3 tests fixed)" in ledger.obituary(
        decider.id
    )
    assert ledger.verify() == []


def test_silent_decide_mints_no_pending_ticket(make: Factory) -> None:
    ledger = make()
    ledger.add(CACHE_Q, CACHE_A)
    ticket = ledger.decide("quantum zebra marmalade")
    assert ticket.provenance == [] and ticket.answer == ""
    assert ledger.pending() == []
    assert not ledger.settle(ticket.id, 1.0)
    assert ledger.verify() == []


def test_escrow_holds_the_verdict_open(make: Factory) -> None:
    ledger = make()
    entry = ledger.add(CACHE_Q, CACHE_A)
    ticket = ledger.decide(CACHE_Q)
    for _ in range(25):  # 25 ticks x 0.05 = 1.25 > 1.0: would starve without escrow
        ledger.tick()
    ledger = reopen(make, ledger)
    held = ledger.store.get(entry.id)
    assert held is not None and held.energy < 0
    assert ledger.forget(entry.id) == "escrowed"
    assert ledger.settle(ticket.id, 1.0, "measured late")
    ledger = reopen(make, ledger)
    revived = ledger.store.get(entry.id)  # -0.25 + 0.6 tanh(1) lifts it back above zero
    assert revived is not None and revived.energy == pytest.approx(-0.25 + 0.6 * math.tanh(1))
    assert ledger.verify() == []


def test_negative_settlement_executes_after_escrow(make: Factory) -> None:
    ledger = make()
    poison = ledger.add(
        "Are the db files redundant?", "The db files are redundant and safe to remove."
    )
    for _ in range(3):
        ticket = ledger.decide("Are the db files redundant?")
        ledger.settle(ticket.id, -5.0, "restore cost")
    ledger = reopen(make, ledger)
    assert ledger.store.get(poison.id) is None
    story = ledger.obituary(poison.id)
    assert "buried at tick 0 on settle" in story and "alive=False" in story
    assert poison.id in ledger.damaged
    assert ledger.verify() == []


def test_expiry_settles_at_zero_and_counts_its_dead(make: Factory) -> None:
    ledger = make()
    ledger.add(CACHE_Q, CACHE_A)
    ticket = ledger.decide(CACHE_Q)
    stats = [ledger.tick(expire_after=2) for _ in range(3)]
    assert [s["expired"] for s in stats] == [0, 0, 1]
    assert ledger.pending() == []
    assert not ledger.settle(ticket.id, 5.0)
    events = list(ledger.events())
    expired = [e for e in events if e["event"] == "settle" and e.get("expired")]
    assert len(expired) == 1 and expired[0]["detail"] == "expired unsettled"
    assert ledger.verify() == []


def test_pin_forget_and_json_reasons(make: Factory) -> None:
    ledger = make()
    e = ledger.add(CACHE_Q, CACHE_A)
    assert ledger.pin(e.id) and ledger.pin(e.id)
    assert ledger.forget(e.id) == "pinned"
    for _ in range(30):
        ledger.tick()
    kept = ledger.store.get(e.id)
    assert kept is not None and kept.energy == 0.0
    assert ledger.unpin(e.id) is False  # at zero it is no longer alive to unpin
    assert ledger.forget("nope00000000") == "missing"
    assert ledger.pin("nope00000000") is False
    assert ledger.verify() == []


def test_forget_buries(make: Factory) -> None:
    ledger = make()
    e = ledger.add(CACHE_Q, CACHE_A)
    assert ledger.forget(e.id) == "buried"
    ledger = reopen(make, ledger)
    assert ledger.store.get(e.id) is None and ledger.store.get_dead(e.id) is not None
    assert "buried at tick 0 by forget" in ledger.obituary(e.id)
    assert ledger.verify() == []


def test_import_on_probation(make: Factory) -> None:
    ledger = make()
    foreign = MemoryStore()
    old = foreign.add(MemoryEntry(CACHE_Q, CACHE_A, recorded_ts="2020-01-01T00:00:00+00:00"))
    dead = foreign.add(MemoryEntry("dead q", "dead a"))
    dead.energy = 0.0
    imported = ledger.import_entries(foreign.alive(), "team.json")
    assert [e.id for e in imported] == [old.id]
    assert imported[0].probation == 3 and imported[0].recorded_ts == old.recorded_ts
    assert ledger.import_entries(foreign.alive(), "team.json") == []  # idempotent
    ticket = ledger.decide(CACHE_Q)
    assert ticket.provenance == []  # probationary entries never decide alone
    mine = ledger.add(CACHE_Q, "Yes: cache chunk files are disposable.")
    ticket = ledger.decide(CACHE_Q)
    assert ticket.deciding_entry == mine.id and old.id in ticket.supporting_entries
    ledger.settle(ticket.id, 1.0)
    ledger = reopen(make, ledger)
    adopted = ledger.store.get(old.id)
    # Riding along behind another entry's decision earns credit, not trust (issue 33).
    assert adopted is not None and adopted.probation == 3 and adopted.energy > 1.0
    assert ledger.verify() == []


def test_juvenile_admission_window(make: Factory) -> None:
    ledger = make(config=SurvivalConfig(admission_window=3))
    e = ledger.add("Is the dedupe helper dead code?", "The dedupe helper is redundant.")
    assert e.juvenile == 3
    ticket = ledger.decide("Is the dedupe helper dead code?")
    ledger.settle(ticket.id, -2.0, "2 tests broke")
    ledger = (
        reopen(make, ledger)
        if make.kind == "memory"
        else make(config=SurvivalConfig(admission_window=3))
    )  # type: ignore[attr-defined]
    assert ledger.store.get(e.id) is None
    assert "admission denied" in ledger.obituary(e.id)
    assert ledger.verify() == []


def test_consolidation_merges_and_verify_follows(make: Factory) -> None:
    ledger = make()
    a = ledger.add(LOG_Q, "Old log files under logs/ may be deleted after seven days.")
    b = ledger.add(LOG_Q, "Old log files under logs/ may be deleted after seven days!")
    for _ in range(5):
        stats = ledger.tick()
    assert stats["merges"] == 1 and stats["population"] == 1
    heir = ledger.store.alive()[0]
    assert sorted(heir.lineage) == sorted([a.id, b.id])
    assert heir.energy == pytest.approx(2 * (1 - 5 * 0.05))
    ledger = reopen(make, ledger)
    assert f"merged into {heir.id}" in ledger.obituary(a.id)
    for member in (a.id, b.id):  # the same note on every backend
        (merged,) = [n for n in ledger.history(member) if n.get("event") == "merged"]
        assert list(merged) == ["tick", "ts", "text", "event", "heir"]
        assert merged["text"] == f"merged into {heir.id} at tick 5"
        assert (merged["tick"], merged["heir"]) == (5, heir.id)
    assert ledger.verify() == []


def test_bad_input_changes_nothing(make: Factory) -> None:
    ledger = make()
    ledger.add(CACHE_Q, CACHE_A)
    ticket = ledger.decide(CACHE_Q)
    before = ledger.stats()
    assert not ledger.settle(ticket.id, float("nan"))
    assert not ledger.settle(ticket.id, float("inf"))
    for bad in ("", "   ", "x" * (64 * 1024 + 1), "nul\x00byte"):
        with pytest.raises(LedgerInputError):
            ledger.decide(bad)
    with pytest.raises(LedgerInputError):
        ledger.add("", "answer")
    with pytest.raises(LedgerInputError):
        ledger.settle(ticket.id, "3")  # type: ignore[arg-type]
    assert ledger.stats() == before
    assert [t.id for t in ledger.pending()] == [ticket.id]
    assert ledger.verify() == []


@pytest.mark.parametrize("name", ["store.json", "store.db"])
def test_two_processes_see_each_others_writes(tmp_path: Path, name: str) -> None:
    first, second = Ledger.open(tmp_path / name), Ledger.open(tmp_path / name)
    entry = first.add(CACHE_Q, CACHE_A)
    ticket = second.decide(CACHE_Q)  # second sees the entry first added
    assert ticket.deciding_entry == entry.id
    assert first.settle(ticket.id, 2.0)  # first sees the ticket second opened
    assert not second.settle(ticket.id, 2.0)  # and second sees it was settled
    assert second.stats() == first.stats()
    assert first.verify() == [] and second.verify() == []


def test_verify_catches_energy_without_an_event(tmp_path: Path) -> None:
    ledger = Ledger.open(tmp_path / "s.db")
    e = ledger.add(CACHE_Q, CACHE_A)
    ledger.close()
    conn = sqlite3.connect(tmp_path / "s.db")
    conn.execute("UPDATE entries SET energy=4.0 WHERE id=?", (e.id,))  # the balance column
    conn.commit()
    conn.close()
    problems = Ledger.open(tmp_path / "s.db").verify()
    assert problems and e.id in problems[0] and "4.000000000" in problems[0]


def test_a_second_handle_in_one_process_keeps_the_first_safe(tmp_path: Path) -> None:
    """Closing any descriptor of a database drops the process's POSIX locks on it;
    opening the store again must not, or another process deletes the live WAL."""
    import subprocess
    import sys

    path = tmp_path / "s.db"
    with Ledger.open(path) as first:
        first.add(CACHE_Q, CACHE_A)
    a = Ledger.open(path)
    a.stats()
    Ledger.open(path).close()
    for i in range(2):
        subprocess.run(
            [sys.executable, "-m", "darwin_memo", "ledger", str(path), "add", f"q{i}?", "a."],
            check=True,
            capture_output=True,
            timeout=60,
        )
    assert (tmp_path / "s.db-wal").exists()
    assert a.stats()["alive"] == 3
    a.add("one more question?", "and its answer.")
    a.close()
    with Ledger.open(path) as again:
        assert again.stats()["alive"] == 4 and again.verify() == []


def test_only_commits_carrying_outside_facts_wait_for_the_disk(tmp_path: Path) -> None:
    """A decide and a tick commit with synchronous=NORMAL (WAL); adds and settles, FULL."""
    ledger = Ledger.open(tmp_path / "s.db")
    conn = ledger.backend.conn  # type: ignore[union-attr]

    def level() -> int:
        return int(conn.execute("PRAGMA synchronous").fetchone()[0])

    ledger.add(CACHE_Q, CACHE_A)
    assert level() == 2  # FULL
    ticket = ledger.decide(CACHE_Q)
    assert ticket.provenance and level() == 1  # NORMAL
    assert ledger.settle(ticket.id, 1.0)
    assert level() == 2
    ledger.tick()
    assert level() == 1
    ledger.add(LOG_Q, "Old log files under logs/ are safe to delete once rotated.")
    assert level() == 2
    ledger.close()
    assert Ledger.open(tmp_path / "s.db").verify() == []


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    Ledger.open(tmp_path / "s.db").add(CACHE_Q, CACHE_A)
    conn = sqlite3.connect(tmp_path / "s.db")
    conn.execute("INSERT INTO schema_migrations VALUES (999, 'm999_future', 'later')")
    conn.commit()
    conn.close()
    with pytest.raises(StoreFormatError, match="schema version 999"):
        Ledger.open(tmp_path / "s.db")


def test_a_newer_schema_applied_while_open_is_refused(tmp_path: Path) -> None:
    """A process keeps its store open while a newer darwin-memo migrates it: its next
    operation says so instead of running its statements on a schema it does not know."""
    path = tmp_path / "s.db"
    ledger = Ledger.open(path)
    ledger.add(CACHE_Q, CACHE_A)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("CREATE INDEX by_kind ON entries(kind)")  # a schema change it understands
    assert ledger.decide(CACHE_Q).deciding_entry
    ledger.add(LOG_Q, "Old log files under logs/ are safe to delete once rotated.")
    other.execute("BEGIN IMMEDIATE")
    other.execute("CREATE TABLE m999_future (x)")
    other.execute("INSERT INTO schema_migrations VALUES (999, 'm999_future', 'later')")
    other.execute("COMMIT")
    rows = other.execute("SELECT COUNT(*) FROM entries").fetchone()
    with pytest.raises(StoreFormatError, match="migrated to schema version 999 by a newer"):
        ledger.add("What breaks the build?", "A stale lockfile.")
    with pytest.raises(StoreFormatError, match="upgrade darwin-memo here and restart"):
        ledger.decide(CACHE_Q)
    with pytest.raises(StoreFormatError, match="newer darwin-memo"):
        ledger.stats()
    assert other.execute("SELECT COUNT(*) FROM entries").fetchone() == rows
    other.close()
    ledger.close()


def test_corrupt_sqlite_file_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    path.write_bytes(b"SQLite format 3\x00" + b"\x07" * 500)
    before = path.read_bytes()
    with pytest.raises(StoreFormatError):
        Ledger.open(path)
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    ("src", "dest"), [("a.json", "b.db"), ("a.db", "b.json"), ("a.db", "b.sqlite")]
)
def test_migrate_round_trips_losslessly(tmp_path: Path, src: str, dest: str) -> None:
    ledger = Ledger.open(tmp_path / src)
    keep = ledger.add(CACHE_Q, CACHE_A)
    gone = ledger.add("trivia?", "The cafeteria menu rotates every two weeks.")
    ledger.forget(gone.id)
    pending = ledger.decide(CACHE_Q)
    ledger.tick()
    ledger.close()
    copy_store(tmp_path / src, tmp_path / dest)
    copy = Ledger.open(tmp_path / dest, create=False)
    assert copy.verify() == []
    assert [t.id for t in copy.pending()] == [pending.id]
    assert copy.tick_count == 1
    assert copy.history(keep.id) == Ledger.open(tmp_path / src).history(keep.id)
    assert len(list(copy.events())) == len(list(Ledger.open(tmp_path / src).events()))
    original = Ledger.open(tmp_path / src)
    assert copy.to_payload()["entries"] == original.to_payload()["entries"]
    assert copy.to_payload()["graveyard"] == original.to_payload()["graveyard"]
    with pytest.raises(Exception, match="already exists"):
        copy_store(tmp_path / src, tmp_path / dest)


def test_published_ledger_file_opens_and_gets_a_snapshot(tmp_path: Path) -> None:
    from conftest import PUBLISHED

    path = tmp_path / "ledger.json"
    path.write_bytes((PUBLISHED / "ledger.json").read_bytes())
    ledger = Ledger.open(path)
    assert len(ledger.pending()) == 1 and ledger.tick_count == 1
    ledger.tick()
    assert ledger.verify() == []  # the journal starts from a snapshot of the published state
    payload = json.loads(path.read_text())
    assert payload["ledger"]["journal"] == "darwin-memo/1"


def test_ticket_round_trip() -> None:
    t = Ticket("q", "a", "d" * 12, ["s" * 12], 3)
    assert Ticket.from_dict(t.to_dict()) == t
    assert t.provenance == ["s" * 12, "d" * 12]
    with pytest.raises(StoreFormatError):
        Ticket.from_dict({"id": "x"})


def test_damaged_entry_row_is_refused_when_read(tmp_path: Path) -> None:
    ledger = Ledger.open(tmp_path / "s.db")
    bad = ledger.add(CACHE_Q, CACHE_A)
    ledger.add("Who owns the cafeteria menu?", "Facilities owns the cafeteria menu.")
    ledger.close()
    conn = sqlite3.connect(tmp_path / "s.db")
    conn.execute("UPDATE entries SET data = '{' WHERE id = ?", (bad.id,))
    conn.commit()
    conn.close()
    ledger = Ledger.open(tmp_path / "s.db")
    with pytest.raises(StoreFormatError, match=bad.id):
        ledger.decide(CACHE_Q)  # retrieval reads the damaged row
    with pytest.raises(StoreFormatError, match=bad.id):
        ledger.verify()
    assert ledger.decide("cafeteria menu owner").provenance  # rows it never reads still serve


def test_a_long_lived_handle_does_not_cache_the_whole_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An MCP server or dashboard keeps one handle for days: its entry cache is bounded."""
    from darwin_memo.backends import sqlstore

    monkeypatch.setattr(sqlstore, "CACHE_LIMIT", 10)
    path = tmp_path / "s.db"
    with Ledger.open(path) as setup:
        for i in range(40):
            setup.add(f"how do I restart service{i} safely?", f"drain service{i} first.")
    ledger = Ledger.open(path)
    for i in range(40):
        ticket = ledger.decide(f"how do I restart service{i} safely?")
        assert ticket.deciding_entry
        assert ledger.settle(ticket.id, 1.0)
        cached = len(ledger.store._population) + len(ledger.store._graveyard)  # type: ignore[attr-defined]
        assert cached <= 10 + 5, cached
    ledger.tick()
    assert ledger.verify() == []
    ledger.close()
    with Ledger.open(path) as fresh, Ledger.open(path) as other:
        assert fresh.stats() == other.stats() and fresh.stats()["alive"] == 40


def test_a_decide_does_not_read_the_open_tickets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A one-shot decide reads no open ticket, a settle only its own."""
    path = tmp_path / "s.db"
    with Ledger.open(path) as ledger:
        ledger.add(CACHE_Q, CACHE_A)
        opened = [ledger.decide(CACHE_Q).id for _ in range(5)]
    read: list[str] = []
    real = Ticket.from_dict.__func__  # type: ignore[attr-defined]

    def counting(cls: type[Ticket], data: dict[str, object]) -> Ticket:
        ticket = real(cls, data)
        read.append(ticket.id)
        return ticket

    monkeypatch.setattr(Ticket, "from_dict", classmethod(counting))
    with Ledger.open(path) as ledger:
        ticket = ledger.decide(CACHE_Q)
        assert read == []
        assert ledger.settle(opened[0], 1.0)  # a settle reads the ticket it settles
        assert read == [opened[0]]
        assert not ledger.settle(opened[0], 1.0)
        read.clear()
        assert {t.id for t in ledger.pending()} == {*opened[1:], ticket.id}
        assert sorted(read) == sorted([*opened[1:], ticket.id])


def test_open_tickets_read_late_agree_with_a_fresh_read(tmp_path: Path) -> None:
    """Two handles (often reopened) decide, settle, abandon and tick in turn; every
    fifth step each handle's open tickets and escrow counts equal a fresh read."""
    import random

    path = tmp_path / "s.db"
    with Ledger.open(path) as ledger:
        for i in range(6):
            ledger.add(f"{CACHE_Q} variant {i}", f"{CACHE_A} Variant {i}.")
    rnd = random.Random(7)
    handles = [Ledger.open(path), Ledger.open(path)]
    known: list[str] = []
    for step in range(120):
        which = rnd.randrange(2)
        if rnd.random() < 0.25:  # a new handle has not read the open tickets yet
            handles[which].close()
            handles[which] = Ledger.open(path)
        ledger = handles[which]
        op = rnd.random()
        if op < 0.45 or not known:
            ticket = ledger.decide(f"{CACHE_Q} variant {rnd.randrange(6)}")
            if ticket.deciding_entry:
                known.append(ticket.id)
        elif op < 0.75:
            ledger.settle(known.pop(rnd.randrange(len(known))), rnd.choice([0.5, -0.2, 1.0]))
        elif op < 0.9:
            ledger.abandon(rnd.choice(known))  # sometimes one already settled elsewhere
        else:
            ledger.tick()
        if step % 5 == 4:  # reading them here makes both handles load their tickets
            with Ledger.open(path) as fresh:
                truth = {t.id: sorted(t.provenance) for t in fresh.pending()}
                escrow = dict(fresh._escrow)
            for h in handles:
                assert {t.id: sorted(t.provenance) for t in h.pending()} == truth
                assert dict(h._escrow) == escrow
    for h in handles:
        h.close()


@pytest.mark.parametrize("fresh", [True, False])
def test_an_entry_named_by_another_open_ticket_is_not_buried_on_settle(
    tmp_path: Path, fresh: bool
) -> None:
    """Escrow holds whether the open tickets were read (long-lived handle) or not
    (a fresh one reads only the tickets naming the entry)."""
    path = tmp_path / "s.db"
    with Ledger.open(path) as ledger:
        entry = ledger.add(CACHE_Q, CACHE_A)
        tickets = [ledger.decide(CACHE_Q) for _ in range(4)]
        other = ledger.add("How do I rotate the api keys?", "Rotate them with keyctl rotate.")
        unrelated = ledger.decide("How do I rotate the api keys?")
    assert {t.deciding_entry for t in tickets} == {entry.id}
    assert unrelated.deciding_entry == other.id
    keeper = Ledger.open(path)
    keeper.pending()  # a long-lived handle that has read them
    # A loss costs at most 0.6 of energy here: dead after the second, buried after the last.
    for k, ticket in enumerate(tickets):
        ledger = Ledger.open(path) if fresh else keeper
        assert ledger.settle(ticket.id, -1e9)
        left = ledger.store.get(entry.id)
        if k < 3:
            assert left is not None and left.alive == (k == 0), (k, left)
        else:
            assert left is None
        if fresh:
            ledger.close()
    keeper.close()
    with Ledger.open(path) as ledger:
        assert {t.id for t in ledger.pending()} == {unrelated.id}
        assert ledger.verify() == []


def test_utc_now_iso_is_the_current_second(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stamp text is made once per second and follows the clock, backwards too."""
    import time

    from darwin_memo.records import entry as types

    clock = [1_800_000_000.25]
    monkeypatch.setattr(types.time, "time", lambda: clock[0])
    for now in (1_800_000_000.25, 1_800_000_000.9, 1_800_000_001.0, 1_700_000_000.5, 0.0):
        clock[0] = now
        want = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(int(now)))
        assert types.utc_now_iso() == want


def test_a_consolidating_tick_pauses_the_collector_until_it_is_written(tmp_path: Path) -> None:
    """The cyclic collector waits while a consolidation and its writes run (it would walk
    the store's objects again and again), and is back on after, an error included."""
    import gc

    ledger = Ledger.open(tmp_path / "store.db")
    for i in range(6):
        ledger.add(CACHE_Q, CACHE_A + f" Case {i % 2}.")
    ledger.config.consolidate_every = 2
    backend = ledger.backend
    assert backend is not None
    write = backend._write  # type: ignore[attr-defined]
    seen: list[bool] = []

    def spy(*args: object) -> None:
        seen.append(gc.isenabled())
        write(*args)

    backend._write = spy  # type: ignore[attr-defined]
    assert ledger.tick()["merges"] == 0 and seen == [True]  # tick 1: no consolidation
    assert ledger.tick()["merges"] > 0 and seen == [True, False]
    assert gc.isenabled()

    def fail(*args: object) -> None:
        seen.append(gc.isenabled())
        raise RuntimeError("disk on fire")

    backend._write = write  # type: ignore[attr-defined]
    ledger.add(CACHE_Q, CACHE_A + " Again.")
    ledger.add(CACHE_Q, CACHE_A + " Again.")
    ledger.config.consolidate_every = 1
    backend._write = fail  # type: ignore[attr-defined]
    with pytest.raises(RuntimeError):
        ledger.tick()  # a consolidating tick: the collector was paused when it failed
    assert seen[-1] is False and gc.isenabled()


def test_a_dying_entry_under_many_open_tickets_reads_one_of_them(tmp_path: Path) -> None:
    """Whether an open ticket still names an entry that a settlement drained is asked of
    the store's rows naming it, parsed only until one does: not every open ticket."""
    ledger = Ledger.open(tmp_path / "store.db")
    poison = ledger.add(
        "Are the db files redundant?", "The db files are redundant and safe to remove."
    )
    tickets = [ledger.decide("Are the db files redundant?") for _ in range(40)]
    assert all(t.deciding_entry == poison.id for t in tickets)
    ledger.close()
    ledger = Ledger.open(tmp_path / "store.db")  # open tickets read when needed
    backend = ledger.backend
    parsed: list[str] = []
    parse = backend._ticket  # type: ignore[attr-defined]

    def spy(data: str) -> Ticket:
        parsed.append(data)
        return parse(data)

    backend._ticket = spy  # type: ignore[attr-defined]
    for ticket in tickets[:10]:  # drained after a few, held open by the other verdicts
        ledger.settle(ticket.id, -5.0, "restore cost")
    entry = ledger.store.get(poison.id)
    assert entry is not None and not entry.alive
    assert len(parsed) <= 3 * 10, len(parsed)  # each settlement: its ticket, and one
    for ticket in tickets[10:]:
        ledger.settle(ticket.id, -5.0, "restore cost")
    assert ledger.store.get(poison.id) is None  # the last verdict in: executed
    assert ledger.verify() == []


def test_settlement_notes_kept_in_parts_read_as_the_durable_ones(tmp_path: Path) -> None:
    """An in-memory ledger keeps a settlement's notes as their parts until they are read;
    read (history, save, copy), they are the objects a durable ledger writes, field for
    field, for gains and losses, with and without a detail."""
    entries = [
        MemoryEntry(f"how do I fix build {i}?", f"clear cache {i}", id=f"e{i}") for i in range(4)
    ]
    memory = Ledger(MemoryStore())
    durable = Ledger.open(tmp_path / "d.db")
    for ledger in (memory, durable):
        for e in entries:
            ledger.store.add(MemoryEntry.from_dict(e.to_dict()))
    deltas = [3.0, -0.25, 0.5, 1e-7, -2.0, 12.0] * 8  # under the cap of kept notes
    for i, delta in enumerate(deltas):
        query = f"how do I fix build {i % 4}?"
        detail = "" if i % 3 else f"run {i}"
        for ledger in (memory, durable):
            ticket = ledger.decide(query)
            assert ticket.deciding_entry is not None
            assert ledger.settle(ticket.id, delta, detail)

    def settle_notes(ledger: Ledger, entry_id: str) -> list[dict[str, object]]:
        notes = ledger.history(entry_id)
        assert all(type(n) is dict for n in notes)
        return [
            {k: v for k, v in n.items() if k not in ("ts", "ticket")}
            for n in notes
            if n.get("event") == "settle"
        ]

    texts = []
    for e in entries:
        kept = settle_notes(memory, e.id)
        assert kept and kept == settle_notes(durable, e.id)
        texts += [str(n["text"]) for n in kept]
    assert any(t.endswith("(measured delta -0.25)") for t in texts)  # a loss, no detail
    assert any(t.endswith("(measured delta +3, run 0)") for t in texts)  # a gain, a detail
    # Saved and read back, and copied to SQLite, the notes are the same objects.
    memory.save(tmp_path / "m.json")
    again = Ledger.load(tmp_path / "m.json")
    copy_store(tmp_path / "m.json", tmp_path / "c.db")
    copied = Ledger.open(tmp_path / "c.db")
    for e in entries:
        assert again.history(e.id) == memory.history(e.id)
        assert copied.history(e.id) == memory.history(e.id)
    saved = json.loads((tmp_path / "m.json").read_text())["ledger"]["history"]
    assert saved == {k: memory.history(k) for k in saved}
    durable.close()
    copied.close()


@pytest.mark.parametrize("durable", [False, True])
def test_an_operation_on_another_thread_waits_for_the_running_one(
    tmp_path: Path, durable: bool
) -> None:
    """A second thread's operation waits for the lock; it is not taken for a nested part
    of the first thread's operation (which would run it unlocked, inside the other)."""
    import threading

    ledger = Ledger.open(tmp_path / "s.db") if durable else Ledger(MemoryStore())
    inside, release = threading.Event(), threading.Event()
    order: list[str] = []

    def first() -> None:
        with ledger._op():
            inside.set()
            release.wait(10)
            order.append("first")

    def second() -> None:
        ledger.add("how do I restart the api?", "systemctl restart api")
        order.append("second")

    a = threading.Thread(target=first)
    a.start()
    assert inside.wait(10)
    b = threading.Thread(target=second)
    b.start()
    b.join(0.5)
    assert b.is_alive()  # waiting for the first operation to end
    release.set()
    a.join(10)
    b.join(10)
    assert order == ["first", "second"]
    assert [e.question for e in ledger.store.alive()] == ["how do I restart the api?"]
    if durable:
        ledger.close()


def test_a_tick_with_nothing_to_charge_reports_plain_zero() -> None:
    """``-0.0`` would print as ``-0.0`` in the published JSON: no upkeep is ``0.0``."""
    import math

    tick = Ledger(MemoryStore()).tick()
    assert tick["upkeep_charged"] == 0.0
    assert math.copysign(1.0, tick["upkeep_charged"]) == 1.0
