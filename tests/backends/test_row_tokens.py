"""A row's indexed tokens read from its text (schema 12).

An SQLite store leaves ``toks`` empty and reads a row's token set from its question and
answer columns (``sqlstore.row_tokens``). It must be exactly the set the index was built
from, ``entry_tokens``; rows an earlier schema wrote keep their ``toks`` and must be
buried and merged from it alike.
"""

from __future__ import annotations

import json
import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_packs import check_lists, small_blocks  # noqa: F401  (a fixture)

from darwin_memo import MemoryEntry
from darwin_memo.backends import sqlstore
from darwin_memo.backends.sqlite import SqliteBackend
from darwin_memo.backends.sqlstore import SqlStore, entry_tokens, row_tokens
from darwin_memo.errors import StoreFormatError
from darwin_memo.ledger import Ledger

# ASCII with what JSON escapes (quotes, backslashes, control characters), capitals,
# stopwords and plurals; and some text that is not ASCII.
_ASCII = st.lists(
    st.sampled_from(["the", "classes", "bus", "Tests", "v0.3"])
    | st.text(st.sampled_from(list('abcsxyzABCS019.*_-/:?! "\\\t\n\x01')), max_size=8),
    max_size=12,
).map(" ".join)
_ANY = _ASCII | st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)


@settings(max_examples=500, deadline=None)
@given(_ANY, _ANY)
def test_a_rows_tokens_are_the_entrys_tokens(q: str, a: str) -> None:
    entry = MemoryEntry(q.strip() or "q", a, id="e1")
    expect = " ".join(entry_tokens(entry))
    assert row_tokens("", entry.question + " " + entry.answer) == expect
    assert row_tokens("kept text", entry.text) == "kept text"  # a row before schema 12


def test_a_row_without_a_question_is_named_damaged() -> None:
    with pytest.raises(StoreFormatError, match=r"damaged.*verify"):
        row_tokens("", None)


def test_sqlite_rows_keep_no_tokens_and_postgres_rows_keep_them(pg_cluster: Any) -> None:
    from conftest import new_store

    for kind, kept in (("sqlite", False), ("postgres", True)):
        store = new_store(kind)
        entry = MemoryEntry("How do I restart the Workers?", "Drain them first", id="e1")
        store.add(entry)
        (toks,) = store.conn.execute("SELECT toks FROM entries WHERE id = 'e1'").fetchone()
        assert toks == (" ".join(entry_tokens(entry)) if kept else "")
        store.backend.close()


def _old_rows(path: Path) -> None:
    """Give every row the ``toks`` an earlier schema wrote (its tokens as text)."""
    conn = sqlite3.connect(path)
    rows = conn.execute("SELECT rowid, question || ' ' || answer FROM entries").fetchall()
    conn.executemany(
        "UPDATE entries SET toks = ? WHERE rowid = ?", [(row_tokens("", t), r) for r, t in rows]
    )
    conn.commit()
    conn.close()


@pytest.mark.parametrize("old", [False, True])
def test_burials_and_merges_keep_the_index_exact_with_either_kind_of_row(
    tmp_path: Path, old: bool
) -> None:
    rnd = random.Random(5)
    words = ["api", "worker", "queue", "restart", "cache", "pin", "drain", "deploy", "flag"]
    path = tmp_path / "s.db"
    store = SqlStore(SqliteBackend(path, create=True), max_energy=5.0, upkeep=0.25)
    for i in range(120):
        q = " ".join(rnd.sample(words, 4))
        store.add(MemoryEntry(q.title() + "?", f"do {rnd.choice(words)} {i % 7}", id=f"e{i:03d}"))
    store.backend.close()
    if old:
        _old_rows(path)
    backend = SqliteBackend(path)
    store = SqlStore(backend, max_energy=5.0, upkeep=0.25)
    (kept,) = backend.conn.execute("SELECT COUNT(*) FROM entries WHERE toks <> ''").fetchone()
    assert (kept == 120) is old
    from darwin_memo.retrieval.simjoin import merge_groups

    merges = merge_groups(store, cycle=1, threshold=0.55)
    store.flush(store.dirty)
    assert merges
    check_lists(backend.conn)
    for _ in range(3):  # lazy upkeep's deaths: buried one by one
        store.charge_upkeep()
        store.flush(store.dirty)
    check_lists(backend.conn)
    (dead,) = backend.conn.execute("SELECT COUNT(*) FROM entries WHERE alive = 0").fetchone()
    assert dead > len(merges)
    backend.close()


