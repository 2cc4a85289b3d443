"""Copying a store between backends, losslessly: ``darwin-memo migrate``.

JSON files, SQLite files and PostgreSQL stores (``postgresql://...?store=NAME``)
copy to one another in any direction.

Everything moves: living entries and the graveyard (unknown fields included),
open tickets, the tick, the damage record, every note of every life story,
the whole journal, the organic layer's rows (links, activations and recall
counts: SQL tables or the JSON ``"organic"`` block, ``backends.organic_rows``),
and top-level keys from newer versions. The destination is
built beside its final path and renamed into place, so an interrupted migrate
leaves either no destination or a complete one, and never touches the source.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .backends import backend_kind, is_postgres_url
from .backends.journal import EventLog, event_log_path, pack_record
from .backends.jsonfile import write_json_atomic
from .errors import StoreError
from .ledger import Ledger

if TYPE_CHECKING:
    import sqlite3

    from .backends.organic_rows import Rows

__all__ = ["copy_store"]


def _notes(ledger: Ledger) -> dict[str, list[Any]]:
    backend = ledger.backend
    if backend is not None and not backend.history_in_memory:
        from .backends.sqlite import SqliteBackend

        assert isinstance(backend, SqliteBackend)
        return backend.all_history()
    history: dict[str, list[Any]] = ledger.ledger_block()["history"]
    return history


def _organic(ledger: Ledger) -> Rows:
    """The organic layer's rows of the source (none where its backend keeps none)."""
    reader = getattr(ledger.backend, "organic_rows", None)
    if reader is None:
        return {}, {}
    rows: Rows = reader(ledger)
    return rows


def _same_store(src: str | Path, dest: str | Path) -> bool:
    if is_postgres_url(src) or is_postgres_url(dest):
        return str(src) == str(dest)
    return Path(src).resolve() == Path(dest).resolve()


def copy_store(src: str | Path, dest: str | Path, *, overwrite: bool = False) -> dict[str, Any]:
    """Copy the store at ``src`` to ``dest`` (format chosen by ``dest``'s path or URL)."""
    if _same_store(src, dest):
        raise StoreError("the source and the destination are the same store")
    to_postgres = is_postgres_url(dest)
    dest_path = Path(dest)
    if not to_postgres and dest_path.exists() and not overwrite:
        raise StoreError(f"{dest_path} already exists; pass --force to replace it")
    source = Ledger.open(src if isinstance(src, str) else Path(src), create=False)
    try:
        events = list(source.events())
        if source.needs_snapshot:
            events.append(
                {"event": "snapshot", "tick": source.tick_count, "ts": _now(), **source.snapshot()}
            )
        notes = _notes(source)
        organic = _organic(source)
        if to_postgres:
            kind = "postgres"
            shown = _write_postgres(source, str(dest), notes, events, organic, overwrite=overwrite)
        else:
            kind = backend_kind(dest_path) if dest_path.suffix else "sqlite"
            shown = str(dest_path)
            dest_path.parent.mkdir(parents=True, exist_ok=True)
            if kind == "json":
                _write_json(source, dest_path, notes, events, organic)
            else:
                _write_sqlite(source, dest_path, notes, events, organic)
        backend = source.backend
        return {
            "source": str(backend.path) if backend is not None else str(src),
            "destination": shown,
            "format": kind,
            "alive": len(source.store),
            "graveyard": source.store.dead_count(),
            "pending": len(source.pending()),
            "events": len(events),
            "notes": sum(len(v) for v in notes.values()),
            "organic_links": len(organic[0]),
            "organic_entries": len(organic[1]),
        }
    finally:
        source.close()


def _now() -> str:
    from .records.entry import utc_now_iso

    return utc_now_iso()


def _write_json(
    source: Ledger,
    dest: Path,
    notes: dict[str, list[Any]],
    events: list[dict[str, Any]],
    organic: Rows,
) -> None:
    from .backends.jsonstore import JOURNAL_MARK
    from .backends.organic_rows import BLOCK_KEY, block_of

    payload = source.to_payload()
    payload.pop(BLOCK_KEY, None)
    if organic[0] or organic[1]:  # as a JSON store holds them: no block until a recall
        payload[BLOCK_KEY] = block_of(organic)
    payload["ledger"]["history"] = notes
    payload["ledger"]["journal"] = JOURNAL_MARK
    payload["ledger"].pop("journal_txn", None)
    journal = event_log_path(dest)
    tmp_journal = journal.with_name(journal.name + f".{secrets.token_hex(4)}.tmp")
    try:
        EventLog(tmp_journal, max_bytes=0).append(events)
        if not events:
            tmp_journal.touch()
        for old in journal.parent.glob(journal.name + ".[0-9]*"):
            if old.name[len(journal.name) + 1 :].isdigit():
                old.unlink()
        os.replace(tmp_journal, journal)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp_journal.unlink()
    write_json_atomic(dest, payload)


