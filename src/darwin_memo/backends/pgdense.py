"""Dense retrieval inside PostgreSQL, with pgvector when the database has it.

A PostgreSQL store whose ledger ranks with an ``EmbeddingRetriever`` keeps the
vector of each living entry in a table of its schema, one table per embedding
model (``dense_<digest of the model id>``, a ``vector(D)`` column), listed in
``dense_models`` with the store version up to which it is complete. The table
is derived data: it can be dropped at any time and is rebuilt on the next
search. It is kept in step two ways: this process writes or deletes an entry's
row when it adds, merges or buries the entry, and before every search it
re-checks the rows of entries written since the table's recorded version (by
any host, including one without the embedding model or an older darwin-memo):
the dead lose their vector, the living whose text changed are embedded again.

A search asks PostgreSQL for the nearest rows by cosine distance
(``ORDER BY embedding <=> q LIMIT n``), a margin beyond ``k``, then scores those
candidates again in double precision exactly as ``EmbeddingRetriever.rank``
does, applies the same similarity floor and breaks ties as the in-process scan
does (score, then energy, then insertion order). If the candidates might not
cover the ``k``-th score (the limit was reached within float32 error of it), it
asks again for more. The result is the exact scan's: same entries, order and
scores (bit for bit when the embedding's components are float32 values, as the
ONNX model's are; within float32 rounding otherwise).

By default the nearest rows come from an exact scan of the table (the SQL is
written so that no index is used). ``?vectors=hnsw`` in the store's URL builds
an HNSW index and lets PostgreSQL use it: approximate, much faster at scale.
``?vectors=off`` never uses pgvector. Without the ``vector`` extension (not
installed and not creatable by the connecting role), nothing changes: the
retriever scans the population in the process, as on SQLite.
"""

from __future__ import annotations

import hashlib
import math
from array import array
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ..records.entry import EntryKind, MemoryEntry
from ..retrieval.lexical import EmbeddingRetriever, _cosine
from .population import finish_ranking
from .sqlstore import SqlStore
from .sqlvectors import model_tag, text_hash

if TYPE_CHECKING:
    from .postgres import PostgresBackend

__all__ = ["VECTOR_MODES", "DenseTable", "PgStore"]

VECTOR_MODES = ("exact", "hnsw", "off")
#: Cosine error allowed between pgvector's float32 distance and the exact score.
SLACK = 1e-5
#: The least ``hnsw.ef_search`` (pgvector's default is 40): the candidates the index
#: walks before the similarity floor filters them (pgvector 0.6 filters afterwards).
HNSW_EF_SEARCH = 100
_MODELS_DDL = (
    "CREATE TABLE IF NOT EXISTS dense_models (model TEXT PRIMARY KEY, tbl TEXT NOT NULL, "
    "dims INTEGER NOT NULL, seen BIGINT NOT NULL)"
)


def _literal(vec: Sequence[float]) -> str:
    return "[" + ",".join(map(repr, vec)) + "]"


def _usable(raw: Iterable[Any]) -> list[float] | None:
    vec = [float(x) for x in raw]
    return vec if vec and all(math.isfinite(x) for x in vec) else None


def _create(conn: Any, name: str, dims: int) -> None:
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {name} (entry_rowid BIGINT PRIMARY KEY, "
        f"text_hash TEXT NOT NULL, embedding vector({int(dims)}) NOT NULL)"
    )


class DenseTable:
    """One model's vector table in one store, as this process knows it."""

    def __init__(self, model: str, table: str, dims: int) -> None:
        self.model = model
        self.table = table
        self.dims = dims
        self.indexed = False  # an HNSW index made (or found) by this process


