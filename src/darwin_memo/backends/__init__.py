"""Where a ledger's state lives: one narrow interface, several backends.

A backend loads a ledger's view (population, graveyard, tickets, tick, damage
record), refreshes it with what other processes wrote, and runs each ledger
operation as one transaction that writes only what the operation touched, plus
its events and notes. The ledger's semantics live above this line; a backend
knows rows, not economics.

How a path picks its backend (``open_backend``):

* ``*.json`` is the published single-file JSON format (``JsonBackend``);
* ``*.db``, ``*.sqlite``, ``*.sqlite3`` is SQLite (``SqliteBackend``), the default;
* any other path is sniffed when it exists (an SQLite header or a JSON object)
  and created as SQLite when it does not;
* a ``postgresql://`` (or ``postgres://``) URL is a named store in a PostgreSQL
  database (``PostgresBackend``; ``?store=NAME`` picks the store).
"""

from __future__ import annotations

import os

from ..errors import StoreFormatError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

    from .interface import Backend

__all__ = [
    "JSON_SUFFIXES",
    "SQLITE_SUFFIXES",
    "Backend",
    "backend_kind",
    "is_postgres_url",
    "open_backend",
]

JSON_SUFFIXES = (".json",)
SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")
SQLITE_HEADER = b"SQLite format 3\x00"


def __getattr__(name: str) -> object:
    # The interface is a typing.Protocol; importing typing costs a one-shot CLI call
    # more than the call itself needs, so it is defined in its own module.
    if name == "Backend":
        from .interface import Backend

        return Backend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# SQLite's locks are POSIX record locks, which belong to the process: closing *any*
# descriptor of the database file drops every lock the process holds on it, and
# another process may then delete the WAL from under a live connection. So a file
# that an SQLite connection of this process has open is never opened again to sniff
# its header. Keyed by (device, inode), counted per open backend.
_LIVE_SQLITE: dict[tuple[int, int], int] = {}


def _file_key(path: str | Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def hold_sqlite(path: str | Path) -> tuple[int, int] | None:
    """Record that this process has an SQLite connection open on ``path``."""
    key = _file_key(path)
    if key is not None:
        _LIVE_SQLITE[key] = _LIVE_SQLITE.get(key, 0) + 1
    return key


def release_sqlite(key: tuple[int, int] | None) -> None:
    if key is None or key not in _LIVE_SQLITE:
        return
    _LIVE_SQLITE[key] -= 1
    if _LIVE_SQLITE[key] <= 0:
        del _LIVE_SQLITE[key]


def is_live_sqlite(path: str | Path) -> bool:
    """True when an SQLite connection of this process has ``path`` open."""
    key = _file_key(path)
    return key is not None and key in _LIVE_SQLITE


def is_postgres_url(path: object) -> bool:
    """True for a ``postgresql://`` or ``postgres://`` store URL (never for a ``Path``)."""
    return isinstance(path, str) and path.lower().startswith(("postgresql://", "postgres://"))


def backend_kind(path: str | Path) -> str:
    """``"json"``, ``"sqlite"`` or ``"postgres"`` for a store path (module docstring)."""
    if is_postgres_url(path):
        return "postgres"
    p = os.fspath(path)
    suffix = os.path.splitext(p)[1].lower()
    if suffix in JSON_SUFFIXES:
        return "json"
    if suffix in SQLITE_SUFFIXES or is_live_sqlite(p):
        return "sqlite"
    try:
        with open(p, "rb") as fh:
            head = fh.read(64)
    except FileNotFoundError:
        return "sqlite"
    except IsADirectoryError:
        raise StoreFormatError(f"{p} is a directory, not a store") from None
    except OSError as exc:
        raise StoreFormatError(f"cannot read {p}: {exc.strerror or exc}") from None
    if head.startswith(SQLITE_HEADER):
        return "sqlite"
    if head.lstrip()[:1] == b"{":
        return "json"
    if not head:
        raise StoreFormatError(f"{p} is empty: not a darwin-memo store (refusing to use it)")
    raise StoreFormatError(f"{p} is neither an SQLite nor a JSON darwin-memo store")


def open_backend(
    path: str | Path,
    *,
    kind: str | None = None,
    create: bool = True,
    lock_timeout: float | None = None,
) -> Backend:
    """Open the backend for ``path``; ``create=False`` refuses a missing store."""
    kind = kind or backend_kind(path)
    if kind == "json":
        from .jsonstore import JsonBackend

        return JsonBackend(path, create=create, lock_timeout=lock_timeout)
    if kind == "sqlite":
        from .sqlite import SqliteBackend

        return SqliteBackend(path, create=create, lock_timeout=lock_timeout)
    if kind == "postgres":
        from .postgres import PostgresBackend

        return PostgresBackend(str(path), create=create, lock_timeout=lock_timeout)
    raise ValueError(f"unknown backend {kind!r} (choose json, sqlite or postgres)")
