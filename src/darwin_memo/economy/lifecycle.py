"""The lifecycle rules of the economy, as functions over a store and a config.

``is_silent`` says whether memory had anything to say, ``assign_credit`` pays a measured
outcome along provenance (``gain * tanh(delta / scale)`` to the decider, the supporter
share to each supporter), ``advance_lifecycle`` moves the probation and juvenile
counters, and ``death_cause`` names why an entry died. They are the same rules for the
survival loop (``darwin_memo.sim.survival``) and the ledger; no I/O beyond the store
passed in.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence

from ..aliases import keyword_aliases
from ..records.entry import MemoryEntry
from . import rules as economy

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..backends.interface import Population
    from .config import SurvivalConfig

__all__ = ["advance_lifecycle", "assign_credit", "death_cause", "is_silent"]


@keyword_aliases(text="answer_text", deciding_entry="deciding", supporting_entries="supporting")
def is_silent(answer_text: str, deciding: str | None, supporting: Sequence[str]) -> bool:
    """Memory said nothing usable: no text, or no entry behind it.

    The parameters carry the published names; ``text``, ``deciding_entry`` and
    ``supporting_entries`` are accepted as keyword spellings too.
    """
    return not answer_text or (deciding is None and not supporting)


@keyword_aliases(deciding="deciding_entry", supporting="supporting_entries")
def assign_credit(
    store: Population,
    deciding_entry: str | None,
    supporting_entries: Sequence[str],
    delta: float,
    resource_scale: float,
    config: SurvivalConfig,
    cycle: int,
) -> list[tuple[str, float]]:
    """Pay a measured ``delta`` along provenance; returns ``(id, credit)`` as applied.

    Non-finite deltas or scales move nothing. A juvenile decider earns only the
    supporter share; with no decider the credit is split evenly over the
    supporters, probationary ones taking a quarter of their split. The provenance
    may also be passed as ``deciding=`` and ``supporting=`` (the spec's names).
    """
    deciding, supporting = deciding_entry, supporting_entries
    if not (math.isfinite(delta) and math.isfinite(resource_scale)) or resource_scale <= 0:
        return []
    credit = economy.credit_amount(delta, resource_scale, config.credit_gain)
    if credit == 0:
        return []
    pairs: list[tuple[str, float]] = []
    if deciding is not None:
        decider = store.get(deciding)
        juvenile = decider is not None and decider.juvenile > 0
        pairs.append((deciding, credit * (config.supporting_share if juvenile else 1.0)))
        pairs += [(s, credit * config.supporting_share) for s in supporting if s != deciding]
    elif supporting:
        share = credit / len(supporting)
        for s in supporting:
            entry = store.get(s)
            on_probation = entry is not None and entry.probation > 0
            pairs.append((s, share * (config.supporting_share if on_probation else 1.0)))
    applied: list[tuple[str, float]] = []
    for entry_id, amount in pairs:
        if store.get(entry_id) is None:
            continue
        store.credit(entry_id, amount, cycle)
        applied.append((entry_id, amount))
    return applied


@keyword_aliases(deciding="deciding_entry")
def advance_lifecycle(
    store: Population,
    applied: Sequence[tuple[str, float]],
    delta: float,
    deciding_entry: str | None,
) -> list[tuple[str, str]]:
    """Move probation and juvenile counters after a credited outcome.

    Returns ``(id, "graduated" | "admitted" | "admission_denied")`` events. A
    juvenile that decides a negative outcome is denied admission: its balance
    goes to zero and the caller's burial sweep executes it. ``deciding=`` is
    accepted for ``deciding_entry`` (the spec's name).
    """
    deciding = deciding_entry
    events: list[tuple[str, str]] = []
    for entry_id, credit in applied:
        entry = store.get(entry_id)
        if entry is None:
            continue
        if entry.probation > 0 and credit > 0:
            entry.probation -= 1
            if entry.probation == 0:
                events.append((entry_id, "graduated"))
        if entry.juvenile > 0:
            if delta < 0 and entry_id == deciding:
                store.set_energy(entry_id, 0.0)
                entry.juvenile = 0
                events.append((entry_id, "admission_denied"))
            else:
                entry.juvenile -= 1
                if entry.juvenile == 0:
                    events.append((entry_id, "admitted"))
    return events


def death_cause(
    entry: MemoryEntry, poisoned_ids: Collection[str], merged_away: Collection[str]
) -> str:
    """``merged``, ``executed`` (poisoned and it acted) or ``starved``."""
    if entry.id in merged_away:
        return "merged"
    if entry.id in poisoned_ids and entry.uses > 0:
        return "executed"
    return "starved"
