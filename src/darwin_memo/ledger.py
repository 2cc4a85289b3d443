"""The Ledger: decide now, settle when the measurement lands, tick on your cadence.

Real outcomes arrive late. ``decide`` answers from memory and hands back a
ticket naming the entries behind the answer; ``settle`` pays the measured delta
along that provenance whenever it arrives; ``tick`` charges upkeep, buries the
dead, expires stale tickets at delta zero and merges near-duplicates.

Entries named by an open ticket are **escrowed**: they keep paying upkeep (and
may go negative) but cannot be buried, merged or forgotten until their verdict
lands, so an outcome can never arrive after the execution.

Every operation appends events to the journal (see ``backends.journal``) and notes to the
life story of each entry it touched. A ledger opened on a path with
``Ledger.open`` is durable: each operation is one transaction against the
store's backend (SQLite by default, or the published JSON file format), which
first brings this process's view up to date with what other processes wrote.
A ledger built on an in-memory ``MemoryStore`` behaves like the published one:
nothing is written until ``save``.

At about 1,300 lines this module is long on purpose: it is the published ``Ledger``
facade, and each of its operations (decide, settle, abandon, tick, add, import, forget,
pin) is one transaction whose validation, escrow checks, credit and notes must be read
together to see that the books balance. The parts that stand alone live elsewhere: the
rules in ``economy``, the records in ``records``, storage behind ``backends.interface``,
the journal in ``backends.journal``, verification in ``replay``.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
from _thread import RLock, get_ident
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence

from . import collector
from .aliases import keyword_aliases
from .answer.protocol import ProtocolAnswer, QueryProtocol
from .backends.interface import Loaded, Population, Refreshed, View
from .backends.journal import EVENT_LOG_KEEP, EVENT_LOG_MAX_BYTES, EventLog, event_log_paths
from .economy.config import SurvivalConfig
from .economy.lifecycle import advance_lifecycle, assign_credit
from .economy.rules import MAX_MAGNITUDE
from .errors import DarwinMemoError
from .records.entry import EntryKind, MemoryEntry, utc_now_iso
from .records.ticket import Changes, Ticket, TicketSource, new_ticket_id
from .retrieval.simjoin import merge_groups
from .store import MemoryStore

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any, TypeVar

    _R = TypeVar("_R")

    from .backends import Backend
    from .retrieval.protocols import Retriever


__all__ = [
    "DEFAULT_PROBATION",
    "EVENT_LOG_KEEP",
    "EVENT_LOG_MAX_BYTES",
    "HISTORY_CAP",
    "MAX_ANSWER_CHARS",
    "MAX_QUERY_CHARS",
    "Ledger",
    "LedgerInputError",
    "Ticket",
    "event_log_paths",
    "new_ticket_id",
    "note_text",
]

DEFAULT_PROBATION = 3
#: Notes kept per entry in memory (durable backends keep every note).
HISTORY_CAP = 100
MAX_QUERY_CHARS = 64 * 1024
MAX_QUESTION_CHARS = 64 * 1024
MAX_ANSWER_CHARS = 1024 * 1024
DEFAULT_EXPIRE_AFTER = 50


#: The ``settle_rejected`` detail of a delta beyond ``economy.rules.MAX_MAGNITUDE``.
_BEYOND_LIMIT = f"delta beyond the limit of {MAX_MAGNITUDE:g} either way"


class LedgerInputError(DarwinMemoError, ValueError):
    """An argument to a ledger operation was refused; nothing changed."""


@keyword_aliases(note="event")
def note_text(event: Any) -> str:
    """The display text of a history note (old stores may hold bare strings)."""
    if isinstance(event, dict):
        return str(event.get("text", ""))
    return str(event)


def _signed(x: float) -> str:
    # % formats a float as f"{x:+.3f}" does, in about half the time
    text = ("%+.3f" % x).rstrip("0").rstrip(".")  # noqa: UP031
    return "+0" if text in ("+", "-", "-0", "+0") else text


def _delta_text(x: float) -> str:
    return "%+g" % x  # noqa: UP031  (f"{x:+g}", faster)


class _SettleNote(tuple):  # type: ignore[type-arg]
    """A settlement's history note in an in-memory ledger, kept as its parts
    ``(tick, ts, credit, delta, detail, ticket)`` until something reads it
    (``_note_dict``): formatting the credit was most of what a settle cost there."""

    __slots__ = ()

    def as_dict(self) -> dict[str, Any]:
        tick, stamp, credit, delta, detail, ticket = self
        suffix = f", {detail}" if detail else ""
        return {
            "tick": tick,
            "ts": stamp,
            "text": f"tick {tick}: credit {_signed(credit)} "
            f"(measured delta {_delta_text(delta)}{suffix})",
            "event": "settle",
            "ticket": ticket,
            "credit": round(credit, 6),
            "delta": delta,
            "detail": detail,
        }


def _note_dict(note: Any) -> Any:
    """A history note as it is read and written: a settlement's kept in parts becomes
    its object; any other is as kept (an object, or a bare string from an old store)."""
    return note.as_dict() if type(note) is _SettleNote else note


def _reads(method: Callable[..., _R]) -> Callable[..., _R]:
    """A read made outside a transaction: a driver's error (a damaged page, a lock)
    becomes the store's own error, as inside one (``Backend.translate``)."""

    @functools.wraps(method)
    def reading(self: Ledger, *args: Any, **kwargs: Any) -> _R:
        try:
            return method(self, *args, **kwargs)
        except Exception as exc:
            backend = self.backend
            error = backend.translate(exc) if backend is not None else None
            if error is None:
                raise
            raise error from None

    return reading


