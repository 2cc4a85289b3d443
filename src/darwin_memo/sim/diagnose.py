"""Naming the ways a selection run degenerates.

Three failure modes look identical from the outside (the whole population
starving around tick 20 with every delta at zero). ``selection_findings`` tells
the first two apart from counts alone; the store-level ``doctor`` builds on the
same thresholds.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "MIN_DEATHS",
    "MIN_DECIDES",
    "MIN_QUIET_TICKS",
    "MIN_SETTLES",
    "SILENCE_LIMIT",
    "STALE_TICKET_TICKS",
    "STARVED_SHARE",
    "Finding",
    "selection_findings",
]

SILENCE_LIMIT = 0.8
MIN_DECIDES = 10
MIN_SETTLES = 5
STALE_TICKET_TICKS = 50
MIN_DEATHS = 3
STARVED_SHARE = 0.5
MIN_QUIET_TICKS = 10


@dataclass(frozen=True)
class Finding:
    """One diagnosis: what is wrong, the evidence, and what to do."""

    code: str
    severity: str  # "error" | "warn"
    summary: str
    evidence: str
    fix: str

    def as_dict(self) -> dict[str, str]:
        return {
            "code": self.code,
            "severity": self.severity,
            "summary": self.summary,
            "evidence": self.evidence,
            "fix": self.fix,
        }


def selection_findings(
    *,
    decides: int,
    silent: int,
    nonzero_outcomes: int,
    settles: int,
    extinct_at: int | None = None,
) -> list[Finding]:
    """Degenerate-run findings from totals; at most one, the first rule that fires.

    ``extinct_at`` is the cycle at which a run's population died out, if it did.
    """
    if decides >= MIN_DECIDES and silent / decides > SILENCE_LIMIT:
        return [
            Finding(
                code="silent_majority",
                severity="error",
                summary=(
                    f"memory was silent on {silent}/{decides} decisions: task phrasing likely "
                    "does not lexically overlap the corpus (see min_coverage), so nothing can "
                    "earn energy"
                ),
                evidence=f"{silent} of {decides} decisions found no entry above the floor",
                fix=(
                    "phrase tasks in the corpus's words, lower LexicalRetriever(min_coverage=...), "
                    "or use an EmbeddingRetriever"
                ),
            )
        ]
    if settles >= MIN_SETTLES and nonzero_outcomes == 0:
        return [
            Finding(
                code="env_never_paid",
                severity="error",
                summary=(
                    f"none of {settles} settlements carried an outcome: the environment never "
                    "paid out"
                ),
                evidence=f"{settles} settlements, 0 with a non-zero delta",
                fix=(
                    "check that verify() reads your answers (decision_polarity's vocabulary: "
                    "pass extra_positive/extra_negative markers for your verbs)"
                ),
            )
        ]
    if extinct_at is not None:
        return [
            Finding(
                code="starvation_cliff",
                severity="error",
                summary=(
                    f"the whole population starved (extinct at cycle {extinct_at}): entries "
                    "spawn at 1.0 and pay 0.05 a cycle, so anything that goes 20 cycles "
                    "without earning dies"
                ),
                evidence=f"population 0 after cycle {extinct_at}; "
                f"{nonzero_outcomes} of {settles} outcomes were non-zero",
                fix=(
                    "make sure the entries that decide are the ones that get paid: check the "
                    "action vocabulary (decision_polarity markers) and the relevance floor "
                    "(task phrasing vs corpus), or lower upkeep for a slower environment"
                ),
            )
        ]
    return []
