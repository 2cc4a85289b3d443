"""Entry vectors kept in a SQLite store, so each process reads them instead of embedding.

A store searched with a dense retriever (``HybridRetriever``, or an
``EmbeddingRetriever`` over an embedder that names its model: ``model_tag``)
keeps each living entry's vector in its ``vectors`` table (schema 18): one row per
entry and model, with the vector's length, a hash of the text it embeds and the
vector as little-endian float64 values, the very doubles the retriever caches, so
a search over read vectors is bit for bit the search over vectors embedded in the
process.

- **Read once per process.** A search without filters (``HybridRetriever``,
  ``EmbeddingRetriever``) reads the model's rows into a matrix keyed by rowid
  (``sqldense``), with the same checks; other dense searches (a filter, a recency
  half-life) read them into the retriever's cache (``prepare``). Either reads each
  row once per process: later searches read only the rows of entries not seen
  (written since by other processes). Only entries without a sound row are
  embedded (in batches). A row is sound when its entry is living, its
  text hash is the entry's text's, and its blob holds ``dims`` finite doubles of the
  model's length; any other row is never trusted: the entry is embedded again and
  the row replaced.
- **Written by writes only.** A search never writes. The vectors a process embedded
  and the table lacks are written by its next write transaction (a ``decide`` is
  one, so the decide that first ranks an entry stores its vector in its own
  transaction), and every write deletes the rows of the entries it buried. A read-only
  command (``query``, ``stats``, ``why``) leaves the file as it was.
- **Derived data.** The table can be dropped at any time: a process that searches
  with a dense retriever makes it again at its next write and fills it from what it
  embeds. ``set-retriever`` fills it for every living entry.

PostgreSQL keeps its vectors in pgvector tables instead (``pgdense``).
"""

from __future__ import annotations

import hashlib
import math
import sqlite3
import sys
from array import array
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..records.entry import MemoryEntry
from ..retrieval.lexical import EmbeddingRetriever, HashingEmbedder

__all__ = [
    "VECTORS_DDL",
    "StoredVectors",
    "decode_vector",
    "dense_part",
    "encode_vector",
    "model_tag",
    "text_hash",
]

#: The table's definition, as schema 18 made it (``migrations.m018_entry_vectors``);
#: used again when the table was dropped.
VECTORS_DDL = (
    "CREATE TABLE IF NOT EXISTS vectors ("
    "entry_id TEXT NOT NULL, model TEXT NOT NULL, dims INTEGER NOT NULL, "
    "text_hash TEXT NOT NULL, vector BLOB NOT NULL, PRIMARY KEY (entry_id, model))"
)
_BIG_ENDIAN = sys.byteorder == "big"
_CHUNK = 900  # SQLite's bound-parameter limit is 999 on old builds


def dense_part(retriever: Any) -> EmbeddingRetriever | None:
    """The retriever's dense part: itself, a ``HybridRetriever``'s ``dense``, or None."""
    if isinstance(retriever, EmbeddingRetriever):
        return retriever
    dense = getattr(retriever, "dense", None)
    return dense if isinstance(dense, EmbeddingRetriever) else None


def text_hash(text: str) -> str:
    """The hash a row keeps of the text its vector embeds (here and in ``pgdense``)."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=8).hexdigest()


def encode_vector(vector: array[float]) -> bytes:
    """A vector as its row holds it: float64 values, little-endian."""
    if _BIG_ENDIAN:
        vector = array("d", vector)
        vector.byteswap()
    return vector.tobytes()


def decode_vector(blob: object, dims: object) -> array[float] | None:
    """The vector a row holds, or None when the row is not sound: the blob is not
    ``dims`` float64 values, ``dims`` is not a positive integer, or a value is not
    finite (NaN, an infinity)."""
    if (
        not isinstance(blob, bytes)
        or isinstance(dims, bool)
        or not isinstance(dims, int)
        or dims <= 0
        or len(blob) != 8 * dims
    ):
        return None
    vector = array("d")
    vector.frombytes(blob)
    if _BIG_ENDIAN:
        vector.byteswap()
    # One C-level sum is finite when every value is (and almost never otherwise):
    # only a non-finite sum is looked at value by value.
    if not math.isfinite(sum(vector)) and not all(map(math.isfinite, vector)):
        return None
    return vector


def model_tag(embed: Any) -> str | None:
    """The id that tags an embedding's vectors in a SQL store (this table, and
    pgvector's tables on PostgreSQL); None when it names none (no SQL path)."""
    tag = getattr(embed, "model_id", None)
    if isinstance(tag, str) and tag:
        return tag
    if type(embed) is HashingEmbedder:
        lo, hi = embed.ngram_range
        return f"darwin-memo-hashing-{embed.dims}-{lo}-{hi}"
    return None


