"""Writing an SQL store's entry rows: one at a time (``write_entry``), in bulk
(``write_entries_bulk``: a copy, a migration), and the burials a consolidation
writes in key order (``_RowWrites``). Each write keeps the lexical index
(``postings``), the living count and the running sums (``sums``) with the row.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Iterable
from operator import itemgetter

from ..records.entry import MemoryEntry, kind_name
from . import postings
from .postings import (
    ListChanges,
    _index_tokens,
    _write_blocks,
    bump_count,
    first_column,
    new_stamp,
    pack_ids,
    set_count,
)
from .rows import (
    _TEXT,
    death_tick,
    entry_tokens,
    row_tokens,
    row_values,
    toks_column,
)
from .sums import EnergySums

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .dialect import Dialect


__all__ = ["SET_HEIR", "write_entries_bulk", "write_entry"]

#: Record a merged entry's heir (parameters: member, heir); a later merge of the
#: heir's lineage moves the member on to the new heir.
SET_HEIR = (
    "INSERT INTO lineage (member, heir) VALUES (?, ?) "
    "ON CONFLICT (member) DO UPDATE SET heir = excluded.heir"
)


class _RowWrites:
    """Writes of bulk burials held back (``SqlStore.merge_batches``) to be made in one
    pass in key order: ``columns``, ``(energy, anchor, pinned, damaged, version,
    rowid)`` of rows whose values stay; ``updates``, ``(energy, anchor, pinned, damaged,
    version, kind, question, answer, sources, data, rowid)``; ``lineage``, ``(member,
    heir)`` in the order written. Batch after batch, the burials land on every page of
    the table many times over; in one pass by rowid, each page once (three times faster
    at 1M rows)."""

    __slots__ = ("columns", "lineage", "updates")

    def __init__(self, lineage: list[tuple[str, str]] | None = None) -> None:
        self.columns: list[tuple[Any, ...]] = []
        self.updates: list[tuple[Any, ...]] = []
        self.lineage: list[tuple[str, str]] = lineage if lineage is not None else []

    def write(self, conn: sqlite3.Connection) -> None:
        """Make the writes held (in rowid order; the lineage by member, the last write
        to a member last) and forget them."""
        conn.executemany(
            "UPDATE entries SET alive=0, energy=?, anchor=?, pinned=?, death_tick=NULL, "
            "damaged=?, version=? WHERE rowid=?",
            sorted(self.columns, key=itemgetter(-1)),
        )
        conn.executemany(
            "UPDATE entries SET alive=0, energy=?, anchor=?, pinned=?, death_tick=NULL, "
            "damaged=?, version=?, kind=?, question=?, answer=?, sources=?, data=? "
            "WHERE rowid=?",
            sorted(self.updates, key=itemgetter(-1)),
        )
        conn.executemany(
            SET_HEIR,
            sorted(self.lineage, key=first_column),  # stable: the last write stays last
        )
        self.columns, self.updates, self.lineage = [], [], []


def _keeps_sums(conn: sqlite3.Connection) -> bool:
    """Whether the store keeps ``energy_sums`` (SQLite from schema 10, PostgreSQL from 3)."""
    if not isinstance(conn, sqlite3.Connection):
        keeps = getattr(conn, "keeps_sums", None)
        return bool(keeps()) if keeps is not None else False
    return bool(
        conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'energy_sums'"
        ).fetchone()
    )


def write_entry(
    conn: sqlite3.Connection,
    dialect: Dialect,
    entry: MemoryEntry,
    *,
    alive: bool,
    damaged: bool,
    tick: int,
    upkeep: float,
    version: int,
    deferred: ListChanges | None = None,
    sums: EnergySums | None = None,
) -> None:
    """Insert or update one row, keeping the index and the counters in step.

    ``dialect``: how ``conn``'s database hands back a new row's rowid. With
    ``deferred``, the packs and blocks are left to ``postings.apply_list_changes``; with
    ``sums``, the row leaves and joins them (``backends.sums``) as it was and is.
    """
    row = conn.execute(
        f"SELECT rowid, alive, toks, pinned, energy, anchor, kind, {_TEXT} FROM entries "
        "WHERE id = ?",
        (entry.id,),
    ).fetchone()
    toks = entry_tokens(entry)
    toks_text = " ".join(toks)
    params = (
        int(alive),
        entry.energy,
        tick,
        int(entry.pinned),
        death_tick(entry.energy, tick, upkeep, entry.pinned) if alive else None,
        toks_column(conn, toks),
        int(damaged),
        version,
        *row_values(entry),
    )
    if row is None:
        cur = conn.execute(
            "INSERT INTO entries (alive, energy, anchor, pinned, death_tick, toks, damaged, "
            "version, kind, question, answer, sources, data, id) "
            f"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?){dialect.returning_rowid()}",
            (*params, entry.id),
        )
        rowid = dialect.inserted_rowid(cur)
        was_alive, old_toks = False, ""
    else:
        rowid, was_alive = int(row[0]), bool(row[1])
        old_toks = row_tokens(str(row[2]), row[7]) if was_alive else ""
        conn.execute(
            "UPDATE entries SET alive=?, energy=?, anchor=?, pinned=?, death_tick=?, toks=?, "
            "damaged=?, version=?, kind=?, question=?, answer=?, sources=?, data=? "
            "WHERE rowid=?",
            (*params, rowid),
        )
    if was_alive and (not alive or old_toks != toks_text):
        _index_tokens(conn, rowid, old_toks.split(), -1, deferred=deferred)
    if alive and (not was_alive or old_toks != toks_text):
        _index_tokens(conn, rowid, toks, +1, deferred=deferred)
        if isinstance(conn, sqlite3.Connection):  # new tokens, or back to life: not settled
            postings.unsettle(conn, [rowid])
    if alive != was_alive:
        bump_count(conn, "alive", 1 if alive else -1)
    if sums is not None:
        if row is not None and was_alive and not row[3]:
            sums.add(kind_name(row[6]), float(row[4]), int(row[5]), -1)
        if alive and not entry.pinned:
            sums.add(entry.kind.value, entry.energy, tick)
    for member in entry.lineage:
        conn.execute(SET_HEIR, (member, entry.id))


def write_entries_bulk(
    conn: sqlite3.Connection,
    rows: Iterable[tuple[MemoryEntry, bool]],
    *,
    damaged: Collection[str],
    tick: int,
    upkeep: float,
    version: int,
) -> int:
    """Insert many new entries into an empty store in a few statements.

    Equivalent to ``write_entry`` per row (same columns, index and counters) but
    builds the token index in memory and inserts it sorted, which is an order of
    magnitude faster for ``migrate`` and bulk imports. Returns the number of rows.
    """
    if conn.execute("SELECT 1 FROM entries LIMIT 1").fetchone() is not None:
        raise ValueError("write_entries_bulk needs an empty store")
    # The rows' indexes are built once, after them: sorted, their pages full (kept up
    # row by row they take an eighth more pages, and longer to write).
    indexes = (
        conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'index' "
            "AND tbl_name = 'entries' AND sql IS NOT NULL ORDER BY name"
        ).fetchall()
        if isinstance(conn, sqlite3.Connection)
        else []
    )
    for name, _sql in indexes:
        conn.execute(f'DROP INDEX "{name}"')
    sums = EnergySums() if _keeps_sums(conn) else None
    token_rows: dict[str, list[int]] = {}
    lineage: list[tuple[str, str]] = []
    batch: list[tuple[Any, ...]] = []
    rowid = 0
    alive_count = 0

    def flush() -> None:
        conn.executemany(
            "INSERT INTO entries (rowid, alive, energy, anchor, pinned, death_tick, toks, "
            "damaged, version, kind, question, answer, sources, data, id) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            batch,
        )
        batch.clear()

    latest: dict[str, tuple[MemoryEntry, bool]] = {}
    for entry, alive in rows:  # a later row for the same id wins, as with write_entry
        latest[entry.id] = (entry, alive)
    for entry, alive in latest.values():
        rowid += 1
        toks = entry_tokens(entry)
        if alive:
            alive_count += 1
            if sums is not None and not entry.pinned:
                sums.add(entry.kind.value, entry.energy, tick)
            for t in toks:
                plist = token_rows.get(t)
                if plist is None:
                    token_rows[t] = [rowid]
                else:
                    plist.append(rowid)
        batch.append(
            (
                rowid,
                int(alive),
                entry.energy,
                tick,
                int(entry.pinned),
                death_tick(entry.energy, tick, upkeep, entry.pinned) if alive else None,
                toks_column(conn, toks),
                int(entry.id in damaged),
                version,
                *row_values(entry),
                entry.id,
            )
        )
        lineage.extend((member, entry.id) for member in entry.lineage)
        if len(batch) >= 5000:
            flush()
    flush()
    for _name, sql in indexes:
        conn.execute(sql)
    ordered = sorted(token_rows)
    packed = isinstance(conn, sqlite3.Connection) and not postings.postings_kept(conn)
    dense: list[str] = []  # (packed: the tokens whose lists go to blocks)
    if packed:
        # Each token's row with its pack; a common token's bits go to its blocks.
        # (ids: only the tokens in blocks take one, schema 15; the others hold 0)
        dense += [t for t in ordered if len(token_rows[t]) >= postings.DENSE_MIN]
        dense_ids = {t: i for i, t in enumerate(dense, 1)}
        conn.executemany(
            "INSERT INTO tokens (id, token, df, dense, ids) VALUES (?, ?, ?, ?, ?)",
            (
                (dense_ids[t], t, len(ids), 1, None)
                if len(ids) >= postings.DENSE_MIN
                else (0, t, len(ids), 0, pack_ids(ids))
                for t, ids in ((t, token_rows[t]) for t in ordered)
            ),
        )
        for t in dense:
            _write_blocks(conn, dense_ids[t], token_rows[t], True)
    else:
        conn.executemany(
            "INSERT INTO tokens (id, token, df) VALUES (?, ?, ?)",
            [(i, t, len(token_rows[t])) for i, t in enumerate(ordered, 1)],
        )
        conn.executemany(
            "INSERT INTO postings (token_id, entry_rowid) VALUES (?, ?)",
            ((i, r) for i, t in enumerate(ordered, 1) for r in token_rows[t]),
        )
    if isinstance(conn, sqlite3.Connection):
        set_count(conn, "token_ids", len(dense) if packed else len(ordered))
        new_stamp(conn)
    conn.executemany(SET_HEIR, lineage)
    bump_count(conn, "alive", alive_count)
    if sums is not None:  # the store was empty: these rows are all it sums
        conn.execute("DELETE FROM energy_sums")
        sums.write(conn)
    return rowid
