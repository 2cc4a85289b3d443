"""Dense retrieval in PostgreSQL with pgvector (``backends/pgdense.py``).

These run on a throwaway PostgreSQL 16 cluster from the ``pgserver`` wheel (part of
the ``dev`` extra), which bundles pgvector; the machine's own PostgreSQL (the
session's ``pg_cluster``) is where the fallback without the extension is tested.
Without pgserver they skip, and fail under ``DARWIN_MEMO_REQUIRE_POSTGRES=1``.

Every search is compared with the exact scan: ``EmbeddingRetriever.rank`` over the
living entries in insertion order, then the store's (score, energy) order.
"""

from __future__ import annotations

import importlib.util
import random
import secrets
import zlib
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from darwin_memo import MemoryEntry, StoreError
from darwin_memo.backends.pgdense import PgStore
from darwin_memo.backends.postgres import PostgresBackend
from darwin_memo.backends.sqlvectors import model_tag
from darwin_memo.ledger import Ledger
from darwin_memo.retrieval.lexical import EmbeddingRetriever, HashingEmbedder

pytestmark = pytest.mark.postgres

psycopg = pytest.importorskip("psycopg")
ROOT = Path(__file__).resolve().parents[2]


def bench_lessons() -> Any:
    spec = importlib.util.spec_from_file_location("perf_lessons", ROOT / "bench/perf/lessons.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class RandomVectors:
    """A deterministic random vector per text; float32 components unless ``f32=False``."""

    def __init__(self, dims: int = 24, model_id: str = "test-random-24", f32: bool = True):
        self.dims = dims
        self.model_id = model_id
        self.f32 = f32
        self.calls = 0

    def __call__(self, text: str) -> list[float]:
        self.calls += 1
        rng = random.Random(zlib.crc32(text.encode("utf-8")) * 7919 + self.dims)
        vec = [rng.gauss(0.0, 1.0) for _ in range(self.dims)]
        return list(array("f", vec)) if self.f32 else vec


@pytest.fixture(scope="module")
def vec_cluster() -> Iterator[Any]:
    """PostgreSQL 16 with pgvector, from the pgserver wheel's server programs."""
    from pgcluster import pgserver_bindir, start_or_skip

    bindir = pgserver_bindir()
    missing = (
        ""
        if bindir
        else "pgserver (PostgreSQL 16 with pgvector) is not installed: pip install -e .[dev]"
    )
    cluster = start_or_skip(bindir, missing)
    yield cluster
    cluster.destroy()


def fresh_url(cluster: Any, extra: str = "") -> str:
    return str(cluster.url(f"v_{secrets.token_hex(5)}")) + extra


def exact(embed: Any, floor: float, entries: list[MemoryEntry], query: str, k: int) -> list[Any]:
    """The exact scan, as ``MemoryStore.retrieve`` ranks it."""
    ranked = EmbeddingRetriever(embed, min_similarity=floor).rank(query, entries)
    ranked.sort(key=lambda pair: (pair[1], pair[0].energy), reverse=True)
    return [(e.id, s) for e, s in ranked[:k]]


def got(ledger: Ledger, query: str, k: int, **kw: Any) -> list[Any]:
    return [(e.id, s) for e, s in ledger.store.retrieve(query, k, **kw)]


def dense_rows(ledger: Ledger) -> dict[int, str]:
    """entry rowid -> text hash of the store's one vector table."""
    conn = ledger.backend.pg  # type: ignore[union-attr]
    (table,) = conn.execute("SELECT tbl FROM dense_models").fetchone()
    return {int(r): str(h) for r, h in conn.execute(f"SELECT entry_rowid, text_hash FROM {table}")}


def alive_rowids(ledger: Ledger) -> set[int]:
    conn = ledger.backend.pg  # type: ignore[union-attr]
    return {int(r) for (r,) in conn.execute("SELECT rowid FROM entries WHERE alive = 1")}


def no_scan(ledger: Ledger) -> None:
    """Make the in-process scan fail, so a passing search must have run in SQL."""

    def boom(*_: Any) -> Any:
        raise AssertionError("the exact scan ran instead of the SQL search")

    ledger.store.retriever.rank = boom  # type: ignore[method-assign]


def filled(url: str, embed: Any, n: int, floor: float = 0.1, seed: int = 1) -> Ledger:
    ledger = Ledger.open(url)
    ledger.store.retriever = EmbeddingRetriever(embed, min_similarity=floor)
    rng = random.Random(seed)
    for i in range(n):
        ledger.add(f"question {i} {rng.random()}", f"answer {i}")
    # Exact ties: the same text twice at equal energy, and again at a higher energy.
    for _ in range(3):
        ledger.add("the duplicated question", "the duplicated answer")
    twin = ledger.add("the duplicated question", "the duplicated answer")
    with ledger._op():
        ledger.store.set_energy(twin.id, 2.5)
    return ledger


def test_sql_search_equals_the_exact_scan_on_random_vectors(vec_cluster: Any) -> None:
    embed = RandomVectors()
    with filled(fresh_url(vec_cluster), embed, 300) as ledger:
        assert isinstance(ledger.store, PgStore)
        ledger.store.retrieve("warm up", 3)  # builds the table (and embeds every entry once)
        assert set(dense_rows(ledger)) == alive_rowids(ledger)
        no_scan(ledger)
        entries = ledger.store.alive()
        queries = [f"query {i}" for i in range(40)] + [
            "the duplicated question the duplicated answer"
        ]
        for query in queries:
            for k in (1, 3, 10, 50):
                assert got(ledger, query, k) == exact(embed, 0.1, entries, query, k), (query, k)
        # The duplicated text ties four ways: energy first, then insertion order.
        top = got(ledger, "the duplicated question the duplicated answer", 4)
        assert len({s for _, s in top}) == 1
        assert ledger.store.get(top[0][0]).energy == 2.5  # type: ignore[union-attr]
        # half_life ranks every qualifying entry: still the scan's result.
        ticks = ledger.tick_count
        for query in queries[:5]:
            want = EmbeddingRetriever(embed, min_similarity=0.1).rank(query, entries)
            assert {i for i, _ in got(ledger, query, 10**6, half_life=3.0, now_cycle=ticks)} == {
                e.id for e, _ in want
            }


def test_double_precision_vectors_match_within_float32_rounding(vec_cluster: Any) -> None:
    embed = RandomVectors(dims=48, model_id="test-random-48-f64", f32=False)
    with filled(fresh_url(vec_cluster), embed, 200, floor=0.05) as ledger:
        no_scan(ledger)
        entries = ledger.store.alive()
        for i in range(30):
            want = exact(embed, 0.05, entries, f"q{i}", 5)
            have = got(ledger, f"q{i}", 5)
            assert [x for x, _ in have] == [x for x, _ in want]
            assert all(abs(a - b) < 1e-6 for (_, a), (_, b) in zip(have, want, strict=True))


def test_a_floor_above_everything_and_many_ties_at_the_kth(vec_cluster: Any) -> None:
    embed = RandomVectors()
    with Ledger.open(fresh_url(vec_cluster)) as ledger:
        ledger.store.retriever = EmbeddingRetriever(embed, min_similarity=0.5)
        for _ in range(40):  # 40 identical vectors: the k-th ties with 39 others
            ledger.add("same", "text")
        ledger.add("other", "thing")
        no_scan(ledger)
        entries = ledger.store.alive()
        assert got(ledger, "same text", 5) == exact(embed, 0.5, entries, "same text", 5)
        assert len(got(ledger, "same text", 5)) == 5
        nothing = [q for q in (f"x{i}" for i in range(50)) if not exact(embed, 0.5, entries, q, 3)]
        assert nothing and all(got(ledger, q, 3) == [] for q in nothing)


def test_decide_through_the_ledger_matches_the_fallback(vec_cluster: Any) -> None:
    """Real text and HashingEmbedder: decide on pgvector and on vectors=off agree."""
    corpus = bench_lessons()
    url = fresh_url(vec_cluster)
    lessons = [(q, a) for _, q, a, _ in corpus.lessons(3, 300)]
    queries = corpus.queries(3, 300, 40)["realistic"]
    with Ledger.open(url) as sql, Ledger.open(url + "&vectors=off") as scan:
        for ledger in (sql, scan):
            ledger.store.retriever = EmbeddingRetriever(HashingEmbedder(), min_similarity=0.3)
        for question, answer in lessons:
            sql.add(question, answer)
        no_scan(sql)
        spoke = 0
        for query in queries[:40]:
            a = sql.decide(query, 3)
            b = scan.decide(query, 3)
            assert (a.deciding_entry, a.supporting_entries) == (
                b.deciding_entry,
                b.supporting_entries,
            )
            spoke += bool(a.provenance)
        assert spoke >= 10
        assert set(dense_rows(sql)) == alive_rowids(sql)
        conn = scan.backend.pg  # type: ignore[union-attr]
        assert scan.backend.vector_mode == "off"  # type: ignore[union-attr]
        assert conn.execute("SELECT COUNT(*) FROM dense_models").fetchone() == (1,)


def test_the_table_follows_add_bury_merge_and_other_hosts(vec_cluster: Any) -> None:
    embed = RandomVectors()
    url = fresh_url(vec_cluster)
    with filled(url, embed, 30) as ledger, Ledger.open(url) as lexical:
        ledger.store.retrieve("build", 3)
        rows = dense_rows(ledger)
        assert set(rows) == alive_rowids(ledger)
        calls = embed.calls
        # add: the new entry's vector is written with it
        entry = ledger.add("a new question", "a new answer")
        assert embed.calls == calls + 1
        assert set(dense_rows(ledger)) == alive_rowids(ledger)
        # bury: its vector goes
        victim = ledger.store.alive()[0].id
        assert ledger.forget(victim) == "buried"
        assert set(dense_rows(ledger)) == alive_rowids(ledger)
        # merge: members' vectors go, the heir's comes
        a, b = [e.id for e in ledger.store.alive()[1:3]]
        heir = MemoryEntry(question="merged question", answer="merged answer")
        with ledger._op():
            ledger.store.merge_into(heir, [a, b])
        assert set(dense_rows(ledger)) == alive_rowids(ledger)
        no_scan(ledger)
        assert got(ledger, "merged question merged answer", 1)[0][0] == heir.id
        assert got(ledger, "a new question a new answer", 1)[0][0] == entry.id
        # A host without the embedding (a lexical ledger) writes; the next search catches up.
        for i in range(5):
            lexical.add(f"lexical {i}", "added elsewhere")
        lexical.forget(lexical.store.alive()[3].id)
        lexical.forget(entry.id)
        before = embed.calls
        hits = got(ledger, "lexical 2 added elsewhere", 3)
        assert embed.calls == before + 1 + 5  # the query and the five new entries only
        entries = ledger.store.alive()
        assert hits == exact(embed, 0.1, entries, "lexical 2 added elsewhere", 3)
        assert set(dense_rows(ledger)) == alive_rowids(ledger)
        # The table is derived data: dropped, it is rebuilt on the next search.
        conn = ledger.backend.pg  # type: ignore[union-attr]
        (table,) = conn.execute("SELECT tbl FROM dense_models").fetchone()
        conn.execute(f"DROP TABLE {table}")
        assert got(ledger, "lexical 2 added elsewhere", 3) == exact(
            embed, 0.1, entries, "lexical 2 added elsewhere", 3
        )
        assert set(dense_rows(ledger)) == alive_rowids(ledger)
        conn.execute(f"DROP TABLE {table}")
        conn.execute("DROP TABLE dense_models")
        assert got(ledger, "lexical 2 added elsewhere", 3) == exact(
            embed, 0.1, entries, "lexical 2 added elsewhere", 3
        )
        assert set(dense_rows(ledger)) == alive_rowids(ledger)


def test_named_stores_in_one_database_keep_their_own_vectors(vec_cluster: Any) -> None:
    embed = RandomVectors()
    first, second = fresh_url(vec_cluster), fresh_url(vec_cluster)
    with filled(first, embed, 20, seed=1) as a, filled(second, embed, 25, seed=2) as b:
        query = "the duplicated question the duplicated answer"
        ids_a = {e.id for e in a.store.alive()}
        ids_b = {e.id for e in b.store.alive()}
        hits_a, hits_b = got(a, query, 50), got(b, query, 50)
        assert hits_a and hits_b
        assert {i for i, _ in hits_a} <= ids_a and {i for i, _ in hits_b} <= ids_b
        assert set(dense_rows(a)) == alive_rowids(a)
        assert set(dense_rows(b)) == alive_rowids(b)
        # Dropping one store (its schema) leaves the extension and the other store working.
        a.backend.drop()  # type: ignore[union-attr]
        no_scan(b)
        assert got(b, query, 50) == hits_b
    with psycopg.connect(vec_cluster.url("x").split("?")[0], autocommit=True) as admin:
        row = admin.execute(
            "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
            "WHERE e.extname = 'vector'"
        ).fetchone()
    assert row == ("public",)


def test_models_never_share_a_table(vec_cluster: Any) -> None:
    url = fresh_url(vec_cluster)
    first, other = RandomVectors(), RandomVectors(dims=16, model_id="test-random-16")
    with filled(url, first, 10) as ledger:
        ledger.store.retrieve("q", 3)
        ledger.store.retriever = EmbeddingRetriever(other, min_similarity=0.1)
        no_scan(ledger)
        assert got(ledger, "q", 3) == exact(other, 0.1, ledger.store.alive(), "q", 3)
        conn = ledger.backend.pg  # type: ignore[union-attr]
        models = dict(conn.execute("SELECT model, dims FROM dense_models").fetchall())
        assert models == {"test-random-24": 24, "test-random-16": 16}
    assert model_tag(lambda text: [1.0]) is None  # an unnamed model: the scan, never SQL
    assert model_tag(HashingEmbedder(dims=64)) == "darwin-memo-hashing-64-3-5"


@pytest.mark.slow
def test_hnsw_is_an_option_and_recall_is_measured(vec_cluster: Any) -> None:
    embed = RandomVectors(dims=32, model_id="test-random-32")
    url = fresh_url(vec_cluster, "&vectors=hnsw")
    with filled(url, embed, 1500, floor=0.05) as ledger:
        no_scan(ledger)
        ledger.store.retrieve("build", 3)
        conn = ledger.backend.pg  # type: ignore[union-attr]
        indexes = [r[0] for r in conn.execute("SELECT indexdef FROM pg_indexes")]
        assert any("hnsw" in d for d in indexes)
        entries = ledger.store.alive()
        found = total = 0
        for i in range(50):
            want = {x for x, _ in exact(embed, 0.05, entries, f"q{i}", 10)}
            have = got(ledger, f"q{i}", 10)
            assert all(s >= 0.05 for _, s in have)
            found += len(want & {x for x, _ in have})
            total += len(want)
        assert found / total >= 0.9, f"recall@10 {found / total:.3f}"
    with pytest.raises(StoreError, match=r"vectors='fast'.*exact, hnsw, off"):
        PostgresBackend(fresh_url(vec_cluster, "&vectors=fast"))


def test_a_role_that_cannot_create_the_extension_falls_back(vec_cluster: Any) -> None:
    admin = psycopg.connect(vec_cluster.url("x").split("?")[0], autocommit=True)
    db = f"novec_{secrets.token_hex(4)}"
    admin.execute(
        "DO $$ BEGIN CREATE ROLE plain LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$"
    )
    admin.execute(f"CREATE DATABASE {db} OWNER plain")
    admin.close()
    url = f"postgresql://plain@127.0.0.1:{vec_cluster.port}/{db}?store=s"
    embed = RandomVectors()
    with filled(url, embed, 40) as ledger:
        assert ledger.backend.vector_schema() is None  # type: ignore[union-attr]
        entries = ledger.store.alive()
        for i in range(10):
            assert got(ledger, f"q{i}", 3) == exact(embed, 0.1, entries, f"q{i}", 3)
        conn = ledger.backend.pg  # type: ignore[union-attr]
        assert conn.execute("SELECT to_regclass('dense_models')").fetchone() == (None,)


def test_without_pgvector_the_exact_scan_runs(pg_cluster: Any) -> None:
    """The machine's PostgreSQL (15 here) has no pgvector: everything works as before."""
    from conftest import pg_url

    embed = RandomVectors()
    with filled(pg_url(pg_cluster), embed, 60) as ledger:
        backend = ledger.backend
        assert isinstance(backend, PostgresBackend)
        if backend.pg.execute(
            "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"
        ).fetchone():
            pytest.skip("this cluster has pgvector; the fallback needs one without it")
        entries = ledger.store.alive()
        for i in range(10):
            assert got(ledger, f"q{i}", 3) == exact(embed, 0.1, entries, f"q{i}", 3)
        assert backend.vector_schema() is None
        assert backend.pg.execute("SELECT to_regclass('dense_models')").fetchone() == (None,)
        assert ledger.decide("the duplicated question the duplicated answer").provenance


@pytest.mark.slow
def test_the_onnx_model_gives_the_scans_scores_bit_for_bit(vec_cluster: Any) -> None:
    """all-MiniLM-L6-v2's components are float32 values: pgvector holds them exactly."""
    from darwin_memo.retrieval.embedding import SentenceEmbedder, embeddings_available

    if not embeddings_available():
        pytest.skip("needs the [embeddings] extra (pip install -e '.[dev]')")
    embed = SentenceEmbedder(threads=1)
    corpus = bench_lessons()
    queries = corpus.queries(5, 60, 15)["realistic"]
    with Ledger.open(fresh_url(vec_cluster)) as ledger:
        ledger.store.retriever = EmbeddingRetriever(embed, min_similarity=0.3)
        assert ledger.store.retrieve("nothing yet", 3) == []  # makes the (empty) table
        for _, question, answer, _ in corpus.lessons(5, 60):
            ledger.add(question, answer)  # each vector written as the scan computes it
        assert set(dense_rows(ledger)) == alive_rowids(ledger)
        no_scan(ledger)
        entries = ledger.store.alive()
        spoke = 0
        for query in queries:
            hits = got(ledger, query, 5)
            assert hits == exact(embed, 0.3, entries, query, 5)
            spoke += bool(hits)
        assert spoke >= 10


class Picky(RandomVectors):
    """Refuses some texts, as an embedding service may: the scan skips those entries."""

    def __call__(self, text: str) -> list[float]:
        if "poison" in text:
            raise ValueError("refused")
        if "empty" in text:
            return []
        return super().__call__(text)


def test_entries_that_do_not_embed_are_skipped_as_the_scan_skips_them(vec_cluster: Any) -> None:
    embed = Picky(model_id="test-picky")
    with Ledger.open(fresh_url(vec_cluster)) as ledger:
        ledger.store.retriever = EmbeddingRetriever(embed, min_similarity=0.0001)
        for i in range(30):
            ledger.add(f"plain {i}", "text")
        ledger.add("poison", "pill")
        ledger.add("empty", "vector")
        ledger.store.retrieve("build", 3)  # a batch without batch(): one by one
        ledger.add("more poison", "later")  # one at a time
        no_scan(ledger)
        assert len(dense_rows(ledger)) == 30
        entries = ledger.store.alive()
        for i in range(10):
            assert got(ledger, f"q{i}", 40) == exact(embed, 0.0001, entries, f"q{i}", 40)
