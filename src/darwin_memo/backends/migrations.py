"""Numbered, append-only schema migrations for SQLite stores.

Each migration is a function ``mNNN_name(conn)`` registered in order. Applied
migrations are recorded in ``schema_migrations`` inside the same transaction as
the change itself. Never edit a released migration: fix forward with a new one.
A store whose recorded version is newer than this code knows is refused rather
than guessed at.

Each migration is frozen: it carries the code it needs (the row forms it reads, the
list codec it writes) instead of calling the store's live code, so a later change to
that code does not change what an old migration does. What it shares with the store
is the tokenizer (``retrieval.tokenize``), which is part of the format: a change to it
comes with a migration that re-indexes.
"""

from __future__ import annotations

import json
import math
import sqlite3
import sys
from array import array
from collections.abc import Callable, Iterable
from itertools import groupby
from operator import itemgetter

from ..errors import StoreFormatError
from ..records.entry import utc_now_iso

__all__ = [
    "MIGRATIONS",
    "SCHEMA_INDEXES",
    "SCHEMA_TABLES",
    "SCHEMA_VIEWS",
    "apply_migrations",
    "foreign_objects",
    "readable_row",
    "schema_version",
]

Migration = Callable[[sqlite3.Connection], None]
MIGRATIONS: list[tuple[int, str, Migration]] = []


def migration(version: int, name: str) -> Callable[[Migration], Migration]:
    def register(fn: Migration) -> Migration:
        assert version == len(MIGRATIONS) + 1, "migrations are numbered consecutively"
        MIGRATIONS.append((version, name, fn))
        return fn

    return register


def _script(conn: sqlite3.Connection, sql: str) -> None:
    # executescript() would COMMIT the enclosing transaction; run statement by statement.
    for statement in sql.split(";"):
        if statement.strip():
            conn.execute(statement)


@migration(1, "m001_initial")
def m001_initial(conn: sqlite3.Connection) -> None:
    _script(
        conn,
        """
        CREATE TABLE meta (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL
        );
        CREATE TABLE entries (
            id TEXT PRIMARY KEY,
            alive INTEGER NOT NULL,
            energy REAL NOT NULL,
            kind TEXT NOT NULL,
            damaged INTEGER NOT NULL DEFAULT 0,
            data TEXT NOT NULL,
            version INTEGER NOT NULL
        );
        CREATE INDEX entries_by_version ON entries(version);
        CREATE INDEX entries_alive ON entries(alive, energy);
        CREATE TABLE tickets (
            id TEXT PRIMARY KEY,
            open INTEGER NOT NULL,
            born_tick INTEGER NOT NULL,
            data TEXT NOT NULL,
            version INTEGER NOT NULL
        );
        CREATE INDEX tickets_by_version ON tickets(version);
        CREATE INDEX tickets_open ON tickets(open, born_tick);
        CREATE TABLE notes (
            seq INTEGER PRIMARY KEY,
            entry_id TEXT NOT NULL,
            data TEXT NOT NULL
        );
        CREATE INDEX notes_by_entry ON notes(entry_id, seq);
        CREATE TABLE events (
            seq INTEGER PRIMARY KEY,
            event TEXT NOT NULL,
            tick INTEGER,
            ts TEXT,
            data TEXT NOT NULL
        );
        CREATE INDEX events_by_ts ON events(ts);
        """,
    )


#: Tables every store has had since its first version. Commands read some of them only
#: when they need them (open tickets, entry rows), so a missing one is caught at open.
CORE_TABLES = frozenset({"meta", "entries", "tickets", "notes", "events"})


#: Every table some schema version has held (a later migration may drop one), and
#: ``schema_migrations``. ``tests/backends/test_hostile_stores.py`` runs the migrations one by
#: one and checks that these two sets name exactly what they create.
SCHEMA_TABLES = frozenset(
    {
        "blocks", "counters", "energy_sums", "entries", "events", "lineage", "merge_notes",
        "meta", "notes", "organic_links", "organic_state", "packs", "postings",
        "schema_migrations", "settled", "tickets", "tokens", "vectors",
    }
)  # fmt: skip
#: Every index some schema version has held (SQLite's own ``sqlite_autoindex_*`` aside).
SCHEMA_INDEXES = frozenset(
    {
        "entries_alive", "entries_balance", "entries_by_version", "entries_damaged",
        "entries_death", "events_by_ts", "notes_by_entry", "organic_links_by_b",
        "tickets_by_version", "tickets_open",
    }
)  # fmt: skip
#: Every view some schema version has held, with the SQL it was created with: a view of
#: that name holding any other SQL is not ours (``foreign_objects``). Nothing of
#: darwin-memo reads a view; they are for people who open a store with ``sqlite3``.
SCHEMA_VIEWS: dict[str, str] = {}  # filled by the migrations that create them (m016)
#: Tables SQLite makes itself (AUTOINCREMENT, ANALYZE), which hold no code.
_SQLITE_TABLES = frozenset(
    {"sqlite_sequence", "sqlite_stat1", "sqlite_stat2", "sqlite_stat3", "sqlite_stat4"}
)


