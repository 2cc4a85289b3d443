"""What every population does with the entries it holds in memory.

Two populations implement ``interface.Population``: ``store.MemoryStore``, which
holds every entry (research loops, the published JSON file), and
``sqlstore.SqlStore``, which holds the entries an operation read and keeps the rest
in its database. Neither is the other's parent. What they do the same way lives
here, once: the checks and postings of a stake, a credit, a balance set outright, a
burial and a merge (``HeldEntries``), and the retrieval's last step, where equal
scores are ordered by energy (``finish_ranking``: the only place energy touches
retrieval).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping

from ..economy import rules as economy
from ..records.entry import EntryKind, MemoryEntry
from ..retrieval.lexical import LexicalRetriever
from ..retrieval.temporal import recency_weight

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ..retrieval.protocols import Retriever
    from ..store import MemoryStore
    from .interface import Population
    from .sqlstore import SqlStore

__all__ = ["HeldEntries", "check_query", "finish_ranking"]


def check_query(
    query: object, k: object, kind: EntryKind | str | None, half_life: float | None
) -> EntryKind | None:
    """``retrieve``'s arguments checked (``TypeError``/``ValueError``, one line); the
    kind filter they name, if any."""
    if not isinstance(query, str):
        raise TypeError(f"query must be a string, got {type(query).__name__}")
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ValueError(f"k must be a non-negative integer, got {k!r}")
    kind_filter: EntryKind | None = None
    if kind is not None:
        try:
            kind_filter = EntryKind(kind)
        except ValueError:
            known = ", ".join(x.value for x in EntryKind)
            raise ValueError(f"unknown kind {kind!r} (known kinds: {known})") from None
    if half_life is not None and (not math.isfinite(half_life) or half_life <= 0):
        raise ValueError(f"half_life must be a positive number of ticks, got {half_life!r}")
    return kind_filter


def finish_ranking(
    hits: list[tuple[MemoryEntry, float]],
    k: int,
    half_life: float | None,
    now: Callable[[], int],
) -> list[tuple[MemoryEntry, float]]:
    """The top ``k`` of ``hits`` (entry, relevance): each weighted by recency when a
    ``half_life`` is given (``now()``: the tick it is measured from), and equal
    scores ordered by energy, highest first."""
    if half_life is not None:
        tick = now()
        hits = [(e, s * recency_weight(e, tick, half_life)) for e, s in hits]
    hits.sort(key=lambda pair: (pair[1], pair[0].energy), reverse=True)
    return hits[:k]


class HeldEntries:
    """The entries a population holds in memory, and the bookkeeping every population
    does on them. Every change to a balance is posted to ``books``; every entry
    changed is marked in ``dirty`` (what a durable backend writes).

    A population calls these with entries it holds; its public methods (the
    ``Population`` protocol) add what it keeps elsewhere (rows, an index). The hooks
    it provides: ``bury`` (a merge buries its members through it), ``_index`` and
    ``now_cycle`` (recency is measured from it).
    """

    def __init__(
        self,
        max_energy: float = economy.MAX_ENERGY,
        upkeep: float = economy.UPKEEP,
        retriever: Retriever | None = None,
    ) -> None:
        for name, value in (("max_energy", max_energy), ("upkeep", upkeep)):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"{name} must be a number, got {value!r}")
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        if max_energy <= 0:
            raise ValueError(f"max_energy must be positive, got {max_energy!r}")
        self.max_energy = float(max_energy)
        self.upkeep = float(upkeep)
        self.retriever: Retriever = retriever if retriever is not None else LexicalRetriever()
        self.last_upkeep_charged = 0.0
        self.books = economy.Books()
        self._population: dict[str, MemoryEntry] = {}
        self._graveyard: dict[str, MemoryEntry] = {}
        # Top-level keys this class does not own (a ledger block, newer keys).
        self.payload_extra: dict[str, Any] = {}
        #: Ids whose rows changed since a durable backend last wrote them.
        self.dirty: set[str] = set()

    # -- the hooks a population provides -------------------------------------------------

    def bury(self, entry_id: str, reason: str = "burial") -> None:
        raise NotImplementedError

    def _index(self, entry: MemoryEntry) -> None:
        raise NotImplementedError

    def now_cycle(self) -> int:
        raise NotImplementedError

    # -- shared ---------------------------------------------------------------------------

    def similarity(self, a: MemoryEntry, b: MemoryEntry) -> float:
        return self.retriever.similarity(a, b)

    def ticks_to_starvation(
        self, entry: MemoryEntry, scale: Mapping[str, float] | None = None
    ) -> float | None:
        """Unsettled ticks left before upkeep kills ``entry`` (None if it cannot starve)."""
        if self.upkeep <= 0 or entry.pinned:
            return None
        factor = 1.0 if scale is None else scale.get(entry.id, 1.0)
        factor = min(1.0, max(economy.MIN_UPKEEP_SCALE, factor))
        return round(entry.energy / (self.upkeep * factor), 1)

    def _hold_new(self, entry: MemoryEntry) -> None:
        """Take a new entry in: checked, held, its energy posted as its stake."""
        if not isinstance(entry, MemoryEntry):
            raise TypeError(f"add() takes a MemoryEntry, got {type(entry).__name__}")
        entry_id, energy = entry.id, entry.energy
        if not math.isfinite(energy):
            raise ValueError(f"entry {entry_id} has a non-finite energy {energy!r}")
        population = self._population
        if entry_id in population or entry_id in self._graveyard:
            raise ValueError(
                f"an entry with id {entry_id} is already in this store; ids must be unique"
            )
        population[entry_id] = entry
        self._index(entry)
        if energy:  # what ``books.post("stake", energy)`` does, its checks made above
            totals = self.books.totals
            totals["stake"] = totals.get("stake", 0.0) + energy
        self.dirty.add(entry_id)

    def _credit_held(self, entry: MemoryEntry, amount: float, cycle: int) -> None:
        """``credit`` on a held living entry: capped at ``max_energy``, a use counted."""
        if not math.isfinite(amount):
            raise ValueError(f"credit amount must be finite, got {amount!r}")
        before = entry.energy
        after = min(self.max_energy, before + amount)
        # What books.post("credit" or "debit", amount) and post("cap", clipped) do
        # (the amounts are finite, checked above).
        totals = self.books.totals
        if amount:
            reason = "credit" if amount > 0 else "debit"
            totals[reason] = totals.get(reason, 0.0) + amount
        clipped = (after - before) - amount
        if clipped:
            totals["cap"] = totals.get("cap", 0.0) + clipped
        entry.energy = after
        entry.uses += 1
        entry.last_used_cycle = cycle
        self.dirty.add(entry.id)

    def _set_held_energy(self, entry: MemoryEntry, energy: float, reason: str) -> None:
        """``set_energy`` on a held living entry, posting the difference."""
        if not math.isfinite(energy):
            raise ValueError(f"energy must be finite, got {energy!r}")
        self.books.post(reason, energy - entry.energy)
        entry.energy = energy
        self.dirty.add(entry.id)

    def _bury_held(self, entry_id: str, reason: str) -> MemoryEntry | None:
        """Move a held entry to the graveyard (its energy clamps to at most 0)."""
        entry = self._population.pop(entry_id, None)
        if entry is None:
            return None
        self.retriever.forget(entry_id)
        self.books.post(reason, -entry.energy)
        entry.energy = min(entry.energy, 0.0)
        self._graveyard[entry_id] = entry
        self.dirty.add(entry_id)
        return entry

    def _merge_held(self, heir: MemoryEntry, member_ids: Iterable[str]) -> float:
        """``merge_into`` over held members: they are buried (through ``bury``) with a
        ``merge`` posting, the heir enters with their pooled energy, and what exceeds
        ``max_energy`` is posted as ``cap``. The energy clipped."""
        members = [self._population[i] for i in member_ids if i in self._population]
        pooled = math.fsum(m.energy for m in members)
        for m in members:
            self.bury(m.id, reason="merge")
        if heir.id in self._population or heir.id in self._graveyard:
            raise ValueError(f"an entry with id {heir.id} is already in this store")
        clipped = max(0.0, pooled - self.max_energy)
        heir.energy = pooled - clipped
        self._population[heir.id] = heir
        self._index(heir)
        self.dirty.add(heir.id)
        self.books.post("merge", pooled)
        self.books.post("cap", -clipped)
        return clipped

    def _rank_held(
        self,
        query: str,
        k: int,
        *,
        half_life: float | None = None,
        now_cycle: int | None = None,
        kind: EntryKind | str | None = None,
        source: str | None = None,
    ) -> list[tuple[MemoryEntry, float]]:
        """The published ``retrieve`` over the held living entries: the retriever's
        index when it covers them all and nothing filters, else a ranking of the
        candidates; then ``finish_ranking``."""
        kind_filter = check_query(query, k, kind, half_life)
        if k == 0:
            return []
        search = getattr(self.retriever, "search", None)
        if (
            search is not None
            and kind_filter is None
            and source is None
            and getattr(self.retriever, "indexed", -1) == len(self._population)
        ):
            found = search(query, None if half_life is not None else k)
            ranked = [(self._population[i], s) for i, s in found]
        else:
            candidates = [
                e
                for e in self._population.values()
                if (kind_filter is None or e.kind == kind_filter)
                and (source is None or source in e.sources)
            ]
            ranked = self.retriever.rank(query, candidates)
        return finish_ranking(
            ranked, k, half_life, lambda: now_cycle if now_cycle is not None else self.now_cycle()
        )

    def _payload_of(self, unreadable: Mapping[str, list[Any]]) -> dict[str, Any]:
        """The published JSON document of the held entries (plus anything unknown)."""
        payload: dict[str, Any] = dict(self.payload_extra)
        payload["config"] = {"max_energy": self.max_energy, "upkeep": self.upkeep}
        payload["entries"] = [e.to_dict() for e in self._population.values()] + list(
            unreadable.get("entries", [])
        )
        payload["graveyard"] = [e.to_dict() for e in self._graveyard.values()] + list(
            unreadable.get("graveyard", [])
        )
        state = self.retriever.dump_state()
        if state:
            payload["retriever"] = state
        elif isinstance(self.payload_extra.get("retriever"), dict):
            # State of a retriever this process does not use (e.g. embedding vectors
            # read by a lexical CLI call): kept, minus vectors of entries now dead.
            kept = dict(self.payload_extra["retriever"])
            vectors = kept.get("vectors")
            if isinstance(vectors, dict):
                kept["vectors"] = {k: v for k, v in vectors.items() if k in self._population}
            payload["retriever"] = kept
        return payload


if TYPE_CHECKING:  # mypy checks that both populations implement the protocol

    def _both_are_populations(memory: MemoryStore, sql: SqlStore) -> list[Population]:
        return [memory, sql]
