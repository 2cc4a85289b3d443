"""The interface between the ledger and its storage (see the package docstring).

The seam is narrow and one-way: a backend never reads or writes the ledger's
attributes. It hands the ledger what it read (``Loaded``, a whole view, or
``Refreshed``, what changed since the last one) and writes what the ledger hands it
(``Changes``). The ledger tells a backend what it needs to know of its view with a
``View``. If a backend needs more from the ledger, a field belongs here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import StoreFormatError
from ..records.ticket import Ticket

if TYPE_CHECKING:
    from pathlib import Path

    from ..economy.rules import Books
    from ..records.entry import EntryKind, MemoryEntry
    from ..records.ticket import Changes, TicketSource
    from ..retrieval.protocols import Retriever

__all__ = ["Backend", "Loaded", "Pages", "PickRetriever", "Population", "Refreshed", "View"]

#: Given the retriever name a store recorded (None: it recorded none), the retriever
#: to index the population with (None: the lexical default). It may raise, refusing a
#: store that recorded another retriever than the one asked for.
PickRetriever = Callable[[str | None], "Retriever | None"]


@dataclass(slots=True)
class Loaded:
    """A store's whole state as a backend read it, for the ledger to adopt."""

    #: The population (a ``MemoryStore``, or a backend's SQL population).
    store: Population
    tick_count: int = 0
    #: The open tickets, or a ``TicketSource`` that reads them when first needed.
    tickets: Iterable[Ticket] | TicketSource = ()
    #: Ids of entries a negative outcome damaged. An SQL population holds the same set
    #: (it writes the flag with each row), so the ledger adopts this very object.
    damaged: set[str] = field(default_factory=set)
    #: The notes kept in memory (JSON stores); None where the backend keeps them.
    history: dict[str, list[Any]] | None = None
    #: Whether the journal does not cover the store's past (the next write opens it
    #: with a snapshot of the balances).
    needs_snapshot: bool = False
    #: The retriever name the store recorded, if any.
    recorded_retriever: str | None = None

    @classmethod
    def from_block(cls, store: Any, block: Any, **more: Any) -> Loaded:
        """The state a published ``ledger`` block holds; malformed parts fall back to
        defaults, as the published package reads them."""
        if not isinstance(block, dict):
            block = {}
        tick = block.get("tick_count", 0)
        tickets: list[Ticket] = []
        pending = block.get("pending", [])
        for raw in pending if isinstance(pending, list) else []:
            with contextlib.suppress(StoreFormatError):
                tickets.append(Ticket.from_dict(raw))
        history = block.get("history", {})
        damaged = block.get("damaged", [])
        return cls(
            store=store,
            tick_count=tick if isinstance(tick, int) and not isinstance(tick, bool) else 0,
            tickets=tickets,
            damaged={d for d in damaged if isinstance(d, str)}
            if isinstance(damaged, list)
            else set(),
            history={k: list(v) for k, v in history.items() if isinstance(v, list)}
            if isinstance(history, dict)
            else {},
            **more,
        )


@dataclass(slots=True)
class Refreshed:
    """What other processes changed since the view a backend last handed out."""

    tick_count: int
    #: Entries whose damage flag was written since, and the flag now.
    damaged: dict[str, bool] = field(default_factory=dict)
    #: Tickets written since, by id: the ticket while open, None once closed. None
    #: when the ledger has not read its open tickets yet (its first read sees them).
    tickets: list[tuple[str, Ticket | None]] | None = None


@dataclass(frozen=True, slots=True)
class View:
    """What a backend needs to know of the ledger's view to bring it up to date."""

    #: The retriever the population is indexed with (kept by a full read).
    retriever: Retriever | None = None
    #: An operation failed mid-way: read the whole store again.
    stale: bool = False
    #: Whether the ledger has read its open tickets (else a delta need not carry them).
    tickets_read: bool = True


#: What a refresh, or the start of a write, found: a whole view, a delta, or nothing new.
Seen = Loaded | Refreshed | None


