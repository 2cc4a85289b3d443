"""PostgreSQL stores: one store shared by many hosts.

A store is named by a URL, ``postgresql://user@host:port/db?store=NAME``; the
other query parameters (``sslmode``, ``sslrootcert``, ``service``, ...) go to
libpq untouched, and so do the standard ``PG*`` environment variables and the
service file, which is where a password belongs. Each named store is its own
schema (``NAME``, ``darwin_memo`` when the URL names none), so several stores
share a database without sharing a row, and a store's migrations are recorded
in its own ``schema_migrations`` table.

The tables mirror the SQLite backend's (each row has the same ``rowid``), and the
code that reads and writes them is shared: ``SqliteBackend`` and ``SqlStore`` run over
``PgConnection``. Their statements are written once in SQL both databases accept
(upserts as ``INSERT ... ON CONFLICT``); where the dialects differ (the row-wise
``GREATEST``, SQLite's index hints, ``RETURNING`` a new rowid, JSON fields, collation)
each statement takes its fragment from ``dialect.POSTGRES``. The connection changes
only the placeholders: ``?`` (sqlite3's paramstyle) becomes ``%s`` (psycopg's).

Locking: every ledger operation is one transaction that first takes a
transaction-scoped advisory lock on its store, then reads what other hosts
wrote since its last view and writes what it touched. That is the SQLite
backend's ``BEGIN IMMEDIATE`` on a server: one writer per store at a time, so a
settle, a tick or a consolidation can neither double-apply nor lose a write,
and no serialization failure needs a retry. Every operation also bumps the
store's version row, so finer row locks would serialize on that row anyway.
Readers never wait. A lost server is a one-line ``StoreUnavailableError``; the next call
connects again and reloads the view from the database.

With the ``vector`` extension, an ``EmbeddingRetriever`` searches in SQL (``pgdense``).
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from ..errors import (
    StoreError,
    StoreFormatError,
    StoreLockedError,
    StoreNotFound,
    StoreUnavailableError,
)
from ..records.entry import utc_now_iso
from . import is_postgres_url
from .dialect import POSTGRES, Dialect
from .interface import Loaded, PickRetriever, Refreshed, View
from .pgdense import VECTOR_MODES, DenseTable, PgStore
from .sqlite import DEFAULT_LOCK_TIMEOUT, SqliteBackend
from .sqlstore import SqlStore

if TYPE_CHECKING:
    from ..records.ticket import Changes

__all__ = [
    "DEFAULT_STORE",
    "PG_MIGRATIONS",
    "PgConnection",
    "PostgresBackend",
    "is_postgres_url",
    "parse_url",
    "qmark_to_format",
    "shown",
]

DEFAULT_STORE = "darwin_memo"
COMMITTING = "commit the write"
_STORE_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_RESERVED = ("public", "information_schema")
#: Connection failures that a server sent back (wrong credentials, no such database or
#: role): ``StoreError``. Any other failure to connect is ``StoreUnavailableError``.
_REFUSED = (
    "authentication failed",
    "no pg_hba.conf entry",
    "does not exist",
    "permission denied",
    "details withheld",
)


class StoreUrl(type(Path())):  # type: ignore[misc]
    """The store's URL without its password, where a ``Path`` is expected (messages)."""

    _display = ""

    def __str__(self) -> str:
        return self._display

    def __repr__(self) -> str:
        return f"StoreUrl({self._display!r})"


def _secrets(url: str) -> list[str]:
    """The password values a URL carries, to scrub from any message."""
    parts = urlsplit(url)
    found = [parts.password] if parts.password else []
    found += [
        v
        for k, v in parse_qsl(parts.query, keep_blank_values=True)
        if k.lower() in ("password", "sslpassword") and v
    ]
    return found