def foreign_objects(conn: sqlite3.Connection, *, code_only: bool = False) -> list[str]:
    """Schema objects no darwin-memo version creates, as ``"trigger 'name'"`` words.

    A store may come from anyone (a cloned repository, a shared folder). A trigger
    runs its SQL in the process that writes the table, a view named like one of our
    tables runs its query (a recursive one never ends) wherever we read that table,
    and a virtual table runs its module's code: none of them is ever ours (but the
    views of ``SCHEMA_VIEWS``, exactly as created), so a store holding one is refused
    before any statement touches its tables. With
    ``code_only`` only those are listed; otherwise also tables we do not know and
    indexes we do not know that compute something (an expression or a ``WHERE``).
    A plain index on our columns runs nothing (someone's own index for their
    queries): it is left alone. Names are given as ``ascii()`` writes them, so a
    crafted name cannot write to a terminal.
    """
    found: list[str] = []
    for kind, name, table, sql in conn.execute(
        "SELECT type, name, tbl_name, sql FROM sqlite_master"
    ):
        name, table = str(name), str(table)
        virtual = isinstance(sql, str) and sql.lstrip()[:14].upper() == "CREATE VIRTUAL"
        if kind == "table" and not virtual:
            if code_only or name in SCHEMA_TABLES or name in _SQLITE_TABLES:
                continue
        elif kind == "table":
            kind = "virtual table"
        ours = (kind == "view" and SCHEMA_VIEWS.get(name) == sql) or (
            kind == "index"
            and (code_only or name in SCHEMA_INDEXES or _plain_index(conn, name, table, sql))
        )
        if ours:
            continue
        found.append(f"{kind} {name[:80]!a}")
    return found


def _plain_index(conn: sqlite3.Connection, name: str, table: str, sql: object) -> bool:
    """An index of SQLite's own, or one on columns of our tables with no expression
    and no ``WHERE`` (nothing in it is computed)."""
    if table not in SCHEMA_TABLES:
        return False
    if sql is None:  # UNIQUE and PRIMARY KEY indexes SQLite makes
        return name.startswith("sqlite_autoindex_")
    partial = conn.execute(
        "SELECT partial FROM pragma_index_list(?) WHERE name = ?", (table, name)
    ).fetchone()
    computed = conn.execute(
        "SELECT count(*) FROM pragma_index_xinfo(?) WHERE cid = -2", (name,)
    ).fetchone()
    return partial is not None and not partial[0] and not computed[0]


def schema_version(conn: sqlite3.Connection) -> int:
    row = conn.execute(
        "SELECT name FROM sqlite_master WHERE type='table' AND name='schema_migrations'"
    ).fetchone()
    if row is None:
        return 0
    found = conn.execute("SELECT MAX(version) FROM schema_migrations").fetchone()
    return int(found[0] or 0)


def apply_migrations(conn: sqlite3.Connection, path: str) -> int:
    """Bring the schema up to date; returns the version. Refuses newer stores.

    A store already at the current version is only read (no write lock taken).
    """
    known = len(MIGRATIONS)
    current = schema_version(conn)
    if current > known:
        raise StoreFormatError(
            f"{path} has schema version {current}, newer than this darwin-memo "
            f"understands ({known}); upgrade darwin-memo to open it"
        )
    if current == known:
        tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master")}
        missing = sorted(CORE_TABLES - tables)
        if missing:
            raise StoreFormatError(
                f"{path} has no {', '.join(missing)} table: the store is damaged "
                "(refusing to use it; restore it from a backup)"
            )
        return known
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
        )
        current = schema_version(conn)
        known = len(MIGRATIONS)
        if current > known:
            raise StoreFormatError(
                f"{path} has schema version {current}, newer than this darwin-memo "
                f"understands ({known}); upgrade darwin-memo to open it"
            )
        for version, name, fn in MIGRATIONS[current:]:
            fn(conn)
            conn.execute(
                "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                (version, name, utc_now_iso()),
            )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return len(MIGRATIONS)


@migration(2, "m002_lazy_population")
def m002_lazy_population(conn: sqlite3.Connection) -> None:
    """Entries read on demand: an inverted index, lazy upkeep, lineage, counters.

    ``energy`` becomes the balance at tick ``anchor``; upkeep since then is charged
    arithmetically, and ``death_tick`` (the first tick at which upkeep leaves the
    entry at or below zero) lets a tick find its dead without touching the living.
    """
    _script(
        conn,
        """
        ALTER TABLE entries ADD COLUMN anchor INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE entries ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE entries ADD COLUMN death_tick INTEGER;
        ALTER TABLE entries ADD COLUMN toks TEXT NOT NULL DEFAULT '';
        CREATE INDEX entries_death ON entries(alive, pinned, death_tick);
        CREATE INDEX entries_damaged ON entries(damaged) WHERE damaged = 1;
        CREATE TABLE tokens (
            id INTEGER PRIMARY KEY,
            token TEXT NOT NULL UNIQUE,
            df INTEGER NOT NULL
        );
        CREATE TABLE postings (
            token_id INTEGER NOT NULL,
            entry_rowid INTEGER NOT NULL,
            PRIMARY KEY (token_id, entry_rowid)
        ) WITHOUT ROWID;
        CREATE TABLE lineage (
            member TEXT PRIMARY KEY,
            heir TEXT NOT NULL
        );
        CREATE TABLE counters (
            name TEXT PRIMARY KEY,
            value INTEGER NOT NULL
        )
        """,
    )
    _backfill_v2(conn)


