"""The running sums of living, unpinned balances (SQLite stores, schema 10).

Whatever writes the rows (one by one, in bulk, merges, burials, another process, a
transaction that fails), the sums stay what a scan of the rows finds, exactly, and
the totals they give are the rows' balances now.
"""

from __future__ import annotations

import math
import sqlite3
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_packs import fold_rows

from conftest import new_store
from darwin_memo import EntryKind, MemoryEntry
from darwin_memo.backends.sums import ONE, EnergySums, exact, read_sums, scan_sums
from darwin_memo.ledger import Ledger
from darwin_memo.records.entry import kind_name
from economy.test_economy import apply, op


def _rows_total(store: Any) -> float:
    """The population's balance from its rows, each as lazy upkeep leaves it (fsum)."""
    return math.fsum(
        store._energy_now(float(e), int(a), bool(p))
        for e, a, p in store.conn.execute(
            "SELECT energy, anchor, pinned FROM entries WHERE alive = 1"
        )
    )


def _rows_by_kind(store: Any) -> dict[str, float]:
    out: dict[str, list[float]] = {}
    for kind, e, a, p in store.conn.execute(
        "SELECT kind, energy, anchor, pinned FROM entries WHERE alive = 1"
    ):
        out.setdefault(kind_name(kind), []).append(store._energy_now(float(e), int(a), bool(p)))
    return {k: math.fsum(v) for k, v in out.items()}


def _sound(store: Any) -> None:
    assert store.sums_problems() == []
    assert read_sums(store.conn) == scan_sums(store.conn)
    assert math.isclose(store.total_energy(), _rows_total(store), rel_tol=1e-12, abs_tol=1e-9)
    by_kind = _rows_by_kind(store)
    whole = math.fsum(by_kind.values())
    shares = store.energy_share_by_kind()
    if whole > 0:
        assert set(shares) == set(by_kind)
        for kind, share in shares.items():
            assert math.isclose(share, by_kind[kind] / whole, rel_tol=1e-9, abs_tol=1e-12)


finite = st.floats(allow_nan=False, allow_infinity=False)


@given(finite)
def test_exact_is_the_float_times_the_scale(x: float) -> None:
    assert Fraction(exact(x), ONE) == Fraction(x)
    assert exact(x) / ONE == x


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abc"), finite, st.integers(-(10**9), 10**9))))
def test_rows_that_join_and_leave_leave_nothing(rows: list[tuple[str, float, int]]) -> None:
    sums = EnergySums()
    for kind, energy, anchor in rows:
        sums.add(kind, energy, anchor)
    bulk = EnergySums()
    bulk.add_rows(rows)
    assert sums == bulk
    for kind, energy, anchor in reversed(rows):
        sums.add(kind, energy, anchor, -1)
    bulk.add_rows(rows, -1)
    assert sums == EnergySums() == bulk
    assert all(v == [0, 0, 0] for v in sums.kinds.values())


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(st.lists(op, max_size=40))
def test_store_operations_keep_the_sums(ops: list[tuple]) -> None:
    """Adds, settles, upkeep, merges, burials on a store used without a ledger (each
    statement its own transaction): the sums are written as they change."""
    store = new_store("sqlite")
    apply(store, ops)
    _sound(store)


ledger_op = st.one_of(
    st.tuples(st.just("add"), st.integers(0, 5), st.integers(0, 3)),
    st.tuples(st.just("import"), st.sampled_from(list(EntryKind)), st.floats(0.01, 5.0)),
    st.tuples(st.just("settle"), st.integers(0, 5), st.floats(-3.0, 3.0)),
    st.tuples(st.just("pin"), st.integers(0, 50), st.booleans()),
    st.tuples(st.just("forget"), st.integers(0, 50)),
    st.tuples(st.just("tick"), st.integers(1, 3)),
    st.tuples(st.just("reopen")),
)

QUESTIONS = [
    "How do I restart the api worker?",
    "How do I rotate the signing key?",
    "Why does the cache miss after deploys?",
    "How do I drain a node before an upgrade?",
    "What breaks when the queue hangs?",
    "How do I pin the worker version?",
]


def _run_ledger(path: Path, ops: list[tuple]) -> Ledger:
    ledger = Ledger.open(path)
    ledger.config.consolidate_every = 2
    for n, o in enumerate(ops):
        kind = o[0]
        alive = ledger.store.alive()
        if kind == "add":
            ledger.add(QUESTIONS[o[1]], f"answer {o[2]} to {QUESTIONS[o[1]]}")
        elif kind == "import":
            entry = MemoryEntry(QUESTIONS[n % 6], f"imported {n}", kind=o[1], energy=o[2])
            ledger.import_entries([entry], source="test")
        elif kind == "settle":
            ticket = ledger.decide(QUESTIONS[o[1]])
            if ticket.deciding_entry:
                ledger.settle(ticket.id, o[2], "test")
        elif kind == "pin" and alive:
            entry = alive[o[1] % len(alive)]
            (ledger.pin if o[2] else ledger.unpin)(entry.id)
        elif kind == "forget" and alive:
            ledger.forget(alive[o[1] % len(alive)].id)
        elif kind == "tick":
            for _ in range(o[1]):
                ledger.tick()
        elif kind == "reopen":
            ledger.close()
            ledger = Ledger.open(path)
            ledger.config.consolidate_every = 2
    return ledger


