"""The row code (schema 15): a lesson's list row kept as a BLOB in a fixed Huffman code.

The C coder and the Python twin must give the same bytes and read them back exactly;
anything else in a BLOB is refused with StoreFormatError; a store codes its lessons,
reads rows written as text before, and answers, buries, merges and searches alike.
"""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import compiled_or_skip
from darwin_memo import MemoryEntry
from darwin_memo import textcode as tc
from darwin_memo.backends import sqlstore
from darwin_memo.backends.sqlite import SqliteBackend
from darwin_memo.backends.sqlstore import SqlStore, entry_tokens, row_json
from darwin_memo.consolidate import merge_groups
from darwin_memo.errors import StoreFormatError
from darwin_memo.ledger import Ledger
from darwin_memo.migrations import schema_version
from darwin_memo.retrieval import STOPWORDS
from darwin_memo.ui_data import PageQuery, StoreView
from test_packs import check_lists


def test_the_code_is_complete_and_canonical() -> None:
    """Every byte has a codeword of 1..12 bits and the Kraft sum is exactly one (so the
    one bits that fill the last byte never make a codeword)."""
    assert len(tc.LENGTHS) == 256
    assert all(1 <= n <= 12 for n in tc.LENGTHS)
    assert sum(2 ** (12 - n) for n in tc.LENGTHS) == 4096
    codes, _table = tc._canonical()
    words = {format(codes[b], f"0{tc.LENGTHS[b]}b") for b in range(256)}
    assert len(words) == 256 and not any(
        w != v and v.startswith(w) for w in words for v in words
    )  # prefix-free
    assert max(words, key=lambda w: (len(w), w)) == "1" * 12


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=400) | st.text(max_size=200).map(str.encode))
def test_python_codes_and_reads_back_any_bytes(raw: bytes) -> None:
    coded = tc._encode_python(raw)
    assert coded[0] == tc.CODE_1
    assert tc._decode_python(coded) == raw


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=400) | st.text(max_size=200).map(str.encode))
def test_c_gives_the_python_twins_bytes(raw: bytes) -> None:
    module = compiled_or_skip("_ctext")
    assert tc.compiled() is module
    coded = module.code_text(raw)
    assert coded == tc._encode_python(raw)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        with pytest.raises(ValueError):
            module.decode_text(coded)
    else:
        assert module.decode_text(coded) == text


@settings(max_examples=600, deadline=None)
@given(st.binary(max_size=24))
def test_c_and_python_refuse_the_same_damaged_blobs(tail: bytes) -> None:
    module = compiled_or_skip("_ctext")
    blob = bytes((tc.CODE_1,)) + tail
    try:
        want: str | None = tc._decode_python(blob).decode("utf-8")
    except ValueError:
        want = None
    try:
        got: str | None = module.decode_text(blob)
    except ValueError:
        got = None
    assert got == want


def test_damaged_or_unknown_blobs_are_a_store_format_error(monkeypatch: pytest.MonkeyPatch) -> None:
    good = tc.encode('["How do I restart the api?","Drain it first",[],"t"]')
    assert good is not None
    for compiled in (True, False):
        if not compiled:
            monkeypatch.setattr(tc, "_C", [False])  # the Python twin
        for blob in (b"", b"\x02" + good[1:], good[:1] + b"\x00\x00"):
            with pytest.raises(StoreFormatError, match=r"verify|newer darwin-memo"):
                tc.decode(blob)
            with pytest.raises(StoreFormatError, match=r"verify|newer darwin-memo"):
                sqlstore.read_row(blob, "e1", 1.0, "4")  # as a store reads its rows
        assert tc.decode(good) == '["How do I restart the api?","Drain it first",[],"t"]'


def test_lesson_prose_gets_shorter_and_what_would_not_stays_text() -> None:
    prose = (
        '["Why does test_checkout fail on eu-west-1 after a deploy?","The cache of the '
        'payments worker is stale; restart it before the run and pin it to v0.36.2.",'
        '["ci"],"2026-01-01T00:00:00+00:00"]'
    )
    coded = tc.encode(prose)
    assert coded is not None and len(coded) < 0.75 * len(prose.encode())
    assert tc.row_text(coded) == prose and tc.row_text(prose) == prose
    assert tc.encode("仕様変更のあとでワーカーを再起動する" * 3) is None  # 12 bits a byte: longer


def _typeof(path: Path) -> dict[str, str]:
    conn = sqlite3.connect(path)
    try:
        return dict(conn.execute("SELECT id, typeof(data) FROM entries").fetchall())
    finally:
        conn.close()


