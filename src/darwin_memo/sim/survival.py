"""The survival loop: ask memory, let the environment act and measure, pay credit.

Each cycle every task is answered from memory, the environment executes the
answer and measures the change in its conserved resource, and that delta flows
back along the answer's provenance at once: ``credit_gain * tanh(delta /
resource_scale)`` to the decider, a quarter of it to each supporter. Then the
best winning trajectory may be written back as an experience, everyone pays
upkeep, the dead are buried, and every few cycles near-duplicates merge.
Nothing grades an answer; the world does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..answer.protocol import QueryProtocol
from ..economy.config import SurvivalConfig
from ..economy.lifecycle import advance_lifecycle, assign_credit, death_cause, is_silent
from ..records.entry import CycleStats, EntryKind, MemoryEntry, Trajectory
from ..retrieval.simjoin import merge_groups

TYPE_CHECKING = False
if TYPE_CHECKING:  # the ledger imports this module; keep its start-up light
    from ..backends.interface import Population
    from .environments import Environment

__all__ = [
    "EXPERIENCE_DEDUP",
    "SurvivalConfig",
    "SurvivalLoop",
    "SurvivalReport",
    "advance_lifecycle",
    "assign_credit",
    "death_cause",
    "is_silent",
]

#: An experience is not written if it is more similar than this to a living entry.
EXPERIENCE_DEDUP = 0.8
_CONFIRMED = " Confirmed by outcome: "


@dataclass
class SurvivalReport:
    """Per-cycle statistics and every trajectory of a run."""

    stats: list[CycleStats] = field(default_factory=list)
    trajectories: list[Trajectory] = field(default_factory=list)

    def health_warning(self) -> str:
        """A plain-language warning when the run degenerated, else ``""``."""
        tasks = sum(s.tasks for s in self.stats)
        extinct_at = next(
            (s.cycle for s in self.stats if s.population == 0 and s.deaths + s.merges > 0), None
        )
        from .diagnose import selection_findings  # only reports need it

        findings = selection_findings(
            decides=tasks,
            silent=sum(s.silent for s in self.stats),
            nonzero_outcomes=sum(s.nonzero_outcomes for s in self.stats),
            settles=tasks,
            extinct_at=extinct_at,
        )
        return "".join(f"\n\nWARNING: {f.summary}: {f.fix}" for f in findings)

    def summary(self) -> str:
        header = (
            f"{'cycle':>5} {'pop':>4} {'births':>6} {'deaths':>6} {'merges':>6} "
            f"{'energy':>8} {'resource Δ':>12} {'silent':>8}"
        )
        rows = [header]
        for s in self.stats:
            silent = f"{s.silent}/{s.tasks}" if s.tasks else "-"
            rows.append(
                f"{s.cycle:>5} {s.population:>4} {s.births:>6} {s.deaths:>6} {s.merges:>6} "
                f"{s.total_energy:>8.2f} {s.resource_delta:>12.0f} {silent:>8}"
            )
        return "\n".join(rows) + self.health_warning()


class SurvivalLoop:
    """Runs cycles of ask, act, measure, credit, upkeep and consolidation."""

    def __init__(
        self,
        store: Population,
        env: Environment,
        protocol: QueryProtocol | None = None,
        config: SurvivalConfig | None = None,
    ) -> None:
        self.store = store
        self.env = env
        self.config = config if config is not None else SurvivalConfig()
        self.protocol = (
            protocol
            if protocol is not None
            else QueryProtocol(store, conflict_threshold=self.config.effective_conflict_threshold)
        )
        #: Ids that merged away, and ids of entries that ever took a negative credit.
        self.merged_away: set[str] = set()
        self.damaged: set[str] = set()

    @property
    def resource_scale(self) -> float:
        if self.config.resource_scale is not None:
            return self.config.resource_scale
        return float(self.env.resource_scale)

    def run(self) -> SurvivalReport:
        report = SurvivalReport()
        for cycle in range(self.config.cycles):
            stats, trajectories = self.run_cycle(cycle)
            report.stats.append(stats)
            report.trajectories.extend(trajectories)
        return report

    def run_cycle(self, cycle: int) -> tuple[CycleStats, list[Trajectory]]:
        store, config = self.store, self.config
        trajectories: list[Trajectory] = []
        resource_delta = 0.0
        silent = nonzero = 0
        best: Trajectory | None = None
        tasks = list(self.env.tasks(cycle))
        for task in tasks:
            answer = self.protocol.answer(task.prompt)
            decider, supporters = answer.deciding_entry, list(answer.supporting_entries)
            if is_silent(answer.text, decider, supporters):
                silent += 1
            outcome = self.env.verify(task, answer.text)
            if math.isfinite(outcome.delta):
                resource_delta += outcome.delta
            if outcome.delta != 0:
                nonzero += 1
            trajectory = Trajectory(cycle, task.prompt, answer.text, decider, supporters, outcome)
            trajectories.append(trajectory)
            applied = assign_credit(
                store, decider, supporters, outcome.delta, self.resource_scale, config, cycle
            )
            self.damaged.update(i for i, c in applied if c < -1e-9)
            advance_lifecycle(store, applied, outcome.delta, decider)
            if outcome.delta > 0 and (best is None or outcome.delta > best.outcome.delta):
                best = trajectory
        births = 0
        if config.write_experience and best is not None and self._write_experience(best, cycle):
            births = 1
        deaths = 0
        if not (config.upkeep_requires_settlement and nonzero == 0):
            deaths = len(store.charge_upkeep())
        merges = 0
        if config.consolidate_every and (cycle + 1) % config.consolidate_every == 0:
            done = merge_groups(
                store,
                cycle,
                config.merge_threshold,
                source_policy=config.merge_source_policy,
                similarity=config.merge_similarity,
            )
            for merge in done:
                self.merged_away.update(merge.members)
            merges = len(done)
        stats = CycleStats(
            cycle=cycle,
            population=len(store),
            births=births,
            deaths=deaths,
            merges=merges,
            total_energy=store.total_energy(),
            resource_delta=resource_delta,
            tasks=len(tasks),
            silent=silent,
            nonzero_outcomes=nonzero,
        )
        return stats, trajectories

    def _write_experience(self, best: Trajectory, cycle: int) -> bool:
        parent_id = best.deciding_entry or (
            best.supporting_entries[0] if best.supporting_entries else None
        )
        parent = self.store.get(parent_id) if parent_id else None
        if parent is None:
            return False
        # Confirming an experience again must not stack "Confirmed by outcome" clauses.
        base = parent.answer.split(_CONFIRMED, 1)[0]
        detail = best.outcome.detail.rstrip(".")
        candidate = MemoryEntry(
            question=parent.question,
            answer=f"{base}{_CONFIRMED}{detail}.",
            kind=EntryKind.EXPERIENCE,
            sources=[f"cycle-{cycle}"],
            born_cycle=cycle,
        )
        if any(
            self.store.similarity(candidate, other) > EXPERIENCE_DEDUP
            for other in self.store.alive()
        ):
            return False
        self.store.add(candidate)
        return True