def parse_url(url: str) -> tuple[str, str, str]:
    """``(conninfo, store, display)``: what libpq gets, the schema, the redacted URL."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    stores = [v for k, v in query if k == "store"]
    store = stores[-1] if stores else DEFAULT_STORE
    if not _STORE_NAME.match(store) or store.startswith("pg_") or store in _RESERVED:
        raise StoreError(
            f"store name {store!r} is not usable: use lower-case letters, digits and _ "
            "(at most 63, not starting with a digit or pg_, not public)"
        )
    rest = [(k, v) for k, v in query if k not in ("store", "vectors")]
    # %20 for a space, not +: libpq decodes %XX only (``options=-c%20name%3Dvalue``).
    conninfo = urlunsplit(parts._replace(query=urlencode(rest, quote_via=quote)))
    netloc = parts.netloc.rsplit("@", 1)
    host = netloc[-1]
    user = netloc[0].split(":", 1)[0] + "@" if len(netloc) == 2 else ""
    shown = [(k, v) for k, v in query if k.lower() not in ("password", "sslpassword")]
    display = urlunsplit(parts._replace(netloc=user + host, query=urlencode(shown)))
    if not stores:
        display += ("&" if shown else "?") + f"store={store}"
    for secret in _secrets(url):
        display = display.replace(secret, "***")
    return conninfo, store, display


def shown(store: object) -> str:
    """How a message names a store: a URL without its password, a path as it is."""
    text = str(store)
    if not is_postgres_url(store):
        return text
    try:
        return parse_url(text)[2]
    except StoreError:  # an unusable store name: still never show the password
        parts = urlsplit(text)
        host = parts.netloc.rsplit("@", 1)
        user = host[0].split(":", 1)[0] + "@" if len(host) == 2 else ""
        return urlunsplit(parts._replace(netloc=user + host[-1], query=""))


# -- sqlite3's placeholders, in psycopg's paramstyle ------------------------------------

#: A quoted literal or identifier (its ``?`` is text, not a placeholder), a ``?``, or a
#: ``%`` (psycopg reads each ``%`` in a statement with parameters as the start of one
#: of its placeholders, inside quotes too).
_QMARK_PARTS = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|[?%]")


def _formatted(part: re.Match[str]) -> str:
    text = part.group()
    return "%s" if text == "?" else text.replace("%", "%%")


@functools.lru_cache(maxsize=4096)
def qmark_to_format(sql: str) -> str:
    """``sql`` with sqlite3's ``qmark`` placeholders (``?``) as psycopg's ``format``
    ones (``%s``), and every other ``%`` doubled.

    The SQL stores write each statement once, with ``?`` (``backends.dialect``); this
    is the one change ``PgConnection`` makes to a statement: the DB-API ``paramstyle``
    of the two drivers differs, the SQL does not.
    """
    return _QMARK_PARTS.sub(_formatted, sql)


class _Result:
    """What ``sqlite3.Cursor`` offers the shared code: the rows, fetched and iterated."""

    def __init__(self, rows: list[tuple[Any, ...]]) -> None:
        self._rows = rows

    def fetchone(self) -> tuple[Any, ...] | None:
        return self._rows[0] if self._rows else None

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self._rows

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self._rows)


class PgConnection:
    """A psycopg connection with the part of ``sqlite3.Connection``'s surface the SQL
    stores use (``execute`` and ``executemany`` with ``?`` placeholders).

    The statements it runs are PostgreSQL's own (the fragments where the dialects
    differ come from ``dialect.POSTGRES``); it changes only their placeholders
    (``qmark_to_format``). It connects lazily and again after the server went away,
    turns every driver error into a one-line ``StoreError`` that never shows a
    password, and notes each new connection so the backend reloads its view.
    """

    def __init__(self, conninfo: str, schema: str, display: str, connect_timeout: int = 10):
        self._conninfo = conninfo
        self._secrets = _secrets(conninfo)
        self.schema = schema
        self.display = display
        self._connect_timeout = connect_timeout
        self._raw: Any = None
        #: Schemas searched after the store's (where the ``vector`` extension lives).
        self.path_tail = ""
        self.reconnected = False
        self.doing = "read the store"

    # -- the connection ------------------------------------------------------------

    def raw(self) -> Any:
        import psycopg

        if self._raw is not None and not self._raw.closed and not self._raw.broken:
            return self._raw
        self.close()
        options: dict[str, Any] = {}
        if "connect_timeout=" not in self._conninfo and "PGCONNECT_TIMEOUT" not in os.environ:
            options["connect_timeout"] = self._connect_timeout
        raw = None
        try:
            raw = psycopg.connect(self._conninfo, autocommit=True, **options)
            # The name is interpolated, not quoted: parse_url allows only [a-z0-9_].
            raw.execute(f"SET search_path TO {self.schema}{self.path_tail}")
        except psycopg.Error as exc:
            if raw is not None:
                raw.close()
            reason = self._clean(exc)
            # The server answered and said no: a setting to fix, not a server to wait for.
            refused = any(marker in reason.lower() for marker in _REFUSED)
            kind = StoreError if refused else StoreUnavailableError
            raise kind(
                f"{self.display}: cannot connect to PostgreSQL: {reason}; "
                "check the server, the URL and the PG* settings, then retry"
            ) from None
        self._raw = raw
        self.reconnected = True
        return raw

    def keeps_sums(self) -> bool:
        """Whether the store has its ``energy_sums`` table (PostgreSQL schema 3)."""
        row = self.execute(
            "SELECT 1 FROM information_schema.tables "
            "WHERE table_schema = ? AND table_name = 'energy_sums'",
            (self.schema,),
        ).fetchone()
        return row is not None

    def in_transaction(self) -> bool:
        import psycopg

        raw = self._raw
        if raw is None or raw.closed or raw.broken:
            return False
        return bool(raw.info.transaction_status != psycopg.pq.TransactionStatus.IDLE)

    def close(self) -> None:
        if self._raw is not None:
            with contextlib.suppress(Exception):
                self._raw.close()
        self._raw = None

    def __del__(self) -> None:  # a ledger dropped without close(): no ResourceWarning
        self.close()

    def _clean(self, exc: BaseException) -> str:
        text = " ".join(str(exc).split()) or type(exc).__name__
        for secret in self._secrets:
            text = text.replace(secret, "***")
        for marker in ("password=", "password:"):
            if marker in text.lower():
                return "authentication or connection failed (details withheld: they name a secret)"
        return text

    def error(self, exc: Exception) -> StoreError:
        import psycopg

        code = getattr(exc, "sqlstate", None)
        if code == "55P03":  # lock_not_available: lock_timeout expired
            return StoreLockedError(
                f"{self.display} stayed locked by another writer while trying to {self.doing}; "
                "retry, or raise the lock timeout"
            )
        if isinstance(exc, psycopg.OperationalError) and (
            self._raw is None or self._raw.closed or self._raw.broken
        ):
            self.close()
            outcome = (
                "the server may have saved it before it went: look before retrying"
                if self.doing == COMMITTING
                else "nothing of this operation was saved: retry"
            )
            return StoreUnavailableError(
                f"{self.display}: lost the PostgreSQL server while trying to {self.doing} "
                f"({self._clean(exc)}); {outcome}"
            )
        return StoreError(
            f"{self.display}: PostgreSQL error while trying to {self.doing}: {self._clean(exc)}"
        )

    # -- the sqlite3-shaped surface ------------------------------------------------

    def execute(self, sql: str, params: Sequence[Any] = ()) -> _Result:
        import psycopg

        raw = self.raw()
        try:
            # Without parameters psycopg sends the text as it is (a %% would stay %%).
            cur = raw.execute(qmark_to_format(sql), tuple(params)) if params else raw.execute(sql)
            rows = cur.fetchall() if cur.description is not None else []
        except psycopg.Error as exc:
            raise self.error(exc) from None
        return _Result(rows)

    def executemany(self, sql: str, seq: Any) -> None:
        import psycopg

        text = qmark_to_format(sql)
        batch = [tuple(p) for p in seq]
        if not batch:
            return
        raw = self.raw()
        try:
            with raw.cursor() as cur:
                cur.executemany(text, batch)
        except psycopg.Error as exc:
            raise self.error(exc) from None

    def rollback(self) -> None:
        if self._raw is not None and not self._raw.closed and not self._raw.broken:
            with contextlib.suppress(Exception):
                self._raw.execute("ROLLBACK")


# -- migrations, recorded per store ---------------------------------------------------

_SCHEMA_V1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE entries (
    rowid BIGSERIAL PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    alive INTEGER NOT NULL,
    energy DOUBLE PRECISION NOT NULL,
    kind TEXT NOT NULL,
    damaged INTEGER NOT NULL DEFAULT 0,
    data TEXT NOT NULL,
    version BIGINT NOT NULL,
    anchor BIGINT NOT NULL DEFAULT 0,
    pinned INTEGER NOT NULL DEFAULT 0,
    death_tick BIGINT,
    toks TEXT NOT NULL DEFAULT ''
);
CREATE INDEX entries_by_version ON entries(version);
CREATE INDEX entries_death ON entries(alive, pinned, death_tick);
CREATE INDEX entries_damaged ON entries(damaged) WHERE damaged = 1;
CREATE INDEX entries_balance ON entries(alive, pinned, anchor, energy, kind);
CREATE TABLE tickets (
    id TEXT PRIMARY KEY,
    open INTEGER NOT NULL,
    born_tick BIGINT NOT NULL,
    data TEXT NOT NULL,
    version BIGINT NOT NULL
);
CREATE INDEX tickets_by_version ON tickets(version);
CREATE INDEX tickets_open ON tickets(open, born_tick);
CREATE TABLE notes (seq BIGSERIAL PRIMARY KEY, entry_id TEXT NOT NULL, data TEXT NOT NULL);
CREATE INDEX notes_by_entry ON notes(entry_id, seq);
CREATE TABLE events (
    seq BIGSERIAL PRIMARY KEY,
    event TEXT NOT NULL,
    tick BIGINT,
    ts TEXT,
    data TEXT NOT NULL
);
CREATE INDEX events_by_ts ON events(ts);
CREATE TABLE tokens (id BIGSERIAL PRIMARY KEY, token TEXT NOT NULL UNIQUE, df BIGINT NOT NULL);
CREATE TABLE postings (
    token_id BIGINT NOT NULL,
    entry_rowid BIGINT NOT NULL,
    PRIMARY KEY (token_id, entry_rowid)
);
CREATE TABLE lineage (member TEXT PRIMARY KEY, heir TEXT NOT NULL);
CREATE TABLE counters (name TEXT PRIMARY KEY, value BIGINT NOT NULL)
"""


