"""An SQLite row's ``data``: the entry without what its columns hold (schema 7).

Rows leave ``id`` and ``energy`` to their columns and omit fields at their defaults;
a lesson with nothing else is the list of its four values (schema 11); rows written
before schema 7 hold the whole ``to_dict``, and all of them read the same.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from darwin_memo import EntryKind, MemoryEntry
from darwin_memo.backends.sqlstore import _dumps, read_row, row_json
from darwin_memo.errors import StoreFormatError
from darwin_memo.ledger import Ledger
from darwin_memo.migrations import MIGRATIONS, schema_version
from darwin_memo.textcode import row_text

text = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=30
)
names = st.lists(st.text("abcdef0123", min_size=1, max_size=8), max_size=3)


@st.composite
def entries(draw: st.DrawFn) -> MemoryEntry:
    return MemoryEntry(
        question=draw(text.filter(str.strip)),
        answer=draw(text),
        kind=draw(st.sampled_from(list(EntryKind))),
        sources=draw(names),
        energy=draw(st.floats(-5, 5, allow_nan=False)),
        born_cycle=draw(st.just(0) | st.integers(-2, 40)),
        recorded_ts=draw(st.sampled_from(["", "2026-01-01T00:00:00+00:00"])),
        last_used_cycle=draw(st.just(-1) | st.integers(-1, 40)),
        uses=draw(st.just(0) | st.integers(0, 3)),
        lineage=draw(st.just([]) | names),
        pinned=draw(st.booleans()),
        probation=draw(st.just(0) | st.integers(0, 2)),
        juvenile=draw(st.just(0) | st.integers(0, 2)),
        imported_from=draw(st.none() | st.just("peer")),
        id=draw(st.text("0123456789abcdef", min_size=12, max_size=12)),
        extra=draw(st.dictionaries(st.sampled_from(["note", "x_tag"]), st.integers(), max_size=1)),
    )


@given(entries())
@settings(max_examples=300, deadline=None)
def test_a_row_reads_back_as_the_entry_it_was_written_from(entry: MemoryEntry) -> None:
    data = row_json(entry)
    held = json.loads(data)
    defaults = (("born_cycle", 0), ("last_used_cycle", -1), ("uses", 0), ("lineage", []))
    if isinstance(held, list):  # schema 11: a lesson's four values alone, in key order
        assert held == [entry.question, entry.answer, entry.sources, entry.recorded_ts]
        assert all(getattr(entry, key) == default for key, default in defaults)
    else:
        assert "id" not in held and "energy" not in held and "kind" not in held
        for key, default in defaults:
            assert (key in held) == (getattr(entry, key) != default)
    back = read_row(data, entry.id, entry.energy, entry.kind.value)
    assert back == entry and back.extra == entry.extra
    # A row written before schema 7 (the whole to_dict) reads the same.
    assert read_row(_dumps(entry.to_dict()), entry.id, entry.energy, "explicit") == entry


def test_a_plain_lessons_row_reads_through_the_short_path() -> None:
    entry = MemoryEntry("why 502?", "restart nginx", sources=["ci"], recorded_ts="t", id="ab12")
    data = row_json(entry)
    assert json.loads(data) == ["why 502?", "restart nginx", ["ci"], "t"]  # schema 11
    assert read_row(data, "ab12", 1.0, "explicit") == entry
    assert read_row(data, "ab12", 0.25, "consolidated").kind is EntryKind.CONSOLIDATED
    # The same under its keys, as schemas 7 to 10 wrote it, reads the same.
    keys = ["question", "answer", "sources", "recorded_ts"]
    keyed = json.dumps(dict(zip(keys, json.loads(data), strict=True)))
    assert read_row(keyed, "ab12", 1.0, "explicit") == entry
    # A row of an earlier development version of schema 7 kept its kind.
    assert (
        read_row(json.dumps({**json.loads(keyed), "kind": "entity"}), "ab12", 1.0, "inferred").kind
        == "entity"
    )
    with pytest.raises(StoreFormatError, match="unknown kind 'nonsense'"):
        read_row(data, "ab12", 1.0, "nonsense")
    # The same shape with a bad value is read by the careful path, which names it.
    for key, value in (("sources", [1]), ("recorded_ts", 7), ("question", None)):
        broken = json.dumps({**json.loads(keyed), key: value})
        with pytest.raises(StoreFormatError, match=key):
            read_row(broken, "ab12", 1.0, "explicit")
        listed = json.loads(data)
        listed[keys.index(key)] = value
        with pytest.raises(StoreFormatError, match=key):
            read_row(json.dumps(listed), "ab12", 1.0, "explicit")
    with pytest.raises(StoreFormatError, match="not a lesson's"):
        read_row(json.dumps(["why 502?", "restart nginx", ["ci"]]), "ab12", 1.0, "explicit")


def test_only_a_lesson_at_its_defaults_is_held_as_a_list() -> None:
    plain = MemoryEntry("q", "a", sources=["ci"], recorded_ts="t", id="ab12")
    assert isinstance(json.loads(row_json(plain)), list)
    for changed in (
        {"uses": 1},
        {"born_cycle": 3},
        {"lineage": ["x"]},
        {"pinned": True},
        {"probation": 2},
        {"imported_from": "peer"},
        {"extra": {"note": 1}},
    ):
        entry = MemoryEntry("q", "a", sources=["ci"], recorded_ts="t", id="ab12", **changed)
        held = json.loads(row_json(entry))
        assert isinstance(held, dict) and held["question"] == "q"
        assert read_row(row_json(entry), "ab12", entry.energy, "explicit") == entry


def _rows(path: Path) -> list[tuple[str, float, dict]]:
    conn = sqlite3.connect(path)
    try:
        return [
            (str(i), float(e), json.loads(row_text(d)))
            for i, e, d in conn.execute("SELECT id, energy, data FROM entries ORDER BY rowid")
        ]
    finally:
        conn.close()


def test_a_store_writes_compact_rows_and_reads_whole_ones(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    with Ledger.open(path) as ledger:
        a = ledger.add("how do I clear the build cache", "delete .cache/build; it regrows")
        b = ledger.add("why do the api workers crashloop", "the queue url is unset in staging")
        ticket = ledger.decide("clear the build cache")
        assert ticket.deciding_entry == a.id
        ledger.settle(ticket.id, 2.0, "freed 2 GB")
        ledger.tick()
        before = {e.id: e.to_dict() for e in ledger.store.alive()}
        assert schema_version(ledger.backend.conn) == len(MIGRATIONS) >= 7
    rows = {i: d for i, _, d in _rows(path)}
    assert set(rows) == {a.id, b.id}
    for data in rows.values():
        assert "id" not in data and "energy" not in data and "born_cycle" not in data
    assert rows[a.id]["uses"] == 1 and rows[a.id]["last_used_cycle"] == 0
    assert "uses" not in rows[b.id] and "lineage" not in rows[b.id]

    # The rows as darwin-memo wrote them before schema 7: whole, with a stale balance.
    conn = sqlite3.connect(path)
    with conn:
        for entry_id, data in before.items():
            conn.execute(
                "UPDATE entries SET data = ? WHERE id = ?",
                (json.dumps({**data, "energy": 4.75}), entry_id),
            )
    conn.close()
    with Ledger.open(path) as ledger:
        assert {e.id: e.to_dict() for e in ledger.store.alive()} == before
        ledger.settle(ledger.decide("api workers crashloop").id, 1.0, "fixed")
    rows = {i: d for i, _, d in _rows(path)}
    assert "id" not in rows[b.id] and rows[b.id]["uses"] == 1  # written again: compact
    assert rows[a.id]["id"] == a.id  # not written since: still whole, and still read
    with Ledger.open(path) as ledger:
        assert ledger.store.get(a.id).to_dict() == before[a.id]


def test_a_damaged_entries_page_is_store_corrupt_for_reads_too(tmp_path: Path) -> None:
    """Reads made outside a transaction (verify, obituary) name the damage as
    writes do, in process and at the CLI: no internal error, nothing written."""
    import subprocess
    import sys

    from darwin_memo.errors import StoreFormatError

    path = tmp_path / "store.db"
    with Ledger.open(path) as ledger:
        first = ledger.add("how do I clear the build cache", "delete .cache/build")
        for i in range(300):
            ledger.add(f"lesson {i} about the queue worker", f"restart worker {i} " * 8)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    pages = [
        p
        for (p,) in conn.execute(
            "SELECT pageno FROM dbstat WHERE name = 'entries' AND pagetype = 'leaf'"
        )
    ]
    (size,) = conn.execute("PRAGMA page_size").fetchone()
    conn.close()
    assert len(pages) > 3
    with open(path, "r+b") as fh:
        for page in pages:  # every leaf of the entries table: rows unreadable, rest intact
            fh.seek((page - 1) * size + 8)
            fh.write(bytes(range(7, 251)) * 8)
    damaged = path.read_bytes()
    with Ledger.open(path) as ledger:
        for read in (ledger.verify, lambda: ledger.obituary(first.id)):
            with pytest.raises(StoreFormatError, match="malformed"):
                read()
    for op in (["verify"], ["obituary", first.id]):
        run = subprocess.run(
            [sys.executable, "-m", "darwin_memo", "ledger", str(path), *op],
            capture_output=True,
            text=True,
            check=False,
        )
        assert run.returncode == 1 and "Traceback" not in run.stderr
        assert json.loads(run.stdout)["code"] == "store_corrupt", run.stdout
    assert path.read_bytes() == damaged
