"""Phase 4 of the organic layer: earned importance, and the upkeep relief it can buy.

An entry's importance, in [0, 1], is three equal thirds:

* recalls: how often it was recalled, over the most recalled living entry's count;
* credit: the energy it earned above its spawn stake, ``max(0, energy - 1.0)``, over
  the living population's largest such surplus;
* centrality: its mean effective relatedness to its nearest neighbours (given by the
  caller, ``OrganicMemory.centrality()``; absent entries count 0), clamped to [0, 1].

A part whose peak is 0 contributes 0. ``upkeep_scale`` turns importance into a
per-entry upkeep multiplier ``max(0.25, 1 - 0.5 * importance)`` for
``MemoryStore.charge_upkeep(scale=...)``. Nothing calls that for you: wiring it makes
*being used* a reason to live, and usage can be bought with queries alone
(docs/organic.md measures what that costs).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..economy.rules import MIN_UPKEEP_SCALE, SPAWN_ENERGY

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..backends.interface import Population

__all__ = [
    "CENTRALITY_WEIGHT",
    "CREDIT_WEIGHT",
    "MAX_RELIEF",
    "MIN_UPKEEP_SCALE",
    "RECALL_WEIGHT",
    "SPAWN_ENERGY",
    "EarnedImportance",
    "clamp01",
]

RECALL_WEIGHT = 1.0 / 3.0
CREDIT_WEIGHT = 1.0 / 3.0
CENTRALITY_WEIGHT = 1.0 / 3.0
#: The most upkeep importance can waive: an entry of importance 1 pays half.
MAX_RELIEF = 0.5


def clamp01(x: float) -> float:
    """``x`` clamped to [0, 1]."""
    return min(1.0, max(0.0, x))


class EarnedImportance:
    """Recall counts, and importance computed from them, energy and centrality."""

    def __init__(self) -> None:
        self._recalls: dict[str, int] = {}
        #: How many times the recall counts changed (a cache of ``peaks`` compares it).
        self.changes = 0

    def record_recall(self, entry_id: str) -> None:
        """Count one recall of ``entry_id``."""
        self._recalls[entry_id] = self._recalls.get(entry_id, 0) + 1
        self.changes += 1

    def set_recalls(self, entry_id: str, count: int) -> None:
        """Set ``entry_id``'s recall count (a persisted layer loading the store's)."""
        if count > 0:
            self._recalls[entry_id] = int(count)
        else:
            self._recalls.pop(entry_id, None)
        self.changes += 1

    def recalls(self, entry_id: str) -> int:
        """How many recalls of ``entry_id`` were counted (0 if none)."""
        return self._recalls.get(entry_id, 0)

    def forget(self, entry_id: str) -> None:
        """Drop an entry's recall count (its entry died)."""
        if self._recalls.pop(entry_id, None) is not None:
            self.changes += 1

    def peak_recalls(self, store: Population) -> int:
        """The most recalls of an entry in the store's population (0 if none): a pass
        over the recalled entries only."""
        return max((n for i, n in self._recalls.items() if i in store), default=0)

    def peaks(self, store: Population) -> tuple[int, float]:
        """The two parts' denominators: the most recalls of an entry in the store's
        population, and the population's largest credit (``energy - 1.0``; may be
        negative, then no credit counts). One pass over the population."""
        peak_recalls = self.peak_recalls(store)
        # (max(energy) - 1.0 is max(energy - 1.0) exactly: rounding is monotonic)
        peak_energy = max((e.energy for e in store.alive()), default=SPAWN_ENERGY)
        return peak_recalls, peak_energy - SPAWN_ENERGY

    def scores(
        self,
        store: Population,
        centrality: Mapping[str, float] | None = None,
        *,
        ids: Iterable[str] | None = None,
        peaks: tuple[int, float] | None = None,
    ) -> dict[str, float]:
        """Importance in [0, 1] of every entry in the store's population.

        ``ids``: only these entries (those alive), with the same peaks; a read of one
        entry's neighbours needs a few scores, not the population's. ``peaks``: what
        ``self.peaks(store)`` returns now, when the caller kept it (then a read of a
        few ids costs no pass over the population).
        """
        peak_recalls, peak_credit = self.peaks(store) if peaks is None else peaks
        wanted = store.alive() if ids is None else [e for e in map(store.get, ids) if e]
        central = centrality or {}
        out: dict[str, float] = {}
        for e in wanted:
            recalls = self._recalls.get(e.id, 0)
            credit = max(0.0, e.energy - SPAWN_ENERGY)
            recall_part = recalls / peak_recalls if peak_recalls > 0 else 0.0
            credit_part = credit / peak_credit if peak_credit > 0 else 0.0
            centrality_part = clamp01(central.get(e.id, 0.0))
            out[e.id] = clamp01(
                RECALL_WEIGHT * recall_part
                + CREDIT_WEIGHT * credit_part
                + CENTRALITY_WEIGHT * centrality_part
            )
        return out

    def upkeep_scale(
        self, store: Population, centrality: Mapping[str, float] | None = None
    ) -> dict[str, float]:
        """Per-entry upkeep multiplier ``max(0.25, 1 - 0.5 * importance)``."""
        return {
            entry_id: max(MIN_UPKEEP_SCALE, 1.0 - MAX_RELIEF * importance)
            for entry_id, importance in self.scores(store, centrality).items()
        }