def _tokens(question: str, answer: str) -> list[str]:
    """The set of an entry's tokens, sorted: what the index holds its row under."""
    from ..retrieval.lexical import tokenize

    return sorted(set(tokenize(question + " " + answer)))


def _death_tick(energy: float, anchor: int, upkeep: float, pinned: bool) -> int | None:
    """The first tick after ``anchor`` at which lazy upkeep leaves ``energy`` dead
    (at or below 1e-9)."""
    if pinned:
        return None
    if energy <= 1e-9:
        return anchor + 1
    if upkeep <= 0:
        return None
    n = max(1, math.ceil((energy - 1e-9) / upkeep))
    while n > 1 and energy - upkeep * (n - 1) <= 1e-9:
        n -= 1
    while energy - upkeep * n > 1e-9:
        n += 1
    return anchor + n


def _backfill_v2(conn: sqlite3.Connection) -> None:
    """Schema 2's columns and index for rows schema 1 wrote (each the whole
    ``to_dict`` of its entry): the anchor at the store's tick, the pinned flag, the
    death tick, the tokens, the postings of the living, the lineage, the living count."""
    meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    tick = int(json.loads(meta.get("tick_count", "0")))
    upkeep = float(json.loads(meta.get("config", "{}")).get("upkeep", 0.05))
    alive_count = 0
    for rowid, alive, energy, data in conn.execute(
        "SELECT rowid, alive, energy, data FROM entries"
    ).fetchall():
        d = json.loads(data)
        pinned = bool(d.get("pinned", False))
        toks = _tokens(d["question"], d["answer"])
        conn.execute(
            "UPDATE entries SET anchor=?, pinned=?, death_tick=?, toks=? WHERE rowid=?",
            (
                tick,
                int(pinned),
                _death_tick(float(energy), tick, upkeep, pinned) if alive else None,
                " ".join(toks),
                rowid,
            ),
        )
        if alive:
            alive_count += 1
            for t in toks:
                conn.execute(
                    "INSERT INTO tokens (token, df) VALUES (?, 1) "
                    "ON CONFLICT(token) DO UPDATE SET df = df + 1",
                    (t,),
                )
                conn.execute(
                    "INSERT OR IGNORE INTO postings (token_id, entry_rowid) "
                    "SELECT id, ? FROM tokens WHERE token = ?",
                    (rowid, t),
                )
        for member in d.get("lineage", []):
            conn.execute(
                "INSERT OR REPLACE INTO lineage (member, heir) VALUES (?, ?)", (member, d["id"])
            )
    conn.execute(
        "INSERT OR REPLACE INTO counters (name, value) VALUES ('alive', ?)", (alive_count,)
    )


@migration(3, "m003_balance_index")
def m003_balance_index(conn: sqlite3.Connection) -> None:
    """A covering index for the population's balance (a tick reports total energy).

    The sum over living entries becomes a scan of this index instead of the table,
    and the old (alive, energy) index, which no query needs any more, goes.
    """
    _script(
        conn,
        """
        CREATE INDEX entries_balance ON entries(alive, pinned, anchor, energy, kind);
        DROP INDEX IF EXISTS entries_alive;
        """,
    )


@migration(4, "m004_packed_postings")
def m004_packed_postings(conn: sqlite3.Connection) -> None:
    """Every token's postings also as one array (``packs``) or as bits (``blocks``).

    Retrieval reads a list in one step and tests a common token's membership with a
    byte lookup, instead of a row or a probe per entry (see ``backends.sqlstore``).
    """
    _script(
        conn,
        """
        ALTER TABLE tokens ADD COLUMN dense INTEGER NOT NULL DEFAULT 0;
        CREATE TABLE packs (
            token_id INTEGER PRIMARY KEY,
            ids BLOB NOT NULL
        );
        CREATE TABLE blocks (
            token_id INTEGER NOT NULL,
            block INTEGER NOT NULL,
            bits BLOB NOT NULL,
            PRIMARY KEY (token_id, block)
        );
        """,
    )
    rows = conn.execute(
        "SELECT p.token_id, p.entry_rowid, t.token FROM postings p "
        "JOIN tokens t ON t.id = p.token_id ORDER BY p.token_id, p.entry_rowid"
    )
    second = itemgetter(1)
    for (token_id, _token), group in groupby(rows, key=itemgetter(0, 2)):
        ids = list(map(second, group))
        if len(ids) >= _DENSE_MIN:
            _write_blocks(conn, int(token_id), ids)
            conn.execute("UPDATE tokens SET dense = 1 WHERE id = ?", (token_id,))
        else:  # the packs of schemas 4 to 12: 32-bit integers (m013 moves them)
            conn.execute(
                "INSERT INTO packs (token_id, ids) VALUES (?, ?)", (token_id, _pack32(ids))
            )


