"""SQLite stores: the default on disk, safe for many processes at once.

WAL mode lets readers run while one writer writes. Every ledger operation is
one ``BEGIN IMMEDIATE`` transaction: it waits its turn (up to ``lock_timeout``
seconds, then ``StoreLockedError``), brings this process's view up to date by
reading only rows whose ``version`` is newer than the one it last saw, runs,
and writes only the entries and tickets it touched plus its events and notes.
A crash at any moment leaves the previous transaction's state: SQLite's
journal makes each one all-or-nothing.

A store file may come from anyone, and its schema is code SQLite runs. So every
connection runs with ``PRAGMA trusted_schema=OFF`` (the schema may not call our
SQL functions nor unsafe ones), a store holding a trigger, a view, a virtual table,
a table no darwin-memo version creates or an index of its own that computes
something is refused when it is opened (and when its schema changes while open),
with one line naming them
(``migrations.foreign_objects``), and every statement runs under a deadline
(``STATEMENT_DEADLINE``, checked by SQLite's progress handler), so nothing a file
holds can keep a command spinning. SQLite itself opens its ``-wal``, ``-shm`` and
``-journal`` files without following links; a link planted there is named here.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
from collections.abc import Iterator

from ..errors import StoreError, StoreFormatError, StoreLockedError, StoreNotFound
from . import hold_sqlite, is_live_sqlite, release_sqlite
from .dialect import SQLITE, Dialect
from .files import warn_if_exposed
from .interface import Loaded, PickRetriever, Refreshed, View
from .journal import pack_record, unpack_record
from .jsonfile import loads
from .migrations import MIGRATIONS, apply_migrations, foreign_objects, schema_version

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from ..records.ticket import Changes, Ticket
    from .sqlstore import SqlStore

__all__ = ["DEFAULT_LOCK_TIMEOUT", "SET_META", "STATEMENT_DEADLINE", "SqliteBackend"]

#: Set one ``meta`` value (parameters: key, JSON text), in SQL both dialects speak.
SET_META = (
    "INSERT INTO meta (key, value) VALUES (?, ?) "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)

DEFAULT_LOCK_TIMEOUT = 30.0

#: Seconds one SQL statement (with the reading of its rows) may run before SQLite is
#: told to stop it. Far above any statement of ours (a consolidating tick of a 1M
#: store is under a minute in all); what it stops is a statement that would not end.
STATEMENT_DEADLINE = 300.0
#: SQLite virtual-machine instructions between two looks at the clock (well under a
#: millisecond of work).
_PROGRESS_STEPS = 100_000


class _Deadline:
    """SQLite's progress handler: stops a statement that runs past ``limit`` seconds.

    ``start`` is stamped by ``_GuardedConnection`` as each statement is run; waiting
    for another process's lock runs no instructions, so it is not counted here.
    """

    __slots__ = ("limit", "overran", "started")

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self.started = time.monotonic()
        self.overran = False

    def start(self) -> None:
        self.started = time.monotonic()
        self.overran = False

    def __call__(self) -> int:
        if time.monotonic() - self.started > self.limit:
            self.overran = True
            return 1  # SQLite stops the statement: OperationalError "interrupted"
        return 0


class _GuardedConnection(sqlite3.Connection):
    """A connection whose every statement runs under a ``_Deadline``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.deadline = _Deadline(STATEMENT_DEADLINE)
        self.set_progress_handler(self.deadline, _PROGRESS_STEPS)

    def execute(self, *args: Any) -> sqlite3.Cursor:
        self.deadline.start()
        return super().execute(*args)

    def executemany(self, *args: Any) -> sqlite3.Cursor:
        self.deadline.start()
        return super().executemany(*args)

    def executescript(self, *args: Any) -> sqlite3.Cursor:
        self.deadline.start()
        return super().executescript(*args)


#: What ``json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))``
#: would build at every call (a tick's notes are hundreds of thousands of calls).
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def _dumps(value: Any) -> str:
    return _ENCODER.encode(value)


