"""Rebuilding every balance from the journal, to check the books.

``verify_ledger`` replays the journal from its last ``snapshot`` (or from the
empty store) with the economy's own rules: births at their stakes, credits as
applied (clipped at the cap), every tick's upkeep on everyone alive (pinned
entries floored at zero), admission denials, burials and merges. It then
compares the rebuilt balances, deaths, open tickets and tick with the stored
state. Any difference means energy moved without an event that says why, or an
event was lost: both are reported, one line each.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .ledger import Ledger

__all__ = ["TOLERANCE", "replay", "verify_ledger"]

TOLERANCE = 1e-9


class _State:
    def __init__(self, max_energy: float) -> None:
        self.max_energy = max_energy
        self.balance: dict[str, float] = {}
        self.alive: set[str] = set()
        self.pinned: set[str] = set()
        self.pending: dict[str, list[str]] = {}
        self.tick = 0
        self.problems: list[str] = []

    def bury(self, entry_id: str, why: str, *, check: bool = True) -> None:
        if entry_id not in self.alive:
            self.problems.append(f"{why}: {entry_id} was not alive")
            return
        bal = self.balance[entry_id]
        if check and bal > TOLERANCE:
            self.problems.append(f"{why}: {entry_id} was buried holding {bal:.9f}")
        self.alive.discard(entry_id)
        self.balance[entry_id] = min(bal, 0.0)


def replay(events: Iterable[dict[str, Any]], max_energy: float) -> _State:
    """Fold the journal into balances (from its last snapshot)."""
    records = list(events)
    start = 0
    for i, record in enumerate(records):
        if record.get("event") == "snapshot":
            start = i
    state = _State(max_energy)
    for record in records[start:]:
        kind = record.get("event")
        if kind == "snapshot":
            state = _State(float(record.get("max_energy", max_energy)))
            state.tick = int(record.get("tick_count", 0))
            entries = record.get("entries", [])
            if not isinstance(entries, list):  # a packed list that did not decode
                state.problems.append(
                    f"the snapshot at tick {state.tick} holds entries that cannot be read "
                    "(a damaged journal record): the balances it started from are unknown"
                )
                entries = []
            for entry_id, energy, alive, pinned in entries:
                state.balance[entry_id] = float(energy)
                if alive:
                    state.alive.add(entry_id)
                if pinned:
                    state.pinned.add(entry_id)
            state.pending = {t: list(p) for t, p in record.get("pending", [])}
        elif kind in ("add", "import"):
            entry_id = record["entry"]
            state.balance[entry_id] = float(record.get("stake", 1.0))
            state.alive.add(entry_id)
        elif kind == "decide":
            ticket = record.get("ticket")
            if ticket and record.get("provenance"):
                state.pending[ticket] = list(record["provenance"])
        elif kind == "settle":
            ticket = str(record.get("ticket"))
            if state.pending.pop(ticket, None) is None:
                state.problems.append(f"settle of ticket {ticket} that was not pending")
            for item in record.get("applied", []):
                entry_id = item["entry"]
                if entry_id in state.alive:
                    state.balance[entry_id] = min(
                        state.max_energy, state.balance[entry_id] + float(item["credit"])
                    )
                else:
                    state.problems.append(f"credit to {entry_id}, which was not alive")
            for entry_id in record.get("denied", []):
                state.balance[entry_id] = 0.0
            for entry_id in record.get("floored", []):
                state.balance[entry_id] = max(0.0, state.balance.get(entry_id, 0.0))
            for entry_id in record.get("buried", []):
                state.bury(entry_id, f"settle of {ticket}")
        elif kind == "forget":
            state.bury(record["entry"], "forget", check=False)
        elif kind == "pin":
            state.pinned.add(record["entry"])
        elif kind == "unpin":
            state.pinned.discard(record["entry"])
        elif kind == "tick":
            state.tick += 1
            if record.get("tick") != state.tick:
                state.problems.append(
                    f"tick {record.get('tick')} follows tick {state.tick - 1} in the journal"
                )
            upkeep = float(record.get("upkeep", 0.05))
            for entry_id in state.alive:
                bal = state.balance[entry_id] - upkeep
                state.balance[entry_id] = max(bal, 0.0) if entry_id in state.pinned else bal
            for entry_id in record.get("dead_entries", []):
                if entry_id in state.alive:
                    state.bury(entry_id, f"tick {state.tick}")
        elif kind == "merge":
            members = list(record.get("members", []))
            pooled = 0.0
            for m in members:
                if m in state.alive:
                    pooled += state.balance[m]
                    state.alive.discard(m)
                    state.balance[m] = min(state.balance[m], 0.0)
                else:
                    state.problems.append(f"merge into {record.get('entry')}: {m} was not alive")
            heir = record["entry"]
            state.balance[heir] = min(state.max_energy, pooled)
            state.alive.add(heir)
    return state


def verify_ledger(ledger: Ledger) -> list[str]:
    """Disagreements between the stored state and its journal (empty when sound)."""
    state = replay(ledger.events(), ledger.store.max_energy)
    problems = list(state.problems)
    store = ledger.store
    for entry in store.alive():
        if entry.id not in state.alive:
            problems.append(f"{entry.id} is alive but the journal has no living record of it")
        elif abs(state.balance[entry.id] - entry.energy) > TOLERANCE:
            problems.append(
                f"{entry.id} holds {entry.energy:.9f} but the journal adds up to "
                f"{state.balance[entry.id]:.9f}"
            )
    living = {e.id for e in store.alive()}
    for entry_id in state.alive - living:
        problems.append(f"{entry_id} is alive in the journal but not in the store")
    pending = {t.id for t in ledger.pending()}
    if pending != set(state.pending):
        missing = sorted(set(state.pending) - pending)[:5]
        extra = sorted(pending - set(state.pending))[:5]
        problems.append(
            f"open tickets differ from the journal (journal only: {missing}; store only: {extra})"
        )
    if state.tick != ledger.tick_count:
        problems.append(f"the store is at tick {ledger.tick_count}, the journal at {state.tick}")
    return problems
