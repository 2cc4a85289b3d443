"""The interface between the ledger and its storage (see the package docstring)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from pathlib import Path

    from ..ledger import Changes, Ledger
    from ..records.entry import MemoryEntry

__all__ = ["Backend", "Pages"]


class Backend(Protocol):
    """What the ledger needs from storage."""

    path: Path
    kind: str
    #: Whether notes live in the ledger's memory (and so in its payload).
    history_in_memory: bool
    created: bool

    def load(self, ledger: Ledger) -> None:
        """Fill ``ledger`` with the stored state."""
        ...

    def refresh(self, ledger: Ledger) -> None:
        """Bring ``ledger`` up to date with writes made elsewhere (cheap when none)."""
        ...

    def transaction(self, ledger: Ledger, changes: Changes) -> AbstractContextManager[None]:
        """Exclusive write: refresh, run the body, then write ``changes`` atomically."""
        ...

    def history(self, entry_id: str) -> list[Any]: ...

    def events(self) -> Iterator[dict[str, Any]]: ...

    def close(self) -> None: ...


class Pages(Protocol):
    """Pages of a population for people browsing it (the dashboard): every store's
    population answers these, in memory or in SQL, with the same rows
    (``backends.pages`` holds the rule and its SQL)."""

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
        """One page of living entries (sorted, ties by id) and how many matched."""
        ...

    def page_graveyard(
        self, *, kind: str = "", search: str = "", offset: int = 0, limit: int = 50
    ) -> tuple[list[str], int]:
        """The ids of one page of dead entries, most recently buried first, and how
        many matched."""
        ...
