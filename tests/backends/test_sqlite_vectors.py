"""A SQLite store keeps its entries' vectors (issue 36, item 4; ``backends/sqlvectors.py``).

Real stores, and real processes where it matters: the decide that first ranks an
entry writes its vector in its own transaction; another process reads the vectors
and embeds only its query; results are the same to the bit with and without the
stored vectors; dead entries lose their rows; a store from before the table
migrates; read-only commands write nothing; a damaged row is embedded again and
replaced, never trusted.
"""

from __future__ import annotations

import contextlib
import json
import math
import sqlite3
import struct
import subprocess
import sys
from array import array
from collections.abc import Iterator
from pathlib import Path

import pytest

from darwin_memo.backends.migrations import MIGRATIONS, schema_version
from darwin_memo.backends.sqlvectors import decode_vector, encode_vector, text_hash
from darwin_memo.ledger import Ledger
from darwin_memo.retrieval.embedding import HybridRetriever, embeddings_available
from darwin_memo.retrieval.lexical import HashingEmbedder

TESTS = Path(__file__).resolve().parent
MODEL = "counting-hashing-64"
LESSONS = [
    (f"How do I restart the {name} service?", f"Run systemctl restart {name} as root.")
    for name in ("nginx", "postgres", "redis", "cron", "sshd", "docker", "kafka", "mysql")
] + [
    ("Where do the web server logs go?", "Logs go to /var/log/nginx/access.log."),
    ("What port does the database listen on?", "PostgreSQL listens on 5432."),
]
QUERIES = ["restart the web server", "database port", "where are logs", "bring redis back"]


class CountingEmbedder(HashingEmbedder):
    """A hashing embedder that names its model and counts the texts it embeds."""

    model_id = MODEL

    def __init__(self) -> None:
        super().__init__(dims=64)
        self.texts: list[str] = []

    def __call__(self, text: str) -> list[float]:
        self.texts.append(text)
        return super().__call__(text)


def open_counting(path: Path) -> tuple[Ledger, CountingEmbedder]:
    embedder = CountingEmbedder()
    return Ledger.open(path, retriever=HybridRetriever(embedder)), embedder


def ranked(ledger: Ledger, query: str) -> list[tuple[str, float]]:
    return [(e.id, s) for e, s in ledger.store.retrieve(query, k=5)]


@contextlib.contextmanager
def connected(path: Path) -> Iterator[sqlite3.Connection]:
    """A plain connection, committed and closed on leaving. (Closed, not left to the
    collector: this process also reads the file's bytes, and closing any descriptor of
    a file drops every POSIX lock the process holds on it, a live connection's too.)"""
    conn = sqlite3.connect(path)
    try:
        with conn:
            yield conn
    finally:
        conn.close()


def rows(path: Path) -> dict[str, tuple[str, int, str, bytes]]:
    """The ``vectors`` table by entry id: (model, dims, text_hash, vector)."""
    with connected(path) as conn:
        found = conn.execute("SELECT entry_id, model, dims, text_hash, vector FROM vectors")
        return {row[0]: tuple(row[1:]) for row in found}  # type: ignore[misc]


