"""Open a store only to read it, with no side effects on the files.

``Ledger.open`` on a JSON store takes the store's lock, which creates
``NAME.lock`` (never through a link), but it does not finish a crashed writer's
journal append (see ``backends.jsonstore``). Readers that must leave a directory
as they found it and need
only the population (``render``, ``query``, ``stats``, and ``settle-ci`` reading
the base commit's store) read a JSON store as the published package did: one
decode of a file that writers replace atomically. SQLite stores are opened
normally (read transactions never write rows).
"""

from __future__ import annotations

from pathlib import Path

from .ledger import Ledger

__all__ = ["open_readonly"]


def open_readonly(path: str | Path) -> Ledger:
    """A ledger view of the store at ``path``; use it as a context manager.

    Raises ``StoreNotFound`` for a missing store and ``StoreFormatError`` (or
    another ``StoreError``) for one that cannot be read.
    """
    from .backends import backend_kind

    if backend_kind(path) == "json":
        return Ledger.load(path)
    return Ledger.open(path, create=False)
