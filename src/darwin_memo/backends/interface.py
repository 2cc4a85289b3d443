"""The interface between the ledger and its storage (see the package docstring)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from pathlib import Path

    from ..ledger import Changes, Ledger

__all__ = ["Backend"]


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