def test_a_store_codes_its_lessons_and_reads_them_in_either_twin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.db"
    ledger = Ledger.open(path)
    lessons = {
        "plain": MemoryEntry("How do I restart the api?", "Drain the queue first", id="plain"),
        "cjk": MemoryEntry("再起動の手順は?" * 4, "キューを先に空にする" * 4, id="cjk"),
        "used": MemoryEntry("When do I pin the worker?", "Before the deploy", id="used"),
    }
    for e in lessons.values():
        ledger.store.add(e)
    ledger.store.get("used").uses = 3  # a field off its default: kept as an object
    ledger.store.flush(["used"])
    ledger.close()
    assert schema_version(sqlite3.connect(path)) == 15
    assert _typeof(path) == {"plain": "blob", "cjk": "text", "used": "text"}
    for compiled in (True, False):
        if not compiled:
            monkeypatch.setattr(tc, "_C", [False])
            monkeypatch.setattr(sqlstore, "_ROW_TOKENS", [False])
        ledger = Ledger.open(path)
        try:
            for key, e in lessons.items():
                got = ledger.store.get(key)
                assert (got.question, got.answer) == (e.question, e.answer)
            ticket = ledger.decide("restart the api")
            assert ticket.deciding_entry == "plain"
        finally:
            ledger.close()


def test_rows_written_as_text_before_read_alike_and_code_when_rewritten(tmp_path: Path) -> None:
    """A store from before schema 15 holds its lessons as JSON text; a row is coded
    when next written, and both kinds answer, search and merge alike."""
    path = tmp_path / "s.db"
    rnd = random.Random(3)
    words = ["api", "worker", "queue", "restart", "cache", "pin", "drain", "deploy"]
    store = SqlStore(SqliteBackend(path, create=True), max_energy=5.0, upkeep=0.25)
    for i in range(60):
        q = " ".join(rnd.choice(words) for _ in range(4))
        store.add(MemoryEntry(f"How do I {q}?", f"Step {i % 7}: {q}", id=f"e{i:02d}"))
    store.backend.close()
    conn = sqlite3.connect(path)
    rows = conn.execute("SELECT rowid, data FROM entries WHERE rowid % 2 = 0").fetchall()
    conn.executemany(  # every other row as an earlier schema wrote it
        "UPDATE entries SET data = ? WHERE rowid = ?", [(tc.row_text(d), r) for r, d in rows]
    )
    conn.commit()
    conn.close()
    kinds = _typeof(path)
    assert set(kinds.values()) == {"blob", "text"}

    view = StoreView(path)
    try:
        found = view.entries(PageQuery(q="drain", limit=100))
        want = sorted(e.id for e in view.ledger.store.alive() if "drain" in e.text.lower())
        assert sorted(r["id"] for r in found["entries"]) == want and want
        assert view.entries(PageQuery(q="how do", limit=100))["total"] == 60  # by its text
        rows = view.entries(PageQuery(sort="question", order="asc", limit=100))["entries"]
        questions = [r["question"].lower() for r in rows]
        assert questions == sorted(questions) and len(questions) == 60
    finally:
        view.close()

    backend = SqliteBackend(path)
    store = SqlStore(backend, max_energy=5.0, upkeep=0.25)
    text_row = next(k for k, v in kinds.items() if v == "text")
    entry = store.get(text_row)
    assert entry is not None
    entry.question += " now"
    store.flush([text_row])
    assert _typeof(path)[text_row] == "blob"  # coded when written again
    merges = merge_groups(store, cycle=1, threshold=0.55)  # reads both kinds of row
    store.flush(store.dirty)
    assert merges
    check_lists(backend.conn)
    assert store.sums_problems() == []  # the members left the sums under their kind
    backend.close()
    view = StoreView(path)
    try:
        dead = view.graveyard(PageQuery(q="queue", limit=100))["entries"]
        want = {e.id for e in view.ledger.store.graveyard() if "queue" in e.text.lower()}
        assert want and {r["id"] for r in dead} == want
    finally:
        view.close()


def test_row_tokens_read_a_coded_row_in_c_as_in_python() -> None:
    module = compiled_or_skip("_ctext")
    tc.compiled()
    entry = MemoryEntry("How do I restart the Workers?", "Drain them first; pin v0.3", id="x")
    text = row_json(entry)
    coded = tc.encode(text)
    assert coded is not None
    assert module.row_tokens(coded, STOPWORDS) == module.row_tokens(text, STOPWORDS)
    assert module.row_tokens(coded, STOPWORDS) == " ".join(entry_tokens(entry))
    assert module.row_tokens(b"\x02abc", STOPWORDS) is None  # not a coded row: Python names it