def _m003_energy_sums(conn: PgConnection) -> None:
    """SQLite's schema 10 (``migrations.m010_energy_sums``): the running sums of the
    living, unpinned balances by kind, filled from the rows."""
    from .sums import scan_sums

    conn.execute(
        "CREATE TABLE energy_sums (kind TEXT PRIMARY KEY, entries BIGINT NOT NULL, "
        "anchors BIGINT NOT NULL, energy TEXT NOT NULL)"
    )
    scan_sums(conn).write(conn)  # type: ignore[arg-type]


def _m005_readable_rows(conn: PgConnection) -> None:
    """SQLite's schema 16 (``migrations.m016_readable_rows``): each entry's question,
    answer and sources in columns of their own, ``data`` the rest of the entry."""
    from .migrations import readable_row

    conn.execute(
        "ALTER TABLE entries ADD COLUMN question TEXT, ADD COLUMN answer TEXT, "
        "ADD COLUMN sources TEXT"
    )
    last = 0
    while True:
        rows = conn.execute(
            "SELECT rowid, kind, data FROM entries WHERE rowid > ? ORDER BY rowid LIMIT 5000",
            (last,),
        ).fetchall()
        if not rows:
            return
        last = rows[-1][0]
        updates = []
        for rowid, kind, data in rows:
            try:
                updates.append((*readable_row(data, str(kind)), rowid))
            except (ValueError, KeyError, TypeError, IndexError, RecursionError):
                continue  # damage: left as it is (the store reports the row)
        conn.executemany(
            "UPDATE entries SET kind = ?, question = ?, answer = ?, sources = ?, data = ? "
            "WHERE rowid = ?",
            updates,
        )