def test_the_graveyard_is_searched_by_the_tokens_of_its_rows(tmp_path: Path) -> None:
    backend = SqliteBackend(tmp_path / "s.db", create=True)
    store = SqlStore(backend, max_energy=5.0, upkeep=0.05)
    store.add(MemoryEntry("Can I delete the Offsite backups?", "no", id="gone1"))
    store.add(MemoryEntry("Rotate the keys?", "yearly", id="gone2"))
    store.bury("gone1")
    store.bury("gone2")
    store.flush(store.dirty)
    conn = backend.conn
    assert conn.execute("SELECT COUNT(*) FROM entries WHERE alive = 0").fetchone() == (2,)
    hits = conn.execute(
        "SELECT id FROM entries WHERE alive = 0 AND "
        "instr(' ' || darwin_row_tokens(toks, question || ' ' || answer) || ' ', ' offsite ') > 0"
    ).fetchall()
    assert hits == [("gone1",)]
    assert conn.execute("SELECT darwin_row_tokens('', NULL)").fetchone() == ("",)
    assert sqlstore.toks_column(conn, ["a", "b"]) == ""
    backend.close()


def test_the_graveyard_search_finds_rows_whatever_their_text(tmp_path: Path) -> None:
    """The dashboard's condition (a cheap test of the text first) misses no row: text
    that NFKC changes, text that is not ASCII."""
    from darwin_memo.backends.pages import _HOLDS_TOKEN

    backend = SqliteBackend(tmp_path / "s.db", create=True)
    store = SqlStore(backend, max_energy=5.0, upkeep=0.05)
    texts = {
        "plain": "Delete the OFFSITE backups?",
        "wide": "Ｏｆｆｓｉｔｅ backups: delete?",  # NFKC: "offsite"
        "accent": "Café offsite backups?",
        "escaped": 'Café offsite backups, "quoted"?',
        "other": "Rotate the keys?",
    }
    for name, question in texts.items():
        store.add(MemoryEntry(question, "no", id=name))
        store.bury(name)
    store.flush(store.dirty)
    conn = backend.conn
    for token, expect in (("offsite", ["accent", "escaped", "plain", "wide"]), ("caf", [])):
        found = conn.execute(
            f"SELECT id FROM entries WHERE alive = 0 AND {_HOLDS_TOKEN} ORDER BY id",
            (token, f" {token} "),
        ).fetchall()
        assert [i for (i,) in found] == expect
    (cafe,) = [t for t in entry_tokens(MemoryEntry(texts["accent"], "no")) if t.startswith("caf")]
    found = conn.execute(
        f"SELECT id FROM entries WHERE alive = 0 AND {_HOLDS_TOKEN} ORDER BY id",
        (cafe, f" {cafe} "),
    ).fetchall()
    assert [i for (i,) in found] == ["accent", "escaped"]
    backend.close()


def _indexed_store(path: Path) -> SqlStore:
    rnd = random.Random(9)
    words = ["api", "worker", "queue", "restart", "cache", "pin", "drain", "deploy"]
    store = SqlStore(SqliteBackend(path, create=True), max_energy=5.0, upkeep=0.05)
    for i in range(40):
        q = " ".join(rnd.sample(words, 3))
        store.add(MemoryEntry(q + "?", f"step {i} zq{i}", id=f"e{i:02d}"))
    store.bury("e05")
    store.flush(store.dirty)
    return store


