"""Phase 2 of the organic layer: activation, gist and detail.

An entry is shown as its gist (the question alone) until it is *active*, and in full
detail (question, answer and sources) once a recall has raised its activation to the
surface threshold. Activation fades with ``decay``; nothing here reads or writes an
entry's energy, and ``surface`` never changes the entry it renders.
"""

from __future__ import annotations

import math

from ..records.entry import MemoryEntry

__all__ = [
    "BUMP_TO",
    "DECAY_FACTOR",
    "SURFACE_THRESHOLD",
    "ActivationState",
    "detail",
    "surface",
]

#: A recalled entry is raised to this activation.
BUMP_TO = 1.0
#: ``ActivationState.decay()`` multiplies every level by this.
DECAY_FACTOR = 0.5
#: At or above this activation an entry surfaces in full detail.
SURFACE_THRESHOLD = 0.5
#: Levels that decay below this are forgotten (read back as 0.0).
PRUNE_BELOW = 1e-3


def _fraction(value: float, name: str) -> float:
    """``value`` as a float in [0, 1]; ``ValueError`` otherwise (NaN included)."""
    number = float(value)
    if not (math.isfinite(number) and 0.0 <= number <= 1.0):
        raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")
    return number


class ActivationState:
    """How active each entry is, in [0, 1]; absent entries are at 0.0."""

    def __init__(self) -> None:
        self._levels: dict[str, float] = {}

    def level(self, entry_id: str) -> float:
        """The entry's activation (0.0 when never bumped or decayed away)."""
        return self._levels.get(entry_id, 0.0)

    def bump(self, entry_id: str, to: float = BUMP_TO) -> None:
        """Raise the entry's activation to ``to``; a bump never lowers it."""
        target = _fraction(to, "to")
        self._levels[entry_id] = max(self._levels.get(entry_id, 0.0), target)

    def decay(self, factor: float = DECAY_FACTOR) -> None:
        """Scale every level by ``factor`` and forget those that fall below 1e-3."""
        f = _fraction(factor, "factor")
        self._levels = {i: v * f for i, v in self._levels.items() if v * f >= PRUNE_BELOW}

    def forget(self, entry_id: str) -> None:
        """Drop an entry's activation (its entry died)."""
        self._levels.pop(entry_id, None)

    def levels(self) -> dict[str, float]:
        """A copy of every non-zero level, in the order entries were first bumped."""
        return dict(self._levels)

    def __len__(self) -> int:
        return len(self._levels)


def detail(entry: MemoryEntry) -> str:
    """The entry in full: ``question answer (sources: a, b)`` (no sources part if none)."""
    text = f"{entry.question} {entry.answer}"
    if entry.sources:
        text += f" (sources: {', '.join(entry.sources)})"
    return text


def surface(
    entry: MemoryEntry, state: ActivationState, threshold: float = SURFACE_THRESHOLD
) -> str:
    """The entry as it surfaces now: its gist (the question) unless active enough."""
    if state.level(entry.id) >= threshold:
        return detail(entry)
    return entry.question