def checkpointed(path: Path) -> bytes:
    """The store file's bytes once its WAL is folded in (what any writer left)."""
    with connected(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path.read_bytes()


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A store of ``LESSONS`` whose first decide stored every living entry's vector."""
    path = tmp_path / "lessons.db"
    ledger, embedder = open_counting(path)
    with ledger:
        for question, answer in LESSONS:
            ledger.add(question, answer)
        assert embedder.texts == []  # adding embeds nothing (no model load for an add)
        ledger.decide(QUERIES[0])
    assert len(embedder.texts) == len(LESSONS) + 1  # every entry once, and the query
    return path


# -- written once, read by every process --------------------------------------------------


def test_the_deciding_transaction_writes_each_living_entrys_vector(store: Path) -> None:
    kept = rows(store)
    with Ledger.open(store) as ledger:
        living = {e.id: e for e in ledger.store.alive()}
    assert set(kept) == set(living)
    embedder = CountingEmbedder()
    for entry_id, (model, dims, digest, blob) in kept.items():
        assert (model, dims) == (MODEL, 64)
        assert digest == text_hash(living[entry_id].text)
        # little-endian float64, the very doubles the embedder gives
        values = struct.unpack("<64d", blob)
        assert list(values) == embedder(living[entry_id].text)


def test_another_process_reads_the_vectors_and_embeds_only_its_query(store: Path) -> None:
    code = f"""
import json, sys
sys.path.insert(0, {str(TESTS)!r})
from test_sqlite_vectors import open_counting, ranked
from pathlib import Path
ledger, embedder = open_counting(Path({str(store)!r}))
with ledger:
    found = ranked(ledger, {QUERIES[1]!r})
print(json.dumps({{"embedded": embedder.texts, "found": found}}))
"""
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    out = json.loads(proc.stdout)
    assert out["embedded"] == [QUERIES[1]]  # no entry embedded again
    assert out["found"] and "5432" in _answer(store, out["found"][0][0])


def _answer(path: Path, entry_id: str) -> str:
    with connected(path) as conn:
        (answer,) = conn.execute("SELECT answer FROM entries WHERE id = ?", (entry_id,)).fetchone()
        return str(answer)


def test_results_are_the_same_to_the_bit_with_and_without_stored_vectors(
    store: Path, tmp_path: Path
) -> None:
    bare = tmp_path / "bare.db"
    bare.write_bytes(checkpointed(store))
    with connected(bare) as conn:
        conn.execute("DELETE FROM vectors")
    kept, kept_embedder = open_counting(store)
    fresh, fresh_embedder = open_counting(bare)
    with kept, fresh:
        for query in QUERIES:
            found = ranked(kept, query)
            assert found and found == ranked(fresh, query)
    assert kept_embedder.texts == QUERIES  # read: only the queries embedded
    assert len(fresh_embedder.texts) == len(LESSONS) + len(QUERIES)


def test_entries_added_by_another_process_are_read_not_embedded(store: Path) -> None:
    reader, reader_embedder = open_counting(store)
    with reader:
        ranked(reader, QUERIES[0])  # this process has read the table
        writer, writer_embedder = open_counting(store)
        with writer:
            new = writer.add("How do I flush the DNS cache?", "Run resolvectl flush-caches.")
            writer.decide("flush dns")  # embeds the new entry, stores its vector
        assert writer_embedder.texts == [new.text, "flush dns"]
        found = ranked(reader, "flush dns")
        assert found[0][0] == new.id
    assert reader_embedder.texts == [QUERIES[0], "flush dns"]


# -- dead entries, old stores, a dropped table ------------------------------------------------


@pytest.mark.parametrize("by", ["the dense ledger", "a lexical ledger"])
def test_a_dead_entrys_vector_is_deleted(store: Path, by: str) -> None:
    victim = next(iter(rows(store)))
    ledger = open_counting(store)[0] if by == "the dense ledger" else Ledger.open(store)
    with ledger:
        for ticket in ledger.pending():  # (an open ticket's entries are escrowed)
            ledger.abandon(ticket.id)
        assert ledger.forget(victim) == "buried"
    assert victim not in rows(store)
    assert len(rows(store)) == len(LESSONS) - 1


def test_rows_of_entries_no_longer_living_are_cleaned(store: Path) -> None:
    with connected(store) as conn:  # as if a writer had missed it
        conn.execute(
            "INSERT INTO vectors VALUES ('0123456789ab', ?, 64, 'x', ?)",
            (MODEL, encode_vector(array("d", [0.125] * 64))),
        )
    ledger, embedder = open_counting(store)
    with ledger:
        ledger.decide(QUERIES[2])
    assert "0123456789ab" not in rows(store)
    assert embedder.texts == [QUERIES[2]]


def test_a_store_from_before_the_table_migrates(store: Path) -> None:
    with connected(store) as conn:  # schema 17, as the previous release left it
        conn.execute("DROP TABLE vectors")
        conn.execute("DELETE FROM schema_migrations WHERE version = 18")
        assert schema_version(conn) == 17
    ledger, embedder = open_counting(store)
    with ledger:
        with connected(store) as conn:
            assert schema_version(conn) == len(MIGRATIONS) == 18
        assert rows(store) == {}
        ledger.decide(QUERIES[0])
    assert len(rows(store)) == len(LESSONS)
    assert len(embedder.texts) == len(LESSONS) + 1


def test_a_dropped_table_is_made_again_by_the_next_write(store: Path) -> None:
    ledger, embedder = open_counting(store)
    with ledger:
        ranked(ledger, QUERIES[0])
        with connected(store) as conn:  # derived data: anyone may drop it
            conn.execute("DROP TABLE vectors")
        ledger.decide(QUERIES[1])
    assert len(rows(store)) == len(LESSONS)
    assert embedder.texts == [QUERIES[0], QUERIES[1]]  # its cache was still good


# -- rows never trusted ---------------------------------------------------------------------


def _damage(path: Path) -> dict[str, str]:
    """Damage five rows five ways; returns the damaged ids and how."""
    kept = rows(path)
    ids = sorted(kept)
    nan = array("d", struct.unpack("<64d", kept[ids[1]][3]))
    nan[7] = math.nan
    inf = array("d", nan)
    inf[7] = math.inf
    changes = {
        ids[0]: ("vector = ?", kept[ids[0]][3][:-8], "short blob"),
        ids[1]: ("vector = ?", encode_vector(nan), "NaN"),
        ids[2]: ("vector = ?", encode_vector(inf), "infinity"),
        ids[3]: ("text_hash = ?", "0000000000000000", "another text"),
        ids[4]: ("dims = ?", 63, "wrong dims"),
    }
    with connected(path) as conn:
        for entry_id, (column, value, _) in changes.items():
            conn.execute(f"UPDATE vectors SET {column} WHERE entry_id = ?", (value, entry_id))
    return {entry_id: why for entry_id, (_, _, why) in changes.items()}


def test_a_damaged_row_is_embedded_again_and_replaced(store: Path, tmp_path: Path) -> None:
    before = rows(store)
    damaged = _damage(store)
    ledger, embedder = open_counting(store)
    with ledger:
        found = ranked(ledger, QUERIES[0])
        texts = {e.id: e.text for e in ledger.store.alive()}
    # each damaged entry embedded again, nothing else
    assert sorted(embedder.texts[:-1]) == sorted(texts[i] for i in damaged)
    assert embedder.texts[-1] == QUERIES[0]
    fresh_path = tmp_path / "fresh.db"
    fresh_path.write_bytes(checkpointed(store))
    with connected(fresh_path) as conn:
        conn.execute("DELETE FROM vectors")
    fresh = open_counting(fresh_path)[0]
    with fresh:
        assert found == ranked(fresh, QUERIES[0])
    ledger = open_counting(store)[0]
    with ledger:
        ledger.decide(QUERIES[0])  # the next write replaces them
    assert rows(store) == before


def test_the_codec_refuses_what_is_not_a_vector() -> None:
    good = array("d", [0.5, -0.25, 1e-300])
    assert decode_vector(encode_vector(good), 3) == good
    assert encode_vector(good) == struct.pack("<3d", *good)
    for blob, dims in [
        (encode_vector(good), 2),
        (encode_vector(good)[:-1], 3),
        (encode_vector(good), 0),
        (encode_vector(good), True),
        ("text", 3),
        (None, 3),
        (struct.pack("<3d", 0.5, math.nan, 0.0), 3),
        (struct.pack("<3d", -math.inf, 0.0, 0.0), 3),
    ]:
        assert decode_vector(blob, dims) is None
    # finite values whose sum overflows are still a vector
    assert decode_vector(struct.pack("<2d", 1e308, 1e308), 2) is not None


# -- read-only commands, set-retriever, the shipped model (real processes) -------------------

needs_model = pytest.mark.skipif(
    not embeddings_available(), reason="needs the [embeddings] extra (pip install -e '.[dev]')"
)


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "darwin_memo", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    return proc


@needs_model
def test_read_only_commands_write_nothing_and_set_retriever_keeps_vectors(tmp_path: Path) -> None:
    from darwin_memo.retrieval.embedding import MODEL_ID

    path = tmp_path / "m.db"
    store = str(path)
    for question, answer in LESSONS[:4]:
        cli("ledger", store, "--retriever", "hybrid", "add", question, answer, cwd=tmp_path)
    assert rows(path) == {}
    decided = json.loads(cli("ledger", store, "decide", "restart nginx", cwd=tmp_path).stdout)
    assert decided["silent"] is False
    assert len(rows(path)) == 4 and {r[0] for r in rows(path).values()} == {MODEL_ID}
    # One more entry, not embedded yet: a read-only search embeds it in memory only.
    added = json.loads(
        cli("ledger", store, "add", *LESSONS[8], cwd=tmp_path).stdout  # the logs lesson
    )["entry_id"]
    before = checkpointed(path)
    for args in (
        ("query", store, "where do the web server logs go"),
        ("stats", store),
        ("why", store, added),
        ("ledger", store, "stats"),
    ):
        assert cli(*args, cwd=tmp_path).returncode == 0, args
        assert checkpointed(path) == before, args
    # The next write stores it.
    cli("ledger", store, "decide", "where do the web server logs go", cwd=tmp_path)
    assert added in rows(path) and len(rows(path)) == 5
    # set-retriever keeps what it embeds; the same model's vectors are read, not embedded.
    with connected(path) as conn:
        conn.execute("DELETE FROM vectors WHERE entry_id = ?", (added,))
    out = json.loads(cli("ledger", store, "set-retriever", "semantic", cwd=tmp_path).stdout)
    assert out == {"retriever": "semantic", "previous": "hybrid", "alive": 5, "embedded": 1}
    assert len(rows(path)) == 5


@needs_model
def test_the_shipped_model_ranks_alike_from_stored_vectors(tmp_path: Path) -> None:
    from darwin_memo.retrieval.named import make_retriever

    path = tmp_path / "m.db"
    with Ledger.open(path, retriever="hybrid") as ledger:
        for question, answer in LESSONS:
            ledger.add(question, answer)
        first = [ranked(ledger, q) for q in QUERIES]  # embedded in this process
        ledger.decide(QUERIES[0])  # and stored
    assert len(rows(path)) == len(LESSONS)
    retriever = make_retriever("hybrid")
    with Ledger.open(path, retriever=retriever) as ledger:
        assert [ranked(ledger, q) for q in QUERIES] == first
        dense = retriever.dense  # type: ignore[attr-defined]
        living = ledger.store.alive()
        # (a search reads the vectors by rowid, not into the retriever: read them there)
        ledger.store.ready_vectors(living, embed=False)
        for entry in living:  # the stored doubles are the model's own
            assert list(dense.cached_vector(entry.id)) == dense.embed(entry.text)