#: Holders from which a token's list is kept as bits in ``blocks`` of 2**_BLOCK_SHIFT
#: rowids (the store's ``DENSE_MIN`` and ``BLOCK_SHIFT`` when m004 was written).
_DENSE_MIN = 8192
_BLOCK_SHIFT = 16


def _write_blocks(conn: sqlite3.Connection, token_id: int, rowids: Iterable[int]) -> None:
    """``token_id``'s rowids as bits in blocks, trailing zero bytes trimmed (the token
    has no blocks yet)."""
    by_block: dict[int, bytearray] = {}
    for rowid in rowids:
        bits = by_block.setdefault(rowid >> _BLOCK_SHIFT, bytearray(1 << (_BLOCK_SHIFT - 3)))
        offset = rowid & ((1 << _BLOCK_SHIFT) - 1)
        bits[offset >> 3] |= 1 << (offset & 7)
    conn.executemany(
        "INSERT OR REPLACE INTO blocks (token_id, block, bits) VALUES (?, ?, ?)",
        [(token_id, block, bytes(bits).rstrip(b"\0")) for block, bits in by_block.items()],
    )


def _pack32(ids: list[int]) -> bytes:
    """A list as schemas 4 to 12 packed it: little-endian unsigned 32-bit integers."""
    arr = array("I", ids)
    if sys.byteorder == "big":
        arr.byteswap()
    return arr.tobytes()


def _unpack32(blob: bytes) -> array[int]:
    arr = array("I")
    arr.frombytes(blob[: len(blob) - len(blob) % 4])
    if sys.byteorder == "big":
        arr.byteswap()
    return arr


@migration(5, "m005_settled_entries")
def m005_settled_entries(conn: sqlite3.Connection) -> None:
    """Entries a consolidation left standing, known to be pairwise below the threshold.

    A later consolidation compares only the pairs that touch the other candidates
    (see ``retrieval.simjoin.SETTLED``). Existing stores start with none settled: their
    next consolidation runs the whole join once and settles what it leaves standing.
    """
    _script(
        conn,
        """
        CREATE TABLE settled (
            entry_rowid INTEGER PRIMARY KEY
        );
        """,
    )


@migration(6, "m006_lists_only")
def m006_lists_only(conn: sqlite3.Connection) -> None:
    """The packs and blocks (m004) become the index's only copy: ``postings`` goes.

    They always held exactly what ``postings`` held, and ``tokens.df`` stays the count.
    Writing and deleting a row per token and entry was most of a bulk burial's cost
    (a store's first consolidation at 1M buries half a million entries) and about a
    quarter of the file. The pages it held are reused by later writes (``VACUUM``
    gives them back to the file system).
    """
    conn.execute("DROP TABLE IF EXISTS postings")


@migration(7, "m007_compact_rows")
def m007_compact_rows(conn: sqlite3.Connection) -> None:
    """An entry's ``data`` leaves out what its columns hold and its default fields.

    Rows written from schema 7 on hold ``to_dict`` without ``id``, ``energy`` and
    ``kind`` (the columns) and without ``born_cycle``, ``last_used_cycle``, ``uses``
    and ``lineage`` at their defaults (``backends.sqlstore.row_json``): about 30% less
    JSON. Rows already written stay whole until they are next written (both read
    alike), so opening a store does not rewrite it; the version keeps older
    darwin-memo from reading rows it would take for damaged.
    """


@migration(8, "m008_tokens_by_text")
def m008_tokens_by_text(conn: sqlite3.Connection) -> None:
    """The vocabulary keyed by its text, which it then holds once.

    ``tokens`` held each token's text in the table and again in its UNIQUE index
    (about an eighth of a 10k-entry file of these lessons); as a WITHOUT ROWID table
    keyed by ``token`` it holds it once. The ids stay; new tokens take theirs from the
    ``token_ids`` counter (``backends.sqlstore.add_df``), which starts at the largest.
    Nothing looks a token up by its id (the packs and blocks are read through it).
    """
    _script(
        conn,
        """
        CREATE TABLE tokens_by_text (
            token TEXT PRIMARY KEY,
            id INTEGER NOT NULL,
            df INTEGER NOT NULL,
            dense INTEGER NOT NULL DEFAULT 0
        ) WITHOUT ROWID;
        INSERT INTO tokens_by_text (token, id, df, dense)
            SELECT token, id, df, dense FROM tokens ORDER BY token;
        INSERT OR REPLACE INTO counters (name, value)
            SELECT 'token_ids', COALESCE(MAX(id), 0) FROM tokens;
        DROP TABLE tokens;
        ALTER TABLE tokens_by_text RENAME TO tokens
        """,
    )