def _chunks(items: Sequence[Any]) -> Iterable[Sequence[Any]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start : start + _CHUNK]


class StoredVectors:
    """What one SQLite population knows of its ``vectors`` table (see the module
    docstring), and the reading and writing of it."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        #: The model whose rows were read (None: none read yet).
        self.model: str | None = None
        #: The length of that model's vectors.
        self.dims: int | None = None
        #: Entry id -> text hash of the sound rows of ``model`` the table holds.
        self.stored: dict[str, str] = {}
        #: Ids of rows to delete at the next write (entries no longer living).
        self.stale: set[str] = set()
        #: Living entries whose vector the retriever cached and the table lacks, by id:
        #: what the next write writes.
        self.unsaved: dict[str, MemoryEntry] = {}

    def has_table(self) -> bool:
        """Whether the store has its ``vectors`` table (anyone may drop it)."""
        return self._has_table()

    def _has_table(self) -> bool:
        found = self.conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'vectors'"
        ).fetchone()
        return found is not None

    # -- reading ----------------------------------------------------------------------

    def prepare(self, retriever: Any, living: Sequence[MemoryEntry], *, embed: bool = True) -> None:
        """Before a dense search over ``living``: every living entry's vector in the
        retriever's cache, read from the table where it holds a sound row, else (with
        ``embed``) embedded. Nothing is written."""
        dense = dense_part(retriever)
        model = model_tag(dense.embed) if dense is not None else None
        if dense is None or model is None:
            return
        fresh = model != self.model or not self._has_table()
        if fresh:  # the first search (or the table was dropped): every row of the model
            self.model, self.stored, self.stale, self.unsaved = model, {}, set(), {}
            if self._has_table():
                self._read(dense, model, living, None)
            missing = []
            for entry in living:
                if dense.cached_vector(entry.id) is None:
                    missing.append(entry)
                elif entry.id not in self.stored:  # cached before: kept at the next write
                    self.unsaved[entry.id] = entry
        else:  # later: the rows of entries first seen since
            missing = [e for e in living if dense.cached_vector(e.id) is None]
            if missing:
                self._read(dense, model, missing, [e.id for e in missing])
                missing = [e for e in missing if dense.cached_vector(e.id) is None]
        if embed and missing:
            self._embed(dense, missing)
        # What gets a vector (here, or from the caller: set-retriever) is written next.
        self.unsaved.update((e.id, e) for e in missing)

    def _read(
        self,
        dense: EmbeddingRetriever,
        model: str,
        entries: Sequence[MemoryEntry],
        ids: Sequence[str] | None,
    ) -> None:
        """Adopt the sound rows of ``model`` for ``entries`` (``ids``: only theirs)."""
        sql = "SELECT entry_id, dims, text_hash, vector FROM vectors WHERE model = ?"
        rows: list[tuple[Any, ...]] = []
        if ids is None:
            rows = self.conn.execute(sql, (model,)).fetchall()
        else:
            for part in _chunks(ids):
                marks = ",".join("?" * len(part))
                rows += self.conn.execute(f"{sql} AND entry_id IN ({marks})", (model, *part))
        if not rows:
            return
        by_id = {e.id: e for e in entries}
        if self.dims is None:
            declared = getattr(dense.embed, "dims", None)
            if isinstance(declared, int) and not isinstance(declared, bool) and declared > 0:
                self.dims = declared
            else:  # the length most rows agree on
                self.dims = Counter(row[1] for row in rows).most_common(1)[0][0]
        for entry_id, dims, digest, blob in rows:
            entry = by_id.get(entry_id)
            if entry is None:
                if ids is None:
                    self.stale.add(entry_id)  # a row of an entry no longer living
                continue
            if dims != self.dims or digest != text_hash(entry.text):
                continue  # another text or length: embedded again, the row replaced
            vector = decode_vector(blob, dims)
            if vector is None:
                continue  # damaged: embedded again (or the cached one kept), the row replaced
            if dense.cached_vector(entry_id) is None:
                dense.adopt(entry_id, vector)
            self.stored[entry_id] = digest

    def _embed(self, dense: EmbeddingRetriever, todo: list[MemoryEntry]) -> None:
        """Embed ``todo`` into the cache, in batches when the embedder has ``batch``."""
        if not todo:
            return
        batch = getattr(dense.embed, "batch", None)
        try:
            dense.warm(todo, batch)
        except ValueError:  # a batch the embedder refused: one by one, skipping the unusable
            dense.warm(todo)

    # -- for the dense search keyed by rowid (``sqldense``) ----------------------------

    def begin(self, model: str, dims: int) -> None:
        """``sqldense.DenseRows`` reads ``model``'s rows itself: what ``prepare`` starts
        with at a first search, without reading them here."""
        if model != self.model:
            self.model, self.stored, self.stale, self.unsaved = model, {}, set(), {}
        if self.dims is None:
            self.dims = dims

    def rows_of(self, model: str, ids: Sequence[str]) -> dict[str, tuple[Any, Any, Any]]:
        """The table's ``(dims, text_hash, vector)`` of ``model`` by entry id, for those
        of ``ids`` it holds (nothing checked: the caller checks as ``_read`` does)."""
        found: dict[str, tuple[Any, Any, Any]] = {}
        if not ids or not self._has_table():
            return found
        for part in _chunks(ids):
            marks = ",".join("?" * len(part))
            for entry_id, dims, digest, blob in self.conn.execute(
                "SELECT entry_id, dims, text_hash, vector FROM vectors "
                f"WHERE model = ? AND entry_id IN ({marks})",
                (model, *part),
            ):
                found[entry_id] = (dims, digest, blob)
        return found

    def embed(self, retriever: Any, entries: Sequence[MemoryEntry]) -> None:
        """Embed ``entries`` into the retriever's cache (in batches); what gets a
        vector is written by the next write, as ``prepare`` embeds and keeps."""
        dense = dense_part(retriever)
        if dense is None or not entries:
            return
        self._embed(dense, list(entries))
        self.unsaved.update((e.id, e) for e in entries)

    def keep(self, entries: Iterable[MemoryEntry]) -> None:
        """Entries whose cached vector the table lacks: written by the next write."""
        self.unsaved.update((e.id, e) for e in entries)

    # -- writing ----------------------------------------------------------------------

    def save(self, retriever: Any, held: Mapping[str, MemoryEntry], dead: Iterable[str]) -> int:
        """Inside a write transaction: delete the rows of ``dead`` entries and of the
        entries found no longer living, and write the vectors the retriever cached
        that the table lacks, of the living entries in ``held``. Returns how many."""
        conn = self.conn
        gone = set(dead) | self.stale
        if gone and self._has_table():
            if conn.execute("SELECT 1 FROM vectors LIMIT 1").fetchone() is not None:
                conn.executemany("DELETE FROM vectors WHERE entry_id = ?", [(i,) for i in gone])
            for entry_id in gone:
                self.stored.pop(entry_id, None)
                self.unsaved.pop(entry_id, None)
        self.stale = set()
        dense = dense_part(retriever)
        model = self.model
        if dense is None or model is None or model != model_tag(dense.embed):
            return 0  # nothing read for this model yet: nothing known to be missing
        rows = []
        for entry_id, entry in list(self.unsaved.items()):
            if entry_id not in held:
                continue  # not in hand now (a later write takes it)
            del self.unsaved[entry_id]
            vector = dense.cached_vector(entry_id)
            if vector is None or (self.dims is not None and len(vector) != self.dims):
                continue
            rows.append((entry_id, model, len(vector), text_hash(entry.text), vector))
        if not rows:
            return 0
        conn.execute(VECTORS_DDL)  # (made again if it was dropped)
        conn.executemany(
            "INSERT INTO vectors (entry_id, model, dims, text_hash, vector) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (entry_id, model) DO UPDATE SET "
            "dims = excluded.dims, text_hash = excluded.text_hash, vector = excluded.vector",
            [(i, m, d, h, encode_vector(v)) for i, m, d, h, v in rows],
        )
        if self.dims is None:
            self.dims = rows[0][2]
        self.stored.update((row[0], row[3]) for row in rows)
        return len(rows)
