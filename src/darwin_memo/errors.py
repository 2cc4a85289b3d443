"""Errors raised by darwin-memo.

One root, so callers can catch everything the package raises on purpose::

    DarwinMemoError
    ├── StoreError              a store could not be read or written
    │   ├── StoreFormatError    (also ValueError) the file is not a darwin-memo store
    │   ├── StoreLockedError    (also RuntimeError) another process holds the store
    │   ├── StoreNotFound       (also FileNotFoundError) no store at that path
    │   └── StoreUnavailableError  the store's server cannot be reached or went away
    ├── EntryNotFound           (also KeyError) no entry with that id
    └── LLMError                (also RuntimeError) a model endpoint failed or answered badly

Messages say what happened and what to do about it.
"""

from __future__ import annotations

__all__ = [
    "DarwinMemoError",
    "EntryNotFound",
    "LLMError",
    "StoreError",
    "StoreFormatError",
    "StoreLockedError",
    "StoreNotFound",
    "StoreUnavailableError",
]


class DarwinMemoError(Exception):
    """Root of every error darwin-memo raises on purpose."""


class StoreError(DarwinMemoError):
    """A store could not be read or written."""


class StoreFormatError(StoreError, ValueError):
    """The file is not a valid darwin-memo store (nothing was written to it)."""


class StoreLockedError(StoreError, RuntimeError):
    """Another process holds the store's lock and did not release it in time."""


class StoreUnavailableError(StoreError):
    """The store's server (PostgreSQL) cannot be reached or went away mid-operation.

    Nothing half-done is left behind: the server rolls back an interrupted
    transaction. Retrying once the server is back is safe, except after a failed
    commit, whose message says to look before retrying.
    """


class EntryNotFound(DarwinMemoError, KeyError):
    """No living or dead entry has that id."""

    def __str__(self) -> str:  # KeyError quotes its argument; we want the message as written
        return str(self.args[0]) if self.args else "entry not found"


class StoreNotFound(StoreError, FileNotFoundError):
    """The store file does not exist (and this operation does not create one)."""


class LLMError(DarwinMemoError, RuntimeError):
    """A language-model endpoint failed, timed out or answered with something unusable.

    ``status`` is the HTTP status (0 when no response arrived); ``body`` is the
    start of the response body, with any API key scrubbed out.
    """

    def __init__(self, message: str, status: int = 0, body: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.body = body