#: SQLite's schema 17 (``migrations.m017_organic``): the organic layer's learned links
#: and per-entry state (``backends.organic_rows``). The ids compare in the "C"
#: collation, so ``a < b`` orders them as Python (and SQLite) do, by code point.
_SCHEMA_ORGANIC = """
CREATE TABLE organic_links (
    a TEXT COLLATE "C" NOT NULL,
    b TEXT COLLATE "C" NOT NULL,
    weight DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (a, b),
    CHECK (a < b)
);
CREATE INDEX organic_links_by_b ON organic_links(b);
CREATE TABLE organic_state (
    entry_id TEXT PRIMARY KEY,
    recalls BIGINT NOT NULL DEFAULT 0,
    activation DOUBLE PRECISION NOT NULL DEFAULT 0
)
"""


#: PostgreSQL's own numbered steps: SQL, or a function of the connection. Version 1 is
#: SQLite's schema 3 in one step. Version 2 changes no table: rows written from it on
#: are compact (SQLite's schema 7, ``migrations.m007_compact_rows``), which older
#: darwin-memo must not read. Version 3 is SQLite's schema 10 (``energy_sums``), version
#: 4 its schema 11 (no table changes: a lesson's row may be a list of its four values),
#: version 5 its schema 16 (plain columns), version 6 its schema 17 (the organic layer).
PG_MIGRATIONS: list[tuple[int, str, str | Callable[[PgConnection], None]]] = [
    (1, "m001_initial", _SCHEMA_V1),
    (2, "m002_compact_rows", ""),
    (3, "m003_energy_sums", _m003_energy_sums),
    (4, "m004_lesson_rows_as_lists", ""),
    (5, "m005_readable_rows", _m005_readable_rows),
    (6, "m006_organic", _SCHEMA_ORGANIC),
]