@settings(max_examples=60, deadline=None)
@given(st.lists(ledger_op, max_size=25))
def test_ledger_operations_keep_the_sums(tmp_path_factory: Any, ops: list[tuple]) -> None:
    path = tmp_path_factory.mktemp("sums") / "store.db"
    ledger = _run_ledger(path, ops)
    _sound(ledger.store)
    assert ledger.verify() == []
    stats = ledger.stats()
    ledger.close()
    again = Ledger.open(path)
    assert again.stats() == stats
    _sound(again.store)
    again.close()


def test_the_total_matches_a_json_store_run_alike(tmp_path: Path) -> None:
    """The same operations on a JSON store and an SQLite one: the same balances."""
    ops: list[tuple] = [("add", i % 6, i) for i in range(12)]
    ops += [("settle", i % 6, 0.7 - 0.3 * (i % 5)) for i in range(10)]
    ops += [("pin", 3, True), ("tick", 3), ("settle", 2, 1.5), ("tick", 2), ("forget", 1)]
    ops += [("pin", 3, False), ("tick", 3)]
    sql = _run_ledger(tmp_path / "store.db", ops)
    js = _run_ledger(tmp_path / "store.json", ops)
    assert math.isclose(sql.store.total_energy(), js.store.total_energy(), abs_tol=1e-9)
    assert sql.stats() == js.stats()
    _sound(sql.store)
    sql.close()
    js.close()


def test_two_processes_writing_one_store_keep_one_sum(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    a, b = Ledger.open(path), Ledger.open(path)
    for i in range(6):
        (a if i % 2 else b).add(QUESTIONS[i], f"answer {i}")
    for i in range(6):
        ledger = a if i % 2 else b
        ticket = ledger.decide(QUESTIONS[i])
        assert ticket.deciding_entry
        ledger.settle(ticket.id, 0.5 * i - 1.0, "test")
        (b if i % 2 else a).tick()
    _sound(a.store)
    _sound(b.store)
    assert a.stats() == b.stats()
    a.close()
    b.close()


def test_a_failed_write_leaves_the_sums_as_they_were(tmp_path: Path) -> None:
    ledger = Ledger.open(tmp_path / "store.db")
    ids = [ledger.add(q, "do it").id for q in QUESTIONS]
    before = read_sums(ledger.store.conn)
    total = ledger.store.total_energy()
    with pytest.raises(RuntimeError), ledger._op() as changes:
        ledger.store.set_energy(ids[0], 4.0)
        ledger.store.bury(ids[1])
        changes.touched.update(ids[:2])
        ledger.store.flush(ids[:2])
        raise RuntimeError("a crash mid-write")
    assert read_sums(ledger.store.conn) == before
    assert ledger.store.total_energy() == total
    ledger.add("How do I page the on-call?", "Use the pager.")
    _sound(ledger.store)
    ledger.close()


def test_a_store_from_before_schema_10_is_summed_when_opened(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    ledger = Ledger.open(path)
    for i, q in enumerate(QUESTIONS):
        ledger.add(q, f"answer {i}")
    ledger.pin(ledger.store.alive()[0].id)
    for _ in range(3):
        ledger.tick()
    stats = ledger.stats()
    ledger.close()
    fold_rows(path)  # as darwin-memo left it before schema 10
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE energy_sums")
    conn.execute("DELETE FROM schema_migrations WHERE version >= 10")
    conn.commit()
    conn.close()
    ledger = Ledger.open(path)
    assert ledger.stats() == stats
    _sound(ledger.store)
    assert sum(v[0] for v in read_sums(ledger.store.conn).kinds.values()) == len(QUESTIONS) - 1
    ledger.close()


def test_a_row_anchored_after_the_tick_is_summed_by_a_scan(tmp_path: Path) -> None:
    ledger = Ledger.open(tmp_path / "store.db")
    for q in QUESTIONS:
        ledger.add(q, "do it")
    ledger.tick()
    store = ledger.store
    store.conn.execute("UPDATE entries SET anchor = anchor + 5 WHERE rowid = 1")
    assert store.exact_balances() is None  # the sums would charge it for ticks to come
    assert math.isclose(store.total_energy(), _rows_total(store), abs_tol=1e-9)
    ledger.close()


def test_verify_names_sums_that_disagree_with_the_rows(tmp_path: Path) -> None:
    ledger = Ledger.open(tmp_path / "store.db")
    for q in QUESTIONS:
        ledger.add(q, "do it")
    assert ledger.verify() == []
    ledger.store.conn.execute("UPDATE energy_sums SET entries = entries + 1")
    problems = ledger.verify()
    assert len(problems) == 1 and problems[0].startswith("energy_sums: kind 'experience'")
    ledger.close()