def _merge_note_heir(note: Any) -> str | None:
    """The heir of a member's "merged" note (held once per merge, schema 9), or None."""
    if isinstance(note, dict) and note.get("event") == "merged":
        heir = note.get("heir")
        if isinstance(heir, str):
            return heir
    return None


def _row_tokens(toks: object, text: object) -> str:
    """SQL's ``darwin_row_tokens(toks, question || ' ' || answer)``:
    ``sqlstore.row_tokens``, and nothing for a row without text (a search then passes
    it by)."""
    from .sqlstore import row_tokens

    try:
        return row_tokens(str(toks or ""), text if isinstance(text, str) else None)
    except StoreFormatError:
        return ""


class SqliteBackend:
    kind = "sqlite"
    #: The SQL fragments this backend's database spells its own way (``dialect``).
    dialect: Dialect = SQLITE
    history_in_memory = False
    #: A merge's note to its members is one ``merge_notes`` row by its heir (schema 9);
    #: PostgreSQL, which speaks this class's SQL, keeps a ``notes`` row per member.
    merge_notes_held = True
    #: The retriever name the store recorded (meta ``retriever``), as last read.
    recorded_retriever: str | None = None

    def __init__(
        self, path: str | Path, *, create: bool = True, lock_timeout: float | None = None
    ) -> None:
        #: The store file as given (``path`` is the same as a ``Path``). Plain ``os``
        #: calls here keep ``pathlib`` out of a one-shot CLI call.
        self.file = os.fspath(path)
        self.lock_timeout = DEFAULT_LOCK_TIMEOUT if lock_timeout is None else lock_timeout
        self.created = False
        if not os.path.exists(self.file):
            if not create:
                raise StoreNotFound(f"{self.file}: no such store")
            self.created = self._create()
        if os.path.isdir(self.file):
            raise StoreFormatError(f"{self.file} is a directory, not a store")
        try:
            st = os.stat(self.file)
        except FileNotFoundError:  # a dangling link named as the store
            raise StoreNotFound(f"{self.file}: no such store (a link to nothing)") from None
        if st.st_size == 0:
            raise StoreFormatError(
                f"{self.file} is empty: not a darwin-memo store (refusing to use it)"
            )
        warn_if_exposed(self.file, st)
        for suffix in ("-wal", "-shm", "-journal"):  # SQLite would only say "unable to open"
            if os.path.islink(self.file + suffix):
                raise StoreError(
                    f"{self.file + suffix} is a symbolic link: beside a store, darwin-memo "
                    "uses regular files only and never follows a link (remove it and retry)"
                )
        if not is_live_sqlite(self.file):  # see backends._LIVE_SQLITE: never reopen a live file
            with open(self.file, "rb") as fh:
                if fh.read(16) != b"SQLite format 3\x00":
                    raise StoreFormatError(
                        f"{self.file} is not an SQLite database (refusing to use or overwrite it)"
                    )
        try:
            self.conn = sqlite3.connect(
                self.file,
                timeout=self.lock_timeout,
                isolation_level=None,
                check_same_thread=False,
                factory=_GuardedConnection,
            )
            # Before any statement reads a table: the schema is the file's, not ours.
            self.conn.execute("PRAGMA trusted_schema=OFF")
            self._refuse_foreign_objects(code_only=True)
            if schema_version(self.conn) <= len(MIGRATIONS):  # (a newer one: refused below)
                self._refuse_foreign_objects()
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=FULL")
            self._synchronous = "FULL"
            # A row's indexed tokens in SQL (the dashboard's graveyard search; schema 12)
            self.conn.create_function("darwin_row_tokens", 2, _row_tokens, deterministic=True)
            apply_migrations(self.conn, self.file)
            #: The schema cookie this handle was opened at (``_check_schema``).
            self._schema_cookie = self._cookie()
        except sqlite3.DatabaseError as exc:
            raise self._error(exc, "open") from None
        self._live_key = hold_sqlite(self.file)
        self._seen = -1
        self.txn_version = 0
        #: The population as last read (``load``), which this backend reads and writes.
        self.store: SqlStore | None = None

    @property
    def path(self) -> Path:
        path: Path | None = self.__dict__.get("_path")
        if path is None:
            from pathlib import Path

            path = self._path = Path(self.file)
        return path

    @path.setter
    def path(self, value: Path) -> None:
        self._path = value

    def _create(self) -> bool:
        """Create the store atomically: build it aside, then link it into place.

        Another process creating the same store at the same moment wins or loses
        the link cleanly; nobody ever sees a half-initialised file.
        """
        directory, name = os.path.split(self.file)
        if directory:
            os.makedirs(directory, exist_ok=True)
        tmp = os.path.join(directory, f"{name}.{os.getpid()}.{id(self):x}.new")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.close(fd)
            conn = sqlite3.connect(tmp, isolation_level=None)
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                apply_migrations(conn, self.file)
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            finally:
                conn.close()
            try:
                os.link(tmp, self.file)
                return True
            except FileExistsError:
                return False
        finally:
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp + suffix)

    def _refuse_foreign_objects(self, *, code_only: bool = False) -> None:
        """``StoreFormatError`` naming the schema objects no darwin-memo version creates
        (``migrations.foreign_objects``)."""
        found = foreign_objects(self.conn, code_only=code_only)
        if found:
            more = f" and {len(found) - 5} more" if len(found) > 5 else ""
            raise StoreFormatError(
                f"{self.file} holds {', '.join(found[:5])}{more}, which darwin-memo never "
                "creates (refusing to open it: its SQL would run in this process)"
            )

    def _error(self, exc: sqlite3.Error, doing: str) -> StoreError:
        """The store's own error for an SQLite error met while trying to ``doing``."""
        message = str(exc)
        deadline = getattr(self.__dict__.get("conn"), "deadline", None)
        if message == "interrupted" and deadline is not None and deadline.overran:
            return StoreFormatError(
                f"{self.path}: an SQL statement ran past {deadline.limit:g} s while trying to "
                f"{doing} and was stopped (a crafted or damaged store?)"
            )
        if "locked" in message or "busy" in message:
            return StoreLockedError(
                f"{self.path} stayed locked by another writer for {self.lock_timeout:g} s "
                f"while trying to {doing}; retry, or raise the lock timeout"
            )
        if "not a database" in message or "malformed" in message:
            return StoreFormatError(
                f"{self.path} is not a valid darwin-memo SQLite store ({message}); "
                "nothing was written to it"
            )
        return StoreError(f"{self.path}: SQLite error while trying to {doing}: {message}")

    def translate(self, exc: BaseException, doing: str = "read the store") -> Exception | None:
        """The store's own error for an ``sqlite3`` error (None for any other)."""
        return self._error(exc, doing) if isinstance(exc, sqlite3.Error) else None

    # -- reading -----------------------------------------------------------------

    def _meta(self) -> dict[str, Any]:
        rows = self.conn.execute("SELECT key, value FROM meta").fetchall()
        meta: dict[str, Any] = {}
        for key, value in rows:
            try:
                meta[key] = loads(value)
            except (TypeError, ValueError):
                raise StoreFormatError(
                    f"{self.path}: unreadable meta value {key!r}; the store is damaged"
                ) from None
        for key in ("version", "tick_count"):
            if key in meta and (isinstance(meta[key], bool) or not isinstance(meta[key], int)):
                raise StoreFormatError(f"{self.path}: meta {key!r} is not an integer")
        return meta

    def _ticket(self, data: str) -> Ticket:
        from ..records.ticket import Ticket

        try:
            return Ticket.from_dict(loads(data))
        except (TypeError, ValueError) as exc:
            raise StoreFormatError(f"{self.path}: unreadable ticket row: {exc}") from None

    def _open_tickets(self, *, ticket_id: str = "", naming: str = "") -> Iterator[Ticket]:
        """Open tickets: all, the one with ``ticket_id``, or those whose row names
        ``naming`` (its id as JSON writes it; the caller checks the provenance).

        The rows are read at once; each is parsed as the caller reaches it (a caller
        asking whether any names an entry stops at the first)."""
        sql = "SELECT data FROM tickets WHERE open = 1"
        params: tuple[str, ...] = ()
        if ticket_id:
            sql, params = sql + " AND id = ?", (ticket_id,)
        elif naming:  # as this version writes it, or with non-ASCII escaped
            sql += " AND (instr(data, ?) > 0 OR instr(data, ?) > 0)"
            params = (_dumps(naming), json.dumps(naming))
        try:
            rows = self.conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise self._error(exc, "read the open tickets") from None
        return (self._ticket(data) for (data,) in rows)

    def _store_class(self) -> type[SqlStore]:
        """The population class for this backend (PostgreSQL's searches vectors in SQL)."""
        from .sqlstore import SqlStore

        return SqlStore

    def _read_all(self, pick: PickRetriever) -> Loaded:
        """The ledger's state: tickets, tick, damage record; entries stay in SQLite."""
        meta = self._meta()
        recorded = meta.get("retriever")
        self.recorded_retriever = recorded if isinstance(recorded, str) else None
        config = meta.get("config", {})
        store = self._store_class()(
            self,
            max_energy=config.get("max_energy", 5.0),
            upkeep=config.get("upkeep", 0.05),
            retriever=pick(self.recorded_retriever),
        )
        extra = meta.get("payload_extra", {})
        store.payload_extra = extra if isinstance(extra, dict) else {}
        state = store.payload_extra.get("retriever")
        if isinstance(state, dict) and state:
            store.retriever.load_state(state)
        tick_count = int(meta.get("tick_count", 0))
        store.tick = tick_count
        # The population writes the flag with each row: it holds the ledger's set.
        store.damaged = {
            str(i) for (i,) in self.conn.execute("SELECT id FROM entries WHERE damaged = 1")
        }
        self.store = store
        self._seen = int(meta.get("version", 0))
        return Loaded(
            store=store,
            tick_count=tick_count,
            # SQLite: read when first needed; PostgreSQL: in this read's snapshot
            tickets=self._open_tickets if self.kind == "sqlite" else list(self._open_tickets()),
            damaged=store.damaged,
            needs_snapshot=False,
            recorded_retriever=self.recorded_retriever,
        )

    def _read_changes(self, version: int, tickets: bool) -> Refreshed:
        """What other processes wrote since version ``_seen``; the open tickets changed
        only when the ledger has read its tickets (``tickets``)."""
        store = self.store
        assert store is not None
        changed = []
        damaged: dict[str, bool] = {}
        for entry_id, dmg in self.conn.execute(
            "SELECT id, damaged FROM entries WHERE version > ?", (self._seen,)
        ):
            changed.append(entry_id)
            damaged[entry_id] = bool(dmg)
        written: list[tuple[str, Ticket | None]] | None = None
        if tickets:  # else the first read sees the store as it is then
            written = [
                (ticket_id, self._ticket(data) if is_open else None)
                for ticket_id, is_open, data in self.conn.execute(
                    "SELECT id, open, data FROM tickets WHERE version > ?", (self._seen,)
                )
            ]
        meta = self._meta()
        tick_count = int(meta.get("tick_count", 0))
        if store.tick != tick_count:
            store.forget_cached()
            store.tick = tick_count
        else:
            store.forget_cached(changed)
        self._seen = version
        return Refreshed(tick_count=tick_count, damaged=damaged, tickets=written)

    def _current_version(self) -> int:
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()
        return int(loads(row[0])) if row else 0

    def _cookie(self) -> int:
        return int(self.conn.execute("PRAGMA schema_version").fetchone()[0])

    def _check_schema(self) -> None:
        """Refuse to go on with a store a newer darwin-memo migrated while it was open.

        SQLite bumps the schema cookie at every change of the schema; only then are the
        applied migrations read again (reading the cookie costs a few microseconds).
        """
        cookie = self._cookie()
        if cookie == self._schema_cookie:
            return
        # (a trigger added while this process had it open)
        self._refuse_foreign_objects(code_only=True)
        version, known = schema_version(self.conn), len(MIGRATIONS)
        if version > known:
            raise StoreFormatError(
                f"{self.file} was migrated to schema version {version} by a newer "
                f"darwin-memo while this process had it open (this one understands {known}); "
                "upgrade darwin-memo here and restart this process"
            )
        self._refuse_foreign_objects()
        self._schema_cookie = cookie

    def _sync(self, view: View) -> Loaded | Refreshed | None:
        self._check_schema()
        if self.store is not None:
            self.store.trim_cache()
        if view.stale or self._seen < 0:
            return self._read_all(lambda _recorded: view.retriever)
        version = self._current_version()
        if version != self._seen:
            return self._read_changes(version, view.tickets_read)
        return None

    def load(self, pick: PickRetriever) -> Loaded:
        try:
            self.conn.execute("BEGIN")
            try:
                return self._read_all(pick)
            finally:
                self.conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise self._error(exc, "read the store") from None

    def refresh(self, view: View) -> Loaded | Refreshed | None:
        try:
            self.conn.execute("BEGIN")
            try:
                return self._sync(view)
            finally:
                self.conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise self._error(exc, "read the store") from None

    # -- writing -----------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(self, changes: Changes, view: View) -> Iterator[Loaded | Refreshed | None]:
        sync = "NORMAL" if changes.relaxed else "FULL"
        if sync != self._synchronous:
            # WAL + NORMAL: the commit is not fsynced; the next FULL commit syncs it too.
            self.conn.execute(f"PRAGMA synchronous={sync}")
            self._synchronous = sync
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise self._error(exc, "start a write") from None
        try:
            seen = self._sync(view)  # (a stale view gets a store of its own here)
            self.txn_version = self._seen + 1  # _sync left _seen at the store's version
            store = self.store
            assert store is not None
            store.reset_sums()  # another process may have changed them since
            yield seen
            if changes.events or changes.touched or changes.opened or changes.closed:
                self._write(changes)
            store.save_sums()
            store.reset_sums()
            self.conn.execute("COMMIT")
        except BaseException as exc:
            if self.store is not None:
                self.store.reset_sums()
            with contextlib.suppress(sqlite3.Error):
                self.conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):
                raise self._error(exc, "write the store") from None
            raise

    def _write(self, changes: Changes) -> None:
        version = self.txn_version
        store = self.store
        assert store is not None
        store.damaged = changes.damaged
        store.flush(changes.touched)
        store.save_vectors(changes.touched)
        self.conn.executemany(
            "INSERT INTO tickets (id, open, born_tick, data, version) VALUES (?, 1, ?, ?, ?) "
            "ON CONFLICT (id) DO UPDATE SET open = 1, born_tick = excluded.born_tick, "
            "data = excluded.data, version = excluded.version",
            [(t.id, t.born_tick, _dumps(t.to_dict()), version) for t in changes.opened],
        )
        if changes.closed:
            self.conn.executemany(
                "UPDATE tickets SET open = 0, version = ? WHERE id = ?",
                [(version, ticket_id) for ticket_id in changes.closed],
            )
        if changes.notes:
            encoded: dict[int, str] = {}  # a note shared by several entries: encoded once
            noted: list[tuple[str, str, str | None]] = []
            # A merge's note to its members is held once, by its heir (schema 9), where
            # it is one note (one text) to exactly the members of the heir's lineage:
            # their lineage rows lead each of them, and only them, to it.
            merged: dict[str, tuple[str, set[str]] | None] = {}
            for entry_id, note in changes.notes:
                text = encoded.get(id(note))
                if text is None:
                    text = encoded[id(note)] = _dumps(note)
                heir = _merge_note_heir(note) if self.merge_notes_held else None
                noted.append((entry_id, text, heir))
                if heir is not None:
                    held = merged.setdefault(heir, (text, set()))
                    if held is not None and held[0] == text and entry_id not in held[1]:
                        held[1].add(entry_id)
                    else:
                        merged[heir] = None  # written as rows of their own
            for heir, held in merged.items():
                entry = store.get(heir)
                if held is not None and (entry is None or held[1] != set(entry.lineage)):
                    merged[heir] = None
            rows = [(i, text) for i, text, heir in noted if heir is None or merged[heir] is None]
            self.conn.executemany("INSERT INTO notes (entry_id, data) VALUES (?, ?)", rows)
            once = sorted((heir, held[0]) for heir, held in merged.items() if held is not None)
            if once:
                self.conn.executemany(
                    "INSERT INTO merge_notes (heir, data) VALUES (?, ?) "
                    "ON CONFLICT (heir) DO UPDATE SET data = excluded.data",
                    once,
                )
        self.conn.executemany(
            "INSERT INTO events (event, tick, ts, data) VALUES (?, ?, ?, ?)",
            [
                (e["event"], e.get("tick"), e.get("ts"), _dumps(pack_record(e)))
                for e in changes.events
            ],
        )
        from .organic_rows import ORGANIC_EVENTS, apply_sql

        if any(e["event"] in ORGANIC_EVENTS for e in changes.events) and self._has_organic():
            apply_sql(self.conn, changes.events, self.dialect)
        meta = {
            "version": version,
            "tick_count": changes.tick_count,
            "config": {"max_energy": store.max_energy, "upkeep": store.upkeep},
        }
        self.conn.executemany(SET_META, [(k, _dumps(v)) for k, v in meta.items()])
        self._seen = version

    def _has_organic(self) -> bool:
        """Whether the store has the organic layer's tables (schema 17 on): code writes
        only what the store's schema holds."""
        found = self.conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'organic_state'"
        ).fetchone()
        return found is not None

    def write_meta(self, key: str, value: Any) -> None:
        """Set one meta value in its own transaction (used by migration)."""
        with self._immediate():
            self.conn.execute(SET_META, (key, _dumps(value)))

    def record_retriever(self, name: str, state: dict[str, Any] | None = None) -> None:
        """Record the retriever every host process of this store searches with. The
        vectors (``state`` elsewhere) are those the population's retriever cached and
        the ``vectors`` table lacks (SQLite: ``SqlStore.save_vectors``), written with it."""
        with self._immediate():
            self.conn.execute(SET_META, ("retriever", _dumps(name)))
            if self.store is not None:
                self.store.save_vectors()
        self.recorded_retriever = name

    @contextlib.contextmanager
    def own_write(self, store: SqlStore) -> Iterator[None]:
        """A population write made outside a ledger operation (a library caller's
        ``ledger.store.add(entry)`` or ``credit``): one transaction of its own with a
        version of its own, as an operation's, so it is all or nothing, every other
        handle of the store reads the rows again (``_read_changes``), and it starts from
        the rows as other writers left them (``_catch_up``). Inside a transaction (an
        operation's, a copy's) it is part of that one."""
        if self._inside():
            yield
            return
        with self._immediate():
            before = self._current_version()
            if before != self._seen and self._seen >= 0:
                self._catch_up(store)
            self.txn_version = before + 1
            store.reset_sums()
            try:
                yield
                store.save_sums()
            except BaseException:
                store.forget_cached()  # what it changed in memory is rolled back too
                raise
            finally:
                store.reset_sums()
            self.conn.execute(SET_META, ("version", _dumps(self.txn_version)))
        if before == self._seen:  # (else another writer came first: the next read sees it)
            self._seen = self.txn_version

    def _catch_up(self, store: SqlStore) -> None:
        """Forget what ``store`` holds of the rows other writers changed since this
        handle last looked (everything, with the tick, when they ticked), so a write
        outside an operation starts from the rows as they are. ``_seen`` stays: the
        ledger's next refresh hands over the rest (tickets, flags)."""
        tick_count = int(self._meta().get("tick_count", 0))
        if store.tick != tick_count:
            store.forget_cached()
            store.tick = tick_count
            return
        changed = self.conn.execute("SELECT id FROM entries WHERE version > ?", (self._seen,))
        store.forget_cached([entry_id for (entry_id,) in changed])

    def _inside(self) -> bool:
        """Whether a transaction is open on this handle's connection."""
        return bool(self.conn.in_transaction)

    @contextlib.contextmanager
    def _immediate(self) -> Iterator[None]:
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise self._error(exc, "start a write") from None
        try:
            yield
            self.conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                self.conn.execute("ROLLBACK")
            raise

    # -- the journal and notes ----------------------------------------------------

    def history(self, entry_id: str) -> list[Any]:
        own = self.conn.execute(
            "SELECT data FROM notes WHERE entry_id = ? ORDER BY seq", (entry_id,)
        ).fetchall()
        if self.merge_notes_held:  # the merge that took it (schema 9), its last note
            own += self.conn.execute(
                "SELECT m.data FROM lineage AS l JOIN merge_notes AS m ON m.heir = l.heir "
                "WHERE l.member = ?",
                (entry_id,),
            ).fetchall()
        return [loads(data) for (data,) in own]

    def all_history(self) -> dict[str, list[Any]]:
        out: dict[str, list[Any]] = {}
        for entry_id, data in self.conn.execute("SELECT entry_id, data FROM notes ORDER BY seq"):
            out.setdefault(entry_id, []).append(loads(data))
        if not self.merge_notes_held:
            return out
        notes = {
            heir: loads(data)
            for heir, data in self.conn.execute("SELECT heir, data FROM merge_notes")
        }
        if notes:
            for member, heir in self.conn.execute("SELECT member, heir FROM lineage"):
                note = notes.get(heir)
                if note is not None:
                    out.setdefault(member, []).append(dict(note))
        return out

    def events(self) -> Iterator[dict[str, Any]]:
        cursor = self.conn.execute("SELECT data FROM events ORDER BY seq")
        for (data,) in cursor:
            yield unpack_record(loads(data))

    def events_after(self, seq: int) -> tuple[int, list[tuple[int, Any]]] | None:
        """The journal's last sequence number and the ``(seq, event)`` pairs after
        ``seq``, oldest first (an unreadable event is None), for a reader that follows
        the journal (the dashboard). A last number below ``seq`` means the journal was
        replaced: read it again from 0."""
        with self._translated("read the journal"):
            top = self.conn.execute("SELECT MAX(seq) FROM events").fetchone()[0] or 0
            rows = self.conn.execute(
                "SELECT seq, data FROM events WHERE seq > ? ORDER BY seq", (seq,)
            ).fetchall()
        out: list[tuple[int, Any]] = []
        for number, data in rows:
            try:
                event = unpack_record(loads(data))
            except ValueError:
                event = None
            out.append((int(number), event))
        return int(top), out

    def version_token(self) -> str:
        """A token that changes whenever any process writes the store (its version
        counter)."""
        with self._translated("read the store's version"):
            row = self.conn.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()
        return f"v{row[0] if row else 0}"

    @contextlib.contextmanager
    def _translated(self, doing: str) -> Iterator[None]:
        """The driver's errors raised inside become the store's own (``translate``)."""
        try:
            yield
        except Exception as exc:
            error = self.translate(exc, doing)
            if error is None:
                raise
            raise error from exc

    def organic_rows(self, _ledger: object = None) -> Any:
        """The organic layer's links and per-entry state (``organic_rows.Rows``), as
        this connection sees them (inside a write: as the write found them; the
        argument, once the ledger, is not used)."""
        from .organic_rows import read_sql

        try:
            return read_sql(self.conn)
        except sqlite3.Error as exc:
            raise self._error(exc, "read the organic layer") from None

    def close(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self.conn.close()
        release_sqlite(getattr(self, "_live_key", None))
        self._live_key = None
