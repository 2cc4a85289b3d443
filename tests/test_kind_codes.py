"""An entry's kind as a code in an SQLite store's rows (schema 15).

``entries.kind`` holds the kind's position in ``types.KIND_NAMES`` (rows written before
hold its name, and both read alike); a PostgreSQL store keeps the name.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from darwin_memo import EntryKind, MemoryEntry
from darwin_memo.backends.sqlite import SqliteBackend
from darwin_memo.backends.sqlstore import SqlStore, kind_column
from darwin_memo.backends.sums import read_sums, scan_sums
from darwin_memo.errors import StoreFormatError
from darwin_memo.types import KIND_CODES, KIND_NAMES, kind_name
from darwin_memo.ui_data import PageQuery, StoreView


def test_every_kind_has_a_frozen_code() -> None:
    assert sorted(KIND_NAMES) == sorted(k.value for k in EntryKind)
    assert KIND_NAMES[:5] == ("explicit", "inferred", "entity", "cross_doc", "experience")
    assert all(kind_name(KIND_CODES[k]) == k and kind_name(k) == k for k in KIND_NAMES)
    for bad in (str(len(KIND_NAMES)), "x", 9):
        with pytest.raises(StoreFormatError, match="no kind has"):
            kind_name(bad)


def _kinds(path: Path) -> list[tuple[str, str, object]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT id, typeof(kind), kind FROM entries ORDER BY id").fetchall()
    finally:
        conn.close()


def test_rows_hold_codes_and_rows_holding_names_read_alike(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SqlStore(SqliteBackend(path, create=True), max_energy=5.0, upkeep=0.5)
    kinds = [EntryKind.EXPLICIT, EntryKind.EXPERIENCE, EntryKind.ENTITY, EntryKind.INFERRED]
    for i in range(24):
        store.add(
            MemoryEntry(f"How do I restart worker {i}?", f"drain queue {i % 5}", id=f"e{i:02d}",
                        kind=kinds[i % 4], energy=1.0 + i % 3)
        )  # fmt: skip
    store.backend.close()
    assert {(t, len(k)) for _, t, k in _kinds(path)} == {("text", 1)}
    conn = sqlite3.connect(path)
    conn.execute(  # every third row as a store from before schema 15 holds it
        "UPDATE entries SET kind = CASE kind "
        + " ".join(f"WHEN '{c}' THEN '{n}'" for c, n in enumerate(KIND_NAMES))
        + " END WHERE rowid % 3 = 0"
    )
    conn.commit()
    conn.close()
    assert {len(k) > 1 for _, _, k in _kinds(path)} == {True, False}

    backend = SqliteBackend(path)
    store = SqlStore(backend, max_energy=5.0, upkeep=0.5)
    for i in range(24):
        entry = store.get(f"e{i:02d}")
        assert entry is not None and entry.kind is kinds[i % 4]
    shares = store.energy_share_by_kind()
    assert sorted(shares) == sorted(k.value for k in kinds)
    assert abs(sum(shares.values()) - 1.0) < 1e-9
    assert read_sums(backend.conn) == scan_sums(backend.conn)
    assert store.sums_problems() == []
    store.bury("e03")  # a row holding a name leaves the sums under its kind
    store.bury("e04")
    store.flush(store.dirty)
    assert read_sums(backend.conn) == scan_sums(backend.conn)
    backend.close()

    view = StoreView(path)
    try:
        for kind in kinds:
            want = sorted(
                f"e{i:02d}" for i in range(24) if kinds[i % 4] is kind and i not in (3, 4)
            )
            got = view.entries(PageQuery(kind=kind.value, limit=100))["entries"]
            assert sorted(r["id"] for r in got) == want
        dead = view.graveyard(PageQuery(kind="inferred", limit=100))["entries"]
        assert [r["id"] for r in dead] == ["e03"]
        rows = view.entries(PageQuery(sort="kind", order="asc", limit=100))["entries"]
        assert [r["kind"] for r in rows] == sorted(r["kind"] for r in rows)
        summary = view.summary()
    finally:
        view.close()
    names = sorted(k.value for k in kinds)
    assert summary["kinds"] == names and sorted(summary["stats"]["energy_share_by_kind"]) == names
    conn = sqlite3.connect(path)  # without the running sums: the GROUP BY kind paths
    conn.execute("DROP TABLE energy_sums")
    conn.commit()
    conn.close()
    view = StoreView(path)
    try:
        scanned = view.summary()
        assert scanned["kinds"] == names
        assert scanned["stats"]["energy_share_by_kind"] == summary["stats"]["energy_share_by_kind"]
        shares = view.ledger.store.energy_share_by_kind()
        assert sorted(shares) == names and abs(sum(shares.values()) - 1.0) < 1e-9
    finally:
        view.close()


def test_postgres_rows_keep_the_name() -> None:
    class NotSqlite:
        pass

    assert kind_column(NotSqlite(), "experience") == "experience"
    conn = sqlite3.connect(":memory:")
    assert kind_column(conn, "experience") == "4"
    conn.close()
