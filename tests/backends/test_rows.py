"""An SQLite row, as people read it (schema 16), and the migration that wrote it so.

A row holds its entry's question, answer, kind and sources in plain columns, and the
rest of the entry as a JSON object in ``data`` without the fields at their defaults.
``m016_readable_rows`` rewrites every row an earlier schema wrote (the whole
``to_dict``, the compact object, the list of a lesson's values, the coded list, a
kind held as a digit) in that form.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from darwin_memo import EntryKind, MemoryEntry
from darwin_memo.backends import migrations as mig
from darwin_memo.backends.migrations import MIGRATIONS
from darwin_memo.backends.sqlstore import read_row, row_values
from darwin_memo.errors import StoreFormatError
from darwin_memo.ledger import Ledger

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


_DEFAULTS = (("born_cycle", 0), ("last_used_cycle", -1), ("uses", 0), ("lineage", []))


@given(entries())
@settings(max_examples=300, deadline=None)
def test_a_row_reads_back_as_the_entry_it_was_written_from(entry: MemoryEntry) -> None:
    kind, question, answer, sources, data = row_values(entry)
    assert (kind, question, answer) == (entry.kind.value, entry.question, entry.answer)
    assert json.loads(sources) == entry.sources
    held = json.loads(data)
    assert isinstance(held, dict)
    assert not {"id", "energy", "kind", "question", "answer", "sources"} & set(held)
    for key, default in _DEFAULTS:
        assert (key in held) == (getattr(entry, key) != default)
    back = read_row(data, entry.id, entry.energy, kind, question, answer, sources)
    assert back == entry and back.extra == entry.extra


def test_a_plain_lesson_keeps_only_its_recording_time_in_data() -> None:
    entry = MemoryEntry("why 502?", "restart nginx", sources=["ci"], recorded_ts="t", id="ab12")
    assert row_values(entry) == (
        "explicit",
        "why 502?",
        "restart nginx",
        '["ci"]',
        '{"recorded_ts":"t"}',
    )
    assert (
        read_row(
            '{"recorded_ts":"t"}', "ab12", 1.0, "explicit", "why 502?", "restart nginx", '["ci"]'
        )
        == entry
    )
    with pytest.raises(StoreFormatError, match="unknown kind 'nonsense'"):
        read_row('{"recorded_ts":"t"}', "ab12", 1.0, "nonsense", "q", "a", "[]")
    with pytest.raises(StoreFormatError, match="not a JSON object"):
        read_row('["q", "a", [], "t"]', "ab12", 1.0, "explicit", "q", "a", "[]")
    with pytest.raises(StoreFormatError, match="question"):
        read_row("{}", "ab12", 1.0, "explicit", None, "a", "[]")  # type: ignore[arg-type]
    with pytest.raises(StoreFormatError, match="sources"):
        read_row("{}", "ab12", 1.0, "explicit", "q", "a", "[1]")


def test_people_read_a_store_with_sqlite3(tmp_path: Path) -> None:
    """The columns and the ``lessons`` view answer plain SQL; the view's balance is the
    balance the ledger gives (lazy upkeep since each row's anchor, pinned floored)."""
    path = tmp_path / "lessons.db"
    with Ledger.open(path) as ledger:
        a = ledger.add("how do I clear the build cache", "delete .cache/build; it regrows")
        b = ledger.add("why do the api workers crashloop", "the queue url is unset", source="ci")
        c = ledger.add("which port does the dashboard use", "8765 by default")
        ledger.settle(ledger.decide("clear the build cache").id, 2.0, "freed 2 GB")
        ledger.pin(c.id)
        for _ in range(30):
            ledger.tick()
        balances = {e.id: e.energy for e in ledger.store.alive()}
    conn = sqlite3.connect(path)
    rows = conn.execute("SELECT id, question, answer, kind, sources FROM entries ORDER BY rowid")
    assert [r[1:] for r in rows][:2] == [
        (a.question, a.answer, "experience", '["agent"]'),
        (b.question, b.answer, "experience", '["ci"]'),
    ]
    seen = dict(conn.execute("SELECT id, energy FROM lessons"))
    assert seen.keys() == balances.keys() and len(seen) >= 2
    for entry_id, energy in balances.items():
        assert seen[entry_id] == pytest.approx(energy, abs=1e-12)
    assert seen[c.id] == 0.0  # pinned: floored, where the row's energy column is not
    (question,) = conn.execute("SELECT question FROM lessons WHERE id = ?", (a.id,)).fetchone()
    assert question == a.question
    assert conn.execute("SELECT typeof(data) FROM entries").fetchall() == [("text",)] * 3
    conn.close()


# -- m016: every earlier row form, rewritten --------------------------------------------


def _coded(text: str) -> bytes:
    """``text`` in schema 15's row code (the canonical Huffman code of
    ``migrations._ROW_CODE_LENGTHS``): what an SQLite store wrote for a lesson's list."""
    lengths = mig._ROW_CODE_LENGTHS
    codes, code, prev = {}, 0, 0
    for b in sorted(range(256), key=lambda b: (lengths[b], b)):
        code <<= lengths[b] - prev
        prev = lengths[b]
        codes[b] = code
        code += 1
    acc = bits = 0
    for b in text.encode("utf-8"):
        acc = (acc << lengths[b]) | codes[b]
        bits += lengths[b]
    pad = -bits % 8
    acc = (acc << pad) | ((1 << pad) - 1)
    return bytes([1]) + acc.to_bytes((bits + pad) // 8, "big")


def _store_at(path: Path, version: int) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(
        "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
        "applied_at TEXT NOT NULL)"
    )
    for number, name, fn in MIGRATIONS[:version]:
        conn.execute("BEGIN")
        fn(conn)
        conn.execute("INSERT INTO schema_migrations VALUES (?, ?, 'then')", (number, name))
        conn.execute("COMMIT")
    return conn


def test_m016_rewrites_every_earlier_form(tmp_path: Path) -> None:
    whole = MemoryEntry("q whole", "a whole", kind=EntryKind.ENTITY, sources=["s"], energy=2.0,
                        uses=2, id="e1")  # fmt: skip
    lesson = MemoryEntry("why 502? café", "restart nginx ✓", sources=["ci"], recorded_ts="t",
                         id="e2")  # fmt: skip
    dump = mig._dump_16
    listed = dump([lesson.question, lesson.answer, lesson.sources, lesson.recorded_ts])
    forms = {  # id -> (kind column, data)
        "e1": ("entity", dump({**whole.to_dict(), "energy": 9.5})),  # before schema 7
        "e2": ("4", _coded(listed)),  # schema 15: coded, kind as a digit
        "e3": ("experience", listed),  # schema 11
        "e4": (
            "2",
            dump(
                {
                    "question": "q4",
                    "answer": "a4",
                    "sources": [],
                    "uses": 0,
                    "recorded_ts": "t",
                    "note": 7,
                }
            ),
        ),
        "e5": ("4", "not json"),  # damage: left as it is
        "e6": ("1", _coded(listed)[:-3] + b"\x00\x00\x00"),  # a torn code: left too
    }
    path = tmp_path / "old.db"
    conn = _store_at(path, 15)
    for rowid, (entry_id, (kind, data)) in enumerate(forms.items(), 1):
        conn.execute(
            "INSERT INTO entries (rowid, id, alive, energy, kind, data, version, toks) "
            "VALUES (?, ?, 0, 1.5, ?, ?, 1, 'x')",
            (rowid, entry_id, kind, data),
        )
    assert mig._RowCode().text(_coded(listed)) == listed
    conn.execute("BEGIN")
    mig.m016_readable_rows(conn)
    conn.execute("COMMIT")
    got = {
        r[0]: r[1:]
        for r in conn.execute("SELECT id, kind, question, answer, sources, data FROM entries")
    }
    rest = {
        k: v
        for k, v in whole.to_dict().items()
        if k not in ("id", "energy", "kind", "question", "answer", "sources")
        and (k, v) not in (("born_cycle", 0), ("last_used_cycle", -1), ("lineage", []))
    }
    assert got["e1"][:4] == ("entity", "q whole", "a whole", '["s"]')
    assert json.loads(got["e1"][4]) == rest and rest["uses"] == 2
    assert got["e2"] == ("experience", lesson.question, lesson.answer, '["ci"]',
                         '{"recorded_ts":"t"}')  # fmt: skip
    assert got["e3"] == got["e2"]
    assert got["e4"] == ("entity", "q4", "a4", "[]", '{"recorded_ts":"t","note":7}')
    assert got["e5"] == ("experience", None, None, None, "not json")
    assert got["e6"][:4] == ("inferred", None, None, None)
    conn.close()


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


def test_m016_reports_progress_on_large_stores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    conn = _store_at(tmp_path / "old.db", 15)
    rows = [(i, f"e{i}", f'["q{i}","a{i}",[],"t"]') for i in range(1, 13)]
    conn.executemany(
        "INSERT INTO entries (rowid, id, alive, energy, kind, data, version) "
        "VALUES (?, ?, 1, 1.0, '4', ?, 1)",
        rows,
    )
    for threshold, lines in ((100, 0), (12, 1)):
        monkeypatch.setattr(mig, "PROGRESS_FROM", threshold)
        conn.execute("BEGIN")
        mig.m016_readable_rows(conn)
        conn.execute("ROLLBACK")
        err = capsys.readouterr().err.splitlines()
        assert err == ["darwin-memo: schema 16, plain rows: 12 of 12 entries"][:lines]
    conn.close()


def test_the_lessons_view_is_ours_only_as_created(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with Ledger.open(path) as ledger:
        ledger.add("q", "a")
    conn = sqlite3.connect(path, isolation_level=None)
    assert mig.foreign_objects(conn) == []
    conn.execute("DROP VIEW lessons")
    conn.execute(mig.SCHEMA_VIEWS["lessons"].replace("e.alive = 1", "e.alive = 0"))
    assert mig.foreign_objects(conn, code_only=True) == ["view 'lessons'"]
    conn.close()
    with pytest.raises(StoreFormatError, match="view 'lessons'"):
        Ledger.open(path)
