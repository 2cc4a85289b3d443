"""A SQLite store's dense search keyed by rowid: the living entries' vectors as one matrix.

A SQLite store searched with ``HybridRetriever`` or an ``EmbeddingRetriever`` (over
an embedder that names its model) keeps each entry's vector in its ``vectors``
table (``sqlvectors``). The published scan ranks every living entry: each search
read and materialized every living row, read their vectors into the retriever and
scored them all in Python. ``DenseRows`` keeps instead, per process, the living
entries' vectors with one row per living entry, found by its rowid: a matrix of
float32 unit rows, for one matrix-vector product over every entry, and each
vector's exact doubles as read (decoded only for the few that may rank).

- **Read once, then what changed.** The first search reads every living row's
  vector in one joined query, a chunk of rows at a time, each blob checked as
  ``sqlvectors`` checks it (the hash of the entry's text, the model's length,
  finite values) and the chunk's blobs decoded as one buffer. Later searches read
  only the rows written since: ``entries.version`` above the store version they
  last saw (index ``entries_by_version``), and again the rows read while their
  writes were not committed (an operation's own, which a rollback undoes). A row
  whose text is unchanged (a credit, a balance) keeps its vector; a living row
  that is new or has a new text takes the retriever's cached vector, else the
  table's sound row, else it is embedded (and materialized, so that the next
  write stores its vector, as ``StoredVectors.prepare`` does).
- **The same ranking.** ``top`` gives what ``HybridRetriever.rank`` (or
  ``EmbeddingRetriever.rank``) over the living entries in rowid order gives, then
  ``population.finish_ranking`` cuts to ``k``, ties and their order included: each
  float32 cosine is within ``APPROX_SLACK`` of the exact one, so every row's
  blended score has bounds (``embedding.top_k_pool``); only rows that may reach
  the ``k``-th score are rescored exactly, in double precision with ``rank``'s
  operations, and only those that tie or beat the ``k``-th are returned, for the
  store to read (``SqlSearch``).

Memory: about 12 bytes per dimension and living entry (460 MB at 100k MiniLM
entries, what the retriever's cache of every vector held before, without the
materialized entries).
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ..records.entry import MemoryEntry
from ..retrieval.lexical import APPROX_SLACK, EmbeddingRetriever
from .jsonfile import loads
from .sqlvectors import StoredVectors, text_hash

__all__ = ["DenseRows"]

_BIG_ENDIAN = sys.byteorder == "big"

#: Rows read and decoded together when the matrix is first filled.
READ_CHUNK = 2048
_CHUNK = 900  # SQLite's bound-parameter limit is 999 on old builds
_CHANGED = "SELECT rowid, id, alive, question, answer, version FROM entries"

#: ``fetch(rowids)``: the living entries of those rows, by rowid, as the store holds
#: them (read and cached when not held).
Fetch = Callable[[Sequence[int]], Mapping[int, MemoryEntry]]


def _text_hash(question: object, answer: object) -> str | None:
    """The hash of a row's text (``MemoryEntry.text``), None when it holds no text."""
    if type(question) is not str or type(answer) is not str:
        return None  # a damaged row: materializing it says what is wrong
    return text_hash(question + " " + answer)