@migration(9, "m009_merge_notes")
def m009_merge_notes(conn: sqlite3.Connection) -> None:
    """One "merged" note per merge instead of one per member.

    A consolidation notes each member "merged into HEIR at tick T": the same note for
    every member of a group, and a first consolidation of a large store makes hundreds
    of thousands (about 170 bytes of row and index each). From schema 9 the note is
    held once, by its heir, in ``merge_notes``; a member's history reads it through
    its ``lineage`` row, after its own notes (nothing notes a dead entry). Notes
    written before stay in ``notes`` as they are; the version keeps older darwin-memo
    from reading a member's history without its last note.
    """
    _script(
        conn,
        """
        CREATE TABLE IF NOT EXISTS merge_notes (
            heir TEXT PRIMARY KEY,
            data TEXT NOT NULL
        ) WITHOUT ROWID
        """,
    )


@migration(10, "m010_energy_sums")
def m010_energy_sums(conn: sqlite3.Connection) -> None:
    """Running sums of the living, unpinned balances by kind (``backends.sums``).

    A tick reports the population's total balance, and ``ledger stats`` its share by
    kind: a scan of every living row before (150 ms at 1M), the sums and the pinned
    rows from schema 10. Filled here from the rows; the version keeps older
    darwin-memo, which would not keep them, from writing the store.
    """
    from .sums import scan_sums

    _script(
        conn,
        """
        CREATE TABLE IF NOT EXISTS energy_sums (
            kind TEXT PRIMARY KEY,
            entries INTEGER NOT NULL,
            anchors INTEGER NOT NULL,
            energy TEXT NOT NULL
        ) WITHOUT ROWID
        """,
    )
    conn.execute("DELETE FROM energy_sums")
    scan_sums(conn).write(conn)


@migration(11, "m011_lesson_rows_as_lists")
def m011_lesson_rows_as_lists(conn: sqlite3.Connection) -> None:
    """A lesson not settled yet is held as the list of its four values.

    What a compact row (schema 7) holds of such an entry is always its question,
    answer, sources and recording time, under the same four keys: about 45 bytes of
    every row, 7% of a store of these lessons. Rows written from schema 11 on hold
    ``[question, answer, sources, recorded_ts]`` instead (``backends.sqlstore.row_json``;
    any other entry keeps its object). Rows already written stay as they are until next
    written (both read alike); the version keeps older darwin-memo from reading a list
    it would take for a damaged row.
    """


@migration(12, "m012_tokens_from_text")
def m012_tokens_from_text(conn: sqlite3.Connection) -> None:
    """A row's indexed tokens are read from its text, not kept in ``toks``.

    ``toks`` held each row's token set (about 130 bytes of a lesson's row, a fifth of a
    store of lessons), which is always what its question and answer tokenize to. Rows
    written from schema 12 on leave it empty and the set is read from the text where
    a burial, a consolidation or the graveyard's search needs it
    (``backends.sqlstore.row_tokens``). Rows already written keep theirs until next
    written (both read alike); the version keeps older darwin-memo, which would take
    an empty ``toks`` for a row without tokens and leave it in the index when it dies,
    from writing the store.
    """


@migration(13, "m013_lists_in_vocabulary")
def m013_lists_in_vocabulary(conn: sqlite3.Connection) -> None:
    """A token's list is kept in its vocabulary row, as varint gaps (``tokens.ids``).

    Schemas 4 to 12 kept it in its own ``packs`` row, as 32-bit integers: a row and a
    key per token besides the vocabulary's, and four bytes a rowid. From schema 13 a
    list is the first rowid, then each next one's distance from the one before, less
    one, as varints (``backends.sqlstore.pack_ids``): about an eighth of a 10k-entry
    store's file, 4% of a 1M one's. The lists are moved here and ``packs`` goes (3.4 s
    at 1M; the moved lists reuse its pages, and ``darwin-memo migrate`` writes a compact
    copy). A store without ``packs`` whose vocabulary has no ``ids`` yet (an earlier
    migration run again) has its lists built from its rows. The version keeps older
    darwin-memo, which reads the lists from ``packs``, from using the store.
    """
    columns = {str(row[1]) for row in conn.execute("PRAGMA table_info(tokens)")}
    if "ids" not in columns:
        conn.execute("ALTER TABLE tokens ADD COLUMN ids BLOB")
    tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master")}
    if "packs" in tables:
        moved = [
            (_pack_ids(sorted(set(_unpack32(blob)))), str(token))  # (as a pack must be)
            for token, blob in conn.execute(
                "SELECT t.token, p.ids FROM tokens AS t JOIN packs AS p ON p.token_id = t.id "
                "WHERE t.dense = 0 ORDER BY t.token"
            )
            if blob
        ]
        conn.execute("DROP TABLE packs")  # first: the updates reuse its pages
        conn.executemany("UPDATE tokens SET ids = ? WHERE token = ?", moved)
    elif "ids" not in columns:
        lists = _living_lists_v12(conn)
        conn.executemany(
            "UPDATE tokens SET ids = ? WHERE token = ? AND dense = 0",
            [(_pack_ids(lists[t]), t) for t in sorted(lists)],
        )