def _lock_sql(schema: str) -> str:
    return f"SELECT pg_advisory_xact_lock(hashtextextended('darwin-memo:{schema}', 0))"


class PostgresBackend(SqliteBackend):
    """A ledger's state in one schema of a PostgreSQL database (module docstring)."""

    kind = "postgres"
    dialect: Dialect = POSTGRES
    history_in_memory = False
    merge_notes_held = False  # a notes row per member, as before SQLite's schema 9

    def __init__(self, url: str, *, create: bool = True, lock_timeout: float | None = None) -> None:
        try:
            import psycopg  # noqa: F401
        except ImportError:
            raise StoreError(
                "PostgreSQL stores need psycopg 3: pip install 'darwin-memo[postgres]'"
            ) from None
        conninfo, self.store_name, display = parse_url(url)
        modes = [v for k, v in parse_qsl(urlsplit(url).query) if k == "vectors"]
        self.vector_mode = modes[-1] if modes else "exact"
        if self.vector_mode not in VECTOR_MODES:
            raise StoreError(
                f"vectors={self.vector_mode!r} in the store URL is not a choice: use "
                + ", ".join(VECTOR_MODES)
            )
        self._vector_schema: str | bool | None = False  # False: not looked up yet
        #: The vector tables this process knows, by model id (see ``pgdense``).
        self.dense_tables: dict[str, DenseTable] = {}
        self.url_display = display
        self.file = display  # what the SQLite code names in messages
        path = StoreUrl(display)
        path._display = display
        self.path = path
        self.lock_timeout = DEFAULT_LOCK_TIMEOUT if lock_timeout is None else lock_timeout
        self.conn = PgConnection(conninfo, self.store_name, display)  # type: ignore[assignment]
        self._seen = -1
        self.txn_version = 0
        self._live_key = None
        self.store: SqlStore | None = None
        self.created = self._migrate(create)
        self.pg.reconnected = False

    @property
    def pg(self) -> PgConnection:
        return self.conn  # type: ignore[return-value]

    def _check_schema(self) -> None:
        """Nothing per operation: a newer schema is refused when the store opens.

        (SQLite's check reads its schema cookie, a few microseconds; here it would be a
        round trip to the server on every operation.)
        """

    def _migrate(self, create: bool) -> bool:
        """Create or upgrade the store's schema under its lock; True when created."""
        conn = self.pg
        conn.doing = "open the store"
        exists = conn.execute(
            "SELECT 1 FROM information_schema.tables "
            "WHERE table_schema = ? AND table_name = 'schema_migrations'",
            (self.store_name,),
        ).fetchone()
        if exists is None and not create:
            raise StoreNotFound(f"{self.path}: no such store")
        known = len(PG_MIGRATIONS)
        if exists is not None and self._schema_version() == known:
            return False
        conn.execute("BEGIN")
        try:
            conn.execute(_lock_sql(self.store_name))
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {self.store_name}")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
            )
            current = self._schema_version()
            if current > known:
                raise StoreFormatError(
                    f"{self.path} has schema version {current}, newer than this darwin-memo "
                    f"understands ({known}); upgrade darwin-memo to open it"
                )
            for version, name, step in PG_MIGRATIONS[current:]:
                if callable(step):
                    step(conn)
                    step = ""
                for statement in step.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute(
                    "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                    (version, name, utc_now_iso()),
                )
            conn.execute("COMMIT")
        except BaseException:
            conn.rollback()
            raise
        return current == 0

    def _schema_version(self) -> int:
        row = self.pg.execute("SELECT MAX(version) FROM schema_migrations").fetchone()
        found = int(row[0] or 0) if row else 0
        if found > len(PG_MIGRATIONS):
            raise StoreFormatError(
                f"{self.path} has schema version {found}, newer than this darwin-memo "
                f"understands ({len(PG_MIGRATIONS)}); upgrade darwin-memo to open it"
            )
        return found

    def _has_organic(self) -> bool:
        """The organic tables are there: ``_migrate`` brought the store to version 6 or
        later when it opened (a newer schema is refused), so no query is needed."""
        return True

    # -- pgvector ------------------------------------------------------------------

    def vector_schema(self) -> str | None:
        """The schema of the ``vector`` extension, creating it if the role may; else None.

        Looked up once per backend: an extension installed later is seen on the next open.
        """
        if self._vector_schema is not False:
            return self._vector_schema  # type: ignore[return-value]
        conn = self.pg
        found = self._find_vector()
        if found is None and self.vector_mode != "off":
            row = conn.execute(
                "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"
            ).fetchone()
            if row is not None:
                inside = conn.in_transaction()
                if inside:
                    conn.execute("SAVEPOINT darwin_memo_vector")
                try:
                    # In public, not the store's schema: DROP SCHEMA store CASCADE must not
                    # take the extension (and other stores' vectors) with it.
                    conn.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
                except StoreUnavailableError:
                    raise
                except StoreError:  # not allowed (pgvector is not a trusted extension)
                    if inside:
                        conn.execute("ROLLBACK TO SAVEPOINT darwin_memo_vector")
                else:
                    if inside:
                        conn.execute("RELEASE SAVEPOINT darwin_memo_vector")
                    found = self._find_vector()
        if found is not None and found != self.store_name:
            conn.path_tail = ', "' + found.replace('"', '""') + '"'
            conn.execute(f"SET search_path TO {self.store_name}{conn.path_tail}")
        self._vector_schema = found
        return found

    def _find_vector(self) -> str | None:
        row = self.pg.execute(
            "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
            "WHERE e.extname = 'vector'"
        ).fetchone()
        return str(row[0]) if row else None

    # -- reading -------------------------------------------------------------------

    def _store_class(self) -> type[SqlStore]:
        return PgStore  # the same store with dense searches in SQL (pgdense)

    def _begin(self, doing: str, *, write: bool) -> None:
        conn = self.pg
        conn.doing = doing
        conn.raw()  # connect (again) before deciding whether the view is stale
        if conn.reconnected:
            self._seen = -1  # a new connection: the next sync reads the whole view
        conn.reconnected = False
        if write:
            conn.execute("BEGIN")
            conn.execute(f"SET LOCAL lock_timeout = '{int(self.lock_timeout * 1000)}ms'")
            conn.execute(_lock_sql(self.store_name))
        else:
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")

    def translate(self, exc: BaseException, doing: str = "read the store") -> Exception | None:
        """The store's own error for a psycopg error (None for any other): the
        connection turns each into one as it is raised, so little reaches here."""
        import psycopg

        if not isinstance(exc, psycopg.Error):
            return None
        self.pg.doing = doing
        return self.pg.error(exc)

    def load(self, pick: PickRetriever) -> Loaded:
        try:
            self._begin("read the store", write=False)
            loaded = self._read_all(pick)
            self.pg.execute("COMMIT")
        except BaseException:
            self._seen = -1
            self.pg.rollback()
            raise
        return loaded

    def refresh(self, view: View) -> Loaded | Refreshed | None:
        try:
            self._begin("read the store", write=False)
            seen = self._sync(view)
            self.pg.execute("COMMIT")
        except BaseException:
            self._seen = -1
            self.pg.rollback()
            raise
        return seen

    # -- writing -------------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(self, changes: Changes, view: View) -> Iterator[Loaded | Refreshed | None]:
        try:
            self._begin("write the store", write=True)
            if changes.relaxed:  # a decide or a tick: no need to wait for the WAL flush
                self.pg.execute("SET LOCAL synchronous_commit = off")
            seen = self._sync(view)
            self.txn_version = self._current_version() + 1
            store = self.store
            assert store is not None
            store.reset_sums()  # another host may have changed them since
            yield seen
            if changes.events or changes.touched or changes.opened or changes.closed:
                self._write(changes)
            store.save_sums()
            store.reset_sums()
            self.pg.doing = COMMITTING
            self.pg.execute("COMMIT")
        except BaseException:
            if self.store is not None:
                self.store.reset_sums()
            self._seen = -1
            self.pg.rollback()
            raise
        finally:
            self.pg.doing = "read the store"

    def _inside(self) -> bool:
        return self.pg.in_transaction()

    @contextlib.contextmanager
    def _immediate(self) -> Iterator[None]:
        self._begin("write the store", write=True)
        try:
            yield
            self.pg.execute("COMMIT")
        except BaseException:
            self.pg.rollback()
            raise

    def reset_sequences(self) -> None:
        """After rows were inserted with explicit ids (a bulk copy)."""
        for table, column in (("entries", "rowid"), ("tokens", "id")):
            self.pg.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', '{column}'), "
                f"GREATEST((SELECT MAX({column}) FROM {table}), 1))"
            )

    def is_empty(self) -> bool:
        row = self.pg.execute("SELECT COUNT(*) FROM events").fetchone()
        entries = self.pg.execute("SELECT 1 FROM entries LIMIT 1").fetchone()
        return bool(row and int(row[0]) == 0) and entries is None

    def drop(self) -> None:
        """Remove the whole store (its schema)."""
        self.pg.execute(f"DROP SCHEMA IF EXISTS {self.store_name} CASCADE")

    def close(self) -> None:
        self.pg.close()
