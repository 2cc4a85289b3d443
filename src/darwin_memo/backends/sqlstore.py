"""A population that lives in SQLite (or PostgreSQL) and is read on demand.

``SqlStore`` implements ``interface.Population`` as ``MemoryStore`` does, but its
entries stay in the database: ``get`` reads one row, retrieval walks an inverted
index with the exact published ranking (``sqlsearch``), and a tick touches only
the entries that die. That keeps a one-shot ``darwin-memo ledger FILE decide``
proportional to the question, not to the store.

Upkeep is lazy. A row holds its balance at tick ``anchor``; at tick ``T`` the
balance is ``energy - upkeep * (T - anchor)`` (floored at zero when pinned).
``death_tick`` is the first tick at which that reaches zero, so a tick finds
its dead with one indexed query instead of an UPDATE of every row.

Every mutation is written through at once, inside the ledger operation's
transaction, so queries made later in the same operation see it. Entries read
during an operation are cached until the next tick or the next refresh.

The parts, one module each: ``rows`` (an entry's row and its codec), ``postings``
(the lexical index's lists), ``sqlwrites`` (writing rows), ``sqlsearch`` (searching
them); this module is the population: its queries, credit and burial, the upkeep
tick, the running sums and consolidation's reads and writes. The names other code
imported from here before the split are still importable from here.
"""

from __future__ import annotations

import contextlib
import math
import sqlite3
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence

from ..errors import StoreFormatError
from ..records.entry import MemoryEntry, kind_name
from ..retrieval.index import bits_to_ids
from . import postings
from .jsonfile import loads
from .population import HeldEntries
from .postings import (
    DfChanges,
    ListChanges,
    add_df,
    apply_list_changes,
    bulk_writing,
    bump_count,
    chunks,
    first_column,
    index_problems,
    living_lists,
    pack_ids,
    rebuild_token,
    token_ids,
    unindex_many,
    unpack_ids,
)
from .rows import (
    _COLUMNS,
    _NOW,
    _TEXT,
    _dumps,
    death_tick,
    entry_tokens,
    read_row,
    row_tokens,
    row_values,
    toks_column,
)
from .sqlite import SET_META
from .sqlsearch import SqlSearch
from .sqlwrites import _keeps_sums, _RowWrites, write_entries_bulk, write_entry
from .sums import ONE, EnergySums, exact, read_sums

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ..retrieval.protocols import Retriever
    from ..retrieval.simjoin import MergeCandidates
    from .sqlite import SqliteBackend
    from .sqlvectors import StoredVectors

__all__ = [
    "CACHE_LIMIT",
    "SqlStore",
    "add_df",
    "apply_list_changes",
    "bits_to_ids",
    "death_tick",
    "entry_tokens",
    "index_problems",
    "living_lists",
    "pack_ids",
    "read_row",
    "rebuild_token",
    "row_tokens",
    "row_values",
    "token_ids",
    "toks_column",
    "unpack_ids",
    "write_entries_bulk",
]

#: A consolidation member's row as read for its burial: rowid, alive, toks, whether
#: its ``data`` is the entry as held (read from that row, not from the cache), and
#: kind, energy, anchor and pinned (what it leaves the running sums).
_MemberRow = tuple[int, int, str, bool, str, float, int, int]
#: Entries a long-lived handle keeps cached between operations (see ``trim_cache``).
CACHE_LIMIT = 20_000