class _JournalOp:
    """An in-memory ledger's operation: its events go to the journal (if any) on success.

    A plain context manager rather than a generator one: a settle in memory is a few
    dozen microseconds, and the generator machinery was a tenth of it."""

    __slots__ = ("ledger", "relaxed")

    def __init__(self, ledger: Ledger, relaxed: bool) -> None:
        self.ledger = ledger
        self.relaxed = relaxed

    def __enter__(self) -> Changes:
        ledger = self.ledger
        ledger._lock.acquire()
        try:
            changes = Changes(relaxed=self.relaxed)
            ledger._changes = changes
            ledger._changes_thread = get_ident()
            ledger._begin_journal(changes)
        except BaseException:
            self._end()
            raise
        return changes

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        ledger = self.ledger
        try:
            changes = ledger._changes
            if exc_type is None and ledger.event_log is not None and changes and changes.events:
                ledger.event_log.append(changes.events)
        finally:
            self._end()

    def _end(self) -> None:
        ledger = self.ledger
        ledger._changes = None
        ledger._changes_thread = None
        ledger.store.dirty.clear()
        ledger._lock.release()


class Ledger:
    """Tickets, escrow, expiry, ticks and the journal over a ``MemoryStore``."""

    def __init__(
        self,
        store: MemoryStore,
        protocol: QueryProtocol | None = None,
        config: SurvivalConfig | None = None,
        resource_scale: float | None = None,
        event_log: str | Path | None = None,
        event_log_max_bytes: int = EVENT_LOG_MAX_BYTES,
        event_log_keep: int = EVENT_LOG_KEEP,
    ) -> None:
        self.store: Population = store
        self.config = config if config is not None else SurvivalConfig()
        scale = resource_scale if resource_scale is not None else self.config.resource_scale
        scale = 1.0 if scale is None else float(scale)
        if not math.isfinite(scale) or scale <= 0:
            raise LedgerInputError(f"resource_scale must be a positive number, got {scale!r}")
        self.resource_scale = scale
        self.protocol = (
            protocol
            if protocol is not None
            else QueryProtocol(store, conflict_threshold=self.config.merge_threshold)
        )
        self.tick_count = 0
        self.damaged: set[str] = set()
        self._pending_now: dict[str, Ticket] = {}
        self._escrow_now: Counter[str] = Counter()
        # A store's open tickets may be read when first needed (``_set_pending``).
        self._pending_source: TicketSource | None = None
        self._pending_deferred: list[Ticket] = []
        self._pending_closed: set[str] = set()
        self._history: dict[str, list[Any]] = {}
        self.event_log = (
            EventLog(event_log, event_log_max_bytes, event_log_keep)
            if event_log is not None
            else None
        )
        self.backend: Backend | None = None
        self._changes: Changes | None = None
        self._changes_thread: int | None = None  # the thread whose operation it is
        self._lock = RLock()
        #: Set when an operation failed mid-way: the next one reloads the view.
        self._stale = False
        #: Whether the journal must open with a snapshot of the current balances.
        self._needs_snapshot = (
            event_log is not None
            and not any(p.exists() for p in event_log_paths(event_log, event_log_keep))
            and (len(store) > 0 or store.dead_count() > 0)
        )

    # -- opening durable stores ---------------------------------------------

    @classmethod
    def open(
        cls,
        path: str | Path,
        *,
        config: SurvivalConfig | None = None,
        resource_scale: float | None = None,
        create: bool = True,
        backend: str | None = None,
        lock_timeout: float | None = None,
        retriever: str | Retriever | None = None,
    ) -> Ledger:
        """A durable ledger on a store path (SQLite by default; ``.json`` = published format;
        a ``postgresql://...?store=NAME`` URL = a PostgreSQL store).

        ``create=False`` raises ``StoreNotFound`` for a missing store instead of
        creating it. See ``backends.open_backend`` for how a path picks its format.

        ``retriever`` is ``"lexical"``, ``"hybrid"``, ``"semantic"`` or a retriever
        object. A named choice is recorded in the store on first use, and a later open
        without one searches with the recorded retriever (``darwin_memo.retrieval.named``);
        a different named choice than the recorded one raises ``RetrieverMismatch``.
        """
        from .backends import open_backend
        from .retrieval.named import make_retriever, mismatch, resolve_retriever

        name, chosen = resolve_retriever(retriever)  # a bad name fails before opening
        be = open_backend(path, kind=backend, create=create, lock_timeout=lock_timeout)

        def pick(recorded: str | None) -> Retriever | None:
            """The retriever to index with, chosen once the store's record is read (so
            the population is read once, indexed by the right one)."""
            if name is not None and recorded is not None and recorded != name:
                from .backends.postgres import shown

                raise mismatch(shown(path), str(recorded), name)
            if chosen is None and recorded not in (None, "lexical"):
                return make_retriever(str(recorded))
            return chosen

        try:
            ledger = cls(
                MemoryStore(retriever=chosen), config=config, resource_scale=resource_scale
            )
            ledger.backend = be
            loaded = be.load(pick)
            ledger._apply_loaded(loaded)
            if name is not None and loaded.recorded_retriever is None:
                be.record_retriever(name)
        except BaseException:
            be.close()
            raise
        return ledger

    def close(self) -> None:
        if self.backend is not None:
            self.backend.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ------------------------------------------------------------

    def _view(self) -> View:
        """What the backend needs to know of this ledger's view to bring it up to date."""
        return View(
            retriever=self.store.retriever,
            stale=self._stale,
            tickets_read=self._pending_source is None,
        )

    def _apply_loaded(self, loaded: Loaded) -> None:
        """Adopt a whole view a backend read."""
        store = loaded.store
        self.store = store
        self.protocol.store = store
        self.tick_count = loaded.tick_count
        self.damaged = loaded.damaged
        self._set_pending(loaded.tickets)
        if loaded.history is not None:
            self._history = loaded.history
        self._needs_snapshot = loaded.needs_snapshot
        self._stale = False

    def _apply_refresh(self, seen: Loaded | Refreshed | None) -> None:
        """Adopt what a backend found changed since its last view (or a whole new one)."""
        if seen is None:
            return
        if isinstance(seen, Loaded):
            self._apply_loaded(seen)
            return
        damaged = self.damaged
        for entry_id, flag in seen.damaged.items():
            if flag:
                damaged.add(entry_id)
            else:
                damaged.discard(entry_id)
        if seen.tickets is not None and self._pending_source is None:
            for ticket_id, ticket in seen.tickets:
                self._close_ticket(ticket_id)
                if ticket is not None:
                    self._open_ticket(ticket)
        self.tick_count = seen.tick_count

    def reload(self, retriever: Retriever | None = None) -> None:
        """Read a durable store whole again, its population indexed by ``retriever``
        (None: the one it has now). ``set-retriever`` uses it to index anew."""
        if self.backend is None:
            raise LedgerInputError("an in-memory ledger has no store to read again")
        chosen = retriever if retriever is not None else self.store.retriever
        with self._lock:
            try:
                self._apply_loaded(self.backend.load(lambda _recorded: chosen))
            except BaseException:
                self._stale = True
                raise

    def _set_pending(self, tickets: Iterable[Ticket] | TicketSource) -> None:
        """The open tickets, or a ``TicketSource`` that reads them when they are needed.

        A one-shot ``decide`` only adds a ticket and a ``settle`` closes one, so a store
        with thousands of open tickets need not parse them all for either: with a
        source, tickets opened or closed here before the first full read are kept aside
        and applied to what it returns (the store is the truth, so a ticket both read
        and kept aside counts once). After each commit the store has them.
        """
        self._pending_now = {}
        self._escrow_now = Counter()
        self._pending_deferred = []
        self._pending_closed = set()
        if callable(tickets):
            self._pending_source = tickets
            return
        self._pending_source = None
        for t in tickets:
            self._open_ticket(t)

    def _pending_loaded(self) -> bool:
        return self._pending_source is None

    def _load_pending(self) -> None:
        source = self._pending_source
        if source is None:
            return
        tickets = list(source())  # may raise: then nothing changed
        deferred, closed = self._pending_deferred, self._pending_closed
        self._pending_source, self._pending_deferred, self._pending_closed = None, [], set()
        for t in tickets:
            if t.id not in closed:
                self._open_ticket(t)
        for t in deferred:
            if t.id not in self._pending_now and t.id not in closed:
                self._open_ticket(t)

    def _unread(self, **where: str) -> Iterator[Ticket]:
        """Open tickets matching ``where`` while the full set is unread (see the source):
        the store's, parsed as reached, then those kept aside; none closed here."""
        assert self._pending_source is not None
        closed = self._pending_closed
        for t in itertools.chain(self._pending_source(**where), self._pending_deferred):
            if t.id not in closed:
                yield t

    def _unread_tickets(self, **where: str) -> dict[str, Ticket]:
        """``_unread`` by id (a ticket both read and kept aside counts once)."""
        return {t.id: t for t in self._unread(**where)}

    @property
    def _pending(self) -> dict[str, Ticket]:
        """Open tickets by id (read from the store on first use, see ``_set_pending``)."""
        if self._pending_source is not None:
            self._load_pending()
        return self._pending_now

    @property
    def _escrow(self) -> Counter[str]:
        """How many open tickets name each entry."""
        if self._pending_source is not None:
            self._load_pending()
        return self._escrow_now

    def _escrowed(self, entry_id: str) -> bool:
        """Whether an open ticket names ``entry_id`` (reads only the tickets that might)."""
        if self._pending_source is None:
            return entry_id in self._escrow_now
        # The store's rows naming it are parsed only until one does.
        return any(entry_id in t.provenance for t in self._unread(naming=entry_id))

    def _open_ticket(self, ticket: Ticket) -> None:
        if self._pending_source is not None:
            self._pending_deferred.append(ticket)
            return
        self._pending_now[ticket.id] = ticket
        self._escrow_now.update(set(ticket.provenance))

    def _close_ticket(self, ticket_id: str) -> Ticket | None:
        if self._pending_source is not None:  # read just this one
            ticket = self._unread_tickets(ticket_id=ticket_id).get(ticket_id)
            if ticket is not None:
                self._pending_deferred = [t for t in self._pending_deferred if t.id != ticket_id]
                self._pending_closed.add(ticket_id)
            return ticket
        ticket = self._pending.pop(ticket_id, None)
        if ticket is not None:
            escrow = self._escrow
            for i in set(ticket.provenance):  # what Counter.subtract, then dropping <= 0, does
                left = escrow[i] - 1
                if left > 0:
                    escrow[i] = left
                else:
                    escrow.pop(i, None)
        return ticket

    def escrowed(self) -> set[str]:
        """Ids named by any pending ticket."""
        return set(self._escrow)

    def _op(self, *, relaxed: bool = False) -> contextlib.AbstractContextManager[Changes]:
        """One operation = one transaction (durable) or one journal append (in memory)."""
        changes = self._changes
        if changes is not None and self._changes_thread == get_ident():
            return contextlib.nullcontext(changes)  # nested: part of the enclosing operation
        if self.backend is None:
            return _JournalOp(self, relaxed)
        return self._transaction(relaxed)

    @contextlib.contextmanager
    def _transaction(self, relaxed: bool) -> Iterator[Changes]:
        """A durable ledger's operation: one transaction of its backend. When the body
        or the commit fails, the view may hold what was not written: the next
        operation reads the store again."""
        assert self.backend is not None
        with self._lock:
            changes = Changes(relaxed=relaxed)
            self._changes = changes
            self._changes_thread = get_ident()
            try:
                try:
                    with self.backend.transaction(changes, self._view()) as seen:
                        self._apply_refresh(seen)
                        self._begin_journal(changes)
                        self.store.dirty.clear()
                        yield changes
                        changes.touched |= self.store.dirty
                        changes.tick_count = self.tick_count
                        changes.damaged = self.damaged
                        changes.payload = self.to_payload
                except BaseException:
                    self._stale = True
                    raise
                # Committed: tickets opened or closed before the open tickets were
                # read are in the store now, and the store is the truth (another
                # process may settle them next).
                self._pending_deferred.clear()
                self._pending_closed.clear()
            finally:
                self._changes = None
                self._changes_thread = None
                self.store.dirty.clear()

    def _in_op(self) -> bool:
        """Whether this thread is inside an operation (another thread's operation is
        waited for on the lock, not joined)."""
        return self._changes is not None and self._changes_thread == get_ident()

    def refresh(self) -> None:
        """See what other processes wrote to a durable store (reads do this themselves)."""
        self._refresh()

    def _refresh(self) -> None:
        """Bring a durable ledger's view up to date before a read."""
        if self.backend is not None and not self._in_op():
            with self._lock:
                try:
                    seen = self.backend.refresh(self._view())
                except BaseException:
                    self._stale = True
                    raise
                self._apply_refresh(seen)

    def _begin_journal(self, changes: Changes) -> None:
        """Open the journal with a snapshot when it does not cover the store's past."""
        if not self._needs_snapshot:
            return
        self._needs_snapshot = False
        self._emit(changes, "snapshot", **self.snapshot())

    @property
    def needs_snapshot(self) -> bool:
        """Whether the journal does not cover the store's past yet (the next write
        records a snapshot of the balances to replay from)."""
        return self._needs_snapshot

    def snapshot(self) -> dict[str, Any]:
        """Balances, flags and open tickets: where a replay of the journal may start."""
        rows = [[e.id, e.energy, True, e.pinned] for e in self.store.alive()]
        rows += [[e.id, e.energy, False, e.pinned] for e in self.store.graveyard()]
        return {
            "tick_count": self.tick_count,
            "max_energy": self.store.max_energy,
            "entries": rows,
            "pending": [[t.id, t.provenance] for t in self._pending.values()],
        }

    @contextlib.contextmanager
    def operation(self) -> Iterator[Callable[..., None]]:
        """One operation for a layer built on the ledger (the organic layer): a
        transaction, or one journal append in memory, that yields ``record(event,
        **payload)``. Each recorded event is journalled with the tick and time, and a
        durable backend applies the events it knows in the same transaction."""
        with self._op() as changes:
            yield functools.partial(self._emit, changes)

    def _emit(self, changes: Changes, event: str, **payload: Any) -> None:
        changes.events.append(
            {"event": event, "tick": self.tick_count, "ts": utc_now_iso(), **payload}
        )

    def _note(self, changes: Changes, entry_id: str, text: str, event: str, **extra: Any) -> None:
        note = {"tick": self.tick_count, "ts": utc_now_iso(), "text": text, "event": event, **extra}
        self._keep_note(changes, entry_id, note)

    def _keep_note(self, changes: Changes, entry_id: str, note: dict[str, Any]) -> None:
        """Add a history note to the entry's history (where kept in memory) and to the
        operation's writes."""
        if self.backend is None or self.backend.history_in_memory:
            self._keep_history(entry_id, note)
        changes.notes.append((entry_id, note))
        changes.touched.add(entry_id)

    def _keep_history(self, entry_id: str, note: Any) -> None:
        """Add a note to the history kept in memory (an in-memory or JSON ledger's)."""
        notes = self._history.setdefault(entry_id, [])
        notes.append(note)
        if len(notes) > HISTORY_CAP:  # keep the birth note; drop the oldest after it
            del notes[1 : len(notes) - HISTORY_CAP + 1]

    # -- validation -------------------------------------------------------------

    @staticmethod
    def _text(value: Any, what: str, limit: int, *, allow_empty: bool = False) -> str:
        if not isinstance(value, str):
            raise LedgerInputError(f"{what} must be text, got {type(value).__name__}")
        if "\x00" in value:
            raise LedgerInputError(f"{what} contains a NUL character; pass plain text")
        if len(value) > limit:
            raise LedgerInputError(
                f"{what} is {len(value):,} characters long; the limit is {limit:,}"
            )
        if not allow_empty and not value.strip():
            raise LedgerInputError(f"{what} is empty")
        return value

    # -- decide / settle --------------------------------------------------------

    def decide(
        self,
        query: str,
        k: int = 3,
        *,
        half_life: float | None = None,
        kind: EntryKind | str | None = None,
        source: str | None = None,
    ) -> Ticket:
        """Answer ``query`` from memory; the ticket is pending only if memory spoke."""
        self._text(query, "the query", MAX_QUERY_CHARS)
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise LedgerInputError(f"k must be a positive integer, got {k!r}")
        if half_life is not None and (not math.isfinite(half_life) or half_life <= 0):
            raise LedgerInputError(f"half_life must be a positive number, got {half_life!r}")
        if kind is not None:
            try:
                kind = EntryKind(kind)
            except ValueError:
                known = ", ".join(x.value for x in EntryKind)
                raise LedgerInputError(f"unknown kind {kind!r} (known kinds: {known})") from None
        with self._op(relaxed=True) as changes:
            answer = self.protocol.answer(
                query, k, half_life=half_life, now_cycle=self.tick_count, kind=kind, source=source
            )
            answer, withheld = self._enforce_probation(answer)
            ticket = Ticket(
                query=query,
                answer=(answer.annotated_text or answer.text) if answer.text else "",
                deciding_entry=answer.deciding_entry,
                supporting_entries=list(answer.supporting_entries),
                born_tick=self.tick_count,
            )
            silent = not ticket.provenance or not answer.text
            if silent:
                ticket.deciding_entry, ticket.supporting_entries, ticket.answer = None, [], ""
            else:
                self._open_ticket(ticket)
                changes.opened.append(ticket)
            payload: dict[str, Any] = {
                "ticket": None if silent else ticket.id,
                "query": query,
                "silent": silent,
                "provenance": ticket.provenance,
            }
            if withheld:
                payload["withheld"] = withheld
            attribution = getattr(answer, "attribution", "local")
            if attribution != "local":  # LLM mode: cited, none, fallback, unparsed
                payload["attribution"] = attribution
            self._emit(changes, "decide", **payload)
        return ticket

    def _enforce_probation(self, answer: ProtocolAnswer) -> tuple[ProtocolAnswer, list[str]]:
        decider = answer.deciding_entry
        supporters = list(answer.supporting_entries)
        entry = self.store.get(decider) if decider else None
        if decider is not None and entry is not None and not entry.may_decide:
            supporters.insert(0, decider)
            decider = None
        consulted = supporters + ([decider] if decider else [])
        if consulted and decider is None:
            entries = [self.store.get(i) for i in consulted]
            if all(e is not None and not e.may_decide for e in entries):
                attribution = getattr(answer, "attribution", "local")
                return ProtocolAnswer(text="", attribution=attribution), consulted
        answer.deciding_entry, answer.supporting_entries = decider, supporters
        return answer, []

    @_reads
    def pending(self) -> list[Ticket]:
        self._refresh()
        return list(self._pending.values())

    def settle(self, ticket_id: str, delta: float, detail: str = "") -> bool:
        """Pay a measured ``delta`` along the ticket's provenance. False if it did not land."""
        if not isinstance(ticket_id, str):
            raise LedgerInputError("the ticket id must be text")
        detail = self._text(detail, "the detail", MAX_QUERY_CHARS, allow_empty=True)
        if isinstance(delta, bool) or not isinstance(delta, (int, float)):
            raise LedgerInputError(f"delta must be a number, got {type(delta).__name__}")
        with self._op() as changes:
            return self._settle(changes, ticket_id, float(delta), detail)

    def _settle(self, changes: Changes, ticket_id: str, delta: float, detail: str) -> bool:
        if not math.isfinite(delta):
            self._emit(changes, "settle_rejected", ticket=ticket_id, detail="non-finite delta")
            return False
        if abs(delta) > MAX_MAGNITUDE:  # no measurement is this large: a typo or an attack
            self._emit(changes, "settle_rejected", ticket=ticket_id, detail=_BEYOND_LIMIT)
            return False
        ticket = self._close_ticket(ticket_id)
        if ticket is None:
            self._emit(changes, "settle_dropped", ticket=ticket_id, delta=delta, detail=detail)
            return False
        changes.closed.append(ticket.id)
        applied = assign_credit(
            self.store,
            ticket.deciding_entry,
            ticket.supporting_entries,
            delta,
            self.resource_scale,
            self.config,
            self.tick_count,
        )
        tick = self.tick_count
        stamp = utc_now_iso()
        if self.backend is None:
            # Kept in memory only, in parts (_SettleNote): read, they are the objects below.
            keep = self._keep_history
            for entry_id, credit in applied:
                if credit < -1e-9:
                    self.damaged.add(entry_id)
                keep(entry_id, _SettleNote((tick, stamp, credit, delta, detail, ticket.id)))
        elif applied:
            # One note per credited entry, the same but for the credit: the shared parts
            # of the text are made once.
            head = f"tick {tick}: credit "
            tail = f" (measured delta {_delta_text(delta)}{', ' + detail if detail else ''})"
            last = None  # the supporters' credits are equal: their text is made once
            for entry_id, credit in applied:
                if credit < -1e-9:
                    self.damaged.add(entry_id)
                if last is None or credit != last or not credit:  # (-0.0 == 0.0)
                    last, text, rounded = credit, head + _signed(credit) + tail, round(credit, 6)
                note = {
                    "tick": tick,
                    "ts": stamp,
                    "text": text,
                    "event": "settle",
                    "ticket": ticket.id,
                    "credit": rounded,
                    "delta": delta,
                    "detail": detail,
                }
                self._keep_note(changes, entry_id, note)
        denied: set[str] = set()
        counted = _probation_credits(self.store, ticket, applied)
        for entry_id, what in advance_lifecycle(self.store, counted, delta, ticket.deciding_entry):
            changes.touched.add(entry_id)
            if what == "graduated":
                self._note(
                    changes,
                    entry_id,
                    f"graduated from probation at tick {self.tick_count}: may decide from here",
                    "graduated",
                    lifecycle="probation",
                )
                self._emit(changes, "graduate", entry=entry_id, lifecycle="probation")
            elif what == "admitted":
                self._note(
                    changes,
                    entry_id,
                    f"admitted at tick {self.tick_count}: juvenile window complete, "
                    "full deciding credit from here",
                    "graduated",
                    lifecycle="admission",
                )
                self._emit(changes, "graduate", entry=entry_id, lifecycle="admission")
            else:
                denied.add(entry_id)
                self.damaged.add(entry_id)
                self._note(
                    changes,
                    entry_id,
                    f"admission denied at tick {self.tick_count}: negative outcome "
                    f"({_delta_text(delta)}) while deciding inside the juvenile window",
                    "admission_denied",
                    delta=delta,
                    ticket=ticket.id,
                )
                self._emit(changes, "admission_denied", entry=entry_id, delta=delta)
        buried: list[str] = []
        floored: list[str] = []
        for entry_id in dict.fromkeys(ticket.provenance):
            entry = self.store.get(entry_id)
            if entry is None:
                continue
            if entry.pinned:
                if entry.energy < 0:
                    self.store.set_energy(entry_id, 0.0)
                    floored.append(entry_id)
                continue
            if not entry.alive and (not self._escrowed(entry_id) or entry_id in denied):
                self.store.bury(entry_id)
                buried.append(entry_id)
                cause = "executed" if entry_id in self.damaged else "starved"
                self._note(
                    changes,
                    entry_id,
                    f"buried at tick {self.tick_count} on settle",
                    "buried",
                    via="settle",
                    cause=cause,
                )
        event: dict[str, Any] = {  # what _emit(changes, "settle", ...) makes, in one dict
            "event": "settle",
            "tick": tick,
            "ts": stamp,
            "ticket": ticket.id,
            "delta": delta,
            "detail": detail,
            "applied": [{"entry": i, "credit": c} for i, c in applied],
            "buried": buried,
        }
        if floored:
            event["floored"] = floored
        if denied:
            event["denied"] = sorted(denied)
        changes.events.append(event)
        return True

    def abandon(self, ticket_id: str) -> bool:
        """Release a ticket you chose not to act on (a settlement at delta zero)."""
        if not isinstance(ticket_id, str):
            raise LedgerInputError("the ticket id must be text")
        with self._op() as changes:
            if ticket_id not in self._pending:
                self._emit(
                    changes,
                    "settle_dropped",
                    ticket=ticket_id,
                    delta=0.0,
                    detail="abandon: ticket not pending",
                )
                return False
            return self._settle(changes, ticket_id, 0.0, "abandoned: not acted on")

    # -- population changes -----------------------------------------------------

    def add(self, question: str, answer: str, source: str = "agent") -> MemoryEntry:
        """Write a lesson (an ``experience`` entry born at this tick)."""
        question = self._text(question, "the question", MAX_QUESTION_CHARS).strip()
        answer = self._text(answer, "the answer", MAX_ANSWER_CHARS).strip()
        source = self._text(source, "the source", 1024)
        window = max(0, self.config.admission_window)
        with self._op() as changes:
            entry = MemoryEntry(
                question=question,
                answer=answer,
                kind=EntryKind.EXPERIENCE,
                sources=[source],
                born_cycle=self.tick_count,
                juvenile=window,
            )
            self.store.add(entry)
            extra = f", juvenile window {window}" if window else ""
            self._note(
                changes,
                entry.id,
                f"born at tick {self.tick_count} (source {source}, stake {entry.energy:g}{extra})",
                "birth",
                source=source,
                stake=entry.energy,
            )
            self._emit(
                changes,
                "add",
                entry=entry.id,
                question=question,
                answer=answer,
                source=source,
                stake=entry.energy,
                juvenile=window,
            )
        return entry

    def import_entries(
        self, entries: Iterable[MemoryEntry], source: str, probation: int = DEFAULT_PROBATION
    ) -> list[MemoryEntry]:
        """Adopt foreign entries on probation (idempotent; the executed stay dead).

        Each gets a fresh stake of 1.0 and must earn ``probation`` net-positive
        settlements before it may decide. Unlike the published package the
        original ``recorded_ts`` is kept: old advice is not shown as new.
        """
        source = self._text(source, "the import source", 4096)
        probation = max(0, int(probation))
        imported: list[MemoryEntry] = []
        with self._op() as changes:
            stamp = utc_now_iso()
            for foreign in entries:
                if not foreign.alive:
                    continue
                if self.store.get(foreign.id) is not None or self.store.get_dead(foreign.id):
                    continue
                entry = MemoryEntry(
                    question=foreign.question,
                    answer=foreign.answer,
                    kind=foreign.kind,
                    sources=list(foreign.sources),
                    born_cycle=self.tick_count,
                    recorded_ts=foreign.recorded_ts,
                    probation=probation,
                    imported_from=source,
                    imported_at=stamp,
                    id=foreign.id,
                )
                self.store.add(entry)
                imported.append(entry)
                self._note(
                    changes,
                    entry.id,
                    f"imported at tick {self.tick_count} from {source} "
                    f"(probation {probation}, stake {entry.energy:g})",
                    "import",
                    source=source,
                    stake=entry.energy,
                )
                self._emit(
                    changes,
                    "import",
                    entry=entry.id,
                    source=source,
                    probation=probation,
                    stake=entry.energy,
                    question=entry.question,
                    answer=entry.answer,
                    kind=entry.kind.value,
                )
        return imported

    def _living(self, entry_id: str) -> MemoryEntry | None:
        entry = self.store.get(entry_id)
        return entry if entry is not None and entry.alive else None

    def pin(self, entry_id: str) -> bool:
        """Exempt a living entry from starvation, merges and forgetting (idempotent)."""
        return self._set_pinned(entry_id, True, "culling and merges disabled")

    def unpin(self, entry_id: str) -> bool:
        """Return a living entry to survival pressure (idempotent)."""
        return self._set_pinned(entry_id, False, "survival pressure resumes")

    def _set_pinned(self, entry_id: str, pinned: bool, why: str) -> bool:
        word = "pinned" if pinned else "unpinned"
        with self._op() as changes:
            entry = self._living(entry_id)
            if entry is None:
                return False
            if entry.pinned != pinned:
                entry.pinned = pinned
                self._note(changes, entry_id, f"{word} at tick {self.tick_count}: {why}", word)
                self._emit(changes, "pin" if pinned else "unpin", entry=entry_id)
            return True

    def forget(self, entry_id: str) -> str:
        """Bury an entry now: ``"buried"``, or why not (``missing/escrowed/pinned``)."""
        with self._op() as changes:
            if entry_id in self._escrow and self.store.get(entry_id) is not None:
                self._emit(changes, "forget_refused", entry=entry_id, reason="escrowed")
                return "escrowed"
            entry = self.store.get(entry_id)
            if entry is None:
                return "missing"
            if entry.pinned:
                self._emit(changes, "forget_refused", entry=entry_id, reason="pinned")
                return "pinned"
            self.store.bury(entry_id)
            self._note(
                changes,
                entry_id,
                f"buried at tick {self.tick_count} by forget",
                "buried",
                via="forget",
                cause="forgotten",
            )
            self._emit(changes, "forget", entry=entry_id)
            return "buried"

    # -- time ---------------------------------------------------------------------

    def tick(self, expire_after: int | None = DEFAULT_EXPIRE_AFTER) -> dict[str, Any]:
        """Advance one tick: expire stale tickets, charge upkeep, bury, consolidate."""
        if expire_after is not None and (
            isinstance(expire_after, bool) or not isinstance(expire_after, int) or expire_after < 0
        ):
            raise LedgerInputError(f"expire_after must be an integer >= 0, got {expire_after!r}")
        # A tick carries no outside measurement: lost to a power cut, it is only run
        # again (the next tick finds the store as it was), so it does not wait for the disk.
        with contextlib.ExitStack() as bulk, self._op(relaxed=True) as changes:
            self.tick_count += 1
            dead_entries: list[str] = []
            expired = 0
            if expire_after is not None:
                stale = [
                    t.id
                    for t in self._pending.values()
                    if self.tick_count - t.born_tick > expire_after
                ]
                for ticket_id in stale:
                    before = len(changes.events)
                    self._settle(changes, ticket_id, 0.0, "expired unsettled")
                    expired += 1
                    for record in changes.events[before:]:
                        if record["event"] == "settle":
                            record["expired"] = True
                            dead_entries.extend(record["buried"])
            charged_before = self.store.books.totals.get("upkeep", 0.0)
            buried = self.store.charge_upkeep(protect=self.escrowed())
            for entry in buried:
                executed = entry.id in self.damaged
                cause = "executed" if executed else "starved"
                why = (
                    "executed: negative outcomes drained it"
                    if executed
                    else "starved: never earned its upkeep"
                )
                self._note(
                    changes,
                    entry.id,
                    f"died at tick {self.tick_count} ({why}; uses={entry.uses}, "
                    f"last_used_tick={entry.last_used_cycle})",
                    "death",
                    cause=cause,
                    uses=entry.uses,
                    last_used_tick=entry.last_used_cycle,
                )
                dead_entries.append(entry.id)
            upkeep_charged = charged_before - self.store.books.totals.get("upkeep", 0.0)
            merges = []
            every = self.config.consolidate_every
            if every and self.tick_count % every == 0:
                # A consolidation makes (and its notes and writes hold) millions of small
                # containers while the store is in memory: the cyclic collector would walk
                # them again and again, so it waits until the tick is written.
                bulk.enter_context(collector.paused())
                merges = merge_groups(
                    self.store,
                    self.tick_count,
                    self.config.merge_threshold,
                    exclude=self.escrowed(),
                    source_policy=self.config.merge_source_policy,
                    similarity=self.config.merge_similarity,
                )
            stats: dict[str, Any] = {
                "tick": self.tick_count,
                "population": len(self.store),
                "deaths": len(dead_entries),
                "merges": len(merges),
                "pending": len(self._pending),
                "expired": expired,
                "total_energy": _round_energy(self.store.total_energy()),
                "upkeep_charged": round(upkeep_charged, 6),
            }
            self._emit(
                changes,
                "tick",
                **{k: v for k, v in stats.items() if k != "tick"},
                dead_entries=dead_entries,
                upkeep=self.store.upkeep,
            )
            # A durable store keeps no history in memory: the members' notes are made
            # here (what ``_note`` makes; a first consolidation notes hundreds of
            # thousands), one per merge, the same for each member (encoded once).
            durable = self.backend is not None and not self.backend.history_in_memory
            for merge in merges:
                heir = merge.heir
                if durable:
                    text = f"merged into {heir.id} at tick {self.tick_count}"
                    note = {"tick": self.tick_count, "ts": utc_now_iso(), "text": text}
                    note["event"] = "merged"
                    note["heir"] = heir.id
                    changes.notes += [(member, note) for member in merge.members]
                    changes.touched.update(merge.members)
                else:
                    for member in merge.members:
                        self._note(
                            changes,
                            member,
                            f"merged into {heir.id} at tick {self.tick_count}",
                            "merged",
                            heir=heir.id,
                        )
                self._note(
                    changes,
                    heir.id,
                    f"born at tick {self.tick_count} by merging {len(merge.members)} entries "
                    f"({', '.join(merge.members)}), pooled energy {heir.energy:.3f}"
                    + (f", {merge.clipped:.3f} above the cap destroyed" if merge.clipped else ""),
                    "birth",
                    source="merge",
                    stake=heir.energy,
                )
                self._emit(
                    changes,
                    "merge",
                    entry=heir.id,
                    members=list(merge.members),
                    energy=heir.energy,
                    clipped=merge.clipped,
                    question=heir.question,
                )
        return stats

    # -- reading ------------------------------------------------------------------

    @_reads
    def stats(self) -> dict[str, Any]:
        """The published ``ledger stats`` object."""
        self._refresh()
        return {
            "alive": len(self.store),
            "graveyard": self.store.dead_count(),
            "pending_tickets": len(self._pending),
            "total_energy": _round_energy(self.store.total_energy()),
            "energy_share_by_kind": {
                k: round(v, 3) for k, v in self.store.energy_share_by_kind().items()
            },
        }

    @_reads
    def history(self, entry_id: str) -> list[Any]:
        """An entry's notes, oldest first (durable stores keep them all)."""
        if self.backend is not None and not self.backend.history_in_memory:
            return self.backend.history(entry_id)
        self._refresh()
        return [_note_dict(note) for note in self._history.get(entry_id, ())]

    @_reads
    def heir_of(self, entry_id: str) -> MemoryEntry | None:
        """The living or dead entry whose lineage names ``entry_id``."""
        self._refresh()
        lookup = getattr(self.store, "heir_of", None)
        if lookup is not None:
            heir_id = lookup(entry_id)
            return (self.store.get(heir_id) or self.store.get_dead(heir_id)) if heir_id else None
        for entry in list(self.store.alive()) + self.store.graveyard():
            if entry_id in entry.lineage:
                return entry
        return None

    @_reads
    def obituary(self, entry_id: str) -> str:
        """An entry's life story in text, living or dead."""
        self._refresh()
        entry = self.store.get(entry_id) or self.store.get_dead(entry_id)
        heir = self.heir_of(entry_id)
        if entry is None:
            if heir is not None:
                return f"{entry_id}: merged into {heir.id} ({heir.question!r})"
            return f"{entry_id}: unknown to this store"
        energy = entry.energy if abs(entry.energy) >= 5e-4 else 0.0
        lines = [
            f"{entry.id} [{entry.kind.value}] {entry.question!r}",
            f"  energy={energy:.3f} uses={entry.uses} alive={self.store.get(entry_id) is not None}",
        ]
        if heir is not None:
            lines.append(f"  merged into {heir.id}")
        notes = self.history(entry_id)
        lines += [f"  {note_text(n)}" for n in notes]
        if not notes and self.store.get(entry_id) is None and heir is None:
            lines.append(
                "  no credited outcomes on record: starved without ever earning its upkeep"
            )
        return "\n".join(lines)

    @_reads
    def verify(self) -> list[str]:
        """Rebuild every balance from the journal; returns disagreements (empty = sound)."""
        from .replay import verify_ledger

        self._refresh()
        if self.backend is None and self.event_log is None:
            return ["this ledger keeps no journal: pass event_log= or open it with Ledger.open"]
        if self._needs_snapshot:
            return [
                "the journal does not cover the store's current state (it was last written "
                "without one, e.g. by darwin-memo 0.7.1); the next write through this version "
                "records a snapshot to verify from"
            ]
        problems = verify_ledger(self)
        for check in ("sums_problems", "index_problems"):  # SQL stores' sums and index
            found = getattr(self.store, check, None)
            if found is not None:
                problems += found()
        return problems

    def events(self) -> Iterator[dict[str, Any]]:
        """The journal, oldest first."""
        if self.backend is not None:
            return self.backend.events()
        if self.event_log is not None:
            return self.event_log.read()
        return iter(())

    # -- the published single-file persistence ----------------------------------

    def _kept_history(self) -> dict[str, list[Any]]:
        """The notes kept in memory (an in-memory or JSON ledger's), by entry."""
        return {k: [_note_dict(note) for note in v] for k, v in self._history.items()}

    def ledger_block(self) -> dict[str, Any]:
        return {
            "tick_count": self.tick_count,
            "pending": [t.to_dict() for t in self._pending.values()],
            "history": self._kept_history(),
            "damaged": sorted(self.damaged),
        }

    def to_payload(self) -> dict[str, Any]:
        payload = self.store.to_payload()
        block = dict(payload.get("ledger", {})) if isinstance(payload.get("ledger"), dict) else {}
        block.update(self.ledger_block())
        payload["ledger"] = block
        return payload

    def apply_ledger_block(self, block: Any) -> None:
        """Read a ``ledger`` block; malformed parts fall back to defaults (as published)."""
        loaded = Loaded.from_block(self.store, block)
        self.tick_count = loaded.tick_count
        self._set_pending(loaded.tickets)
        self._history = loaded.history if loaded.history is not None else {}
        self.damaged = loaded.damaged

    def save(self, path: str | Path) -> None:
        """Write the store and the ledger block to one JSON file (atomic, locked)."""
        from .backends.jsonfile import save_payload
        from .collector import paused

        with paused():  # a payload is a few small containers per entry
            save_payload(path, self.to_payload())

    @classmethod
    def load(
        cls,
        path: str | Path,
        protocol: QueryProtocol | None = None,
        config: SurvivalConfig | None = None,
        resource_scale: float | None = None,
        event_log: str | Path | None = None,
        retriever: Any = None,
    ) -> Ledger:
        """Read a JSON store file (a plain store gets fresh ledger state)."""
        store = MemoryStore.load(path, retriever=retriever)
        block = store.payload_extra.pop("ledger", {})
        ledger = cls(
            store,
            protocol=protocol,
            config=config,
            resource_scale=resource_scale,
            event_log=event_log,
        )
        ledger.apply_ledger_block(block)
        return ledger


