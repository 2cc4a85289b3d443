"""The journal as an SQL store holds it: a large snapshot deflated, read back as written."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from darwin_memo import MemoryEntry, MemoryStore
from darwin_memo.backends.journal import (
    PACKED_MIN_ENTRIES,
    EventLog,
    event_log_path,
    pack_record,
    unpack_record,
)
from darwin_memo.ledger import Ledger
from darwin_memo.transfer import copy_store

row = st.tuples(
    st.text(min_size=1, max_size=12),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.booleans(),
).map(list)


@settings(max_examples=60, deadline=None)
@given(st.lists(row, max_size=PACKED_MIN_ENTRIES + 40), st.sampled_from(["snapshot", "tick"]))
def test_a_packed_record_reads_back_as_written(entries: list[Any], event: str) -> None:
    record = {"event": event, "tick": 3, "ts": "t", "tick_count": 3, "max_energy": 5.0}
    record |= {"entries": entries, "pending": [["T1", ["a"]]]}
    held = json.loads(json.dumps(pack_record(record)))
    packed = event == "snapshot" and len(entries) >= PACKED_MIN_ENTRIES
    assert (held.get("entries_encoding") == "zlib+base64") == packed
    back = unpack_record(held)
    assert back == record and list(back) == list(record)  # key for key, in order


def _json_store(path: Path, n: int) -> Path:
    store = MemoryStore()
    for i in range(n):
        store.add(
            MemoryEntry(f"How do I restart worker {i}?", f"Drain it first ({i}).", id=f"L{i}")
        )
    ledger = Ledger(store)
    ledger.save(path)
    return path


def test_a_migrated_store_holds_its_snapshot_deflated(tmp_path: Path) -> None:
    n = PACKED_MIN_ENTRIES * 4
    source = _json_store(tmp_path / "s.json", n)
    dest = tmp_path / "s.db"
    copy_store(source, dest)
    conn = sqlite3.connect(dest)
    (data,) = conn.execute("SELECT data FROM events WHERE event = 'snapshot'").fetchone()
    conn.close()
    assert len(data) < 10 * n  # the plain list is over 30 bytes an entry
    with Ledger.open(dest) as ledger:
        (snapshot,) = [e for e in ledger.events() if e["event"] == "snapshot"]
        assert "entries_encoding" not in snapshot
        assert snapshot["entries"] == [[f"L{i}", 1.0, True, False] for i in range(n)]
        ticket = ledger.decide("How do I restart worker 7?")
        ledger.settle(ticket.id, 2.0, "test")
        ledger.tick()
        assert ledger.verify() == []
    back = tmp_path / "back.json"  # and out again: the JSON file's journal is plain JSON lines
    copy_store(dest, back)
    lines = list(EventLog(event_log_path(back)).read())
    plain = [r for r in lines if r["event"] == "snapshot"]
    assert plain and all("entries_encoding" not in r for r in plain)
    assert plain[0]["entries"] == snapshot["entries"]
    with Ledger.open(back) as ledger:
        assert ledger.verify() == []


def test_a_damaged_packed_snapshot_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    dest = tmp_path / "s.db"
    copy_store(_json_store(tmp_path / "s.json", PACKED_MIN_ENTRIES), dest)
    conn = sqlite3.connect(dest)
    (seq, data) = conn.execute("SELECT seq, data FROM events WHERE event = 'snapshot'").fetchone()
    record = json.loads(data)
    record["entries"] = record["entries"][:-8] + "!!!!!!!!"
    conn.execute("UPDATE events SET data = ? WHERE seq = ?", (json.dumps(record), seq))
    conn.commit()
    conn.close()
    with Ledger.open(dest) as ledger:
        problems = ledger.verify()
    assert any("cannot be read" in p for p in problems)