def _pack_ids(ids: Iterable[int]) -> bytes:
    """Strictly increasing rowids as a pack (schema 13): the first, then each gap less
    one, as unsigned LEB128 varints."""
    out = bytearray()
    last = -1
    for rowid in ids:
        value = rowid if last < 0 else rowid - last - 1
        last = rowid
        while value >= 0x80:
            out.append(value & 0x7F | 0x80)
            value >>= 7
        out.append(value)
    return bytes(out)


def _living_lists_v12(conn: sqlite3.Connection) -> dict[str, list[int]]:
    """Every token's rowids as the living rows of schema 12 make them: a row's ``toks``,
    or where that is empty the tokens of the question and answer in its ``data`` (the
    whole entry, its compact object or, a lesson, the list of its four values). A row
    without them is left out (``ledger verify`` names it)."""
    lists: dict[str, list[int]] = {}
    for rowid, toks, data in conn.execute(
        "SELECT rowid, toks, data FROM entries WHERE alive = 1 ORDER BY rowid"
    ):
        if not toks:
            try:
                d = json.loads(data)
                question, answer = (d[0], d[1]) if type(d) is list else (d["question"], d["answer"])
                toks = " ".join(_tokens(question, answer))
            except (ValueError, TypeError, KeyError, IndexError):
                continue
        for t in str(toks).split():
            lists.setdefault(t, []).append(int(rowid))
    return lists


#: The tables m014 rebuilds keyed by their text, with their columns.
_KEYED = (
    ("lineage", "member TEXT PRIMARY KEY, heir TEXT NOT NULL", "member, heir"),
    ("counters", "name TEXT PRIMARY KEY, value INTEGER NOT NULL", "name, value"),
    ("meta", "key TEXT PRIMARY KEY, value TEXT NOT NULL", "key, value"),
)


@migration(14, "m014_keyed_tables_without_rowid")
def m014_keyed_tables_without_rowid(conn: sqlite3.Connection) -> None:
    """``lineage``, ``counters`` and ``meta`` become WITHOUT ROWID tables.

    Each was a rowid table whose text PRIMARY KEY made an index of its own, so each key
    was kept twice (and each table took two pages in a small store). ``lineage`` gains a
    row for every member a merge buries: after the first consolidation of the 1M scale
    store (525,000 members) it took 30.2 MB kept so and takes 18.1 MB keyed by member, and
    its rows go in about a fifth faster (1.17 -> 0.92 s). The rows move as they are,
    through a temporary table, so the new table takes the old one's pages and the file
    does not grow (that lineage: 0.82 s, in key order).
    """
    for table, columns, names in _KEYED:
        (sql,) = conn.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
        ).fetchone()
        if "WITHOUT ROWID" in sql.upper():
            continue
        conn.execute(f"CREATE TEMP TABLE m014_{table} AS SELECT {names} FROM {table}")
        conn.execute(f"DROP TABLE {table}")
        conn.execute(f"CREATE TABLE {table} ({columns}) WITHOUT ROWID")
        key = names.split(",")[0]
        conn.execute(
            f"INSERT INTO {table} ({names}) SELECT {names} FROM temp.m014_{table} ORDER BY {key}"
        )
        conn.execute(f"DROP TABLE temp.m014_{table}")


@migration(15, "m015_coded_rows")
def m015_coded_rows(conn: sqlite3.Connection) -> None:
    """Rows may hold a lesson in the row code and a kind as a code.

    A lesson's list row may be a BLOB in the row code (``textcode``: about 30% fewer
    bytes of text), ``entries.kind`` the kind's position in ``records.entry.KIND_NAMES`` (one
    digit instead of up to 12 bytes, in the row and in ``entries_balance``), and a
    token's id 0 until its list first goes to ``blocks`` (no bytes instead of two or
    three in most vocabulary rows). Nothing is rewritten here: rows take these forms
    as they are next written, and ``darwin-memo migrate`` writes a copy with every row
    so. The version marks that a store may hold them, so a darwin-memo from before
    refuses it instead of misreading them. The 1,000-entry scale store: 585,728 bytes
    at schema 14, 487,424 copied at schema 15 (its lesson text 159,683 bytes coded
    instead of 224,803).
    """
    del conn


# -- schema 16: rows people can read ---------------------------------------------------
#
# Schemas 7 to 15 kept an entry in ``data`` in ever smaller forms: the whole ``to_dict``
# (before 7), an object without its columns and default fields (7), a lesson as the list
# of its four values (11), that list coded with a fixed Huffman code (15, a BLOB), and
# ``kind`` as one digit (15). m016 reads every one of them with the code below (frozen
# here: the store's code reads schema 16 only) and writes each row plainly.

