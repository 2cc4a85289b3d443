"""SQLite keeps every token's postings as a pack or as bits, always equal to ``postings``.

Small thresholds (``DENSE_MIN``, ``DENSE_DROP``, ``BLOCK_SHIFT``) make small stores
exercise what large ones do: tokens turning dense and back, bits spread over blocks.
"""

from __future__ import annotations

import json
import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from darwin_memo import LexicalRetriever, MemoryEntry
from darwin_memo.backends import postings, sqlsearch, sqlstore
from darwin_memo.backends.sqlite import SqliteBackend
from darwin_memo.backends.sqlstore import SqlStore, bits_to_ids, pack_ids, unpack_ids
from darwin_memo.retrieval.lexical import tokenize

VOCAB = [f"w{i}" for i in range(30)] + ["api", "worker", "queue", "restart", "cache"]


def zipf_text(rnd: random.Random, n: int) -> str:
    return " ".join(VOCAB[min(int(rnd.paretovariate(1.1)) - 1, len(VOCAB) - 1)] for _ in range(n))


@pytest.fixture
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(postings, "DENSE_MIN", 6)
    monkeypatch.setattr(postings, "DENSE_DROP", 3)
    monkeypatch.setattr(postings, "BLOCK_SHIFT", 4)  # 16 rowids per block
    monkeypatch.setattr(postings, "_BLOCK_MASK", 15)


def check_lists(conn: sqlite3.Connection) -> int:
    """Every token's pack or bits hold exactly the living rows whose question and
    answer hold it (the row's ``toks``, where it keeps them, say the same), and its
    ``df`` counts them; returns how many tokens are dense."""
    holders: dict[str, list[int]] = {}
    for rowid, toks, entry_id, energy, kind, data, question, answer, sources in conn.execute(
        "SELECT rowid, toks, id, energy, kind, data, question, answer, sources FROM entries "
        "WHERE alive = 1"
    ):
        entry = sqlstore.read_row(data, entry_id, energy, kind, question, answer, sources)
        held = sqlstore.entry_tokens(entry)
        assert sqlstore.row_tokens(str(toks), question + " " + answer) == " ".join(held)
        assert toks in ("", " ".join(held))
        for t in held:
            holders.setdefault(t, []).append(int(rowid))
    names = {}
    dense_count = 0
    for token, token_id, df, dense, pack in conn.execute(
        "SELECT token, id, df, dense, ids FROM tokens"
    ).fetchall():
        names[token] = token_id
        truth = sorted(holders.get(token, []))
        assert len(truth) == df, token
        packs = [(pack,)] if pack is not None else []
        blocks = conn.execute(
            "SELECT block, bits FROM blocks WHERE token_id = ? ORDER BY block", (token_id,)
        ).fetchall()
        if dense:
            dense_count += 1
            assert token_id, "a token whose list is bits has an id"
            assert not packs
            assert all(bits and bits[-1] for _, bits in blocks), "trailing zeros trimmed"
            got = [
                r
                for block, bits in blocks
                for r in bits_to_ids(bits, block << postings.BLOCK_SHIFT)
            ]
        else:
            assert not blocks
            got = list(unpack_ids(packs[0][0])) if packs else []
            assert bool(packs) == bool(truth), "no empty packs are kept"
        assert got == truth
        assert list(postings.token_ids(conn, token, token_id, bool(dense))) == truth
    assert set(holders) <= set(names), "every living row's tokens are in tokens"
    ids = [i for i in names.values() if i]  # (schema 15: 0 until a token's list is bits)
    assert len(set(ids)) == len(ids), "token ids are unique"
    top = conn.execute("SELECT value FROM counters WHERE name = 'token_ids'").fetchone()
    assert max(ids, default=0) <= (top[0] if top else 0), "new tokens take ids past every id"
    tables = {n for (n,) in conn.execute("SELECT name FROM sqlite_master")}
    assert "postings" not in tables and "packs" not in tables
    assert postings.index_problems(conn) == []  # and verify's check agrees
    return dense_count


def brute(store: SqlStore, query: str, k: int) -> list[tuple[str, float]]:
    ranked = LexicalRetriever(store.retriever.min_coverage).rank(query, store.alive())  # type: ignore[attr-defined]
    ranked.sort(key=lambda pair: (pair[1], pair[0].energy), reverse=True)
    return [(e.id, s) for e, s in ranked[:k]]


def at_schema(full: list[Any], version: int) -> list[Any]:
    """The migrations up to ``version``, the last one also adding the columns the store's
    code writes (schema 16's), so that code can write a store of that schema;
    ``fold_rows`` then gives its rows the form that schema held."""
    number, name, fn = full[version - 1]

    def with_columns(conn: sqlite3.Connection) -> None:
        fn(conn)
        for column in ("question", "answer", "sources"):
            conn.execute(f"ALTER TABLE entries ADD COLUMN {column} TEXT")

    return [*full[: version - 1], (number, name, with_columns)]