class Backend(Protocol):
    """What the ledger needs from storage."""

    path: Path
    kind: str
    #: Whether notes live in the ledger's memory (and so in its payload).
    history_in_memory: bool
    created: bool
    #: The retriever name the store recorded, as last read (None: none).
    recorded_retriever: str | None

    def load(self, pick: PickRetriever) -> Loaded:
        """Read the whole stored state, the population indexed by ``pick``'s retriever."""
        ...

    def refresh(self, view: View) -> Loaded | Refreshed | None:
        """What other processes wrote since the last read (None, cheaply, when nothing)."""
        ...

    def transaction(
        self, changes: Changes, view: View
    ) -> AbstractContextManager[Loaded | Refreshed | None]:
        """Exclusive write: refresh and yield what it found, then write ``changes``
        atomically when the body returns (nothing when it raises)."""
        ...

    def translate(self, exc: BaseException, doing: str = "read the store") -> Exception | None:
        """The ``errors.py`` error for a driver's error (None: not the driver's)."""
        ...

    def version_token(self) -> str:
        """A token that changes whenever any process writes the store."""
        ...

    def events_after(self, seq: int) -> tuple[int, list[tuple[int, Any]]] | None:
        """The journal's last sequence number and its ``(seq, event)`` pairs after
        ``seq`` (None: this backend's journal is not numbered; read ``events()``)."""
        ...

    def record_retriever(self, name: str, state: dict[str, Any] | None = None) -> None: ...

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


class Population(Pages, Protocol):
    """What the ledger, the query protocol and the front ends ask of a population:
    the living entries and the graveyard, their balances, and retrieval.

    ``store.MemoryStore`` holds every entry in memory; ``sqlstore.SqlStore`` reads
    its entries from the database as they are asked for. Neither inherits from the
    other (their shared bookkeeping is ``population.HeldEntries``). The dashboard's
    pages are ``Pages``'. What only some
    populations can do is asked for by name (``getattr``): ``heir_of``,
    ``merge_candidates``, ``token_sets``, ``merge_batches``, ``exact_balances``,
    ``sums_problems``, ``index_problems``, ``trim_cache``.
    """

    max_energy: float
    upkeep: float
    retriever: Retriever
    books: Books
    last_upkeep_charged: float
    #: Top-level keys of the published document the population does not own.
    payload_extra: dict[str, Any]
    #: Ids of entries changed since a durable backend last wrote them.
    dirty: set[str]

    def add(self, entry: MemoryEntry) -> MemoryEntry: ...

    def get(self, entry_id: str) -> MemoryEntry | None: ...

    def get_dead(self, entry_id: str) -> MemoryEntry | None: ...

    def alive(self) -> list[MemoryEntry]: ...

    def graveyard(self) -> list[MemoryEntry]: ...

    def dead_count(self) -> int: ...

    def __len__(self) -> int: ...

    def __contains__(self, entry_id: object) -> bool: ...

    def retrieve(
        self,
        query: str,
        k: int = 3,
        *,
        half_life: float | None = None,
        now_cycle: int | None = None,
        kind: EntryKind | str | None = None,
        source: str | None = None,
    ) -> list[tuple[MemoryEntry, float]]: ...

    def now_cycle(self) -> int: ...

    def similarity(self, a: MemoryEntry, b: MemoryEntry) -> float: ...

    def credit(self, entry_id: str, amount: float, cycle: int) -> None: ...

    def set_energy(self, entry_id: str, energy: float, reason: str = "adjust") -> None: ...

    def charge_upkeep(
        self, protect: Iterable[str] = (), scale: Mapping[str, float] | None = None
    ) -> list[MemoryEntry]: ...

    def bury(self, entry_id: str, reason: str = "burial") -> None: ...

    def merge_into(self, heir: MemoryEntry, member_ids: Iterable[str]) -> float: ...

    def ticks_to_starvation(
        self, entry: MemoryEntry, scale: Mapping[str, float] | None = None
    ) -> float | None: ...

    def total_energy(self) -> float: ...

    def energy_share_by_kind(self) -> dict[str, float]: ...

    def to_payload(self) -> dict[str, Any]: ...