def _write_sqlite(
    source: Ledger,
    dest: Path,
    notes: dict[str, list[Any]],
    events: list[dict[str, Any]],
    organic: Rows,
) -> None:
    from .backends.sqlite import SqliteBackend

    tmp = dest.with_name(dest.name + f".{secrets.token_hex(4)}.tmp")
    backend = SqliteBackend(tmp, create=True)
    try:
        conn = backend.conn
        with backend._immediate():
            _fill(backend.conn, source, notes, events, organic)
        # Rebuilt page by page, the tables' pages are full: the vocabulary and the id
        # index, written key by key, kept a tenth of theirs empty (a 10k store: 4.65 ->
        # 4.52 MB). SQLite may renumber the rows of a table without an INTEGER PRIMARY
        # KEY, which the lists of rowids would not follow; the bulk writer numbers them
        # 1..n in order, the numbering a renumbering would give.
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except BaseException:
        backend.close()
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(str(tmp) + suffix)
        raise
    backend.close()
    for suffix in ("-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(str(dest) + suffix)
    os.replace(tmp, dest)
    for suffix in ("-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(str(tmp) + suffix)


def _fill(
    conn: sqlite3.Connection,
    source: Ledger,
    notes: dict[str, list[Any]],
    events: list[dict[str, Any]],
    organic: Rows,
) -> None:
    """Write ``source`` into an empty SQL store (SQLite or PostgreSQL: the same SQL)."""
    from .backends.organic_rows import BLOCK_KEY, write_sql
    from .backends.sqlite import SET_META, _dumps
    from .backends.sqlstore import write_entries_bulk

    store = source.store
    rows = [(e, True) for e in store.alive()] + [(e, False) for e in store.graveyard()]
    write_entries_bulk(
        conn,
        rows,
        damaged=source.damaged,
        tick=source.tick_count,
        upkeep=store.upkeep,
        version=1,
    )
    conn.executemany(
        "INSERT INTO tickets (id, open, born_tick, data, version) VALUES (?, 1, ?, ?, 1)",
        [(t.id, t.born_tick, _dumps(t.to_dict())) for t in source.pending()],
    )
    conn.executemany(
        "INSERT INTO notes (entry_id, data) VALUES (?, ?)",
        [(i, _dumps(n)) for i, ns in notes.items() for n in ns if isinstance(i, str)],
    )
    conn.executemany(
        "INSERT INTO events (event, tick, ts, data) VALUES (?, ?, ?, ?)",
        [(str(e.get("event")), e.get("tick"), e.get("ts"), _dumps(pack_record(e))) for e in events],
    )
    # (a JSON store's organic block becomes the organic tables' rows)
    extra = {k: v for k, v in store.payload_extra.items() if k not in ("ledger", BLOCK_KEY)}
    state = store.retriever.dump_state()
    if state:
        extra["retriever"] = state
    meta = {
        "version": 1,
        "tick_count": source.tick_count,
        "config": {"max_energy": store.max_energy, "upkeep": store.upkeep},
        "payload_extra": extra,
    }
    conn.executemany(SET_META, [(k, json.dumps(v, allow_nan=False)) for k, v in meta.items()])
    write_sql(conn, organic)


def _write_postgres(
    source: Ledger,
    url: str,
    notes: dict[str, list[Any]],
    events: list[dict[str, Any]],
    organic: Rows,
    *,
    overwrite: bool,
) -> str:
    """Fill a new (or, with ``overwrite``, emptied) PostgreSQL store in one transaction.

    Readers of the destination see nothing until the copy commits; an interrupted
    copy leaves the store empty (its tables made, no rows).
    """
    from .backends.postgres import PostgresBackend

    backend = PostgresBackend(url, create=True)
    try:
        if not backend.is_empty():
            if not overwrite:
                raise StoreError(f"{backend.path} already exists; pass --force to replace it")
            backend.drop()
            backend.close()
            backend = PostgresBackend(url, create=True)
        with backend._immediate():
            _fill(backend.conn, source, notes, events, organic)
            backend.reset_sequences()
        # The planner's statistics, for this store's tables only (the database may hold
        # other stores): until autovacuum came by, a store loaded in one transaction was
        # planned as empty (a tick scanned the death index's range: 3 ms of 5.5 at 10k).
        backend.pg.execute("ANALYZE entries, tokens, postings, lineage, tickets")
        return str(backend.path)
    finally:
        backend.close()