def fold_rows(path: Path) -> None:
    """The rows as schemas before 16 held them: question, answer and sources in ``data``
    (and no table of a later schema)."""
    conn = sqlite3.connect(path)
    rows = conn.execute("SELECT rowid, question, answer, sources, data FROM entries").fetchall()
    conn.executemany(
        "UPDATE entries SET data = ? WHERE rowid = ?",
        [
            (json.dumps({"question": q, "answer": a, "sources": json.loads(s), **json.loads(d)}), r)
            for r, q, a, s, d in rows
        ],
    )
    conn.execute("DROP VIEW IF EXISTS lessons")  # (schema 16's)
    for table in ("organic_links", "organic_state", "vectors"):  # (schemas 17 and 18)
        conn.execute(f"DROP TABLE IF EXISTS {table}")
    for column in ("question", "answer", "sources"):
        conn.execute(f"ALTER TABLE entries DROP COLUMN {column}")
    conn.commit()
    conn.close()


def new_store(tmp: Path, floor: float = 0.25) -> SqlStore:
    return SqlStore(
        SqliteBackend(tmp / "store.db"),
        max_energy=5.0,
        upkeep=0.05,
        retriever=LexicalRetriever(min_coverage=floor),
    )


def test_pack_and_bits_round_trip() -> None:
    ids = [0, 1, 7, 8, 255, 256, 65_535, 65_536, 2**31 + 5, 2**32 - 1]
    assert list(unpack_ids(pack_ids(ids))) == ids
    # The first rowid, then each gap less one, as unsigned LEB128 varints.
    assert pack_ids(ids)[:6] == bytes([0, 0, 5, 0, 0xF6, 0x01])
    assert pack_ids([300]) == bytes([0xAC, 0x02]) and pack_ids([]) == b""
    assert list(unpack_ids(bytes([0xAC, 0x02, 0x00, 0x7F]))) == [300, 301, 429]
    bits = bytes([0b1000_0001, 0, 0b0100_0000])
    assert bits_to_ids(bits) == [0, 7, 22]
    assert bits_to_ids(bits, 100) == [100, 107, 122]
    assert bits_to_ids(b"") == []
    # Sparse maps (under one nonzero byte in SPARSE_BYTES) are searched with find.
    rnd = random.Random(3)
    for count in (1, 5, 40, 400, 4000):
        ids = sorted(rnd.sample(range(80_000), count))
        buf = bytearray(10_000)
        for r in ids:
            buf[r >> 3] |= 1 << (r & 7)
        assert bits_to_ids(bytes(buf)) == ids
        assert bits_to_ids(bytes(buf), 7) == [r + 7 for r in ids]


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)  # the thresholds are the same for every example
@given(st.integers(0, 10_000), st.integers(10, 90), st.floats(0.0, 0.5))
def test_lists_follow_every_change_and_retrieval_stays_exact(
    small_blocks: None, tmp_path_factory: pytest.TempPathFactory, seed: int, size: int, floor: float
) -> None:
    rnd = random.Random(seed)
    store = new_store(tmp_path_factory.mktemp("packs"), floor)
    conn = store.conn
    conn.execute("BEGIN")
    entries = [
        store.add(
            MemoryEntry(
                zipf_text(rnd, rnd.randint(1, 7)),
                zipf_text(rnd, rnd.randint(0, 7)),
                energy=rnd.choice([0.5, 1.0, 2.0]),
            )
        )
        for _ in range(size)
    ]
    assert check_lists(conn) > 0, "some tokens turned dense"
    # Deaths take tokens back under DENSE_DROP; a changed question moves the postings.
    for entry in rnd.sample(entries, k=size // 2):
        store.bury(entry.id)
    for entry in store.alive()[:5]:
        entry.question = zipf_text(rnd, 4)
        store.flush([entry.id])
    for _ in range(size // 3):
        store.add(MemoryEntry(zipf_text(rnd, 5), zipf_text(rnd, 3)))
    conn.execute("COMMIT")
    check_lists(conn)
    for _ in range(12):
        query = zipf_text(rnd, rnd.randint(1, 6))
        k = rnd.randint(1, 6)
        store.forget_cached()
        assert [(e.id, s) for e, s in store.retrieve(query, k)] == brute(store, query, k), query
    store.backend.close()


def test_a_token_turns_dense_and_back(small_blocks: None, tmp_path: Path) -> None:
    store = new_store(tmp_path)
    conn = store.conn
    ids = [store.add(MemoryEntry(f"restart the worker {i}", "yes")).id for i in range(8)]
    dense = dict(conn.execute("SELECT token, dense FROM tokens").fetchall())
    assert dense["worker"] == 1 and dense["0"] == 0
    for entry_id in ids[:6]:
        store.bury(entry_id)
    assert dict(conn.execute("SELECT token, dense FROM tokens").fetchall())["worker"] == 0
    check_lists(conn)
    store.backend.close()


def test_cached_lists_see_changes_from_another_handle(tmp_path: Path) -> None:
    a = new_store(tmp_path)
    b = new_store(tmp_path)
    a.add(MemoryEntry("how do I restart the queue worker", "drain first"))
    assert [e.question for e, _ in b.retrieve("restart queue worker", 3)] == [
        "how do I restart the queue worker"
    ]
    a.add(MemoryEntry("restart queue worker safely", "with a drain"))
    assert len(b.retrieve("restart queue worker", 3)) == 2  # b's cached lists are stale
    # b also keeps each token's count and form (and that a token is unknown) while the
    # stamp holds: a token another handle brings, or takes away, is seen at once.
    assert b.retrieve("zephyr", 3) == []
    first = a.add(MemoryEntry("zephyr rotation for the queue", "rotate weekly"))
    assert [e.id for e, _ in b.retrieve("zephyr", 3)] == [first.id]
    for _ in range(3):
        a.add(MemoryEntry("queue worker zephyr", "again"))
    query = "zephyr rotation queue worker"
    assert [(e.id, s) for e, s in b.retrieve(query, 3)] == brute(b, query, 3)
    a.bury(first.id)
    assert [(e.id, s) for e, s in b.retrieve(query, 3)] == brute(b, query, 3)
    assert first.id not in {e.id for e, _ in b.retrieve("zephyr rotation", 3)}
    a.backend.close()
    b.backend.close()


def test_migration_gives_an_older_store_its_lists(
    small_blocks: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from darwin_memo.backends import migrations

    rnd = random.Random(4)
    full = list(migrations.MIGRATIONS)
    apply, unsettle, kept = postings.apply_list_changes, postings.unsettle, postings.postings_kept
    monkeypatch.setattr(migrations, "MIGRATIONS", at_schema(full, 3))  # before m004
    monkeypatch.setattr(migrations, "_DENSE_MIN", postings.DENSE_MIN)  # (small_blocks')
    monkeypatch.setattr(migrations, "_BLOCK_SHIFT", postings.BLOCK_SHIFT)
    monkeypatch.setattr(postings, "apply_list_changes", lambda *args: None)
    monkeypatch.setattr(postings, "unsettle", lambda *args: None)  # no m005 table either
    monkeypatch.setattr(postings, "postings_kept", lambda conn: True)  # m006 drops them
    old = new_store(tmp_path)
    for _ in range(60):
        old.add(MemoryEntry(zipf_text(rnd, 5), zipf_text(rnd, 3)))
    old.backend.close()
    fold_rows(tmp_path / "store.db")
    assert "packs" not in {
        name
        for (name,) in sqlite3.connect(tmp_path / "store.db").execute(
            "SELECT name FROM sqlite_master"
        )
    }
    monkeypatch.setattr(migrations, "MIGRATIONS", full)
    monkeypatch.setattr(postings, "apply_list_changes", apply)
    monkeypatch.setattr(postings, "unsettle", unsettle)
    monkeypatch.setattr(postings, "postings_kept", kept)
    store = new_store(tmp_path)
    conn = store.conn
    assert migrations.schema_version(conn) == len(migrations.MIGRATIONS)
    assert check_lists(conn) > 0
    store.add(MemoryEntry("restart the api worker", "after the drain"))
    check_lists(conn)
    for query in ("api worker", "restart the queue", "w1 w2 w3"):
        assert [(e.id, s) for e, s in store.retrieve(query, 3)] == brute(store, query, 3)
    store.backend.close()


def write_legacy_lists(conn: sqlite3.Connection) -> dict[str, list[int]]:
    """Give a store written with its lists switched off the lists schemas 4 to 12 kept:
    a ``packs`` row of 32-bit integers per token, bits (``blocks``) for a common one.
    Returns every token's list."""
    from darwin_memo.backends.migrations import _living_lists_v12, _pack32

    lists = _living_lists_v12(conn)
    ids = dict(conn.execute("SELECT token, id FROM tokens").fetchall())
    conn.execute("DELETE FROM packs")
    conn.execute("DELETE FROM blocks")
    for token, held in lists.items():
        dense = len(held) >= postings.DENSE_MIN
        if dense:
            postings._write_blocks(conn, ids[token], held, True)
        else:
            conn.execute("INSERT INTO packs VALUES (?, ?)", (ids[token], _pack32(held)))
        conn.execute("UPDATE tokens SET dense = ? WHERE token = ?", (int(dense), token))
    conn.commit()
    return lists


def old_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: int, seed: int, n: int
) -> None:
    """A store at schema ``version`` (4 to 12) with ``n`` entries and its lists as that
    schema kept them, closed."""
    from darwin_memo.backends import migrations

    full = list(migrations.MIGRATIONS)
    rnd = random.Random(seed)
    with monkeypatch.context() as patch:
        patch.setattr(migrations, "MIGRATIONS", at_schema(full, version))
        patch.setattr(postings, "apply_list_changes", lambda *args: None)
        old = new_store(tmp_path)
        for _ in range(n):
            old.add(MemoryEntry(zipf_text(rnd, 6), zipf_text(rnd, 3)))
        old.backend.close()
    fold_rows(tmp_path / "store.db")
    conn = sqlite3.connect(tmp_path / "store.db")
    # Before schema 15 every token took an id from the counter as it came.
    unnamed = [t for (t,) in conn.execute("SELECT token FROM tokens WHERE id = 0")]
    if unnamed:
        (top,) = conn.execute("SELECT value FROM counters WHERE name = 'token_ids'").fetchone()
        conn.executemany(
            "UPDATE tokens SET id = ? WHERE token = ?",
            [(top + i, t) for i, t in enumerate(unnamed, 1)],
        )
        conn.execute(
            "UPDATE counters SET value = ? WHERE name = 'token_ids'", (top + len(unnamed),)
        )
    write_legacy_lists(conn)
    conn.close()


def test_m008_keeps_the_vocabulary_once_with_its_ids(
    small_blocks: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from darwin_memo.backends import migrations

    old_store(tmp_path, monkeypatch, 7, seed=8, n=80)  # a store written before m008
    path = tmp_path / "store.db"
    conn = sqlite3.connect(path)
    before = sorted(conn.execute("SELECT token, id, df, dense FROM tokens").fetchall())
    assert sum(dense for *_, dense in before) > 0
    assert "sqlite_autoindex_tokens_1" in {
        n for (n,) in conn.execute("SELECT name FROM sqlite_master")
    }
    conn.close()

    store = new_store(tmp_path)
    conn = store.conn
    assert migrations.schema_version(conn) == len(migrations.MIGRATIONS)
    (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'tokens'").fetchone()
    assert "WITHOUT ROWID" in sql
    names = {n for (n,) in conn.execute("SELECT name FROM sqlite_master")}
    assert not {n for n in names if n.startswith("sqlite_autoindex_tokens")}, "text held once"
    assert sorted(conn.execute("SELECT token, id, df, dense FROM tokens").fetchall()) == before
    check_lists(conn)
    top = max(token_id for _, token_id, _, _ in before)
    store.add(MemoryEntry("zebra quokka api", "w1 restart"))  # two new tokens, three known
    fresh = dict(conn.execute("SELECT token, id FROM tokens WHERE token IN ('quokka', 'zebra')"))
    assert fresh == {"quokka": 0, "zebra": 0}  # (schema 15) no id until the list is bits
    counter = conn.execute("SELECT value FROM counters WHERE name = 'token_ids'").fetchone()
    assert counter == (top,)  # the next token to go to bits takes top + 1
    check_lists(conn)
    for query in ("zebra api", "restart the queue", "w1 w2 w3", "quokka"):
        assert [(e.id, s) for e, s in store.retrieve(query, 3)] == brute(store, query, 3)
    store.backend.close()


def test_m013_moves_every_list_into_its_vocabulary_row(
    small_blocks: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from darwin_memo.backends import migrations
    from darwin_memo.backends.migrations import _unpack32

    old_store(tmp_path, monkeypatch, 12, seed=13, n=120)  # a store written before m013
    conn = sqlite3.connect(tmp_path / "store.db")
    packs = {
        token: list(_unpack32(blob))
        for token, blob in conn.execute(
            "SELECT t.token, p.ids FROM tokens t JOIN packs p ON p.token_id = t.id"
        )
    }
    bits = conn.execute("SELECT * FROM blocks ORDER BY token_id, block").fetchall()
    vocabulary = sorted(conn.execute("SELECT token, id, df, dense FROM tokens").fetchall())
    assert packs and bits
    conn.close()

    store = new_store(tmp_path)
    conn = store.conn
    assert migrations.schema_version(conn) == len(migrations.MIGRATIONS) >= 13
    assert sorted(conn.execute("SELECT token, id, df, dense FROM tokens").fetchall()) == vocabulary
    moved = {
        token: list(unpack_ids(blob))
        for token, blob in conn.execute("SELECT token, ids FROM tokens WHERE ids IS NOT NULL")
    }
    assert moved == packs
    assert conn.execute("SELECT * FROM blocks ORDER BY token_id, block").fetchall() == bits
    check_lists(conn)  # and no packs table
    rnd = random.Random(1)
    for _ in range(30):
        store.add(MemoryEntry(zipf_text(rnd, 6), zipf_text(rnd, 3)))
    for entry in store.alive()[:40]:
        store.bury(entry.id)
    check_lists(conn)
    for query in ("api worker", "restart the queue", "w1 w2 w3", "w7 cache"):
        assert [(e.id, s) for e, s in store.retrieve(query, 3)] == brute(store, query, 3)
    store.backend.close()


def test_m013_moves_a_pack_out_of_order_sorted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 32-bit pack with its rowids out of order or twice (damage a varint pack cannot
    hold) is moved as the sorted set, and the store opens."""
    from darwin_memo.backends.migrations import _pack32, _unpack32

    old_store(tmp_path, monkeypatch, 12, seed=3, n=40)
    conn = sqlite3.connect(tmp_path / "store.db")
    token_id, blob = conn.execute(
        "SELECT token_id, ids FROM packs WHERE length(ids) >= 12 LIMIT 1"
    ).fetchone()
    ids = list(_unpack32(blob))
    conn.execute(
        "UPDATE packs SET ids = ? WHERE token_id = ?", (_pack32(ids[::-1] + ids[:1]), token_id)
    )
    conn.commit()
    conn.close()
    store = new_store(tmp_path)
    check_lists(store.conn)
    store.backend.close()


def test_m013_run_again_builds_lost_lists_from_the_rows(small_blocks: None, tmp_path: Path) -> None:
    """A vocabulary rebuilt by an earlier migration run again (no ``ids`` column, no
    ``packs``) gets its lists back from the rows."""
    store = new_store(tmp_path)
    rnd = random.Random(2)
    for _ in range(70):
        store.add(MemoryEntry(zipf_text(rnd, 6), zipf_text(rnd, 3)))
    store.backend.close()
    fold_rows(tmp_path / "store.db")  # (schema 12's rows)
    conn = sqlite3.connect(tmp_path / "store.db")
    conn.execute("ALTER TABLE tokens DROP COLUMN ids")
    conn.execute("DELETE FROM schema_migrations WHERE version >= 13")
    conn.commit()
    conn.close()

    store = new_store(tmp_path)
    check_lists(store.conn)
    store.backend.close()


def test_a_torn_pack_is_a_one_line_error_that_names_verify(tmp_path: Path) -> None:
    from darwin_memo.errors import StoreFormatError

    store = new_store(tmp_path)
    store.add(MemoryEntry("rotate the zq3 signing key", "run rotate-key"))
    store.add(MemoryEntry("zq3 restart", "drain first"))
    store.backend.close()
    conn = sqlite3.connect(tmp_path / "store.db")
    conn.execute("UPDATE tokens SET ids = x'01ff' WHERE token = 'zq3'")  # cut short
    conn.commit()
    conn.close()
    store = new_store(tmp_path)
    with pytest.raises(StoreFormatError, match=r"torn.*darwin-memo ledger FILE verify"):
        store.retrieve("zq3", 3)
    assert "index: token 'zq3''s pack is torn" in postings.index_problems(store.conn)
    store.backend.close()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_ties_rank_by_the_balance_now(kind: str, request: pytest.FixtureRequest) -> None:
    """Tied scores go to the higher balance after lazy upkeep (pinned floored at 0)."""
    from conftest import new_store as any_store

    if kind == "postgres":
        request.getfixturevalue("pg_cluster")
    store = any_store(kind)
    energies = [0.5, 2.0, 1.0, 2.0, 0.2, 3.0, 1.0, 0.1, 2.5, 0.3]
    for i, energy in enumerate(energies):
        store.tick = i * 4  # anchors differ, so upkeep since then differs
        store.add(
            MemoryEntry("restart the api worker", f"answer {i}", energy=energy, pinned=i % 3 == 0)
        )
    for now in (0, 20, 41, 400):
        store.tick = now
        store.forget_cached()
        for k in (1, 3, 5):
            got = [(e.id, s) for e, s in store.retrieve("restart api worker", k)]
            assert got == brute(store, "restart api worker", k), (now, k)
            assert len(got) == k


@pytest.mark.parametrize("groups", [1, 2, 3, 64])
def test_many_ties_read_the_highest_balance_first(
    groups: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Entries tied at the k-th score: when the lowest rowids hold the highest balance of
    any living entry, only they are read; otherwise (a higher balance elsewhere, balances
    set at more ticks than ``TIE_GROUPS``) every tied row is. Same ranking either way."""
    monkeypatch.setattr(sqlsearch, "TIES_BOUNDED", 2)
    monkeypatch.setattr(sqlsearch, "TIE_GROUPS", groups)
    rnd = random.Random(groups)
    store = new_store(tmp_path)
    statements: list[str] = []
    store.conn.set_trace_callback(statements.append)
    for round_ in range(12):
        store.conn.execute("BEGIN")
        for _ in range(rnd.randint(5, 30)):
            # Few balances, anchors and pins, so equal balances are common.
            store.tick = rnd.choice([0, 0, 0, 3, 8])
            store.add(
                MemoryEntry(
                    rnd.choice(["restart the api worker", "restart the api", "drain the queue"]),
                    "x",
                    energy=rnd.choice([1.0, 1.0, 1.0, 0.5, 2.0, 0.01]),
                    pinned=rnd.random() < 0.1,
                )
            )
        store.conn.execute("COMMIT")
        equal = round_ % 4 == 1
        if round_ % 2 == 1:  # some stores of equal balances (the shortcut's case)
            store.conn.execute("UPDATE entries SET energy = 1.0, anchor = 0, pinned = 0")
        if round_ % 4 == 3:
            # ... but for the last tied entry: pinned, or its balance set at a later tick.
            store.conn.execute(
                "UPDATE entries SET energy = 3.0, pinned = ?, anchor = ? WHERE rowid = "
                "(SELECT MAX(rowid) FROM entries WHERE "
                "question = ?)",
                (round_ % 8 == 3, 0 if round_ % 8 == 3 else 2, "restart the api worker"),
            )
        for now in (0, 5, 30, 200):
            store.tick = now
            for k in (1, 3, 6):
                store.forget_cached()
                statements.clear()
                got = [(e.id, s) for e, s in store.retrieve("restart api worker", k)]
                assert got == brute(store, "restart api worker", k), (round_, now, k)
                whole = any("ORDER BY now DESC" in sql for sql in statements)
                if equal and len(store) > k + 2:
                    assert not whole, "equal balances: the tied rows after the k-th are not read"
    store.backend.close()


def test_a_copied_store_gets_its_lists_in_bulk(small_blocks: None, tmp_path: Path) -> None:
    """``migrate`` into SQLite (the bulk writer) builds the same packs and blocks."""
    from darwin_memo import MemoryStore
    from darwin_memo.ledger import Ledger
    from darwin_memo.transfer import copy_store

    rnd = random.Random(7)
    ledger = Ledger(MemoryStore())
    for _ in range(80):
        ledger.store.add(MemoryEntry(zipf_text(rnd, 6), zipf_text(rnd, 3)))
    for entry in ledger.store.alive()[:10]:
        ledger.store.bury(entry.id)
    ledger.save(tmp_path / "lessons.json")
    copy_store(tmp_path / "lessons.json", tmp_path / "lessons.db")
    copied = Ledger.open(tmp_path / "lessons.db", create=False)
    store = copied.store
    assert isinstance(store, SqlStore)
    assert check_lists(store.conn) > 0
    for _ in range(10):
        query = zipf_text(rnd, 4)
        assert [(e.id, s) for e, s in store.retrieve(query, 4)] == brute(store, query, 4)
    # The rows' indexes, built after the rows, are the schema's own (as a new store's).
    fresh = SqliteBackend(tmp_path / "fresh.db")

    def schema(conn: sqlite3.Connection) -> list[tuple[str, str]]:
        return conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'index' ORDER BY name"
        ).fetchall()

    assert schema(store.conn) == schema(fresh.conn)
    assert {name for name, _ in schema(store.conn)} >= {"entries_balance", "entries_death"}
    assert store.conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    plan = " ".join(
        str(row[-1])
        for row in store.conn.execute(
            "EXPLAIN QUERY PLAN SELECT rowid FROM entries WHERE alive = 1 AND pinned = 0 "
            "AND death_tick <= 3"
        )
    )
    assert "entries_death" in plan
    fresh.close()
    copied.close()


def test_a_copied_store_is_compact_and_any_store_survives_vacuum(tmp_path: Path) -> None:
    """``migrate`` writes full pages; ``VACUUM`` (the user's or ours) keeps the lists true.

    The lists hold rowids, which SQLite documents that ``VACUUM`` may renumber in a
    table without an INTEGER PRIMARY KEY. A store never deletes a row (the dead keep
    theirs, heirs take the next), so its rows are numbered 1..n in order, the numbering
    a renumbering would give; this checks that a vacuumed store's index still agrees.
    """
    from darwin_memo import MemoryStore
    from darwin_memo.ledger import Ledger
    from darwin_memo.transfer import copy_store

    rnd = random.Random(5)
    ledger = Ledger(MemoryStore())
    for i in range(1500):
        ledger.store.add(MemoryEntry(f"{zipf_text(rnd, 6)} q{i}x", f"{zipf_text(rnd, 3)} a{i}y"))
    for entry in ledger.store.alive()[::7]:
        ledger.store.bury(entry.id)
    ledger.save(tmp_path / "lessons.json")
    copy_store(tmp_path / "lessons.json", tmp_path / "lessons.db")

    def pages(path: Path) -> int:
        conn = sqlite3.connect(path)
        try:
            return int(conn.execute("PRAGMA page_count").fetchone()[0])
        finally:
            conn.close()

    def vacuum(path: Path) -> None:
        conn = sqlite3.connect(path, isolation_level=None)
        try:
            conn.execute("VACUUM")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()

    copied = pages(tmp_path / "lessons.db")
    vacuum(tmp_path / "lessons.db")
    assert pages(tmp_path / "lessons.db") == copied, "nothing left for VACUUM to reclaim"

    # A store grown and consolidated in place (burials, heirs), then vacuumed.
    opened = Ledger.open(tmp_path / "lessons.db", create=False)
    for i in range(200):
        opened.store.add(MemoryEntry(f"{zipf_text(rnd, 5)} late{i}", zipf_text(rnd, 3)))
    opened.config.consolidate_every = 1
    assert opened.tick()["merges"]
    store = opened.store
    assert isinstance(store, SqlStore)
    assert store.dead_count() > 1500 // 7
    before = store.conn.execute("SELECT rowid, id FROM entries ORDER BY rowid").fetchall()
    assert [r for r, _ in before] == list(range(1, len(before) + 1))
    opened.close()
    vacuum(tmp_path / "lessons.db")
    reopened = Ledger.open(tmp_path / "lessons.db", create=False)
    store = reopened.store
    assert isinstance(store, SqlStore)
    assert store.conn.execute("SELECT rowid, id FROM entries ORDER BY rowid").fetchall() == before
    check_lists(store.conn)
    for _ in range(10):
        query = zipf_text(rnd, 4)
        assert [(e.id, s) for e, s in store.retrieve(query, 4)] == brute(store, query, 4)
    reopened.close()


def test_m014_keys_lineage_counters_and_meta_by_their_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A schema-13 store's three keyed tables become WITHOUT ROWID, their rows unchanged."""
    from darwin_memo.backends import migrations
    from darwin_memo.ledger import Ledger

    path = tmp_path / "old.db"
    rnd = random.Random(14)
    full = list(migrations.MIGRATIONS)
    with monkeypatch.context() as patch:
        patch.setattr(migrations, "MIGRATIONS", at_schema(full, 13))
        old = Ledger.open(path)
        for i in range(60):
            base = zipf_text(rnd, 5)
            old.add(f"{base} how {i % 7}", "restart the worker")
            old.add(f"{base} how {i % 7}", "restart the worker")  # a duplicate to merge
        old.config.consolidate_every = 1
        assert old.tick()["merges"]
        old.close()
    fold_rows(path)
    tables = ("lineage", "counters", "meta")
    conn = sqlite3.connect(path)
    before = {t: sorted(conn.execute(f"SELECT * FROM {t}").fetchall()) for t in tables}
    names = {n for (n,) in conn.execute("SELECT name FROM sqlite_master")}
    assert {f"sqlite_autoindex_{t}_1" for t in tables} <= names
    assert len(before["lineage"]) >= 60 and before["counters"] and before["meta"]
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.close()
    copy = sqlite3.connect(":memory:", isolation_level=None)  # m014 alone: in place
    sqlite3.connect(path).backup(copy)
    copy.execute("BEGIN")
    migrations.m014_keyed_tables_without_rowid(copy)
    copy.execute("COMMIT")
    assert copy.execute("PRAGMA page_count").fetchone()[0] <= pages, "the file did not grow"
    copy.close()

    ledger = Ledger.open(path, create=False)
    store = ledger.store
    assert isinstance(store, SqlStore)
    conn = store.conn
    assert migrations.schema_version(conn) == len(migrations.MIGRATIONS) >= 14
    for t in tables:
        (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (t,)).fetchone()
        assert "WITHOUT ROWID" in sql, t
        assert sorted(conn.execute(f"SELECT * FROM {t}").fetchall()) == before[t]
    names = {n for (n,) in conn.execute("SELECT name FROM sqlite_master")}
    assert not {f"sqlite_autoindex_{t}_1" for t in tables} & names
    member, heir = before["lineage"][0]
    assert store.heir_of(member) == heir
    heirs = {h for _, h in before["lineage"]}
    assert ledger.tick_count == 1
    assert len(ledger.store) == 120 - len(before["lineage"]) + len(heirs)
    ledger.add("one more lesson about quokkas", "feed them")  # writes counters and meta
    ledger.tick()
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    check_lists(conn)
    ledger.close()
    # And a new store is made so from the start (the same schema as the migrated one).
    fresh = Ledger.open(tmp_path / "new.db")
    assert isinstance(fresh.store, SqlStore)
    schema = "SELECT name, sql FROM sqlite_master WHERE name IN ('lineage', 'counters', 'meta')"
    migrated = sqlite3.connect(path)
    assert sorted(fresh.store.conn.execute(schema).fetchall()) == sorted(
        migrated.execute(schema).fetchall()
    )
    migrated.close()
    fresh.close()


def test_common_word_queries_walk_token_combinations(
    small_blocks: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Queries whose indexed tokens are all common take the bitmap path; same results."""
    rnd = random.Random(11)
    store = new_store(tmp_path, floor=0.2)
    store.conn.execute("BEGIN")
    for _ in range(300):
        store.add(MemoryEntry(zipf_text(rnd, 6), zipf_text(rnd, 4), energy=rnd.random() * 3))
    store.conn.execute("COMMIT")
    walked: list[bool] = []
    real = sqlsearch.top_by_combinations

    def spy(*args: object, **kwargs: object) -> object:
        found = real(*args, **kwargs)  # type: ignore[arg-type]
        walked.append(found is not None)
        return found

    monkeypatch.setattr(sqlsearch, "top_by_combinations", spy)
    queries = [zipf_text(rnd, rnd.randint(1, 6)) for _ in range(40)] + ["api worker nothere"]
    for query in queries:
        for k in (1, 3, 8):
            store.forget_cached()
            assert [(e.id, s) for e, s in store.retrieve(query, k)] == brute(store, query, k)
    assert sum(walked) > 40, "most of these queries are made of common tokens"


def test_mixed_queries_score_candidates_by_codes(
    small_blocks: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Queries with rare and common tokens take the code path (flags from packs and
    bitmaps, lists kept across searches); results equal the published scan's."""
    rnd = random.Random(5)
    store = new_store(tmp_path, floor=0.25)
    store.conn.execute("BEGIN")
    rare = [f"rare{i}" for i in range(150)]  # two or three holders each: packs
    for _ in range(400):
        words = zipf_text(rnd, 5) + " " + " ".join(rnd.sample(rare, rnd.randint(0, 2)))
        store.add(MemoryEntry(words, zipf_text(rnd, 3), energy=rnd.choice([0.5, 1.0, 2.0])))
    store.conn.execute("COMMIT")
    coded: list[tuple[bool, int]] = []  # (took the code path, indexed tokens)
    real = sqlsearch.top_by_codes

    def spy(*args: Any, **kwargs: Any) -> Any:
        found = real(*args, **kwargs)
        coded.append((found is not None, sum(args[2](t) > 0 for t in args[0])))
        return found

    monkeypatch.setattr(sqlsearch, "top_by_codes", spy)
    queries = [
        zipf_text(rnd, rnd.randint(1, 5)) + " " + " ".join(rnd.sample(rare, rnd.randint(1, 3)))
        for _ in range(40)
    ]
    queries += [" ".join(rare[:9]) + " api", "rare3 nothere", "w0 w1 w2 w3 w4 w5 w6 w7 rare1"]
    queries += [" ".join(rare[10:22]) + " w0 w1 w2", " ".join(VOCAB[:12]) + " rare5 rare6"]
    queries += [" ".join(VOCAB) + " rare7 rare8"]  # past 32 tokens: top_candidates
    for query in queries:
        for k in (1, 3, 8):
            if k == 3:
                store.forget_cached()  # rows read afresh (the lists stay cached)
            hits = store.retrieve(query, k)
            assert [(e.id, s) for e, s in hits] == brute(store, query, k), query
            for entry, _ in hits:  # the token sets the search remembered are the text's
                assert store.retriever.tokens(entry) == frozenset(tokenize(entry.text))
    assert sum(took for took, _ in coded) > 80, "mixed queries take the code path"
    assert any(took and m > 8 for took, m in coded), "past 8 tokens, one int per candidate"
    assert any(not took for took, _ in coded), "past 32 tokens, top_candidates"


def test_a_bitmap_read_whole_covers_later_rowids(small_blocks: None, tmp_path: Path) -> None:
    """A common token's bitmap read whole ends at its last holder; tests of later rowids
    against it (code path and top_candidates' path) read them as zeros."""
    store = new_store(tmp_path, floor=0.05)
    store.conn.execute("BEGIN")
    for i in range(8):
        store.add(MemoryEntry(f"early common{i % 2}", "first"))
    other = [f"late{i}" for i in range(40)]
    for i in range(120):
        store.add(MemoryEntry(f"{other[i % 40]} {other[(i + 1) % 40]} common{i % 2}", "later"))
    store.conn.execute("COMMIT")
    queries = ["early", "early common0", "early " + " ".join(other[:36]), "early late3 late4"]
    for query in queries:
        for k in (1, 3, 200):
            got = [(e.id, s) for e, s in store.retrieve(query, k)]
            assert got == brute(store, query, k), query
    store.backend.close()


def test_cached_packs_are_not_walked_by_the_cyclic_collector(tmp_path: Path) -> None:
    """A long-lived handle keeps rare tokens' rowids for membership tests; a set of them
    would be traversed at every garbage collection (tens of ms at a million entries)."""
    import gc

    rnd = random.Random(5)
    store = new_store(tmp_path)
    store.conn.execute("BEGIN")
    for _ in range(400):
        store.add(MemoryEntry(zipf_text(rnd, 6), zipf_text(rnd, 4)))
    store.conn.execute("COMMIT")
    for _ in range(40):
        query = zipf_text(rnd, rnd.randint(2, 6))
        assert [(e.id, s) for e, s in store.retrieve(query, 3)] == brute(store, query, 3), query
    assert store._sets, "some pack was kept for membership tests"
    assert not any(gc.is_tracked(held) for held in store._sets.values())
    store.backend.close()


def test_rows_buried_in_bulk_leave_every_list_and_come_back_when_listed_again(
    small_blocks: None, tmp_path: Path
) -> None:
    """A bulk burial takes its rows out of every list with one set (``ListChanges.gone``):
    after changes by rowid made earlier in the same batch, and undone for a row that is
    listed again later in it."""
    store = new_store(tmp_path)
    for i in range(40):
        store.add(MemoryEntry(f"restart api worker w{i % 3}", f"note {i}", id=f"e{i:02d}"))
    assert check_lists(store.conn) > 0  # the common words are bits already
    heir = MemoryEntry("restart api worker", "merged", id="h0", lineage=["e00", "e01", "e02"])
    edited = store.get("e03")
    assert edited is not None
    with store.deferred_lists():
        edited.question = "drain the queue first w7"  # new tokens listed by rowid...
        store._write(edited, True)
        heir2 = MemoryEntry("drain the queue", "merged", id="h1", lineage=["e03", "e04"])
        store.merge_many([(heir, ["e00", "e01", "e02"]), (heir2, ["e03", "e04"])])  # ...gone
        revived = store.get_dead("e01")
        assert revived is not None
        revived.question = "cache w9"  # listed again in the same batch, with other words
        store._write(revived, True)
    check_lists(store.conn)
    alive = {str(i) for (i,) in store.conn.execute("SELECT id FROM entries WHERE alive = 1")}
    assert {"e01", "h0", "h1"} <= alive and not {"e00", "e02", "e03", "e04"} & alive
    assert [e.id for e, _ in store.retrieve("drain queue w7", 5)] == ["h1"]
    assert "e01" not in [e.id for e, _ in store.retrieve("restart api worker w1", 50)]
