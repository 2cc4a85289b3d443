"""The protocols that pluggable parts implement: retrievers and embedding functions.

They live apart from ``lexical`` (which re-exports them) because defining a
``typing.Protocol`` needs ``typing``, and a one-shot ``darwin-memo ledger`` call
should not import it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ..records.entry import MemoryEntry

__all__ = ["EmbeddingFn", "Retriever"]


@runtime_checkable
class Retriever(Protocol):
    """What the store needs from a retriever. Implementations never read energy."""

    def rank(self, query: str, entries: Sequence[MemoryEntry]) -> list[tuple[MemoryEntry, float]]:
        """Entries that clear the relevance floor, with scores, best first."""
        ...

    def similarity(self, a: MemoryEntry, b: MemoryEntry) -> float:
        """Similarity of two entries in [0, 1] (drives merges and conflict groups)."""
        ...

    def forget(self, entry_id: str) -> None:
        """Drop anything cached for an entry that left the population."""
        ...

    def dump_state(self) -> dict[str, Any]:
        """State worth persisting with the store (``{}`` = nothing)."""
        ...

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore what ``dump_state`` returned."""
        ...


class EmbeddingFn(Protocol):
    def __call__(self, text: str) -> list[float]: ...
