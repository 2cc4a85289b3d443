"""A decision awaiting its measured outcome (``Ticket``), and what one ledger
operation did (``Changes``), for a backend to write in one transaction.

Records, not behaviour: the ledger makes them, the backends store them. ``Ticket``
is published as ``darwin_memo.ledger.Ticket`` (a re-export); its dict form is the
0.7.1 store files' ``pending`` entries.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import StoreFormatError

__all__ = ["Changes", "Ticket", "TicketSource", "new_ticket_id"]


def new_ticket_id() -> str:
    """An unguessable ticket id: 96 random bits as 24 hex digits.

    Tickets are capabilities (whoever holds one moves energy), so they are not
    the 12-hex ids of the published package, though those are still accepted.
    """
    return os.urandom(12).hex()  # 96 bits from the OS CSPRNG, as secrets.token_hex


@dataclass
class Ticket:
    """A decision awaiting its measured outcome."""

    query: str
    answer: str
    deciding_entry: str | None
    supporting_entries: list[str]
    born_tick: int
    id: str = field(default_factory=new_ticket_id)

    @property
    def provenance(self) -> list[str]:
        """Supporting ids, then the decider (last)."""
        ids = list(self.supporting_entries)
        if self.deciding_entry is not None:
            ids.append(self.deciding_entry)
        return ids

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "answer": self.answer,
            "deciding_entry": self.deciding_entry,
            "supporting_entries": list(self.supporting_entries),
            "born_tick": self.born_tick,
            "id": self.id,
        }

    @classmethod
    def from_dict(cls, d: Any) -> Ticket:
        if not isinstance(d, dict):
            raise StoreFormatError("a ticket must be an object")
        try:
            ticket = cls(
                query=str(d["query"]),
                answer=str(d.get("answer", "")),
                deciding_entry=d.get("deciding_entry"),
                supporting_entries=list(d.get("supporting_entries", [])),
                born_tick=int(d.get("born_tick", 0)),
                id=str(d["id"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise StoreFormatError(f"bad ticket {d.get('id')!r}: {exc}") from None
        if ticket.deciding_entry is not None and not isinstance(ticket.deciding_entry, str):
            raise StoreFormatError(f"bad ticket {ticket.id!r}: deciding_entry must be a string")
        if not all(isinstance(s, str) for s in ticket.supporting_entries):
            raise StoreFormatError(f"bad ticket {ticket.id!r}: supporting_entries must be strings")
        return ticket


class TicketSource(Protocol):
    """Reads a store's open tickets: all, one by id, or those whose text names an
    entry (a superset of the tickets whose provenance holds it)."""

    def __call__(self, *, ticket_id: str = ..., naming: str = ...) -> Iterable[Ticket]: ...


@dataclass(slots=True)
class Changes:
    """What one operation did, for the backend to write in one transaction."""

    events: list[dict[str, Any]] = field(default_factory=list)
    notes: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    opened: list[Ticket] = field(default_factory=list)
    closed: list[str] = field(default_factory=list)
    touched: set[str] = field(default_factory=set)
    #: True for an operation that carries no outside measurement (a decide, a tick): a
    #: durable backend may commit it without waiting for the disk. It survives a crash
    #: of the process; a power cut can only lose it (a lost ticket settles as unknown,
    #: a lost tick is run again by the next one).
    relaxed: bool = False
    #: Set by the ledger when the operation's body is done: its tick, the ids of the
    #: damaged entries, and its whole state in the published JSON shape (called only by
    #: a backend that writes the state whole).
    tick_count: int = 0
    damaged: set[str] = field(default_factory=set)
    payload: Callable[[], dict[str, Any]] | None = None