def _probation_credits(
    store: Population, ticket: Ticket, applied: list[tuple[str, float]]
) -> list[tuple[str, float]]:
    """``applied`` as the lifecycle counts it: an entry on probation counts a credit
    only from a ticket no trusted entry decided.

    Such a ticket's answer rested on the entries it names (a model citing several
    snippets, the import among them; ``decide`` demotes a cited import from deciding
    and withholds an answer resting on imports alone), so its outcome measured the
    import's own advice. An import that merely rode along behind another entry's
    decision earned nothing towards trust: its credit counts as zero here (its
    balance keeps it), so it cannot graduate on others' good advice.
    """
    if ticket.deciding_entry is None:
        return applied
    counted = []
    for entry_id, credit in applied:
        entry = store.get(entry_id)
        if entry is not None and entry.probation > 0 and entry_id != ticket.deciding_entry:
            credit = 0.0
        counted.append((entry_id, credit))
    return counted


def _round_energy(x: float) -> float | int:
    value = round(x, 3)
    return 0 if value == 0 else value


def decide_json(ticket: Ticket) -> dict[str, Any]:
    """The published ``ledger decide`` object for a ticket."""
    if not ticket.provenance:
        return {"answer": None, "ticket_id": None, "silent": True}
    return {"answer": ticket.answer, "ticket_id": ticket.id, "silent": False}


def all_entries(ledger: Ledger) -> Sequence[MemoryEntry]:
    return list(ledger.store.alive()) + ledger.store.graveyard()
