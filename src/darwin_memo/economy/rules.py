"""The economic rules, as pure functions, and the books that keep them honest.

Every entry is born with a stake (1.0), pays upkeep every tick (0.05), earns
``credit_gain * tanh(delta / resource_scale)`` when an outcome it decided is
measured, and is capped at ``max_energy`` (5.0). Supporting entries get a
quarter of that. Death comes at zero.

``Books`` records every movement of energy by its reason: stakes, credits and
debits, upkeep, energy clipped at the cap, burials and merges. The invariant is
``sum(balances) == books.balance()``: energy is never created or destroyed
without a posting that says why. The published package lost energy silently in
one place (a merge whose members held more than the cap together); here that
loss is still made, as published, but it is posted as ``cap`` with the merge.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = [
    "CREDIT_GAIN",
    "MAX_ENERGY",
    "MAX_MAGNITUDE",
    "MIN_UPKEEP_SCALE",
    "SPAWN_ENERGY",
    "SUPPORTING_SHARE",
    "UPKEEP",
    "Books",
    "bounded",
    "credit_amount",
    "safe_sum",
]

SPAWN_ENERGY = 1.0
UPKEEP = 0.05
MAX_ENERGY = 5.0
CREDIT_GAIN = 0.6
SUPPORTING_SHARE = 0.25
#: The smallest upkeep multiplier a per-entry scale may ask for.
MIN_UPKEEP_SCALE = 0.25
#: The largest magnitude a settled delta or a stored balance may have (10^15). No real
#: measurement comes near it (a petabyte counted in bytes), and any number of values
#: within it sum without overflowing a float: a settle beyond it is rejected like a NaN
#: delta, a store holding a balance beyond it is refused (or clamped when read
#: leniently), and reports clamp what they read from a journal to it.
MAX_MAGNITUDE = 1e15

#: Reasons a posting may carry. Positive amounts flow into the population.
REASONS = (
    "opening",  # balances present when a store was loaded
    "stake",  # a new entry's starting energy
    "credit",  # positive settlement credit (before clipping)
    "debit",  # negative settlement credit
    "cap",  # energy clipped because a balance would exceed max_energy (always <= 0)
    "upkeep",  # upkeep paid (always <= 0)
    "burial",  # a buried entry's balance leaving the population
    "merge",  # members' balances leaving for the heir (-) and the heir's pooled stake (+)
    "adjust",  # explicit lifecycle moves (admission denied, pin floor)
)


def credit_amount(delta: float, resource_scale: float, gain: float = CREDIT_GAIN) -> float:
    """The credit a measured ``delta`` is worth: ``gain * tanh(delta / scale)``.

    Returns 0.0 for a non-finite delta or scale, or a scale that is not positive:
    an outcome that cannot be measured moves nothing.
    """
    if not (math.isfinite(delta) and math.isfinite(resource_scale)) or resource_scale <= 0:
        return 0.0
    return gain * math.tanh(delta / resource_scale)


def bounded(x: float) -> float:
    """``x`` clamped to ``[-MAX_MAGNITUDE, MAX_MAGNITUDE]`` (NaN becomes 0.0).

    What reports apply to every number they read from a journal or a store, so that
    a hand-edited ``1e308`` reads as a large number instead of overflowing a sum.
    """
    if x != x:  # NaN
        return 0.0
    return max(-MAX_MAGNITUDE, min(MAX_MAGNITUDE, x))


def safe_sum(values: Iterable[float]) -> float:
    """An exact sum (``math.fsum``) that cannot overflow: each value is ``bounded``."""
    return math.fsum(bounded(v) for v in values)


@dataclass(slots=True)
class Books:
    """Running totals of energy movements, by reason (signed; + flows in)."""

    totals: dict[str, float] = field(default_factory=dict)

    def post(self, reason: str, amount: float) -> None:
        if reason not in REASONS:
            raise ValueError(f"unknown posting reason {reason!r}")
        if not math.isfinite(amount):
            raise ValueError(f"refusing to post a non-finite amount ({amount!r}) as {reason}")
        if amount:
            self.totals[reason] = self.totals.get(reason, 0.0) + amount

    def balance(self) -> float:
        """What the population's balances must sum to."""
        return math.fsum(self.totals.values())

    @property
    def stakes(self) -> float:
        return self.totals.get("opening", 0.0) + self.totals.get("stake", 0.0)

    @property
    def credits(self) -> float:
        """Every posting that added energy, stakes aside."""
        return math.fsum(
            v for k, v in self.totals.items() if k not in ("opening", "stake") and v > 0
        )

    @property
    def debits(self) -> float:
        """Every posting that removed energy, as a positive number."""
        return -math.fsum(
            v for k, v in self.totals.items() if k not in ("opening", "stake") and v < 0
        )