#: The kinds by their schema-15 code (``entries.kind`` one digit).
_KIND_CODES_15 = ("explicit", "inferred", "entity", "cross_doc", "experience", "consolidated")
#: Schema 15's row code: each byte value's codeword length (a complete canonical prefix
#: code, codewords assigned in order of length, then byte value), one hex digit each.
_ROW_CODE_LENGTHS = bytes(
    int(d, 16)
    for d in (
        "cccccccccc6ccccccccccccccccccccc"
        "3c99bba9778a6668667777788889baab"
        "baa9b9bbb9ab99a99aa99abbbbcabac8"
        "6576547755a756556a54467777ab5bcc"
        "cccccccccccccccccccccccccccccccc"
        "cccccccccccccccccccccbcccccccccc"
        "ccbccccccccccccccccccccccccccccc"
        "cccccccccccccccccccccccccccccccc"
    )
)


class _RowCode:
    """Schema 15's coded rows read back: a BLOB whose first byte is 1, then the UTF-8
    bytes of the row's JSON, each as its codeword in the canonical Huffman code of
    ``_ROW_CODE_LENGTHS`` (at most 12 bits), most significant bit first, the last byte
    filled with one bits. Only ``m016_readable_rows`` reads it, once per store (about
    4 s a 100k store, in Python)."""

    def __init__(self) -> None:
        lengths = _ROW_CODE_LENGTHS
        order = sorted(range(256), key=lambda b: (lengths[b], b))
        codes = [0] * 256
        code, prev = 0, lengths[order[0]]
        for b in order:
            code <<= lengths[b] - prev
            prev = lengths[b]
            codes[b] = code
            code += 1
        # For every 12-bit window: the byte whose codeword starts it, and its length.
        self.table = [(0, 0)] * 4096
        for b in range(256):
            n = lengths[b]
            first = codes[b] << (12 - n)
            for w in range(first, first + (1 << (12 - n))):
                self.table[w] = (b, n)

    def text(self, blob: bytes) -> str:
        """The JSON text a coded row holds (ValueError: not one)."""
        if not blob or blob[0] != 1:
            raise ValueError("a BLOB in no row code")
        n, rem = int.from_bytes(blob[1:], "big"), 8 * (len(blob) - 1)
        out = bytearray()
        while rem:
            if rem >= 12:
                w = (n >> (rem - 12)) & 0xFFF
            else:
                w = ((n & ((1 << rem) - 1)) << (12 - rem)) | ((1 << (12 - rem)) - 1)
            byte, length = self.table[w]
            if length > rem:
                if rem < 8 and n & ((1 << rem) - 1) == (1 << rem) - 1:
                    break  # the one bits that fill the last byte
                raise ValueError("a codeword runs past the end")
            out.append(byte)
            rem -= length
        return out.decode("utf-8")


#: JSON as schema 16 writes it (compact, UTF-8, no NaN).
_dump_16 = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode
#: What a schema-16 row's ``data`` leaves out: fields at their published defaults.
_DEFAULTS_16: tuple[tuple[str, object], ...] = (
    ("born_cycle", 0),
    ("last_used_cycle", -1),
    ("uses", 0),
    ("lineage", []),
)


def readable_row(data: str | bytes, kind: str, code: _RowCode | None = None) -> tuple[str, ...]:
    """A row of schemas 1 to 15 (PostgreSQL 1 to 4) as schema 16 holds it:
    ``(kind, question, answer, sources, data)``, ``sources`` a JSON list and ``data``
    the rest of the entry as a JSON object without the fields at their defaults.
    ValueError (or KeyError, TypeError) where the row holds no entry (damage)."""
    if isinstance(data, bytes):
        data = (code or _RowCode()).text(data)
    d = json.loads(data)
    if type(d) is list:  # schema 11: a lesson's four values
        question, answer, sources, recorded_ts = d
        d = {"question": question, "answer": answer, "sources": sources}
        d["recorded_ts"] = recorded_ts
    if type(d) is not dict:
        raise ValueError("not an entry")
    d.pop("id", None)  # the whole to_dict (before schema 7): the columns hold these
    d.pop("energy", None)
    kind = d.pop("kind", kind)  # (a kind in the JSON wins, as it did when read)
    if len(kind) == 1:
        kind = _KIND_CODES_15[int(kind)]
    question, answer, sources = d.pop("question"), d.pop("answer"), d.pop("sources", [])
    if type(question) is not str or type(answer) is not str or type(sources) is not list:
        raise ValueError("no question, answer and sources")
    for key, default in _DEFAULTS_16:
        if key in d and d[key] == default:
            del d[key]
    return str(kind), question, answer, _dump_16(sources), _dump_16(d)


#: Rows from which a migration that rewrites every row reports its progress on stderr.
PROGRESS_FROM = 100_000