class DenseRows:
    """The living entries' vectors of one SQLite store and model (module docstring)."""

    def __init__(self, np: Any, model: str, dims: int) -> None:
        self.np = np
        self.model = model
        self.dims = dims
        #: The store version (meta ``version``) the rows were last read at; -1: never.
        self.seen = -1
        #: Rowids read at a version above ``seen`` (not committed then): read again.
        self.provisional: set[int] = set()
        #: The store's living counter less the rows held, as last read whole (0 but
        #: in a store whose counter is off).
        self.offset = 0
        self.slot_of: dict[int, int] = {}  # rowid -> its row in the matrices
        self.ids: list[str | None] = []  # by row: the entry id (None: a free row)
        self.hashes: list[str | None] = []  # by row: the hash of the text it embeds
        self.rowids: list[int] = []  # by row (-1: free)
        self.free: list[int] = []
        #: Rows of living entries without a usable vector (embedding refused it):
        #: tried again at each search, as ``rank`` embeds them again.
        self.missing: set[int] = set()
        self.usable = np.zeros(0, dtype=bool)
        self.unit = np.zeros((0, dims), dtype=np.float32)
        #: By row: its exact vector as read (the table's little-endian blob, or the
        #: retriever's cached ``array``), decoded only when rescored.
        self.raw: list[Any] = []

    def __len__(self) -> int:
        return len(self.slot_of)

    # -- rows -------------------------------------------------------------------------

    def _grow(self, need: int) -> None:
        np = self.np
        have = self.usable.shape[0]
        if need <= have:
            return
        size = max(need, 2 * have, 1024)
        usable = np.zeros(size, dtype=bool)
        unit = np.zeros((size, self.dims), dtype=np.float32)
        usable[:have], unit[:have] = self.usable, self.unit
        self.usable, self.unit = usable, unit

    def _place(self, rowid: int, entry_id: str, digest: str | None) -> int:
        """The row of ``rowid`` (taken now if it has none), holding no vector yet."""
        slot = self.slot_of.get(rowid)
        if slot is None:
            if self.free:
                slot = self.free.pop()
            else:
                slot = len(self.ids)
                self.ids.append(None)
                self.hashes.append(None)
                self.rowids.append(-1)
                self.raw.append(None)
                self._grow(slot + 1)
            self.slot_of[rowid] = slot
            self.rowids[slot] = rowid
        self.ids[slot], self.hashes[slot], self.raw[slot] = entry_id, digest, None
        self.usable[slot] = False
        return slot

    def _drop(self, rowid: int) -> None:
        slot = self.slot_of.pop(rowid, None)
        if slot is None:
            return
        self.ids[slot] = self.hashes[slot] = self.raw[slot] = None
        self.rowids[slot] = -1
        self.usable[slot] = False
        self.missing.discard(slot)
        self.free.append(slot)

    def _fill(self, slots: Sequence[int], values: Any, raws: Sequence[Any]) -> None:
        """Rows ``slots`` hold ``values`` (float64, one vector per row), read from
        ``raws`` (``raw``)."""
        np = self.np
        if not len(slots):
            return
        at = np.asarray(slots, dtype=np.int64)
        for slot, raw in zip(slots, raws, strict=True):
            self.raw[slot] = raw
        norms = np.linalg.norm(values, axis=1, keepdims=True)
        self.unit[at] = (values / np.where(norms > 0, norms, 1.0)).astype(np.float32)
        self.usable[at] = True
        self.missing.difference_update(slots)

    def vector(self, rowid: int) -> array[float] | None:
        """The exact vector of a living row, as the retriever caches one, or None."""
        slot = self.slot_of.get(rowid)
        if slot is None or not self.usable[slot]:
            return None
        return self._exact(slot)

    def _exact(self, slot: int) -> array[float]:
        raw = self.raw[slot]
        if isinstance(raw, array):
            return raw  # the retriever's own (not changed by anyone)
        out = array("d")
        out.frombytes(raw)
        if _BIG_ENDIAN:
            out.byteswap()
        return out

    def lend(self, dense: EmbeddingRetriever) -> None:
        """Cache every vector held in the retriever (the table was dropped: the scan
        ranks from the cache, and the next write stores them again)."""
        for rowid in list(self.slot_of):
            entry_id = self.ids[self.slot_of[rowid]]
            if entry_id is not None and dense.cached_vector(entry_id) is None:
                vector = self.vector(rowid)
                if vector is not None:
                    dense.adopt(entry_id, vector)

    # -- reading ----------------------------------------------------------------------

    def sync(self, conn: Any, dense: EmbeddingRetriever, kept: StoredVectors, fetch: Fetch) -> None:
        """Bring the rows up to date with the store (module docstring).

        Every write has a version of its own (an operation's, or ``own_write``'s for a
        library caller's ``store.add``). A store whose living counter disagrees with
        the rows held is read again whole."""
        version_value, living = conn.execute(
            "SELECT (SELECT value FROM meta WHERE key = 'version'), "
            "(SELECT value FROM counters WHERE name = 'alive')"
        ).fetchone()
        version = int(loads(version_value)) if version_value is not None else 0
        kept.begin(self.model, self.dims)
        if self.seen >= 0:
            self._read_changes(conn, dense, kept, fetch, version)
        count = int(living) if living is not None else None
        if self.seen < 0 or (count is not None and count - self.offset != len(self.slot_of)):
            self._clear()
            self._read_all(conn, dense, kept, fetch, version)
            # (a counter that disagrees with the rows themselves is not read again)
            self.offset = count - len(self.slot_of) if count is not None else 0
        self.seen = version

    def _clear(self) -> None:
        """Hold no row (the matrices are kept, to be filled again)."""
        self.slot_of, self.ids, self.hashes, self.rowids, self.raw = {}, [], [], [], []
        self.free, self.missing, self.provisional = [], set(), set()
        self.usable[:] = False

    def _read_all(
        self, conn: Any, dense: EmbeddingRetriever, kept: StoredVectors, fetch: Fetch, version: int
    ) -> None:
        """Every living row (held empty): the rows, then the model's vectors, read in
        rowid and key order, each chunk of blobs checked and decoded together."""
        np, dims = self.np, self.dims
        size = 8 * dims
        placed = conn.execute(
            "SELECT rowid, id, question, answer, version FROM entries WHERE alive = 1"
        ).fetchall()
        # Held empty (``_clear``): row i of the matrices is the i-th living row.
        self._grow(len(placed))
        self.rowids = [row[0] for row in placed]
        self.ids = [row[1] for row in placed]
        self.hashes = [_text_hash(row[2], row[3]) for row in placed]
        self.raw = [None] * len(self.ids)
        self.slot_of = {rowid: slot for slot, rowid in enumerate(self.rowids)}
        self.provisional = {row[0] for row in placed if row[4] > version}
        slot_of: dict[str, int] = {row[1]: slot for slot, row in enumerate(placed)}  # by id
        del placed
        hashes, cached = self.hashes, dense.cached_vector
        stale: list[str] = []  # rows of entries no longer living
        cursor = conn.execute(
            "SELECT entry_id, dims, text_hash, vector FROM vectors WHERE model = ?", (self.model,)
        )
        while chunk := cursor.fetchmany(READ_CHUNK):
            slots: list[int] = []
            blobs: list[bytes] = []
            for entry_id, length, digest, blob in chunk:
                at = slot_of.get(entry_id)
                if at is None:
                    stale.append(entry_id)
                    continue
                if (
                    digest == hashes[at]
                    and digest is not None
                    and length == dims
                    and type(blob) is bytes
                    and len(blob) == size
                ):
                    slots.append(at)
                    blobs.append(blob)
            if blobs:
                values = np.frombuffer(b"".join(blobs), dtype="<f8").reshape(len(blobs), dims)
                finite = np.isfinite(values).all(axis=1)
                keep = finite.tolist()
                self._fill(
                    [s for s, ok in zip(slots, keep, strict=True) if ok],
                    values[finite],
                    [b for b, ok in zip(blobs, keep, strict=True) if ok],
                )
        kept.stale.update(stale)
        # The retriever's own vectors first (as ``prepare``): kept at the next write
        # where the table has no sound row; the entries with neither are embedded.
        unsaved: list[int] = []
        other: set[int] = set()  # cached at another length: skipped, as ``rank`` skips it
        for entry_id, slot in slot_of.items():
            held = cached(entry_id)
            if held is None:
                continue
            if not self.usable[slot]:
                unsaved.append(self.rowids[slot])
            if len(held) == dims:
                self._fill([slot], np.frombuffer(held, dtype=np.float64)[None, :], [held])
            else:
                self.usable[slot] = False
                other.add(slot)
        lacking = np.nonzero(~self.usable[: len(self.ids)])[0].tolist()
        todo = [s for s in lacking if s not in other and self.ids[s] is not None]
        if unsaved:
            kept.keep(fetch(unsaved).values())
        self._embed(dense, kept, fetch, todo)

    def _read_changes(
        self, conn: Any, dense: EmbeddingRetriever, kept: StoredVectors, fetch: Fetch, version: int
    ) -> None:
        rows = {row[0]: row for row in conn.execute(f"{_CHANGED} WHERE version > ?", (self.seen,))}
        again = [r for r in self.provisional if r not in rows]
        for start in range(0, len(again), _CHUNK):
            part = again[start : start + _CHUNK]
            marks = ",".join("?" * len(part))
            for row in conn.execute(f"{_CHANGED} WHERE rowid IN ({marks})", part):
                rows[row[0]] = row
        for rowid in self.provisional - rows.keys():
            self._drop(rowid)  # an insert rolled back
        self.provisional = {rowid for rowid, row in rows.items() if row[5] > version}
        todo = set(self.missing)
        for rowid, entry_id, alive, question, answer, _ in rows.values():
            if not alive:
                self._drop(rowid)
                continue
            own = _text_hash(question, answer)
            slot = self.slot_of.get(rowid)
            if (
                slot is not None
                and self.ids[slot] == entry_id
                and self.hashes[slot] == own
                and slot not in self.missing
            ):
                continue  # the same text: the same vector
            todo.add(self._place(rowid, entry_id, own))
        if not todo:
            return
        # The retriever's cached vector first (as ``prepare``), then the table's.
        np = self.np
        left: list[int] = []
        for slot in sorted(todo):
            held = dense.cached_vector(str(self.ids[slot]))
            if held is not None and len(held) == self.dims:
                self._fill([slot], np.frombuffer(held, dtype=np.float64)[None, :], [held])
            elif held is None:
                left.append(slot)
        found = kept.rows_of(self.model, [str(self.ids[s]) for s in left])
        todo_embed: list[int] = []
        size = 8 * self.dims
        for slot in left:
            length, digest, blob = found.get(str(self.ids[slot]), (None, None, None))
            if (
                self.hashes[slot] is not None
                and digest == self.hashes[slot]
                and length == self.dims
                and type(blob) is bytes
                and len(blob) == size
            ):
                values = np.frombuffer(blob, dtype="<f8")[None, :]
                if bool(np.isfinite(values).all()):
                    self._fill([slot], values, [blob])
                    continue
            todo_embed.append(slot)
        self._embed(dense, kept, fetch, todo_embed)

    def _embed(
        self, dense: EmbeddingRetriever, kept: StoredVectors, fetch: Fetch, slots: Iterable[int]
    ) -> None:
        """Embed the entries of ``slots`` (read whole: the next write stores them)."""
        rowids = [self.rowids[s] for s in slots]
        if not rowids:
            return
        entries = fetch(rowids)
        kept.embed(dense, [entries[r] for r in rowids if r in entries])
        for rowid in rowids:
            slot = self.slot_of[rowid]
            entry = entries.get(rowid)
            held = dense.cached_vector(entry.id) if entry is not None else None
            if held is not None and len(held) == self.dims:
                self._fill([slot], self.np.frombuffer(held, dtype=self.np.float64)[None, :], [held])
            elif held is None:
                self.missing.add(slot)  # refused: asked again next time, as ``rank`` does

    # -- ranking ----------------------------------------------------------------------

    def top(
        self,
        q: Sequence[float],
        dense: EmbeddingRetriever,
        k: int,
        *,
        alpha: float = 1.0,
        lexical: Sequence[tuple[int, float]] = (),
        blend: Callable[..., list[tuple[int, float]]] | None = None,
    ) -> list[tuple[int, float]] | None:
        """``(rowid, score)`` best first, in ``rank``'s order, of the entries that tie
        or beat the ``k``-th score (module docstring). ``lexical``: the query's
        lexical ``(rowid, score)`` over every living row, and ``blend`` the hybrid's
        (``HybridRetriever.blend``); without them, the dense ranking alone. None when
        ``lexical`` names a row this does not hold (read again, or scan)."""
        from ..retrieval.embedding import top_k_pool

        np = self.np
        used = len(self.ids)
        qv = np.asarray(q, dtype=np.float32)
        qn = float(np.linalg.norm(qv))
        sims = (self.unit[:used] @ (qv / qn)).astype(np.float64)
        sims[~self.usable[:used]] = -np.inf
        lex = np.zeros(used, dtype=np.float64)
        best = max((score for _, score in lexical), default=0.0)
        scores = dict(lexical)
        if best > 0:
            for rowid, score in lexical:
                slot = self.slot_of.get(rowid)
                if slot is None:
                    return None
                lex[slot] = score / best
        floor = dense.min_similarity
        pool = top_k_pool(np, sims, lex, alpha, floor, k)
        near = pool[sims[pool] + APPROX_SLACK >= floor].tolist()
        vectors = [self._exact(slot) for slot in near]
        rowids = self.rowids
        found = [
            (rowids[slot], sim)
            for slot, sim in zip(near, dense.exact_cosines(q, vectors), strict=True)
            if sim >= floor
        ]
        found.sort(key=lambda pair: (-pair[1], pair[0]))  # rank's order: by score, then rowid
        if blend is not None:
            words = [(rowids[s], scores[rowids[s]]) for s in pool.tolist() if lex[s] > 0]
            words.sort(key=lambda pair: (-pair[1], pair[0]))
            found = blend(words, found, best)
        if len(found) > k:
            kth = found[k - 1][1]
            found = [pair for pair in found if pair[1] >= kth]
        return found