class PgStore(SqlStore):
    """``SqlStore`` on PostgreSQL: dense searches run in SQL when pgvector is there."""

    backend: PostgresBackend

    # -- which path ------------------------------------------------------------------

    def _dense_retriever(self) -> EmbeddingRetriever | None:
        retriever = self.retriever
        if not isinstance(retriever, EmbeddingRetriever) or self.backend.vector_mode == "off":
            return None
        if model_tag(retriever.embed) is None or self.backend.vector_schema() is None:
            return None
        return retriever

    def _table(self, retriever: EmbeddingRetriever, dims: int | None) -> DenseTable | None:
        """The model's table, made when ``dims`` is known; None while it is not."""
        tag = model_tag(retriever.embed)
        assert tag is not None
        conn = self.conn
        known = self.backend.dense_tables.pop(tag, None)
        if known is not None and conn.execute(
            "SELECT to_regclass('dense_models') IS NOT NULL AND to_regclass(?) IS NOT NULL",
            (known.table,),
        ).fetchone() == (True,):
            self.backend.dense_tables[tag] = known
            return known  # else someone dropped it: made again below, and rebuilt
        row = None
        if conn.execute("SELECT to_regclass('dense_models')").fetchone() != (None,):
            row = conn.execute(
                "SELECT tbl, dims FROM dense_models WHERE model = ?", (tag,)
            ).fetchone()
        if row is not None and conn.execute("SELECT to_regclass(?)", (row[0],)).fetchone() == (
            None,
        ):  # the table was dropped, its row kept: make it again, filled from every entry
            _create(conn, str(row[0]), int(row[1]))
            conn.execute("UPDATE dense_models SET seen = -1 WHERE model = ?", (tag,))
        if row is None:
            if dims is None:
                return None
            conn.execute(_MODELS_DDL)
            name = "dense_" + hashlib.sha256(tag.encode("utf-8")).hexdigest()[:16]
            _create(conn, name, dims)
            conn.execute(
                "INSERT INTO dense_models (model, tbl, dims, seen) VALUES (?, ?, ?, -1) "
                "ON CONFLICT (model) DO NOTHING",
                (tag, name, int(dims)),
            )
            row = conn.execute(
                "SELECT tbl, dims FROM dense_models WHERE model = ?", (tag,)
            ).fetchone()
            assert row is not None
        table = DenseTable(tag, str(row[0]), int(row[1]))
        self.backend.dense_tables[tag] = table
        return table

    # -- keeping the table in step --------------------------------------------------

    def _vectors(self, retriever: EmbeddingRetriever, texts: list[str]) -> list[list[float] | None]:
        """Embeddings of ``texts``; None where the embedding is unusable (skipped, as rank does)."""
        batch = getattr(retriever.embed, "batch", None)
        if batch is not None and len(texts) > 1:
            try:
                raw = list(batch(texts))
            except ValueError:
                raw = []
            if len(raw) == len(texts):
                return [_usable(v) for v in raw]
        out: list[list[float] | None] = []
        for text in texts:
            try:
                out.append(_usable(retriever.embed(text)))
            except ValueError:  # rank() skips such an entry too
                out.append(None)
        return out

    def _reconcile(
        self,
        retriever: EmbeddingRetriever,
        table: DenseTable,
        rows: Iterable[tuple[Any, ...]],
    ) -> None:
        """Bring the vectors of these ``(rowid, alive, text, text_hash)`` rows in step
        (``text``: the row's question and answer, ``MemoryEntry.text``)."""
        dead: list[int] = []
        todo: list[tuple[int, str, str]] = []
        for rowid, alive, text, stored in rows:
            if not alive:
                if stored is not None:
                    dead.append(int(rowid))
                continue
            if type(text) is not str:
                continue  # an unreadable row: the exact scan cannot score it either
            digest = text_hash(text)
            if digest != stored:
                todo.append((int(rowid), text, digest))
        conn = self.conn
        if dead:
            conn.execute(f"DELETE FROM {table.table} WHERE entry_rowid = ANY(?)", (dead,))
        for start in range(0, len(todo), 1024):
            part = todo[start : start + 1024]
            vectors = self._vectors(retriever, [text for _, text, _ in part])
            keep = [
                (rowid, digest, _literal(vec))
                for (rowid, _, digest), vec in zip(part, vectors, strict=True)
                if vec is not None and len(vec) == table.dims
            ]
            drop = [
                rowid
                for (rowid, _, _), vec in zip(part, vectors, strict=True)
                if vec is None or len(vec) != table.dims
            ]
            conn.executemany(
                f"INSERT INTO {table.table} (entry_rowid, text_hash, embedding) "
                "VALUES (?, ?, ?::vector) ON CONFLICT (entry_rowid) DO UPDATE SET "
                "text_hash = EXCLUDED.text_hash, embedding = EXCLUDED.embedding",
                keep,
            )
            if drop:  # a changed text that no longer embeds: its old vector must go
                conn.execute(f"DELETE FROM {table.table} WHERE entry_rowid = ANY(?)", (drop,))

    def _catch_up(self, retriever: EmbeddingRetriever, table: DenseTable) -> None:
        """Re-check every entry written since the table's recorded version."""
        conn = self.conn
        committed = self.backend._current_version()
        row = conn.execute(
            "SELECT seen FROM dense_models WHERE model = ?", (table.model,)
        ).fetchone()
        seen = int(row[0]) if row else -1
        if row is None:  # the table's row was deleted: rebuild from every entry
            conn.execute(
                "INSERT INTO dense_models (model, tbl, dims, seen) VALUES (?, ?, ?, -1) "
                "ON CONFLICT (model) DO NOTHING",
                (table.model, table.table, table.dims),
            )
        rows = conn.execute(
            "SELECT e.rowid, e.alive, e.question || ' ' || e.answer, v.text_hash FROM entries e "
            f"LEFT JOIN {table.table} v ON v.entry_rowid = e.rowid WHERE e.version > ?",
            (seen,),
        ).fetchall()
        if seen < 0:  # a new table: rows of entries that no longer exist go too
            conn.execute(
                f"DELETE FROM {table.table} v WHERE NOT EXISTS "
                "(SELECT 1 FROM entries e WHERE e.rowid = v.entry_rowid AND e.alive = 1)"
            )
        self._reconcile(retriever, table, rows)
        if committed > seen:
            # Rows this transaction wrote carry a newer version: the next look sees them again.
            conn.execute(
                "UPDATE dense_models SET seen = GREATEST(seen, ?) WHERE model = ?",
                (committed, table.model),
            )

    def _touched(self, ids: Iterable[str]) -> None:
        retriever = self._dense_retriever()
        if retriever is None:
            return
        wanted = list(ids)
        table = self._table(retriever, None)
        if table is None:
            return  # no table yet: the first search builds it
        rows = self.conn.execute(
            "SELECT e.rowid, e.alive, e.question || ' ' || e.answer, v.text_hash FROM entries e "
            f"LEFT JOIN {table.table} v ON v.entry_rowid = e.rowid WHERE e.id = ANY(?)",
            (wanted,),
        ).fetchall()
        self._reconcile(retriever, table, rows)

    def add(self, entry: MemoryEntry) -> MemoryEntry:
        super().add(entry)
        self._touched([entry.id])
        return entry

    def bury(self, entry_id: str, reason: str = "burial") -> None:
        super().bury(entry_id, reason)
        self._touched([entry_id])

    def merge_into(self, heir: MemoryEntry, member_ids: Iterable[str]) -> float:
        members = list(member_ids)
        clipped = super().merge_into(heir, members)  # the members go through bury()
        self._touched([heir.id])
        return clipped

    # -- searching ------------------------------------------------------------------

    def retrieve(
        self,
        query: str,
        k: int = 3,
        *,
        half_life: float | None = None,
        now_cycle: int | None = None,
        kind: EntryKind | str | None = None,
        source: str | None = None,
    ) -> list[tuple[MemoryEntry, float]]:
        retriever = None
        if (
            kind is None
            and source is None
            and isinstance(query, str)
            and not isinstance(k, bool)
            and isinstance(k, int)
            and k > 0
            and (half_life is None or (math.isfinite(half_life) and half_life > 0))
        ):
            retriever = self._dense_retriever()
        if retriever is None or retriever.min_similarity <= 0:
            return super().retrieve(
                query, k, half_life=half_life, now_cycle=now_cycle, kind=kind, source=source
            )
        q = retriever._embed(query)
        table = self._table(retriever, len(q))
        if table is None or len(q) != table.dims:
            return super().retrieve(
                query, k, half_life=half_life, now_cycle=now_cycle, kind=kind, source=source
            )
        self._catch_up(retriever, table)
        found = self.dense_search(retriever, table, q, None if half_life is not None else k)
        return finish_ranking(
            found, k, half_life, lambda: now_cycle if now_cycle is not None else self.now_cycle()
        )

    def _ensure_index(self, table: DenseTable) -> None:
        if table.indexed:
            return
        self.conn.execute(
            f"CREATE INDEX IF NOT EXISTS {table.table}_hnsw ON {table.table} "
            "USING hnsw (embedding vector_cosine_ops)"
        )
        table.indexed = True

    def dense_search(
        self,
        retriever: EmbeddingRetriever,
        table: DenseTable,
        q: list[float],
        k: int | None,
    ) -> list[tuple[MemoryEntry, float]]:
        """Entries scoring at least the floor, in the scan's order; at least the top ``k``.

        Candidates come from SQL by cosine distance; scores are recomputed exactly.
        """
        if math.sqrt(math.fsum(x * x for x in q)) == 0:
            return []  # every cosine is 0: under a positive floor
        floor = retriever.min_similarity
        bound = 1.0 - floor + SLACK
        hnsw = self.backend.vector_mode == "hnsw"
        if hnsw:
            self._ensure_index(table)
            sql = (  # the form an HNSW index answers: ORDER BY the operator itself
                f"SELECT entry_rowid, embedding::real[], embedding <=> ?::vector AS d "
                f"FROM {table.table} WHERE (embedding <=> ?::vector) <= ? "
                f"ORDER BY embedding <=> ?::vector LIMIT ?"
            )
        else:  # one distance per row, and an order no index matches: always the full scan
            sql = (
                f"SELECT entry_rowid, embedding::real[], d FROM (SELECT entry_rowid, embedding, "
                f"embedding <=> ?::vector AS d FROM {table.table} OFFSET 0) s "
                f"WHERE d <= ? ORDER BY d LIMIT ?"
            )
        qtext = _literal(q)
        limit = None if k is None else k + 5  # grown below when the k-th might lie past it
        conn = self.conn
        while True:
            if hnsw:
                ef = max(HNSW_EF_SEARCH, min(2 * (limit or 500), 1000))
                conn.execute(f"SET hnsw.ef_search = {ef}")
                params: tuple[Any, ...] = (qtext, qtext, bound, qtext, limit)
            else:
                params = (qtext, bound, limit)
            rows = conn.execute(sql, params).fetchall()
            scores: dict[int, float] = {}
            for rowid, vec, _ in rows:
                # The shortest decimal of each float32, read back as that float32.
                sim = _cosine(q, array("f", vec))
                if sim >= floor:
                    scores[int(rowid)] = sim
            if k is None or limit is None or len(rows) < limit or hnsw:
                break
            best = sorted(scores.values(), reverse=True)
            kth = best[k - 1] if len(best) >= k else floor
            if 1.0 - float(rows[-1][2]) < kth - SLACK:
                break  # everything past the limit scores below the k-th: complete
            limit *= 4
        return self._entries(scores)

    def _entries(self, scores: dict[int, float]) -> list[tuple[MemoryEntry, float]]:
        if not scores:
            return []
        rows = self._fetch("rowid = ANY(?) AND alive = 1", (sorted(scores),))
        rows.sort(key=lambda row: row[0])  # insertion order, as the scan sees it
        out = []
        for row in rows:
            entry = self._population.get(row[1])
            if entry is None:
                entry = self._population[row[1]] = self._materialize(row)
            out.append((entry, scores[int(row[0])]))
        out.sort(key=lambda pair: pair[1], reverse=True)
        return out
