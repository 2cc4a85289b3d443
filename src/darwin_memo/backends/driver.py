"""The SQLite driver: the ``_sqlite3`` C module, where the interpreter has one.

The ``sqlite3`` package is that module plus the DB-API's date and time helpers, and
importing it imports ``datetime`` to register adapters for them, which no store
uses: about 3 ms of a one-shot process's open of a small store (7 ms against 4,
measured as fresh processes). The classes, functions and exceptions are the same
objects either way (``sqlite3`` re-exports the C module's), so an error raised
here is a ``sqlite3.Error`` to every caller. An interpreter without the C module
under that name gets the package.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3
else:
    try:
        import _sqlite3 as sqlite3
    except ImportError:  # pragma: no cover - not CPython
        import sqlite3

__all__ = ["sqlite3"]