class SqlStore(HeldEntries, SqlSearch):
    """The population over an SQLite (or PostgreSQL) database (see the module docstring).

    It implements ``interface.Population`` as ``MemoryStore`` does, holding only the
    entries an operation read; what both do alike is ``HeldEntries``'.
    """

    def __init__(
        self,
        backend: SqliteBackend,
        max_energy: float,
        upkeep: float,
        retriever: Retriever | None = None,
    ) -> None:
        super().__init__(max_energy=max_energy, upkeep=upkeep, retriever=retriever)
        self.backend = backend
        self.conn = backend.conn
        #: How this store's database spells what SQLite and PostgreSQL spell differently.
        self.dialect = backend.dialect
        #: The tick lazy upkeep is computed at (kept equal to the ledger's tick).
        self.tick = 0
        self.damaged: set[str] = set()
        self._init_search()
        self._deferred: ListChanges | None = None
        #: While ``merge_many`` runs, the entries buried so far (written together after).
        self._merging: list[MemoryEntry] | None = None
        #: The rows (``_MemberRow``) by id of the members a consolidation read, for
        #: ``merge_many`` to bury without reading them again (emptied by it).
        self._member_rows: dict[str, _MemberRow] = {}
        #: Ids of the dead ``merge_many`` wrote, until the next ``flush``.
        self._buried_written: set[str] = set()
        #: Heirs ``merge_many`` wrote, until the next ``flush``: id -> the row's
        #: (tick, version, damaged, data) then, so an unchanged heir is not written twice.
        self._heirs_written: dict[str, tuple[int, int, bool, tuple[str, ...]]] = {}
        #: While ``merge_batches`` runs (SQLite), the ``df`` changes not written yet,
        #: and the buried rows' columns and the lineage (``_RowWrites``).
        self._df_deferred: DfChanges | None = None
        self._rows_deferred: _RowWrites | None = None
        #: Whether the store keeps ``energy_sums`` (SQLite from schema 10, PostgreSQL
        #: from 3), and the sums as this write transaction leaves them (read at its
        #: first change, written before its commit: ``save_sums``; None outside one).
        self._sums_kept = _keeps_sums(self.conn)
        self._sums: EnergySums | None = None
        #: The entry vectors the store keeps (SQLite, schema 18), made on first use.
        self._entry_vectors: StoredVectors | None = None

    # -- rows -----------------------------------------------------------------------

    def _energy_now(self, energy: float, anchor: int, pinned: bool) -> float:
        elapsed = self.tick - anchor
        if elapsed <= 0:
            return energy
        now = energy - self.upkeep * elapsed
        return max(now, 0.0) if pinned else now

    def _materialize(self, row: tuple[Any, ...]) -> MemoryEntry:
        _rowid, entry_id, alive, energy, anchor, pinned, data, kind, question, answer, sources = row
        try:
            entry = read_row(data, entry_id, energy, kind, question, answer, sources)
        except (TypeError, ValueError, StoreFormatError) as exc:
            raise StoreFormatError(
                f"{self.backend.path}: unreadable entry {entry_id}: {exc}"
            ) from None
        entry.energy = (
            self._energy_now(float(energy), int(anchor), bool(pinned)) if alive else (float(energy))
        )
        return entry

    def _fetch(self, where: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return self.conn.execute(f"SELECT {_COLUMNS} FROM entries WHERE {where}", params).fetchall()

    def _write(self, entry: MemoryEntry, alive: bool) -> None:
        self._member_rows.pop(entry.id, None)  # a row read before this write is stale
        write_entry(
            self.conn,
            self.dialect,
            entry,
            alive=alive,
            damaged=entry.id in self.damaged,
            tick=self.tick,
            upkeep=self.upkeep,
            version=self.backend.txn_version,
            deferred=self._deferred,
            sums=self._changing_sums(),
        )
        self._sums_written()

    @contextlib.contextmanager
    def deferred_lists(self) -> Iterator[None]:
        """Write the packs and blocks of everything changed inside once, at the end.

        For bulk changes (a tick's burials, consolidation's merges): each changed
        token's list is rewritten once instead of once per entry. Searches made
        inside still see every change. Nested uses join the outermost.
        """
        if self._deferred is not None:
            yield
            return
        self._deferred = ListChanges()
        try:
            yield
            pending = self._deferred
        finally:
            self._deferred = None
        postings.apply_list_changes(self.conn, pending)

    def flush(self, ids: Iterable[str]) -> None:
        """Write the cached state of these entries (attribute changes included)."""
        # Members ``merge_many`` buried in this operation are written already; the
        # dead do not change after, so they are not written twice.
        written, self._buried_written = self._buried_written, set()
        heirs, self._heirs_written = self._heirs_written, {}
        with self.deferred_lists():
            for entry_id in ids:
                if entry_id in written and entry_id in self._graveyard:
                    continue
                entry = self._population.get(entry_id)
                if entry is not None:
                    row = heirs.get(entry_id)
                    if row is not None and row == (
                        self.tick,
                        self.backend.txn_version,
                        entry_id in self.damaged,
                        row_values(entry),
                    ):
                        continue  # written by merge_many and unchanged since
                    self._write(entry, True)
                    continue
                dead = self._graveyard.get(entry_id)
                if dead is not None:
                    self._write(dead, False)

    def trim_cache(self) -> None:
        """Between operations, drop the entry cache once it outgrows ``CACHE_LIMIT``.

        A long-lived process (an MCP server, the dashboard) would otherwise end up
        holding every entry it ever read. Rows are the truth, so nothing is lost.
        """
        if not self.dirty and len(self._population) + len(self._graveyard) > CACHE_LIMIT:
            self.forget_cached()

    def forget_cached(self, ids: Iterable[str] | None = None) -> None:
        """Drop cached entries (all of them when ``ids`` is None)."""
        if ids is None:
            self._population.clear()
            self._graveyard.clear()
            self._buried_written.clear()
            self._heirs_written.clear()
            self._member_rows.clear()
            return
        for entry_id in ids:
            self._population.pop(entry_id, None)
            self._graveyard.pop(entry_id, None)
            self._member_rows.pop(entry_id, None)

    # -- the population -------------------------------------------------------------

    def _index(self, entry: MemoryEntry) -> None:
        return None  # the SQL index is kept by write_entry

    def add(self, entry: MemoryEntry) -> MemoryEntry:
        with self.backend.own_write(self):
            if self.conn.execute("SELECT 1 FROM entries WHERE id = ?", (entry.id,)).fetchone():
                raise ValueError(
                    f"an entry with id {entry.id} is already in this store; ids must be unique"
                )
            self._hold_new(entry)
            self._write(entry, True)
        return entry

    def get(self, entry_id: str) -> MemoryEntry | None:
        cached = self._population.get(entry_id)
        if cached is not None:
            return cached
        rows = self._fetch(f"id = ? AND {self.dialect.unindexed('alive')} = 1", (entry_id,))
        if not rows:
            return None
        entry = self._materialize(rows[0])
        self._population[entry_id] = entry
        return entry

    def get_dead(self, entry_id: str) -> MemoryEntry | None:
        cached = self._graveyard.get(entry_id)
        if cached is not None:
            return cached
        rows = self._fetch("id = ? AND alive = 0", (entry_id,))
        if not rows:
            return None
        entry = self._materialize(rows[0])
        self._graveyard[entry_id] = entry
        return entry

    def _load_all(self, alive: bool) -> list[MemoryEntry]:
        cache = self._population if alive else self._graveyard
        out = []
        for row in self._fetch("alive = ? ORDER BY rowid", (int(alive),)):
            entry = cache.get(row[1])
            if entry is None:
                entry = cache[row[1]] = self._materialize(row)
            out.append(entry)
        return out

    def alive(self) -> list[MemoryEntry]:
        return self._load_all(True)

    def token_sets(self, entries: Iterable[MemoryEntry]) -> list[frozenset[str]]:
        """The lexical token set of each entry, as indexed (from its row: ``row_tokens``)."""
        wanted = {e.id: e for e in entries}
        found: dict[str, frozenset[str]] = {}
        for entry_id, toks, text in self.conn.execute(
            f"SELECT id, toks, CASE WHEN toks = '' THEN {_TEXT} END FROM entries WHERE alive = 1"
        ):
            if entry_id in wanted:
                found[entry_id] = frozenset(row_tokens(str(toks), text).split())
        out = []
        for entry_id, entry in wanted.items():
            toks = found.get(entry_id)
            out.append(toks if toks is not None else frozenset(entry_tokens(entry)))
        return out

    def merge_candidates(
        self, exclude: Collection[str], need_sources: bool, rule: str | None = None
    ) -> MergeCandidates | None:
        """Consolidation's candidates from the rows, without materializing every entry.

        The same list, in the same order, as ``consolidate._candidates`` over
        ``alive()`` with ``token_sets``: living rows in rowid order, less the excluded,
        pinned, probationary and juvenile, sorted by balance (highest first, stable).
        An entry this handle holds in memory counts as held (its balance and flags),
        as ``alive()`` would return it; the others are judged from their columns and
        fields of their JSON read by SQLite. A row whose fields are not plain values
        is read whole, so a damaged row fails as ``alive()`` fails. None (read
        ``alive()`` instead) on PostgreSQL or when SQLite cannot read a row's JSON.

        With ``rule`` (``consolidate.settled_rule``), also which entries are settled
        under it (``consolidate.SETTLED``); entries settled under another rule are
        forgotten first.
        """
        from ..retrieval.simjoin import MergeCandidates

        self._member_rows.clear()  # rows a consolidation that did not finish read
        if not isinstance(self.conn, sqlite3.Connection):
            return None
        cache = self._population
        columns = (
            "rowid, id, energy, anchor, pinned, toks, json_extract(data, '$.probation'), "
            f"json_extract(data, '$.juvenile'), CASE WHEN toks = '' THEN {_TEXT} END"
        )
        if need_sources:
            columns += ", sources"
        try:
            rows = self.conn.execute(
                f"SELECT {columns} FROM entries WHERE alive = 1 ORDER BY rowid"
            ).fetchall()
        except sqlite3.OperationalError:  # malformed JSON: alive() names the row
            return None
        known: set[int] | None = None
        if rule is not None:
            known = self._settled_under(rule)
        rowids: list[int] = []
        ids: list[str] = []
        texts: list[str] = []  # the tokens as text: made into sets only where needed
        sources: list[tuple[str, ...]] = []
        energies: list[float] = []
        others: list[frozenset[str]] = []
        others_settled: list[bool] = []

        def left_out(row: tuple[Any, ...]) -> None:
            if known is not None:
                others.append(frozenset(row_tokens(str(row[5]), row[8]).split()))
                others_settled.append(int(row[0]) in known)

        for row in rows:
            entry_id = row[1]
            if entry_id in exclude:
                left_out(row)
                continue
            entry = cache.get(entry_id)
            probation, juvenile = row[6] or 0, row[7] or 0
            held: Any = ()
            if entry is None and need_sources:
                held = loads(row[9]) if type(row[9]) is str else None
            if entry is None and (
                type(probation) is not int
                or type(juvenile) is not int
                or not isinstance(held, (list, tuple))
                or not all(isinstance(s, str) for s in held)
            ):
                entry = self.get(entry_id)  # odd fields: read it whole (and check it)
            if entry is not None:
                if entry.pinned or entry.probation > 0 or entry.juvenile > 0:
                    left_out(row)
                    continue
                energy = entry.energy
                held = entry.sources
            else:
                if row[4] or probation > 0 or juvenile > 0:
                    left_out(row)
                    continue
                energy = self._energy_now(float(row[2]), int(row[3]), False)
            if need_sources:
                sources.append(tuple(held))
            rowids.append(int(row[0]))
            ids.append(str(entry_id))
            texts.append(row_tokens(str(row[5]), row[8]))
            energies.append(energy)
        order = sorted(range(len(ids)), key=energies.__getitem__, reverse=True)  # stable
        rowids = [rowids[i] for i in order]
        texts = [texts[i] for i in order]

        def entries(indices: list[int]) -> list[MemoryEntry]:
            # the members of groups, about to be buried: their rows are kept for that
            return self._entries_at(
                [rowids[i] for i in indices],
                self._member_rows,
                {rowids[i]: texts[i] for i in indices},
            )

        def settle(indices: list[int]) -> None:
            self.conn.executemany(
                "INSERT INTO settled (entry_rowid) VALUES (?) ON CONFLICT DO NOTHING",
                sorted((rowids[i],) for i in indices),
            )

        return MergeCandidates(
            ids=[ids[i] for i in order],
            tokens=None,
            texts=texts,
            sources=[sources[i] for i in order] if need_sources else [],
            entries=entries,
            settled=None if known is None else [rowids[i] in known for i in range(len(order))],
            others=others,
            others_settled=others_settled,
            settle=None if known is None else settle,
        )

    def _settled_under(self, rule: str) -> set[int]:
        """The rowids settled under ``rule``; under another rule none (the table is emptied)."""
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'settled_rule'").fetchone()
        if row is None or loads(row[0]) != rule:
            self.conn.execute("DELETE FROM settled")
            self.conn.execute(SET_META, ("settled_rule", _dumps(rule)))
            return set()
        return set(map(first_column, self.conn.execute("SELECT entry_rowid FROM settled")))

    def _entries_at(
        self,
        rowids: list[int],
        keep: dict[str, _MemberRow] | None = None,
        texts: Mapping[int, str] | None = None,
    ) -> list[MemoryEntry]:
        """The living entries at these rowids, in order (cached ones as held).

        ``keep``: also note each one's row there by id (``_MemberRow``), as
        ``_write_buried`` reads it (consolidation buries these entries next);
        ``texts``: their tokens as text by rowid, where the caller has them.
        """
        rows: dict[int, tuple[Any, ...]] = {}
        living = f"{self.dialect.unindexed('alive')} = 1"
        for part in chunks(sorted(set(rowids))):
            marks = ",".join("?" * len(part))
            if keep is None:
                for row in self._fetch(f"rowid IN ({marks}) AND {living}", tuple(part)):
                    rows[int(row[0])] = row
                continue
            for *row, toks, row_text in self.conn.execute(
                f"SELECT {_COLUMNS}, toks, {_TEXT} FROM entries "
                f"WHERE rowid IN ({marks}) AND {living}",
                tuple(part),
            ):
                rows[int(row[0])] = tuple(row)
                entry_id = str(row[1])
                fresh = entry_id not in self._population  # materialized from this row
                # (the columns as SQLite types them: TEXT, REAL, INTEGER NOT NULL)
                text = texts.get(int(row[0])) if texts is not None else None
                if text is None:
                    text = row_tokens(str(toks), row_text)
                kind = kind_name(row[7])
                keep[entry_id] = (
                    int(row[0]), int(row[2]), text, fresh, kind, row[3], row[4], row[5],
                )  # fmt: skip
        out = []
        for rowid in rowids:
            row = rows[rowid]
            entry = self._population.get(row[1])
            if entry is None:
                entry = self._population[row[1]] = self._materialize(row)
            out.append(entry)
        return out

    def graveyard(self) -> list[MemoryEntry]:
        return self._load_all(False)

    def page_entries(
        self,
        *,
        sort: str = "balance",
        order: str = "desc",
        kind: str = "",
        flag: str = "",
        search: str = "",
        offset: int = 0,
        limit: int = 50,
    ) -> tuple[list[MemoryEntry], int]:
        """``MemoryStore.page_entries`` in SQL (``pages.sql_living_page``): only the
        rows on the page are read."""
        from .pages import PageRequest, sql_living_page

        request = PageRequest(sort, order, kind, flag, search, offset, limit)
        ids, total = sql_living_page(self, request)
        entries = [self.get(i) for i in ids]
        return [e for e in entries if e is not None], total

    def page_graveyard(
        self, *, kind: str = "", search: str = "", offset: int = 0, limit: int = 50
    ) -> tuple[list[str], int]:
        """``MemoryStore.page_graveyard`` in SQL (``pages.sql_dead_page``)."""
        from .pages import PageRequest, sql_dead_page

        request = PageRequest(kind=kind, search=search, offset=offset, limit=limit)
        return sql_dead_page(self, request)

    def __len__(self) -> int:
        row = self.conn.execute("SELECT value FROM counters WHERE name = 'alive'").fetchone()
        return int(row[0]) if row else 0

    def __contains__(self, entry_id: object) -> bool:
        return isinstance(entry_id, str) and self.get(entry_id) is not None

    def dead_count(self) -> int:
        row = self.conn.execute("SELECT COUNT(*) FROM entries WHERE alive = 0").fetchone()
        return int(row[0])

    def heir_of(self, entry_id: str) -> str | None:
        row = self.conn.execute("SELECT heir FROM lineage WHERE member = ?", (entry_id,)).fetchone()
        return str(row[0]) if row else None

    # -- economics --------------------------------------------------------------------

    def credit(self, entry_id: str, amount: float, cycle: int) -> None:
        with self.backend.own_write(self):
            entry = self.get(entry_id)
            if entry is None:
                return
            self._credit_held(entry, amount, cycle)
            self._write(entry, True)

    def set_energy(self, entry_id: str, energy: float, reason: str = "adjust") -> None:
        with self.backend.own_write(self):
            entry = self.get(entry_id)
            if entry is None:
                raise KeyError(entry_id)
            self._set_held_energy(entry, energy, reason)
            self._write(entry, True)

    def bury(self, entry_id: str, reason: str = "burial") -> None:
        with self.backend.own_write(self):
            entry = self.get(entry_id)
            if entry is None:
                return
            self._bury_held(entry_id, reason)
            if self._merging is not None:
                self._merging.append(entry)
            else:
                self._write(entry, False)

    def merge_into(self, heir: MemoryEntry, member_ids: Iterable[str]) -> float:
        with self.backend.own_write(self), self.deferred_lists():
            members = [i for i in member_ids if self.get(i) is not None]
            clipped = self._merge_held(heir, members)
            self._write(heir, True)
        return clipped

    def merge_many(self, merges: Iterable[tuple[MemoryEntry, Iterable[str]]]) -> list[float]:
        """``merge_into`` for each ``(heir, member_ids)``, the members' rows written in bulk.

        The rows, index and counters end as the merges one by one leave them; the
        buried members are written with a few batched statements instead of one
        ``write_entry`` each (their token rows are kept: a burial does not change
        the text).
        """
        return self.merge_batches([merges])

    def merge_batches(
        self, batches: Iterable[Iterable[tuple[MemoryEntry, Iterable[str]]]]
    ) -> list[float]:
        """``merge_many`` over batches of merges, each batch written as it comes.

        Consolidation hands the batches over as the compiled join (on a thread of its
        own) finds them: a batch is merged in memory and its heirs are written while
        the join looks for the next. What is cheaper in one pass waits for the last
        batch (SQLite): the burials' row updates and the lineage (``_RowWrites``, in key
        order), the ``df`` changes, the token lists (packs and blocks). The page cache
        may grow to ``BULK_CACHE_KIB`` meanwhile. The clipped energy of each merge, in
        order.
        """
        clipped: list[float] = []
        # (outside an operation, one transaction: ``own_write``)
        with self.backend.own_write(self), bulk_writing(self.conn), self.deferred_lists():
            if isinstance(self.conn, sqlite3.Connection):  # and each df changed once,
                self._df_deferred = DfChanges()
                self._rows_deferred = _RowWrites()  # and the burials in rowid order
            try:
                self._merge_batches(batches, clipped)
            finally:
                deferred, self._df_deferred = self._df_deferred, None
                rows, self._rows_deferred = self._rows_deferred, None
            if rows is not None:
                rows.write(self.conn)
            if deferred:
                postings.change_df(self.conn, deferred)  # before the lists: they read df
        return clipped

    def _write_deferred_rows(self) -> None:
        """Write the rows ``merge_batches`` holds back now (before a write one by one)."""
        if self._rows_deferred is not None:
            self._rows_deferred.write(self.conn)

    def _merge_batches(
        self,
        batches: Iterable[Iterable[tuple[MemoryEntry, Iterable[str]]]],
        clipped: list[float],
    ) -> None:
        """Each batch of ``merge_batches``: merged in memory, then its rows written."""
        for batch in batches:
            buried: list[MemoryEntry] = []
            heirs: list[MemoryEntry] = []
            self._merging = buried
            try:
                for heir, member_ids in batch:
                    members = [i for i in member_ids if self.get(i) is not None]
                    clipped.append(self._merge_held(heir, members))
                    heirs.append(heir)
            finally:
                self._merging = None
            self._write_buried(buried)
            self._write_heirs(heirs)

    def _write_heirs(self, heirs: list[MemoryEntry]) -> None:
        """``_write(heir, True)`` for each new heir, in order, in a few statements.

        Rowids, token ids (new tokens in order of first use), ``df``, the packs and
        blocks (or the deferred list changes), the living count and lineage end as
        one by one.
        """
        if not heirs:
            return
        conn = self.conn
        taken = False
        for part in chunks([h.id for h in heirs]):
            marks = ",".join("?" * len(part))
            if conn.execute(
                f"SELECT 1 FROM entries WHERE id IN ({marks}) LIMIT 1", part
            ).fetchone():
                taken = True
        # Rows to update, or PostgreSQL (its rowids come from a sequence): one by one.
        if (
            taken
            or len({h.id for h in heirs}) < len(heirs)
            or not isinstance(conn, sqlite3.Connection)
        ):
            self._write_deferred_rows()
            for heir in heirs:
                self._write(heir, True)
            return
        (top,) = conn.execute("SELECT MAX(rowid) FROM entries").fetchone()
        rowid = int(top or 0)
        version = self.backend.txn_version
        rows = []
        counts: dict[str, int] = {}  # in order of first use, as one by one assigns ids
        deferred = self._deferred
        changes: ListChanges = deferred if deferred is not None else ListChanges()
        for heir in heirs:
            rowid += 1
            toks = entry_tokens(heir)
            values = row_values(heir)
            damaged = heir.id in self.damaged
            rows.append(
                (
                    rowid,
                    heir.energy,
                    self.tick,
                    int(heir.pinned),
                    death_tick(heir.energy, self.tick, self.upkeep, heir.pinned),
                    toks_column(conn, toks),
                    int(damaged),
                    version,
                    *values,
                    heir.id,
                )
            )
            self._heirs_written[heir.id] = (self.tick, version, damaged, values)
            for t in toks:
                counts[t] = counts.get(t, 0) + 1
                held = changes.get(t)
                if held is None:
                    changes[t] = {rowid: True}
                else:
                    held[rowid] = True
        conn.executemany(
            "INSERT INTO entries (rowid, alive, energy, anchor, pinned, death_tick, toks, "
            "damaged, version, kind, question, answer, sources, data, id) "
            "VALUES (?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
        add_df(conn, counts, self._df_deferred)
        sums = self._changing_sums()
        if sums is not None:
            sums.add_rows((h.kind.value, h.energy, self.tick) for h in heirs if not h.pinned)
            self._sums_written()
        conn.executemany("DELETE FROM settled WHERE entry_rowid = ?", [(row[0],) for row in rows])
        if deferred is None:
            postings.apply_list_changes(conn, changes)
        bump_count(conn, "alive", len(heirs))
        lineage = [(member, heir.id) for heir in heirs for member in heir.lineage]
        if self._rows_deferred is not None:
            self._rows_deferred.lineage += lineage
        else:
            _RowWrites(lineage=lineage).write(conn)

    def _write_buried(self, entries: list[MemoryEntry]) -> None:
        """Write living rows as dead (what ``write_entry`` does for a burial), batched."""
        if not entries:
            return
        conn = self.conn
        # Rows consolidation read when it took the members (same transaction), else now.
        kept, self._member_rows = self._member_rows, {}
        rows: dict[str, _MemberRow] = {}
        missing = [e.id for e in entries]
        if kept:
            rows = {e.id: kept[e.id] for e in entries if e.id in kept}
            missing = [e.id for e in entries if e.id not in rows]
        for chunk in chunks(missing):
            marks = ",".join("?" * len(chunk))
            for entry_id, rowid, alive, toks, kind, energy, anchor, pinned, text in conn.execute(
                "SELECT id, rowid, alive, toks, kind, energy, anchor, pinned, "
                f"CASE WHEN alive = 1 AND toks = '' THEN {_TEXT} END "
                f"FROM entries WHERE id IN ({marks})",
                chunk,
            ):
                rows[str(entry_id)] = (
                    int(rowid), int(alive), row_tokens(str(toks), text) if alive else "", False,
                    kind_name(kind), float(energy), int(anchor), int(pinned),
                )  # fmt: skip
        for entry in entries:
            if entry.id not in rows:  # no row yet: the one-by-one path inserts it
                self._write_deferred_rows()
                self._write(entry, False)
        entries = [e for e in entries if e.id in rows]
        version = self.backend.txn_version
        tick = self.tick
        damaged = self.damaged
        updates = []  # the entry as held written too
        columns = []  # a member read from its row for this burial: only the columns
        for entry in entries:
            rowid, _alive, _toks, as_read, *_ = rows[entry.id]
            if as_read:
                # The burial changed its balance only, and a dead entry's balance is
                # read from ``energy``: its JSON stays as it was (``_materialize``).
                columns.append(
                    (
                        entry.energy,
                        tick,
                        int(entry.pinned),
                        int(entry.id in damaged),
                        version,
                        rowid,
                    )
                )
                continue
            updates.append(
                (
                    entry.energy,
                    tick,
                    int(entry.pinned),
                    int(entry.id in damaged),
                    version,
                    *row_values(entry),
                    rowid,
                )
            )
        lineage = [(member, entry.id) for entry in entries for member in entry.lineage]
        pending = self._rows_deferred if self._rows_deferred is not None else _RowWrites()
        pending.columns += columns
        pending.updates += updates
        pending.lineage += lineage
        if self._rows_deferred is None:
            pending.write(conn)
        held = [rows[e.id] for e in entries]
        unlisted = [(row[0], row[2]) for row in held if row[1]]
        sums = self._changing_sums()
        if sums is not None:  # the living unpinned leave the sums as their rows held them
            sums.add_rows(((row[4], row[5], row[6]) for row in held if row[1] and not row[7]), -1)
            self._sums_written()
        counts = unindex_many(conn, unlisted, self._df_deferred)
        if isinstance(conn, sqlite3.Connection):  # and the packs and bits (SQLite only)
            changes = self._deferred if self._deferred is not None else ListChanges()
            for t in counts:  # their lists lose the rows gone (one set for every token)
                if t not in changes:
                    changes[t] = {}
            changes.gone.update(unlisted)
            if self._deferred is None:
                postings.apply_list_changes(conn, changes)
        if unlisted:
            bump_count(conn, "alive", -len(unlisted))
        self._buried_written.update(e.id for e in entries)

    def charge_upkeep(
        self, protect: Iterable[str] = (), scale: Mapping[str, float] | None = None
    ) -> list[MemoryEntry]:
        """One tick of lazy upkeep: only the dead are read and written."""
        if scale is not None:
            raise ValueError("per-entry upkeep scales are not supported on SQLite stores")
        self.flush(self.dirty & (set(self._population) | set(self._graveyard)))
        protected = set(protect)
        # Pinned entries are few (index entries_death); the unpinned are counted, not scanned.
        pinned_before = [
            self._energy_now(float(e), int(a), True)
            for e, a in self.conn.execute(
                "SELECT energy, anchor FROM entries WHERE alive = 1 AND pinned = 1"
            )
        ]
        unpinned = len(self) - len(pinned_before)
        # A pinned balance floors at zero: it pays what it has (and a negative one is lifted).
        charged = self.upkeep * int(unpinned) + math.fsum(
            e - max(e - self.upkeep, 0.0) for e in pinned_before
        )
        self.tick += 1
        # Entries already in hand pay in place, as in memory (rows pay lazily).
        for cached in self._population.values():
            after = cached.energy - self.upkeep
            cached.energy = max(after, 0.0) if cached.pinned else after
        self.books.post("upkeep", -charged)
        self.last_upkeep_charged = round(charged, 6)
        buried: list[MemoryEntry] = []
        with self.deferred_lists():
            for row in self._fetch(
                "alive = 1 AND pinned = 0 AND death_tick <= ? ORDER BY rowid", (self.tick,)
            ):
                if row[1] in protected:
                    continue
                entry = self._population.get(row[1]) or self._materialize(row)
                if entry.alive:
                    continue
                self._population[entry.id] = entry
                self.bury(entry.id)
                buried.append(entry)
        return buried

    # -- entry vectors (schema 18, ``sqlvectors``) ------------------------------------

    def _stored_vectors(self) -> StoredVectors | None:
        if self._entry_vectors is None and isinstance(self.conn, sqlite3.Connection):
            from .sqlvectors import StoredVectors

            self._entry_vectors = StoredVectors(self.conn)
        return self._entry_vectors

    def ready_vectors(self, living: Sequence[MemoryEntry], *, embed: bool = True) -> None:
        """Before a dense search: the living entries' vectors in the retriever's cache,
        read from the store's ``vectors`` table, else (with ``embed``) embedded. A
        search writes nothing; ``save_vectors`` does, in a write transaction."""
        kept = self._stored_vectors()
        if kept is not None:
            kept.prepare(self.retriever, living, embed=embed)

    def save_vectors(self, touched: Iterable[str] = ()) -> int:
        """In a write transaction: the vectors this process embedded that the store
        lacks, written; the rows of the ``touched`` entries now dead, deleted. Returns
        how many vectors it wrote."""
        dead = [i for i in touched if i in self._graveyard]
        if self._entry_vectors is None and not dead:
            return 0  # no dense search here, no burial: nothing to do
        kept = self._stored_vectors()
        return 0 if kept is None else kept.save(self.retriever, self._population, dead)

    # -- the running sums (schema 10) ------------------------------------------------

    def reset_sums(self) -> None:
        """Forget the sums held (a write transaction starts or ends)."""
        self._sums = None

    def _changing_sums(self) -> EnergySums | None:
        """The sums this write transaction changes (None where the store keeps none)."""
        if not self._sums_kept:
            return None
        if self._sums is None:
            self._sums = read_sums(self.conn)
        return self._sums

    def save_sums(self) -> None:
        """Write the sums this transaction changed (before its commit)."""
        if self._sums is not None and self._sums.changed:
            self._sums.write(self.conn)

    def _sums_written(self) -> None:
        """After a write: outside a transaction (a store used without a ledger, each
        statement its own), the sums changed are written now, and read again next."""
        if self._sums is None:
            return
        inside: Any = self.conn.in_transaction  # (PostgreSQL's connection: a method)
        if not (inside() if callable(inside) else inside):
            self.save_sums()
            self._sums = None

    def exact_balances(self) -> dict[str, int] | None:
        """Each kind's balance now, exact (``sums.ONE`` is 1.0), from the running sums
        and the pinned rows; None where the sums cannot say (a store without them, or
        a row anchored after the tick)."""
        if not self._sums_kept:
            return None
        sums = self._sums if self._sums is not None else read_sums(self.conn)
        # A row anchored after this tick (none is: rows are written at the store's
        # tick) would not have paid for ticks yet to come: the scan then.
        # (one step down the balance index, written so on both SQLite and PostgreSQL)
        top = self.conn.execute(
            "SELECT anchor FROM entries WHERE alive = 1 AND pinned = 0 ORDER BY anchor DESC LIMIT 1"
        ).fetchone()
        if top is not None and int(top[0]) > self.tick:
            return None
        totals = sums.totals(self.tick, self.upkeep)
        for kind, energy, anchor in self.conn.execute(
            "SELECT kind, energy, anchor FROM entries WHERE alive = 1 AND pinned = 1"
        ):
            now = exact(self._energy_now(float(energy), int(anchor), True))
            totals[kind_name(kind)] = totals.get(kind_name(kind), 0) + now
        return totals

    def sums_problems(self) -> list[str]:
        """Where the running sums disagree with a scan of the rows (empty: they agree)."""
        if not self._sums_kept:
            return []
        from .sums import scan_sums

        held, found = read_sums(self.conn), scan_sums(self.conn)
        if held == found:
            return []
        return [
            f"energy_sums: kind {kind!r} holds {held.kinds.get(kind, [0, 0, 0])} "
            f"(rows, anchors, exact energy), the rows {found.kinds.get(kind, [0, 0, 0])}"
            for kind in sorted(set(held.kinds) | set(found.kinds))
            if held.kinds.get(kind, [0, 0, 0]) != found.kinds.get(kind, [0, 0, 0])
        ]

    def index_problems(self, limit: int = 20) -> list[str]:
        """Where the lexical index disagrees with the rows (``index_problems``)."""
        return index_problems(self.conn, limit)

    def total_energy(self) -> float:
        totals = self.exact_balances()
        if totals is not None:
            return sum(totals.values()) / ONE  # rounded once
        t, u = self.tick, self.upkeep
        row = self.conn.execute(
            f"SELECT SUM({_NOW}) FROM entries WHERE alive = 1", (t, u, t, u, t)
        ).fetchone()
        return float(row[0] or 0.0)

    def energy_share_by_kind(self) -> dict[str, float]:
        totals = self.exact_balances()
        if totals is not None:
            whole = sum(totals.values())
            if whole <= 0:
                return {}
            return {kind: totals[kind] / whole for kind in sorted(totals)}
        t, u = self.tick, self.upkeep
        rows = self.conn.execute(
            f"SELECT kind, SUM({_NOW}) FROM entries WHERE alive = 1 GROUP BY kind", (t, u, t, u, t)
        ).fetchall()
        total = math.fsum(float(v or 0.0) for _, v in rows)
        if total <= 0:
            return {}
        shares: dict[str, float] = {}
        for k, v in rows:  # (a store from before schema 15 may hold a kind both ways)
            shares[kind_name(k)] = shares.get(kind_name(k), 0.0) + float(v or 0.0) / total
        return shares

    def now_cycle(self) -> int:
        return max(
            (max(e.born_cycle, e.last_used_cycle) for e in self.alive()),
            default=0,
        )

    # -- persistence --------------------------------------------------------------------

    def to_payload(self) -> dict[str, Any]:
        """The published JSON document of every entry (a copy to a JSON store)."""
        self.alive()
        self.graveyard()
        return self._payload_of({})