@pytest.mark.usefixtures("small_blocks")  # (both kinds of list are checked)
def test_index_problems_name_what_disagrees_with_the_rows(tmp_path: Path) -> None:
    store = _indexed_store(tmp_path / "s.db")
    conn = store.conn
    assert store.index_problems() == []
    (dense,) = conn.execute("SELECT COUNT(*) FROM tokens WHERE dense = 1").fetchone()
    assert dense > 0

    def token_id(token: str) -> int:
        return int(conn.execute("SELECT id FROM tokens WHERE token = ?", (token,)).fetchone()[0])

    # bits and a pack without their rows; a df off by one; a token the index forgot
    conn.execute("DELETE FROM blocks WHERE token_id = ?", (token_id("step"),))
    conn.execute("UPDATE tokens SET ids = NULL WHERE token = 'zq3'")
    conn.execute("UPDATE tokens SET df = df + 1 WHERE token = 'zq7'")
    conn.execute("DELETE FROM tokens WHERE token = 'zq8'")
    conn.execute("INSERT INTO blocks VALUES (?, 0, x'01')", (token_id("step") + 10**6,))
    problems = store.index_problems()
    assert len(problems) == 5, problems
    assert "index: token 'step' (df 39) lists 0 entries, 39 living rows hold it" in problems
    assert "index: token 'zq3' (df 1) lists 0 entries, 1 living rows hold it" in problems
    assert "index: token 'zq7' (df 2) lists 1 entries, 1 living rows hold it" in problems
    assert "index: 1 living rows hold token 'zq8', not listed" in problems
    assert "index: lists of 1 unknown token ids" in problems  # bits no token owns
    assert store.index_problems(limit=2)[-1] == "index: ... and 3 more"
    store.backend.close()


def test_verify_reports_a_damaged_index(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = tmp_path / "s.db"
    ledger = Ledger.open(path, create=True)
    for i in range(5):
        ledger.add(f"How do I drain queue {i}?", "pause the workers")
    assert ledger.verify() == []
    ledger.backend.conn.execute("UPDATE tokens SET ids = NULL")  # every list lost
    problems = ledger.verify()
    assert problems and all(p.startswith("index: token") for p in problems)
    ledger.close()
    out = subprocess.run(
        [sys.executable, "-m", "darwin_memo", "ledger", str(path), "verify"],
        capture_output=True,
        text=True,
    )
    report = json.loads(out.stdout)
    assert report["ok"] is False and "'drain' (df 5) lists 0 entries" in " ".join(
        report["problems"]
    )
    assert "Traceback" not in out.stderr


def test_index_problems_on_postgresql(pg_cluster: Any) -> None:
    from conftest import new_store

    store = new_store("postgres")
    for i in range(6):
        store.add(MemoryEntry(f"How do I drain queue {i}?", f"pause worker w{i}", id=f"e{i}"))
    store.bury("e5")
    store.flush(store.dirty)
    assert store.index_problems() == []
    conn = store.conn
    (drain,) = conn.execute("SELECT id FROM tokens WHERE token = 'drain'").fetchone()
    conn.execute(
        "DELETE FROM postings WHERE token_id = ? AND entry_rowid = ("
        "SELECT MIN(entry_rowid) FROM postings WHERE token_id = ?)",
        (drain, drain),
    )
    conn.execute("UPDATE tokens SET df = df + 1 WHERE token = 'w1'")
    conn.execute("INSERT INTO postings (token_id, entry_rowid) VALUES (999999, 1)")
    problems = store.index_problems()
    assert sorted(problems) == [
        "index: lists of 1 unknown token ids",
        "index: token 'drain' (df 5) lists 4 entries, 5 living rows hold it",
        "index: token 'w1' (df 2) lists 1 entries, 1 living rows hold it",
    ], problems
    store.backend.close()