#: The living lessons with their balance now (``backends.sqlstore._NOW``: the balance at
#: the row's anchor tick less upkeep since, a pinned one floored at zero).
_LESSONS_VIEW = """CREATE VIEW lessons AS
SELECT e.id, e.kind, e.question, e.answer, e.sources,
    CASE WHEN m.tick - e.anchor <= 0 THEN e.energy
        WHEN e.pinned <> 0 AND e.energy - m.upkeep * (m.tick - e.anchor) < 0.0 THEN 0.0
        ELSE e.energy - m.upkeep * (m.tick - e.anchor) END AS energy,
    e.pinned, json_extract(e.data, '$.recorded_ts') AS recorded_ts
FROM entries AS e, (
    SELECT COALESCE((SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'tick_count'), 0)
            AS tick,
        COALESCE((SELECT json_extract(value, '$.upkeep') FROM meta WHERE key = 'config'), 0.0)
            AS upkeep
) AS m
WHERE e.alive = 1"""
SCHEMA_VIEWS["lessons"] = _LESSONS_VIEW


@migration(16, "m016_readable_rows")
def m016_readable_rows(conn: sqlite3.Connection) -> None:
    """Each entry's question, answer, kind and sources in plain columns.

    ``entries`` gains ``question``, ``answer`` (TEXT) and ``sources`` (a JSON list);
    ``kind`` holds the kind's name again, and ``data`` the rest of the entry as a JSON
    object (a lesson not settled yet: ``{"recorded_ts": ...}``). Every row is rewritten
    (``readable_row``), in rowid order, a few thousand at a time; a row that holds no
    entry keeps its ``data`` and gets no question (the store reports it as damaged, as
    before). The view ``lessons`` shows the living with their balance now. Progress goes
    to stderr from ``PROGRESS_FROM`` rows (about 20 s a million).
    """
    _script(
        conn,
        """
        ALTER TABLE entries ADD COLUMN question TEXT;
        ALTER TABLE entries ADD COLUMN answer TEXT;
        ALTER TABLE entries ADD COLUMN sources TEXT
        """,
    )
    (total,) = conn.execute("SELECT count(*) FROM entries").fetchone()
    code = _RowCode()
    done, last = 0, 0
    while True:
        rows = conn.execute(
            "SELECT rowid, kind, data FROM entries WHERE rowid > ? ORDER BY rowid LIMIT 5000",
            (last,),
        ).fetchall()
        if not rows:
            break
        last = rows[-1][0]
        updates = []
        for rowid, kind, data in rows:
            try:
                updates.append((*readable_row(data, str(kind), code), rowid))
            except (ValueError, KeyError, TypeError, IndexError, RecursionError):
                continue  # damage: left as it is
        conn.executemany(
            "UPDATE entries SET kind = ?, question = ?, answer = ?, sources = ?, data = ? "
            "WHERE rowid = ?",
            updates,
        )
        done += len(rows)
        if total >= PROGRESS_FROM and (done % 100_000 < len(rows) or done == total):
            print(
                f"darwin-memo: schema 16, plain rows: {done:,} of {total:,} entries",
                file=sys.stderr,
                flush=True,
            )
    conn.execute(  # the kinds of rows left as they were
        "UPDATE entries SET kind = CASE kind "
        + " ".join(f"WHEN '{i}' THEN '{name}'" for i, name in enumerate(_KIND_CODES_15))
        + " END WHERE length(kind) = 1 AND kind BETWEEN '0' AND '5'"
    )
    conn.execute(_LESSONS_VIEW)


@migration(17, "m017_organic")
def m017_organic(conn: sqlite3.Connection) -> None:
    """The organic layer's learned state (``darwin_memo.organic``, docs/organic.md).

    ``organic_links`` holds each learned link once, its ids in order (``a < b``), with
    its weight in (0, 1]; ``organic_state`` an entry's recall count and activation.
    Both start empty and change only in the transactions of the operations that cause
    the change (a recall, a tick's decay, a death, a merge: ``backends.organic_rows``).
    """
    _script(
        conn,
        """
        CREATE TABLE organic_links (
            a TEXT NOT NULL,
            b TEXT NOT NULL,
            weight REAL NOT NULL,
            PRIMARY KEY (a, b),
            CHECK (a < b)
        );
        CREATE INDEX organic_links_by_b ON organic_links(b);
        CREATE TABLE organic_state (
            entry_id TEXT PRIMARY KEY,
            recalls INTEGER NOT NULL DEFAULT 0,
            activation REAL NOT NULL DEFAULT 0
        )
        """,
    )


@migration(18, "m018_entry_vectors")
def m018_entry_vectors(conn: sqlite3.Connection) -> None:
    """Each living entry's embedding, once per entry and model (``backends.sqlvectors``).

    ``vectors`` holds one row per entry and embedding model: the model's id, the
    vector's length, a hash of the text it embeds (``question || ' ' || answer``), and
    the vector as little-endian float64 values. It is derived data: it starts empty,
    is filled by the processes that search with a dense retriever, and may be dropped
    at any time (the next write of such a process makes it again).
    """
    conn.execute(
        "CREATE TABLE vectors ("
        "entry_id TEXT NOT NULL, model TEXT NOT NULL, dims INTEGER NOT NULL, "
        "text_hash TEXT NOT NULL, vector BLOB NOT NULL, PRIMARY KEY (entry_id, model))"
    )
