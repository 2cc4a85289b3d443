"""The population: living entries, the graveyard, and the energy they hold.

``MemoryStore`` is the published facade. It owns every balance: retrievers rank
relevance and never see energy; the store breaks exact score ties by energy and
that is all energy ever does for retrieval. Every change to a balance made
through the store is posted to ``store.books`` (see ``economy.Books``), so
``store.total_energy() == store.books.balance()`` after any sequence of
operations.

Persistence here is the published JSON store format (``memory.json``), written
atomically and read defensively: a bad entry is reported by id and field, unknown
fields from newer versions are carried through untouched, and nothing non-finite
is ever written.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from . import collector
from .backends import jsonfile
from .backends.files import warn_if_exposed
from .backends.jsonfile import StoreLockedError, store_lock, write_json_atomic
from .backends.population import HeldEntries
from .economy import rules as economy
from .errors import StoreFormatError
from .records.entry import ALIVE_EPSILON, EntryKind, MemoryEntry, read_entry
from .retrieval.lexical import tokenize

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from .retrieval.protocols import Retriever

__all__ = [
    "MIN_UPKEEP_SCALE",
    "LoadProblem",
    "MemoryStore",
    "StoreLockedError",
    "store_lock",
    "tokenize",
    "write_json_atomic",
]

MIN_UPKEEP_SCALE = economy.MIN_UPKEEP_SCALE
#: How many joins and departures ``MemoryStore.population_since`` remembers.
MOVES_KEPT = 4096


@dataclass(frozen=True)
class LoadProblem:
    """One stored record that could not be read (its raw form is kept and written
    back), or one whose balance was out of range and was clamped (``message`` says so)."""

    where: str  # "entries" or "graveyard"
    index: int
    message: str


class MemoryStore(HeldEntries):
    """Living entries plus the graveyard, with upkeep, credit and burial.

    The in-memory population (``backends.interface.Population``): it holds every
    entry. The bookkeeping it shares with the SQL population is ``HeldEntries``'.
    """

    def __init__(
        self,
        max_energy: float = economy.MAX_ENERGY,
        upkeep: float = economy.UPKEEP,
        retriever: Retriever | None = None,
    ) -> None:
        super().__init__(max_energy=max_energy, upkeep=upkeep, retriever=retriever)
        # Raw records we could not read, written back untouched (never dropped).
        self._unreadable: dict[str, list[Any]] = {"entries": [], "graveyard": []}
        self.load_problems: list[LoadProblem] = []
        #: Counts the changes made through this store's methods (an entry joining or
        #: leaving the population, a balance moving): a view of the store (the organic
        #: layer) compares it with the value it last saw to tell whether anything moved.
        self.version = 0
        # (version, id) of the latest joins and departures, oldest first, and the
        # version before which some may be forgotten (``population_since``).
        self._moves: list[tuple[int, str]] = []
        self._moves_floor = 0

    # -- population ---------------------------------------------------------

    def add(self, entry: MemoryEntry) -> MemoryEntry:
        """Add an entry to the population; its energy is posted as its stake."""
        self._hold_new(entry)
        self._moved(entry.id)
        return entry

    def _moved(self, entry_id: str) -> None:
        """Count a change: ``entry_id`` joined or left the population."""
        self.version += 1
        moves = self._moves
        moves.append((self.version, entry_id))
        if len(moves) > 2 * MOVES_KEPT:
            self._moves_floor = moves[-MOVES_KEPT - 1][0]
            del moves[:-MOVES_KEPT]

    def population_since(self, version: int) -> list[str] | None:
        """Ids that joined or left the population after ``version`` (a past ``self.version``).

        Oldest first; an id may appear twice. ``None`` when that is further back than
        the store remembers (its last 4,096 to 8,192 joins and departures) or not a
        version it had: walk ``alive()`` instead. Only changes made through the
        store's methods are counted (not an entry's attributes set directly).
        """
        if version < self._moves_floor or version > self.version:
            return None
        moves = self._moves
        start = bisect_right(moves, version, key=lambda move: move[0])
        return [entry_id for _, entry_id in moves[start:]]

    def _index(self, entry: MemoryEntry) -> None:
        index = getattr(self.retriever, "index", None)
        if index is not None:
            index(entry)

    def _index_many(self, entries: list[MemoryEntry]) -> None:
        many = getattr(self.retriever, "index_many", None)
        if many is not None and type(self)._index is MemoryStore._index:
            many(entries)
        else:
            for entry in entries:
                self._index(entry)

    def get(self, entry_id: str) -> MemoryEntry | None:
        """A member of the population (possibly at <= 0 energy, not yet buried)."""
        return self._population.get(entry_id)

    def alive(self) -> list[MemoryEntry]:
        return list(self._population.values())

    def graveyard(self) -> list[MemoryEntry]:
        return list(self._graveyard.values())

    def get_dead(self, entry_id: str) -> MemoryEntry | None:
        return self._graveyard.get(entry_id)

    def dead_count(self) -> int:
        return len(self._graveyard)

    def __len__(self) -> int:
        return len(self._population)

    def __contains__(self, entry_id: object) -> bool:
        return entry_id in self._population

    # -- retrieval ----------------------------------------------------------

    def retrieve(
        self,
        query: str,
        k: int = 3,
        *,
        half_life: float | None = None,
        now_cycle: int | None = None,
        kind: EntryKind | str | None = None,
        source: str | None = None,
    ) -> list[tuple[MemoryEntry, float]]:
        """Top ``k`` relevant entries with scores, best first.

        ``kind`` and ``source`` narrow the candidates before ranking; ``half_life``
        (ticks) multiplies each qualifying score by a recency weight. Equal scores
        are ordered by energy: the only place energy touches retrieval.
        """
        return self._rank_held(
            query, k, half_life=half_life, now_cycle=now_cycle, kind=kind, source=source
        )

    def now_cycle(self) -> int:
        """The latest tick any living entry has seen (birth or last settlement)."""
        return max(
            (max(e.born_cycle, e.last_used_cycle) for e in self._population.values()),
            default=0,
        )

    # -- economics ----------------------------------------------------------

    def credit(self, entry_id: str, amount: float, cycle: int) -> None:
        """Add ``amount`` (which may be negative) to a living entry, capped at max_energy.

        Counts a use and stamps ``last_used_cycle``. Unknown ids are ignored.
        """
        entry = self._population.get(entry_id)
        if entry is not None:
            self._credit_held(entry, amount, cycle)
            self.version += 1

    def set_energy(self, entry_id: str, energy: float, reason: str = "adjust") -> None:
        """Set a living entry's balance outright, posting the difference."""
        entry = self._population.get(entry_id)
        if entry is None:
            raise KeyError(entry_id)
        self._set_held_energy(entry, energy, reason)
        self.version += 1

    def charge_upkeep(
        self, protect: Iterable[str] = (), scale: Mapping[str, float] | None = None
    ) -> list[MemoryEntry]:
        """Charge one tick of upkeep to everyone; bury the dead (except ``protect``).

        Pinned entries pay but never fall below zero. Protected (escrowed) entries
        pay and may go negative, and are not buried until their verdict lands.
        Returns the buried entries.
        """
        protected = set(protect)
        charged = 0.0
        dead: list[str] = []
        upkeep = self.upkeep
        population = self._population
        for entry in population.values():
            if scale is None:
                cost = upkeep
            else:
                factor = scale.get(entry.id, 1.0)
                if not math.isfinite(factor):
                    factor = 1.0
                cost = upkeep * min(1.0, max(MIN_UPKEEP_SCALE, factor))
            before = entry.energy
            after = before - cost
            if entry.pinned:
                if after < 0.0:
                    after = 0.0
            elif after <= ALIVE_EPSILON and entry.id not in protected:
                dead.append(entry.id)
            entry.energy = after
            charged += before - after
        self.dirty.update(population)
        self.version += 1
        self.books.post("upkeep", -charged)
        self.last_upkeep_charged = round(charged, 6)
        buried = [self._graveyard_entry(i) for i in dead]
        return buried

    def _graveyard_entry(self, entry_id: str) -> MemoryEntry:
        self.bury(entry_id)
        return self._graveyard[entry_id]

    def bury(self, entry_id: str, reason: str = "burial") -> None:
        """Move an entry to the graveyard (its energy clamps to at most 0). Enforces nothing."""
        if self._bury_held(entry_id, reason) is not None:
            self._moved(entry_id)

    def merge_into(self, heir: MemoryEntry, member_ids: Iterable[str]) -> float:
        """Replace ``member_ids`` by ``heir``, pooling their balances (capped).

        The members are buried with a ``merge`` posting, the heir enters holding
        their pooled energy, and whatever exceeds ``max_energy`` is posted as
        ``cap``. Returns the energy clipped (0.0 when the pool fits under the cap).
        """
        clipped = self._merge_held(heir, member_ids)
        self._moved(heir.id)
        return clipped

    def total_energy(self) -> float:
        return math.fsum([e.energy for e in self._population.values()])

    def energy_share_by_kind(self) -> dict[str, float]:
        total = self.total_energy()
        if total <= 0:
            return {}
        shares: dict[str, float] = {}
        for e in self._population.values():
            shares[e.kind.value] = shares.get(e.kind.value, 0.0) + e.energy
        return {k: v / total for k, v in shares.items()}

    # -- pages, for people browsing the store --------------------------------

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
        """One page of living entries and how many matched (``backends.pages``:
        the filters, the search rule and the sorts, ties by id)."""
        from .backends.pages import PageRequest, matches, sort_key

        request = PageRequest(sort, order, kind, flag, search, offset, limit)
        found = [e for e in self.alive() if matches(e, request)]
        found.sort(key=lambda e: e.id)
        found.sort(key=sort_key(self, sort), reverse=request.desc)
        return found[offset : offset + limit], len(found)

    def page_graveyard(
        self, *, kind: str = "", search: str = "", offset: int = 0, limit: int = 50
    ) -> tuple[list[str], int]:
        """The ids of one page of dead entries, most recently buried first, and how
        many matched (``backends.pages``' search rule)."""
        from .backends.pages import PageRequest, matches

        request = PageRequest(kind=kind, search=search, offset=offset, limit=limit)
        found = [e.id for e in reversed(self.graveyard()) if matches(e, request)]
        return found[offset : offset + limit], len(found)

    # -- views kept in step with a durable backend ---------------------------

    def sync_entry(self, entry: MemoryEntry, alive: bool) -> None:
        """Install an entry as another process wrote it (no posting but ``opening``).

        Used by backends refreshing an in-process view; the balance change is
        posted as ``opening`` because it happened elsewhere, with its own events.
        """
        old = self._population.pop(entry.id, None)
        if old is not None:
            self.books.post("opening", -old.energy)
            self.retriever.forget(entry.id)
        self._graveyard.pop(entry.id, None)
        if alive:
            self._population[entry.id] = entry
            self._index(entry)
            self.books.post("opening", entry.energy)
        else:
            self._graveyard[entry.id] = entry
        self._moved(entry.id)

    # -- persistence --------------------------------------------------------

    def to_payload(self) -> dict[str, Any]:
        """The published JSON document (plus anything unknown we were given)."""
        return self._payload_of(self._unreadable)

    @classmethod
    def from_payload(
        cls,
        payload: Any,
        retriever: Retriever | None = None,
        *,
        strict: bool = True,
    ) -> MemoryStore:
        """Build a store from a decoded JSON document.

        With ``strict=True`` (the default) the first unreadable entry raises
        ``StoreFormatError`` naming it. With ``strict=False`` unreadable records are
        listed in ``store.load_problems`` and kept verbatim so ``save`` writes them
        back: nothing is ever dropped.
        """
        if not isinstance(payload, dict):
            raise StoreFormatError(f"a store must be a JSON object, got {type(payload).__name__}")
        if "entries" not in payload:
            raise StoreFormatError(
                "no 'entries' list; this JSON object does not look like a darwin-memo store"
            )
        config = payload.get("config", {})
        if not isinstance(config, dict):
            raise StoreFormatError("'config' must be an object")
        kwargs: dict[str, float] = {}
        for key in ("max_energy", "upkeep"):
            if key in config:
                value = config[key]
                if (
                    isinstance(value, bool)
                    or not isinstance(value, (int, float))
                    or not math.isfinite(value)
                    or abs(value) > economy.MAX_MAGNITUDE
                ):
                    raise StoreFormatError(
                        f"config {key!r} must be a finite number within "
                        f"{economy.MAX_MAGNITUDE:g}, got {value!r}"
                    )
                kwargs[key] = float(value)
        try:
            store = cls(retriever=retriever, **kwargs)
        except (TypeError, ValueError) as exc:
            raise StoreFormatError(f"bad store config: {exc}") from None
        store.payload_extra = {
            k: v for k, v in payload.items() if k not in ("config", "entries", "graveyard")
        }
        population, graveyard = store._population, store._graveyard
        living: list[MemoryEntry] = []
        opening = 0.0
        for where in ("entries", "graveyard"):
            records = payload.get(where, [])
            if not isinstance(records, list):
                raise StoreFormatError(f"{where!r} must be a list of entry objects")
            for index, raw in enumerate(records):
                try:
                    entry = read_entry(raw)
                    if entry.id in population or entry.id in graveyard:
                        raise StoreFormatError(
                            f"entry {entry.id!r}: the id appears more than once in the store"
                        )
                except StoreFormatError as exc:
                    message = f"{where}[{index}]: {exc}"
                    if strict:
                        raise StoreFormatError(message) from None
                    store.load_problems.append(LoadProblem(where, index, str(exc)))
                    store._unreadable[where].append(raw)
                    continue
                if where == "entries":
                    store._population[entry.id] = entry
                    living.append(entry)
                    # Summed in the order read: what posting each in turn would total.
                    opening += entry.energy  # finite: read_entry checked it
                else:
                    store._graveyard[entry.id] = entry
        opening = store._check_balances(living, opening, strict)
        store.books.post("opening", opening)
        store._index_many(living)  # in the order read, as one by one
        state = payload.get("retriever")
        if isinstance(state, dict) and state:
            store.retriever.load_state(state)
            if store.retriever.dump_state():
                store.payload_extra.pop("retriever", None)  # the retriever owns it now
        return store

    def _check_balances(self, living: list[MemoryEntry], opening: float, strict: bool) -> float:
        """Refuse (strict) or clamp (lenient) balances outside ``[-MAX_MAGNITUDE,
        max_energy]``; returns the opening balance of what was kept.

        No settlement lifts a balance above the cap, and nothing but escrow takes one
        below zero (a few units, not 10^15): a balance outside the range was written by
        hand. Kept, an entry at 1e300 would never die and sums of balances would
        overflow. A clamped entry is listed in ``load_problems`` with what was done.
        """
        low, high = -economy.MAX_MAGNITUDE, self.max_energy
        clamped = False
        for where, entries in (("entries", living), ("graveyard", list(self._graveyard.values()))):
            energies = [e.energy for e in entries]
            if not energies or (low <= min(energies) and max(energies) <= high):
                continue
            for index, entry in enumerate(entries):
                energy = entry.energy
                if low <= energy <= high:
                    continue
                message = f"entry {entry.id!r}: energy {energy!r} is outside [{low:g}, {high:g}]"
                if strict:
                    raise StoreFormatError(f"{where}: {message}")
                entry.energy = min(high, max(low, energy))
                self.load_problems.append(
                    LoadProblem(where, index, f"{message}; clamped to {entry.energy:g}")
                )
                clamped = clamped or where == "entries"
        return math.fsum(e.energy for e in living) if clamped else opening

    def save(self, path: str | Path) -> None:
        """Write the store atomically (temp file, fsync, rename) under its lock."""
        with collector.paused():  # a payload is a few small containers per entry
            jsonfile.save_payload(path, self.to_payload())

    @classmethod
    def load(
        cls, path: str | Path, retriever: Retriever | None = None, *, strict: bool = True
    ) -> MemoryStore:
        """Read a store file. Raises ``StoreNotFound`` or ``StoreFormatError`` (a ValueError)."""
        with collector.paused():  # a few small containers per entry, and its index
            payload = jsonfile.read_json(path)
            warn_if_exposed(path)  # (once a store is known to be there)
            try:
                store = cls.from_payload(payload, retriever, strict=strict)
            except StoreFormatError as exc:
                raise StoreFormatError(f"{path} is not a valid darwin-memo store: {exc}") from None
            # The decoded document goes before the collector is back: its next
            # collection then walks the store alone.
            del payload
        return store
