"""Retrieval over an SQL store's lexical index, with the published ranking.

``SqlSearch`` is the search half of ``sqlstore.SqlStore``: it reads the query's
tokens' lists (``postings``), scores the rows that hold them exactly as the
published scan does (``index``: the IDF overlap with the coverage floor), and breaks
ties at the k-th score by balance without reading every tied row
(``_best_balances``). A filtered query, or another retriever, is the published scan
over the living entries (``population.HeldEntries._rank_held``). Lists read are
kept between searches while the index's stamp holds.
"""

from __future__ import annotations

import math
import sqlite3
import sys
from array import array
from bisect import bisect_left
from collections.abc import Collection, Sequence
from operator import itemgetter

from ..records.entry import EntryKind, MemoryEntry
from ..retrieval.index import top_by_codes, top_by_combinations, top_candidates
from ..retrieval.lexical import LexicalRetriever, tokenize
from . import postings as _postings
from .population import finish_ranking
from .postings import (
    _CHUNK,
    block_bits,
    chunks,
    first_column,
    token_ids,
)
from .rows import (
    _COLUMNS,
    _NOW,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ..retrieval.protocols import Retriever
    from .dialect import Dialect
    from .sqldense import DenseRows
    from .sqlvectors import StoredVectors

__all__ = ["SqlSearch"]

_BIG_ENDIAN = sys.byteorder == "big"
_BIT_OF_LOW = bytes(1 << (b & 7) for b in range(256))  # a rowid's bit in its byte, by low byte
_ID_SIZE = array("I").itemsize
_LOW_BYTE = _ID_SIZE - 1 if _BIG_ENDIAN else 0  # where an array("I") item keeps its low byte
_NONZERO = bytes([0] + [1] * 255)
#: About how much memory of postings lists a handle keeps between searches.
LISTS_CACHE_BYTES = 64 << 20
#: Entries tied at the k-th score from which a search first tries the highest balance.
TIES_BOUNDED = 16
#: How many (pinned, anchor) groups ``_highest_balance`` visits before giving up.
TIE_GROUPS = 4


def _fresh() -> list[Any]:
    """What ``flags`` derives from a list of keys, filled on first use: [the keys, the
    blocks they fall in (None: all), a getter of their bytes in a bitmap, their bits
    as an int]."""
    return [None, None, None, 0]


class SqlSearch:
    """Searching the rows (see the module docstring); mixed into ``SqlStore``."""

    if TYPE_CHECKING:  # what it uses of the store it is part of
        conn: sqlite3.Connection
        dialect: Dialect
        retriever: Retriever
        tick: int
        upkeep: float
        _population: dict[str, MemoryEntry]
        _deferred: _postings.ListChanges | None

        def _materialize(self, row: tuple[Any, ...]) -> MemoryEntry: ...

        def alive(self) -> list[MemoryEntry]: ...

        def ready_vectors(self, living: Sequence[MemoryEntry], *, embed: bool = True) -> None: ...

        def now_cycle(self) -> int: ...

        def _stored_vectors(self) -> StoredVectors | None: ...

        def __len__(self) -> int: ...

        def _rank_held(
            self,
            query: str,
            k: int,
            *,
            half_life: float | None = None,
            now_cycle: int | None = None,
            kind: EntryKind | str | None = None,
            source: str | None = None,
        ) -> list[tuple[MemoryEntry, float]]: ...

    def _init_search(self) -> None:
        # Lists read for retrieval, kept across searches while ``index_stamp`` holds:
        # token -> (bitmap, blocks read) for common tokens, token -> its pack's rowids as
        # dict keys for membership tests. A dict of ints, unlike a set, is not tracked by
        # the cyclic collector, so these thousands of rowids are not walked again at
        # every collection (which paused a long-lived handle's decides for tens of ms).
        self._lists_stamp: int | None = None
        self._bitmaps: dict[str, tuple[bytes, set[int] | None]] = {}
        self._sets: dict[str, dict[int, None]] = {}
        self._ints: dict[str, int] = {}
        # token -> its pack (sorted rowids) and what ``flags`` derived from it
        self._packs: dict[str, tuple[array[int], list[Any]]] = {}
        self._token_stats: dict[str, tuple[int, int, bool] | None] = {}
        self._lists_bytes = 0
        #: The living entries' vectors by rowid, for a dense retriever (``sqldense``).
        self._dense_rows: DenseRows | None = None

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
        if (
            kind is not None
            or source is not None
            or not isinstance(query, str)
            or isinstance(k, bool)
            or not isinstance(k, int)
            or k <= 0
        ):
            return self._retrieve_scan(
                query, k, half_life=half_life, now_cycle=now_cycle, kind=kind, source=source
            )
        if not isinstance(self.retriever, LexicalRetriever):
            if half_life is None:
                found = self._retrieve_dense(query, k)
                if found is not None:
                    return found
            return self._retrieve_scan(
                query, k, half_life=half_life, now_cycle=now_cycle, kind=kind, source=source
            )
        if half_life is not None and (not math.isfinite(half_life) or half_life <= 0):
            raise ValueError(f"half_life must be a positive number of ticks, got {half_life!r}")
        found = self._search(query, None if half_life is not None else k)
        return finish_ranking(
            found, k, half_life, lambda: now_cycle if now_cycle is not None else self.now_cycle()
        )

    def _retrieve_scan(self, query: str, k: int, **kwargs: Any) -> list[tuple[MemoryEntry, float]]:
        """The published scan over every living entry (filters, custom retrievers)."""
        living = self.alive()  # fill the cache the base implementation ranks over
        held = self._population
        if list(held) != [e.id for e in living]:
            # The scan ranks the cache in its order, and equal scores keep it: the
            # entries in rowid order (insertion order, as the published scan and
            # the dense search see them), not in the order this handle read them.
            ordered = {e.id: e for e in living}
            ordered.update(held)
            held.clear()
            held.update(ordered)
        if not isinstance(self.retriever, LexicalRetriever):
            self.ready_vectors(living)  # the store's vectors read, not embedded again
        count = len(self._population)
        saved = self.retriever
        try:
            return self._rank_held(query, k, **kwargs) if count else []
        finally:
            self.retriever = saved

    def _retrieve_dense(self, query: str, k: int) -> list[tuple[MemoryEntry, float]] | None:
        """``_retrieve_scan``'s result for a dense retriever, from the vectors kept by
        rowid (``sqldense``): only the entries it returns are read whole. None where
        that path does not apply (another backend or retriever, no model tag, no
        numpy, no ``vectors`` table, a query without a usable vector): the scan then."""
        from ..retrieval.embedding import HybridRetriever
        from ..retrieval.lexical import EmbeddingRetriever

        retriever = self.retriever
        hybrid = type(retriever) is HybridRetriever and type(retriever.lexical) is LexicalRetriever
        if hybrid:
            assert isinstance(retriever, HybridRetriever)
            dense = retriever.dense
            if retriever.context != 0:
                return None
        elif type(retriever) is EmbeddingRetriever:
            dense = retriever
        else:
            return None
        if type(dense) is not EmbeddingRetriever or not isinstance(self.conn, sqlite3.Connection):
            return None
        kept = self._stored_vectors()
        if kept is None:
            return None
        if not kept.has_table():  # dropped: the scan, from the vectors held
            if self._dense_rows is not None:
                self._dense_rows.lend(dense)
            return None
        from .sqlvectors import model_tag

        model = model_tag(dense.embed)
        if model is None:
            return None
        try:
            import numpy as np
        except ImportError:
            return None
        preload = getattr(dense.embed, "preload", None)
        if callable(preload) and self._dense_rows is None:
            preload()  # the model loads while the store's vectors are read
        # The entries' vectors first, then the query's (as the scan embeds them).
        q: list[float] | None = None
        rows = self._dense_rows
        if rows is None or rows.model != model:
            dims = getattr(dense.embed, "dims", None)
            if isinstance(dims, bool) or not isinstance(dims, int) or dims <= 0:
                q = dense.query_vector(query)  # an embedder that does not say its length
                if q is None:
                    return None
                dims = len(q)
            from .sqldense import DenseRows

            rows = self._dense_rows = DenseRows(np, model, dims)
        if self._deferred:
            _postings.apply_list_changes(self.conn, self._deferred)
            self._deferred.clear()
        rows.sync(self.conn, dense, kept, self._entries_of_rows)
        if q is None:
            q = dense.query_vector(query)
        if q is None or len(q) != rows.dims or not any(q):
            return None  # (the scan says what a query without a usable vector finds)
        if hybrid:
            assert isinstance(retriever, HybridRetriever)
            lexical = self.token_scores(query, None, retriever.lexical.min_coverage)
            found = rows.top(
                q, dense, k, alpha=retriever.alpha, lexical=lexical, blend=retriever.blend
            )
        else:
            found = rows.top(q, dense, k)
        if found is None:
            return None
        entries = self._entries_of_rows([rowid for rowid, _ in found])
        if len(entries) != len(found):
            return None  # a row buried since (another process, outside a transaction)
        hits = [(entries[rowid], score) for rowid, score in found]
        for rowid, _ in found:  # the consult's similarity finds their vectors cached
            entry_id = entries[rowid].id
            if dense.cached_vector(entry_id) is None:
                vector = rows.vector(rowid)
                if vector is not None:
                    dense.adopt(entry_id, vector)
        return finish_ranking(hits, k, None, self.now_cycle)

    def _entries_of_rows(self, rowids: Sequence[int]) -> dict[int, MemoryEntry]:
        """The living entries of these rows by rowid: the cached ones, the others read
        (and cached)."""
        out: dict[int, MemoryEntry] = {}
        living = f"{self.dialect.unindexed('alive')} = 1"
        for part in chunks(list(rowids)):
            marks = ",".join("?" * len(part))
            for row in self.conn.execute(
                f"SELECT {_COLUMNS} FROM entries WHERE rowid IN ({marks}) AND {living}",
                tuple(part),
            ):
                entry = self._population.get(row[1])
                if entry is None:
                    entry = self._population[row[1]] = self._materialize(row)
                out[int(row[0])] = entry
        return out

    def _best_balances(self, tied: list[int], need: int, bounded: bool) -> list[tuple[float, int]]:
        """The ``need`` best of ``tied`` (ascending rowids) by balance now, then rowid,
        as ``(-balance, rowid)`` sorted (fewer when some are dead).

        SQLite computes the balances (``_NOW``, the float operations of ``_energy_now``).
        With ``bounded``, the ``need`` lowest rowids are read first: when each holds the
        highest balance of any living entry (``_highest_balance``), nobody after them
        can beat them, and the other tied rows are never read (a store of entries with
        equal balances: thousands tie on templated lessons, one row read each).
        """
        params = (self.tick, self.upkeep, self.tick, self.upkeep, self.tick)
        living = f"{self.dialect.unindexed('alive')} = 1"
        best: list[tuple[float, int]] = []
        if bounded and 0 < need <= _CHUNK:
            top = self._highest_balance(TIE_GROUPS)
            if top is not None:
                first = tied[:need]
                rows = self.conn.execute(
                    f"SELECT rowid, {_NOW} FROM entries "
                    f"WHERE rowid IN ({','.join('?' * len(first))}) AND {living}",
                    (*params, *first),
                ).fetchall()
                if len(rows) == need and all(float(now) >= top for _, now in rows):
                    return sorted((-float(now), int(rowid)) for rowid, now in rows)
        for part in chunks(tied):
            marks = ",".join("?" * len(part))
            best += [
                (-float(now), int(rowid))
                for rowid, now in self.conn.execute(
                    f"SELECT rowid, {_NOW} AS now FROM entries "
                    f"WHERE rowid IN ({marks}) AND {living} "
                    "ORDER BY now DESC, rowid LIMIT ?",
                    (*params, *part, need),
                )
            ]
        best.sort()
        return best[:need]

    def _highest_balance(self, groups: int) -> float | None:
        """The highest balance now of any living entry, or None past ``groups`` groups.

        Entries of one (pinned, anchor) group rank by balance as by ``energy`` (the
        balance now is a monotonic function of it), so each group's best is one seek
        in ``entries_balance``, and the groups are found by seeks too. Stores whose
        balances were set at many different ticks have many groups: None then.
        """
        conn = self.conn
        params = (self.tick, self.upkeep, self.tick, self.upkeep, self.tick)
        row = conn.execute(
            "SELECT pinned, anchor FROM entries WHERE alive = 1 ORDER BY pinned, anchor LIMIT 1"
        ).fetchone()
        if row is None:
            return None
        pinned, anchor = row
        top: float | None = None
        while True:
            groups -= 1
            if groups < 0:
                return None
            (now,) = conn.execute(
                f"SELECT {_NOW} FROM entries WHERE alive = 1 AND pinned = ? AND anchor = ? "
                "ORDER BY energy DESC LIMIT 1",
                (*params, pinned, anchor),
            ).fetchone()
            top = float(now) if top is None else max(top, float(now))
            (anchor,) = conn.execute(
                "SELECT MIN(anchor) FROM entries WHERE alive = 1 AND pinned = ? AND anchor > ?",
                (pinned, anchor),
            ).fetchone()
            if anchor is None:
                (pinned,) = conn.execute(
                    "SELECT MIN(pinned) FROM entries WHERE alive = 1 AND pinned > ?", (pinned,)
                ).fetchone()
                if pinned is None:
                    return top
                (anchor,) = conn.execute(
                    "SELECT MIN(anchor) FROM entries WHERE alive = 1 AND pinned = ?", (pinned,)
                ).fetchone()

    def _search(self, query: str, k: int | None) -> list[tuple[MemoryEntry, float]]:
        assert isinstance(self.retriever, LexicalRetriever)
        found = self.token_scores(query, k, self.retriever.min_coverage)
        if not found:
            return []
        packed = isinstance(self.conn, sqlite3.Connection)  # PostgreSQL: postings only
        if k is not None and len(found) > k:
            # Many entries tie at the k-th score: SQLite ranks the tied ones by their
            # balance now (``_energy_now`` in SQL, the same float operations), and only
            # the k that win are read whole. ``found`` is best first (every search
            # returns it so), so those above the k-th score come before it.
            kth = found[k - 1][1]
            above = k - 1
            while above and found[above - 1][1] == kth:
                above -= 1
            scores = dict(found[:above])
            tied = sorted(key for key, s in found[above:] if s == kth)
            best = self._best_balances(tied, k - above, packed and len(tied) >= TIES_BOUNDED)
            scores.update((rowid, kth) for _, rowid in best)
            keys = sorted(scores)
        else:
            scores = dict(found)
            keys = sorted(scores)
        rows: list[tuple[Any, ...]] = []
        living = f"{self.dialect.unindexed('alive')} = 1"
        for part in chunks(keys):
            marks = ",".join("?" * len(part))
            rows += self.conn.execute(
                f"SELECT {_COLUMNS}, toks FROM entries WHERE rowid IN ({marks}) AND {living}",
                tuple(part),
            ).fetchall()
        rows.sort(key=lambda row: row[0])  # insertion order, as the published scan sees it
        out = []
        for row in rows:
            entry = self._population.get(row[1])
            if entry is None:
                entry = self._population[row[1]] = self._materialize(row[:-1])
                if row[-1]:  # the indexed tokens (rows before schema 12 keep them):
                    # what the consult's similarity would otherwise tokenize again
                    self.retriever.remember_tokens(entry, str(row[-1]).split())
            out.append((entry, scores[int(row[0])]))
        return out

    def token_scores(
        self, query: str, k: int | None, min_coverage: float
    ) -> list[tuple[int, float]]:
        """The published lexical scores of the query over the living rows, from the
        store's index: ``(rowid, score)`` best first, those that qualify with
        ``min_coverage`` and tie or beat the ``k``-th (``k=None``: all of them), the
        scores ``LexicalRetriever.rank`` gives to the bit. Nothing is materialized."""
        qtokens = list(dict.fromkeys(tokenize(query)))
        if not qtokens:
            return []
        packed = isinstance(self.conn, sqlite3.Connection)  # PostgreSQL: postings only
        bitmaps, sets, ints, packs = self._bitmaps, self._sets, self._ints, self._packs
        known = self._token_stats
        if self._deferred:
            _postings.apply_list_changes(self.conn, self._deferred)
            self._deferred.clear()
        if packed:
            # The lists' stamp and the living count (``__len__``) in one statement.
            counters = dict(
                self.conn.execute(
                    "SELECT name, value FROM counters WHERE name IN ('index_stamp', 'alive')"
                ).fetchall()
            )
            stamp = int(counters.get("index_stamp", 0))
            n = int(counters.get("alive", 0))
            if stamp != self._lists_stamp or self._lists_bytes > LISTS_CACHE_BYTES:
                bitmaps.clear()
                sets.clear()
                ints.clear()
                packs.clear()
                known.clear()
                self._lists_bytes = 0
                self._lists_stamp = stamp
        else:
            bitmaps, sets, ints, packs, known = {}, {}, {}, {}, {}
            n = len(self)
        # Each token's (id, df, has bits), or None when no entry holds it: kept with the
        # lists, since every change of a token's df or form writes a new stamp.
        missing = [t for t in qtokens if t not in known]
        columns = "token, id, df, dense" if packed else "token, id, df, 0"
        for part in chunks(missing):
            marks = ",".join("?" * len(part))
            known.update(dict.fromkeys(part))
            for token, token_id, count, has_bits in self.conn.execute(
                f"SELECT {columns} FROM tokens WHERE token IN ({marks})", part
            ):
                known[token] = (int(token_id), int(count), bool(has_bits))
                self._lists_bytes += 200
        stats: dict[str, tuple[int, int]] = {}
        dense: dict[str, int] = {}  # tokens with bitmaps: token -> id
        for token in qtokens:
            got = known[token]
            if got is not None:
                stats[token] = (got[0], got[1])
                if got[2]:
                    dense[token] = got[0]

        def df(t: str) -> int:
            return stats.get(t, (0, 0))[1]

        def postings(t: str) -> Sequence[int]:
            if t not in stats:
                return []
            if packed:
                if t in dense:
                    return token_ids(self.conn, t, stats[t][0], True)
                return pack(t)[0]
            rows = self.conn.execute(
                "SELECT entry_rowid FROM postings WHERE token_id = ?", (stats[t][0],)
            )
            return list(map(first_column, rows))  # no Python loop per row: lists run to 10^5

        def covering(t: str, want: set[int] | None) -> bytes:
            """``t``'s bitmap with (at least) the blocks ``want`` read (None: every
            block), zeros elsewhere; blocks read before are kept, so only the missing
            ones are read. A bitmap read whole may end before the last rowids."""
            bits, have = bitmaps.get(t, (b"", set()))
            if have is None:
                return bits  # read whole
            if want is None:
                fresh = block_bits(self.conn, stats[t][0])
                bitmaps[t] = (fresh, None)
                self._lists_bytes += len(fresh) - len(bits)
                return fresh
            missing = want - have
            if not missing:
                return bits
            fresh = block_bits(self.conn, stats[t][0], missing)
            if have:
                span = 1 << (_postings.BLOCK_SHIFT - 3)
                buf = bytearray(bits)
                if len(fresh) > len(buf):
                    buf.extend(bytes(len(fresh) - len(buf)))
                for block in missing:
                    at = block * span
                    buf[at : at + span] = fresh[at : at + span]
                fresh = bytes(buf)
            bitmaps[t] = (fresh, have | missing)
            self._lists_bytes += len(fresh) - len(bits)
            return fresh

        def contains(t: str, keys: Collection[int]) -> list[int]:
            if t not in stats or not keys:
                return []
            token_id = stats[t][0]
            if t in dense:
                # A byte lookup per key in the token's bitmap, reading only the
                # blocks the keys fall in.
                bits = covering(t, {r >> _postings.BLOCK_SHIFT for r in keys})
                reach = (max(keys) >> 3) + 1
                if len(bits) < reach:  # a whole map ends at its last set bit
                    bits += bytes(reach - len(bits))
                return [r for r in keys if bits[r >> 3] >> (r & 7) & 1]
            if packed:
                held = sets.get(t)
                if held is None:
                    held = sets[t] = dict.fromkeys(pack(t)[0])
                    self._lists_bytes += 64 * len(held)
                return [r for r in keys if r in held]
            # One primary-key probe of (token_id, entry_rowid) per key, inside SQLite.
            out: list[int] = []
            for part in chunks(list(keys)):
                marks = ",".join("?" * len(part))
                out += [
                    r
                    for (r,) in self.conn.execute(
                        f"SELECT entry_rowid FROM postings "
                        f"WHERE token_id = ? AND entry_rowid IN ({marks})",
                        (token_id, *part),
                    )
                ]
            return out

        def pack(t: str) -> tuple[array[int], list[Any]]:
            """A rare token's sorted rowids (kept across searches), with what ``flags``
            derived from them when they were tested as one list."""
            got = packs.get(t)
            if got is None:
                ids = token_ids(self.conn, t, stats[t][0], False)
                got = packs[t] = (ids if isinstance(ids, array) else array("I", ids), _fresh())
                self._lists_bytes += 4 * len(got[0])
            return got

        # What ``flags`` derived from the keys it was last given (see ``_fresh``).
        last: list[Any] = _fresh()

        def flags(t: str, keys: Sequence[int]) -> bytes:
            """One byte per key of ``keys`` (ascending): 1 if it holds ``t``, else 0."""
            nonlocal last
            size = len(keys)
            if t not in stats or not size:
                return bytes(size)
            if last[0] is not keys:
                last = _fresh()
                for prepared in (packs.get(tok) for tok in stats):
                    if prepared is not None and prepared[0] is keys:  # a whole pack
                        last = prepared[1]
                        break
                last[0] = keys
            if t in dense:
                # The byte of each key in the token's bitmap (read only for the blocks
                # the keys fall in), ANDed with the key's bit as two big integers.
                if last[2] is None:
                    # A few keys read the blocks they fall in; more read the whole map
                    # (16 blocks at a million rowids, and many keys touch them all).
                    last[1] = {r >> _postings.BLOCK_SHIFT for r in keys} if size <= 64 else None
                    offsets = list(map((3).__rrshift__, keys))  # r >> 3, in C
                    offsets.append(0)  # so that itemgetter always returns a tuple
                    last[2] = itemgetter(*offsets)
                    # Each key's bit in its byte, from the keys' low bytes (C slices).
                    low = array("I", keys).tobytes()[_LOW_BYTE::_ID_SIZE]
                    last[3] = int.from_bytes(low.translate(_BIT_OF_LOW), "little")
                    self._lists_bytes += 40 * size
                bits = covering(t, last[1])
                try:
                    picked = bytes(last[2](bits)[:size])
                except IndexError:  # a whole map ends at its last set bit: pad it
                    bits += bytes((max(keys) >> 3) + 1 - len(bits))
                    bitmaps[t] = (bits, bitmaps[t][1])
                    picked = bytes(last[2](bits)[:size])
                both: int = int.from_bytes(picked, "little") & last[3]
                return both.to_bytes(size, "little").translate(_NONZERO)
            held = sets.get(t)
            if held is None:
                ids = pack(t)[0]
                if size * 8 < len(ids):
                    # A few keys against a long list: binary searches, no set built.
                    hits = {
                        r for r in keys if (at := bisect_left(ids, r)) < len(ids) and ids[at] == r
                    }
                    return bytes(map(hits.__contains__, keys)) if hits else bytes(size)
                held = sets[t] = dict.fromkeys(ids)
                self._lists_bytes += 64 * len(held)
            return bytes(map(held.__contains__, keys))  # in C

        def whole(t: str) -> int:
            """A common token's postings as one integer (bit r: rowid r holds it)."""
            value = ints.get(t)
            if value is None:
                bits = covering(t, None)
                value = ints[t] = int.from_bytes(bits, "little")
                self._lists_bytes += len(bits)
            return value

        found: list[tuple[int, float]] | None = None
        if packed and k is not None and all(t in dense for t in qtokens if df(t) > 0):
            # Only common words: walk the combinations of tokens with bitmap ANDs.
            found = top_by_combinations(qtokens, n, df, whole, min_coverage, k)
        if found is None and packed:
            found = top_by_codes(qtokens, n, df, postings, flags, min_coverage, k)
        if found is None:
            found = top_candidates(
                qtokens,
                n,
                df,
                postings,
                contains,
                min_coverage,
                k,
                (lambda t: True) if packed else None,
            )
        return found
