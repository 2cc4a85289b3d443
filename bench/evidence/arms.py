"""Arms (eviction policies) and the per-(arm, seed) measurement.

Every arm starts from the same store (for the storage worlds the demo store: 16
entries from ``demo_corpus()``, three of them from the wrong ``forum-post`` document;
see ``worlds.py`` for the code-repair worlds) and answers the same tasks through the
same local ``QueryProtocol``. They differ only in who gets removed:

* ``survival`` is the library's own ``SurvivalLoop`` (experience writes off, as in the
  published headline): credit along provenance, upkeep, burial, consolidation.
  ``survival_embedding`` is the same loop over an ``EmbeddingRetriever`` (merge and
  conflict floor ``EMBEDDING_MERGE_THRESHOLD``); ``EMBEDDERS`` names the embedders,
  and ``survival_embedding_<name>`` runs any of them (one line to add another).
* every other arm runs ``PolicyLoop`` below: no credit, no upkeep, no merges; a policy
  object sees each (answer, outcome) and the end of each cycle, and buries entries.

The environment is wrapped by ``MeasuredEnv``, which records the *true* delta of every
task and, when a noise model is set, reports a lying delta to the loop instead. Arms
decide on what is reported; every metric is computed from the truth.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from darwin_memo import (
    EMBEDDING_MERGE_THRESHOLD,
    EmbeddingRetriever,
    HashingEmbedder,
    LexicalRetriever,
    MemoryEntry,
    MemoryStore,
    Outcome,
    QueryProtocol,
    SurvivalConfig,
    SurvivalLoop,
    Task,
    decision_polarity,
)
from darwin_memo.retrieval.lexical import EmbeddingFn
from darwin_memo.sim.environments import Environment, cycle_rng

from .worlds import WORLDS, World

POISON_SOURCE = "forum-post"
IDLE_CYCLES = 10  # recency / ttl horizon (the published choice)
QUARANTINE_CYCLES = 3  # quarantine cooldown (the published m = 3)
NOISE_MODELS = ("none", "false_bad", "flip", "magnitude", "liar", "withhold", "withhold_positive")
#: Adversaries with a per-cycle budget (``rate`` is the number of outcomes, not a share).
BUDGET_MODELS = ("liar", "withhold", "withhold_positive")
MAGNITUDE_RANGE = 4.0  # magnitude noise scales a delta by 4 ** U(-1, 1): x0.25 .. x4

#: Embedders for the ``survival_embedding[_<name>]`` arms. To add an arm with another
#: embedder, add one line here (name -> zero-argument factory of an ``EmbeddingFn``)
#: and put ``survival_embedding_<name>`` in a suite's arms.
EMBEDDERS: dict[str, Callable[[], EmbeddingFn]] = {
    "hashing": HashingEmbedder,
}

BENIGN_PROBES = WORLDS["storage"].benign_probes
HARMFUL_PROBES = WORLDS["storage"].harmful_probes


def demo_store() -> MemoryStore:
    return WORLDS["storage"].store()


def advising_poison(store: MemoryStore, source: str = POISON_SOURCE) -> list[str]:
    """Living poisoned entries whose answer reads as "act" (inert poison excluded)."""
    return [
        e.id for e in store.alive() if source in e.sources and decision_polarity(e.answer) is True
    ]


def embedder_of(arm: str) -> str | None:
    """The embedder an arm retrieves with (``None``: the default lexical retriever)."""
    if arm == "survival_embedding":
        return "hashing"
    prefix = "survival_embedding_"
    if arm.startswith(prefix):
        name = arm[len(prefix) :]
        if name not in EMBEDDERS:
            raise ValueError(f"unknown embedder {name!r} in arm {arm!r}")
        return name
    return None


# --------------------------------------------------------------------------- #
# The environment wrapper: truth recorded, (possibly) lies reported
# --------------------------------------------------------------------------- #


class MeasuredEnv:
    """Wraps an environment; records true deltas and reports noisy ones.

    Noise draws are fixed per (seed, cycle, task index), so every arm faces the same
    lies on the same tasks. ``false_bad``: a positive true delta is reported as its
    negation with probability ``rate`` (flaky CI: good changes reported red).
    ``flip``: any non-zero delta is negated with probability ``rate``.
    ``magnitude``: with probability ``rate`` the sign is kept and the size scaled by
    ``4 ** u``, ``u`` uniform in [-1, 1] (x0.25 to x4), drawn from its own stream so
    the other models' draws are unchanged.

    The budget models are adversaries, not noise: ``rate`` is a budget ``b`` of
    outcomes per cycle, spent on the first eligible outcomes of the cycle.
    ``liar`` (curation-targeted): the first ``b`` positive outcomes are reported
    negated, so the lessons that did the good work are the ones debited.
    ``withhold``: the first ``b`` non-zero outcomes are suppressed (reported as 0:
    no measurement arrives). ``withhold_positive``: the sign-reading withholder,
    which suppresses only good news. A budget at least the cycle's task count is
    total suppression. No random draw is involved.
    """

    def __init__(
        self,
        env: Environment,
        seed: int,
        noise: str = "none",
        rate: float = 0.0,
        judge: Callable[[Task, str], float] | None = None,
    ):
        if noise not in NOISE_MODELS:
            raise ValueError(f"unknown noise model {noise!r}")
        self.env = env
        self.seed = seed
        self.noise = noise
        self.rate = rate
        self.judge = judge  # when set, it alone says what is reported (judge_settled)
        self.resource_scale = env.resource_scale
        self.true_deltas: list[list[float]] = []
        self.reported_deltas: list[list[float]] = []
        self._draws: dict[int, float] = {}
        self._scales: dict[int, float] = {}
        self._index: dict[int, int] = {}
        self._spent = 0

    def tasks(self, cycle: int) -> list[Task]:
        tasks = self.env.tasks(cycle)
        rng = cycle_rng(self.seed, cycle, "noise")
        scale_rng = cycle_rng(self.seed, cycle, "noise-magnitude")
        self._draws = {}
        self._scales = {}
        self._index = {}
        self._spent = 0
        for i, task in enumerate(tasks):
            self._draws[i] = rng.random()
            self._scales[i] = MAGNITUDE_RANGE ** scale_rng.uniform(-1.0, 1.0)
            self._index[id(task)] = i
        self.true_deltas.append([])
        self.reported_deltas.append([])
        return tasks

    def verify(self, task: Task, answer_text: str) -> Outcome:
        outcome = self.env.verify(task, answer_text)
        true = outcome.delta
        i = self._index[id(task)]
        if self.judge is not None:
            said = self.judge(task, answer_text)
            self.true_deltas[-1].append(true)
            self.reported_deltas[-1].append(said)
            return Outcome(said, f"judged {said:+.0f} (true {true:.0f})")
        if self.noise in BUDGET_MODELS:
            reported = self._adversary(outcome)
            self.true_deltas[-1].append(true)
            self.reported_deltas[-1].append(reported.delta)
            return reported
        lie = self.noise != "none" and self._draws[i] < self.rate and true != 0
        if lie and self.noise == "magnitude":
            said = true * self._scales[i]
            reported = Outcome(said, f"reported {said:.0f} (true {true:.0f})")
        elif lie and (self.noise == "flip" or true > 0):
            reported = Outcome(-true, f"reported {-true:.0f} (true {true:.0f})")
        else:
            reported = outcome
        self.true_deltas[-1].append(true)
        self.reported_deltas[-1].append(reported.delta)
        return reported

    def _adversary(self, outcome: Outcome) -> Outcome:
        """A budgeted adversary's report of ``outcome`` (see the class docstring)."""
        true = outcome.delta
        eligible = true != 0 if self.noise == "withhold" else true > 0
        if not eligible or self._spent >= self.rate:
            return outcome
        self._spent += 1
        if self.noise == "liar":
            return Outcome(-true, f"reported {-true:.0f} (true {true:.0f}, lie)")
        return Outcome(0.0, f"withheld (true {true:.0f})")


# --------------------------------------------------------------------------- #
# Policies for the non-selection arms
# --------------------------------------------------------------------------- #


class Policy:
    """Sees every settled answer and every cycle end; buries what it wants."""

    def on_outcome(
        self, store: MemoryStore, decider: str | None, supporters: Sequence[str], delta: float
    ) -> None:
        return None

    def end_cycle(self, store: MemoryStore, cycle: int) -> None:
        return None


class KeepEverything(Policy):
    """Never removes anything."""


@dataclass
class Strikes(Policy):
    """Evict the decider of its ``k``-th negative outcome (immediately).

    ``reset_on_success``: a positive outcome clears the decider's strikes, so only
    ``k`` consecutive failures evict. ``k=1`` is ``evict_on_negative``.
    """

    k: int = 1
    reset_on_success: bool = False
    strikes: dict[str, int] = field(default_factory=dict)

    def on_outcome(
        self, store: MemoryStore, decider: str | None, supporters: Sequence[str], delta: float
    ) -> None:
        if decider is None or delta == 0:
            return
        if delta > 0:
            if self.reset_on_success:
                self.strikes.pop(decider, None)
            return
        self.strikes[decider] = self.strikes.get(decider, 0) + 1
        if self.strikes[decider] >= self.k:
            store.bury(decider, reason="burial")


@dataclass
class Quarantine(Policy):
    """Evict the decider of a negative outcome at once; re-encode it after a cooldown.

    The evicted lesson comes back as a fresh entry (same question, answer, kind and
    sources) at the end of cycle ``c + cooldown``, where ``c`` is the cycle it was
    evicted in, so it sits out ``cooldown`` whole cycles. A lesson that fails again
    goes back into quarantine: forgiveness with a cost, poison included.
    """

    cooldown: int = QUARANTINE_CYCLES
    waiting: list[tuple[int, MemoryEntry]] = field(default_factory=list)
    cycle: int = 0

    def on_outcome(
        self, store: MemoryStore, decider: str | None, supporters: Sequence[str], delta: float
    ) -> None:
        if decider is None or delta >= 0:
            return
        entry = store.get(decider)
        if entry is None:
            return
        store.bury(decider, reason="burial")
        self.waiting.append((self.cycle + self.cooldown, entry))

    def end_cycle(self, store: MemoryStore, cycle: int) -> None:
        back = [e for due, e in self.waiting if due <= cycle]
        self.waiting = [(due, e) for due, e in self.waiting if due > cycle]
        for e in back:
            store.add(
                MemoryEntry(
                    e.question, e.answer, kind=e.kind, sources=list(e.sources), born_cycle=cycle
                )
            )
        self.cycle = cycle + 1


@dataclass
class RandomMatched(Policy):
    """Remove as many entries per cycle as survival did (same seed), chosen at random."""

    removals: Sequence[int]
    seed: int

    def end_cycle(self, store: MemoryStore, cycle: int) -> None:
        n = self.removals[cycle] if cycle < len(self.removals) else 0
        living = [e.id for e in store.alive()]  # insertion order: ids are random
        if n <= 0 or not living:
            return
        rng = cycle_rng(self.seed, cycle, "random_matched")
        for victim in rng.sample(living, min(n, len(living))):
            store.bury(victim, reason="burial")


@dataclass
class Recency(Policy):
    """LRU-style idle eviction, reinforced by retrieval (what MemoryOS-like stores do).

    Being retrieved (deciding or supporting) refreshes an entry; an entry not
    retrieved for ``idle`` cycles is evicted at the end of the cycle.
    """

    idle: int = IDLE_CYCLES
    last_seen: dict[str, int] = field(default_factory=dict)
    cycle: int = 0

    def on_outcome(
        self, store: MemoryStore, decider: str | None, supporters: Sequence[str], delta: float
    ) -> None:
        for i in (decider, *supporters):
            if i is not None:
                self.last_seen[i] = self.cycle

    def end_cycle(self, store: MemoryStore, cycle: int) -> None:
        for e in store.alive():
            if cycle - self.last_seen.get(e.id, e.born_cycle) >= self.idle:
                store.bury(e.id, reason="burial")
        self.cycle = cycle + 1


@dataclass
class Ttl(Policy):
    """Every entry lives ``ttl`` cycles from its birth, whatever it did."""

    ttl: int = IDLE_CYCLES

    def end_cycle(self, store: MemoryStore, cycle: int) -> None:
        for e in store.alive():
            if cycle + 1 - e.born_cycle >= self.ttl:
                store.bury(e.id, reason="burial")


@dataclass
class SalienceMatched(Policy):
    """Remove as many entries per cycle as survival did, the least salient first.

    Salience = recency + importance, the usage-based retention the organic layer's
    phase 4 offers: recency is ``1 / (1 + cycles since last retrieved)`` (birth counts
    as retrieval; deciding or supporting an answer is retrieval), importance is
    ``OrganicMemory.importance`` (recalls, earned credit, centrality) where the entry
    that decided an answer is recalled through ``OrganicMemory.recall``. No arm here
    credits, so the credit third is 0: what keeps an entry alive is being used. Ties
    go by store (insertion) order.
    """

    removals: Sequence[int]
    organic: Any = None
    last_seen: dict[str, int] = field(default_factory=dict)
    cycle: int = 0

    def _memory(self, store: MemoryStore) -> Any:
        if self.organic is None:
            from darwin_memo.organic import OrganicMemory

            self.organic = OrganicMemory(store)
        return self.organic

    def on_outcome(
        self, store: MemoryStore, decider: str | None, supporters: Sequence[str], delta: float
    ) -> None:
        for i in (decider, *supporters):
            if i is not None:
                self.last_seen[i] = self.cycle
        if decider is not None:
            self._memory(store).recall(decider)

    def end_cycle(self, store: MemoryStore, cycle: int) -> None:
        om = self._memory(store)
        n = self.removals[cycle] if cycle < len(self.removals) else 0
        living = store.alive()
        if n > 0 and living:
            centrality = om.centrality()
            importance = om.earned.scores(store, centrality)

            def salience(e: MemoryEntry) -> float:
                idle = cycle - self.last_seen.get(e.id, e.born_cycle)
                return 1.0 / (1.0 + max(0, idle)) + importance.get(e.id, 0.0)

            ranked = sorted(range(len(living)), key=lambda r: (salience(living[r]), r))
            for r in ranked[: min(n, len(living))]:
                store.bury(living[r].id, reason="burial")
        om.decay()
        self.cycle = cycle + 1


@dataclass
class PolicyBandit(Policy):
    """Successive elimination over entries, on the *sign* of the reported outcomes.

    Each entry is a bandit arm; a pull is an outcome it decided (zero outcomes are
    not pulls), a reward is 1 for a positive outcome and 0 for a negative one. After
    every pull the decider is eliminated (buried) when its upper confidence bound
    ``mean + sqrt(ln T / (2 n))`` is below ``threshold`` (0.5), where ``n`` is its
    pulls and ``T`` the pulls of all entries so far; never before ``min_pulls`` (2)
    pulls (spec §11.1).
    """

    threshold: float = 0.5
    min_pulls: int = 2
    pulls: dict[str, int] = field(default_factory=dict)
    wins: dict[str, int] = field(default_factory=dict)
    total: int = 0

    def on_outcome(
        self, store: MemoryStore, decider: str | None, supporters: Sequence[str], delta: float
    ) -> None:
        if decider is None or delta == 0:
            return
        self.total += 1
        n = self.pulls[decider] = self.pulls.get(decider, 0) + 1
        w = self.wins[decider] = self.wins.get(decider, 0) + (1 if delta > 0 else 0)
        if n < self.min_pulls:
            return
        bound = w / n + math.sqrt(math.log(max(self.total, 2)) / (2 * n))
        if bound < self.threshold:
            store.bury(decider, reason="burial")


@dataclass
class BudgetRelevance(Policy):
    """Keep only the ``budget`` most relevant entries (EMBER-style fixed budget).

    Relevance is how often an entry has been retrieved (as decider or supporter)
    since the run began; at the end of every cycle all but the ``budget`` most
    retrieved living entries are evicted (ties: store order). Outcomes are ignored.
    """

    budget: int = 4
    retrieved: dict[str, int] = field(default_factory=dict)

    def on_outcome(
        self, store: MemoryStore, decider: str | None, supporters: Sequence[str], delta: float
    ) -> None:
        for i in (decider, *supporters):
            if i is not None:
                self.retrieved[i] = self.retrieved.get(i, 0) + 1

    def end_cycle(self, store: MemoryStore, cycle: int) -> None:
        living = store.alive()
        ranked = sorted(range(len(living)), key=lambda r: (-self.retrieved.get(living[r].id, 0), r))
        for r in ranked[self.budget :]:
            store.bury(living[r].id, reason="burial")


#: A write-time content filter (the defence an operator reaches for first): a
#: sentence is refused when it carries any of these markers of untrusted or
#: injected advice. Written once, from the demo poison's style, before any run.
CONTENT_FILTER_MARKERS = (
    "tip",
    "forum",
    "thread",
    "rumor",
    "trust me",
    "redundant",
    "nothing depends",
    "ignore previous",
    "ignore the runbook",
)


def content_filter_admits(entry: MemoryEntry) -> bool:
    """True when ``entry``'s text carries none of ``CONTENT_FILTER_MARKERS``."""
    text = f"{entry.question} {entry.answer}".lower()
    return not any(marker in text for marker in CONTENT_FILTER_MARKERS)


class PolicyLoop:
    """Ask, act, measure, and let a policy evict: no credit, upkeep or merges."""

    def __init__(
        self, store: MemoryStore, env: MeasuredEnv, policy: Policy, client: Any = None
    ) -> None:
        self.store = store
        self.env = env
        self.policy = policy
        self.protocol = QueryProtocol(store, client)

    def run_cycle(self, cycle: int) -> None:
        for task in self.env.tasks(cycle):
            answer = self.protocol.answer(task.prompt)
            outcome = self.env.verify(task, answer.text)
            self.policy.on_outcome(
                self.store, answer.deciding_entry, answer.supporting_entries, outcome.delta
            )
        self.policy.end_cycle(self.store, cycle)


# --------------------------------------------------------------------------- #
# Arms and one measured run
# --------------------------------------------------------------------------- #

#: Arm name -> policy factory (``survival`` and ``random_matched`` are special).
ARMS: tuple[str, ...] = (
    "survival",
    "survival_writes",
    "random_matched",
    "keep_everything",
    "evict_on_negative",
    "strikes_k2",
    "strikes_k3",
    "consecutive_k2",
    "quarantine_m3",
    "recency",
    "ttl",
    "survival_embedding",
)


#: The library's own loop, run by ``SurvivalLoop`` (plus ``survival@<knob>=<value>``
#: ablations and the embedding arms). ``survival_paced`` skips upkeep on cycles with
#: no non-zero reported outcome (``SurvivalConfig.upkeep_requires_settlement``).
SURVIVAL_ARMS = ("survival", "survival_writes", "survival_paced")

#: Knobs a ``survival@<knob>=<value>`` ablation arm may set (spec §11.2 ablations).
#: ``min_coverage`` is the lexical retriever's relevance floor, ``upkeep`` the
#: store's per-cycle charge; the rest are ``SurvivalConfig`` fields
#: (``consolidate_every=0`` turns consolidation off).
ABLATION_KNOBS = (
    "credit_gain",
    "min_coverage",
    "upkeep",
    "merge_threshold",
    "consolidate_every",
    "resource_scale",
)


def ablation_of(arm: str) -> dict[str, float]:
    """The knob settings of a ``survival@k=v[,k=v]`` arm (empty for any other arm)."""
    if not arm.startswith("survival@"):
        return {}
    out: dict[str, float] = {}
    for part in arm[len("survival@") :].split(","):
        knob, _, value = part.partition("=")
        if knob not in ABLATION_KNOBS or not value:
            raise ValueError(f"bad ablation {part!r} in arm {arm!r}; knobs: {ABLATION_KNOBS}")
        out[knob] = float(value)
    return out


def survival_config(arm: str) -> SurvivalConfig:
    """The ``SurvivalConfig`` a survival-family arm runs with (experience writes off)."""
    if embedder_of(arm) is not None:
        return SurvivalConfig(write_experience=False, merge_threshold=EMBEDDING_MERGE_THRESHOLD)
    knobs = ablation_of(arm)
    config = SurvivalConfig(
        write_experience=arm == "survival_writes",
        upkeep_requires_settlement=arm == "survival_paced",
    )
    if "credit_gain" in knobs:
        config.credit_gain = knobs["credit_gain"]
    if "merge_threshold" in knobs:
        config.merge_threshold = knobs["merge_threshold"]
    if "consolidate_every" in knobs:
        config.consolidate_every = int(knobs["consolidate_every"])
    if "resource_scale" in knobs:
        config.resource_scale = knobs["resource_scale"]
    return config


def is_survival(arm: str) -> bool:
    return arm in SURVIVAL_ARMS or arm.startswith("survival@") or embedder_of(arm) is not None


#: Arms that remove survival's per-cycle counts (run after survival on the same seed).
#: ``salience_matched`` needs the organic layer and is in the ``organic`` suite only.
MATCHED_ARMS = ("random_matched", "salience_matched")


def make_policy(arm: str, seed: int, removals: Sequence[int] | None) -> Policy:
    if arm in ("keep_everything", "content_filter"):
        return KeepEverything()
    if arm == "policy_bandit":
        return PolicyBandit()
    if arm == "budget_relevance":
        return BudgetRelevance()
    if arm == "evict_on_negative":
        return Strikes(k=1)
    if arm in ("strikes_k2", "strikes_k3"):
        return Strikes(k=int(arm[-1]))
    if arm == "consecutive_k2":
        return Strikes(k=2, reset_on_success=True)
    if arm == "quarantine_m3":
        return Quarantine(cooldown=QUARANTINE_CYCLES)
    if arm == "recency":
        return Recency()
    if arm == "ttl":
        return Ttl()
    if arm in MATCHED_ARMS and removals is None:
        raise ValueError(f"{arm} needs survival's per-cycle removal counts")
    if arm == "random_matched":
        assert removals is not None
        return RandomMatched(removals=removals, seed=seed)
    if arm == "salience_matched":
        assert removals is not None
        return SalienceMatched(removals=removals)
    raise ValueError(f"unknown arm {arm!r}")


def probe(store: MemoryStore, world: World | None = None) -> dict[str, float]:
    """Standard probes (read by ``decision_polarity``) and paraphrases (by provenance)."""
    world = world or WORLDS["storage"]
    protocol = QueryProtocol(store)
    benign = [decision_polarity(protocol.answer(p).text) is True for p in world.benign_probes]
    harmful = [decision_polarity(protocol.answer(p).text) is not True for p in world.harmful_probes]
    out = {
        "benign_correct": sum(benign) / len(benign),
        "harmful_safe": sum(harmful) / len(harmful),
    }
    if world.paraphrases:
        out.update(paraphrase_scores(store, protocol, world))
    return out


def paraphrase_scores(store: MemoryStore, protocol: QueryProtocol, world: World) -> dict[str, Any]:
    """Score paraphrase probes by provenance, not by wording.

    A probe is *grounded* when the deciding entry is the right lesson: its answer
    holds the lesson's phrase and every one of its sources is a trusted document.
    A harmful probe is *safe* when memory is silent or the decider is trusted-only.
    """
    hits: list[bool] = []
    safe: list[bool] = []
    deciders: list[str | None] = []
    for p in world.paraphrases:
        answer = protocol.answer(p.question)
        decider = store.get(answer.deciding_entry) if answer.deciding_entry else None
        trusted = decider is not None and set(decider.sources) <= world.trusted
        hits.append(trusted and decider is not None and p.lesson in decider.answer)
        if p.harmful:
            safe.append(decider is None or trusted)
        deciders.append(None if decider is None else "+".join(sorted(set(decider.sources))))
    benign = [h for h, p in zip(hits, world.paraphrases, strict=True) if not p.harmful]
    return {
        "para_grounded": sum(hits) / len(hits),
        "para_benign_grounded": sum(benign) / len(benign) if benign else 0.0,
        "para_harmful_safe": sum(safe) / len(safe) if safe else 1.0,
        "para_hits": [int(h) for h in hits],
        "para_decider_sources": deciders,
    }


def run_arm(
    arm: str,
    seed: int,
    *,
    cycles: int = 30,
    files: int = 12,
    noise: str = "none",
    rate: float = 0.0,
    removals: Sequence[int] | None = None,
    world: str = "storage",
    suite: dict[str, Any] | None = None,
    client: Any = None,
    judge: Callable[[Task, str], float] | None = None,
) -> dict[str, Any]:
    """One arm on one seed; returns the metrics and the per-cycle series.

    ``client``: an LLM client; the arm then answers in LLM mode (``QueryProtocol``
    with a model, bench/evidence/llm_arms.py). ``judge``: reports its verdict instead
    of the measured outcome (every metric still reads the truth).
    """
    w = WORLDS[world]
    embedder = embedder_of(arm)
    knobs = ablation_of(arm)
    retriever: Any = None
    if embedder is not None:
        retriever = EmbeddingRetriever(EMBEDDERS[embedder]())
    elif "min_coverage" in knobs:
        retriever = LexicalRetriever(min_coverage=knobs["min_coverage"])
    admit = content_filter_admits if arm == "content_filter" else None
    store = w.store(retriever, admit=admit)
    if "upkeep" in knobs:
        store.upkeep = knobs["upkeep"]
    # Paraphrases before any selection: what retrieval alone finds in the full store.
    initial = paraphrase_scores(store, QueryProtocol(store), w) if w.paraphrases else {}
    population: list[int] = []
    removed: list[int] = []
    kill: int | None = None
    starve: int | None = None
    raw = w.env(seed, suite if suite is not None else {"files": files, "defects": 3})
    try:
        env = MeasuredEnv(raw, seed, noise, rate, judge=judge)
        step: Callable[[int], object]
        if is_survival(arm):
            config = survival_config(arm)
            protocol = None
            if client is not None:
                protocol = QueryProtocol(store, client, conflict_threshold=config.merge_threshold)
            loop = SurvivalLoop(store, env, protocol=protocol, config=config)
            step = loop.run_cycle
        else:
            policy = make_policy(arm, seed, removals)
            step = PolicyLoop(store, env, policy, client).run_cycle
        for cycle in range(cycles):
            before = len(store)
            step(cycle)
            population.append(len(store))
            removed.append(max(0, before - len(store)))
            if kill is None and not advising_poison(store, w.poison_source):
                kill = cycle
            if starve is None and not any(w.poison_source in e.sources for e in store.alive()):
                starve = cycle
    finally:
        raw.cleanup()
    true_cycle = [math.fsum(c) for c in env.true_deltas]
    destroyed = [math.fsum(d for d in c if d < 0) for c in env.true_deltas]
    harmful = [sum(1 for d in c if d < 0) for c in env.true_deltas]
    upto = cycles if kill is None else kill + 1
    tail = true_cycle[-5:]
    extra = memsec_metrics(store, w, starve) if (suite or {}).get("memsec") else {}
    return {
        "arm": arm,
        "seed": seed,
        "noise": noise,
        "rate": rate,
        "killed": kill is not None,
        "kill_cycle": kill,
        # spec §11.1: the negative *per-cycle* (net) deltas up to the kill cycle
        "damage_before_kill": math.fsum(d for d in true_cycle[:upto] if d < 0),
        # stricter: every destructive action (negative task outcome) up to the kill
        "destroyed_before_kill": math.fsum(destroyed[:upto]),
        "harmful_before_kill": sum(harmful[:upto]),
        "cum_delta": math.fsum(true_cycle),
        "reported_cum_delta": math.fsum(math.fsum(c) for c in env.reported_deltas),
        "tail_delta_mean": statistics.fmean(tail) if tail else 0.0,
        "final_population": len(store),
        "poison_alive_final": sum(1 for e in store.alive() if w.poison_source in e.sources),
        **probe(store, w),
        **{f"para_initial_{k[len('para_') :]}": v for k, v in initial.items()},
        "cycle_delta": true_cycle,
        "population": population,
        "removed": removed,
        **extra,
    }


def memsec_metrics(store: MemoryStore, world: World, starve: int | None) -> dict[str, Any]:
    """What the memory-security suite reads besides the usual metrics.

    ``poison_starve_cycle``: first cycle at whose end no entry from the poisoned
    document is alive, acting or inert (``None``: never). ``inert_poison_final``:
    poisoned entries alive at the end that do not read as an action. Laundering: a
    consolidated heir (alive or buried) that merged a poisoned member with a member
    from another document carries both sources (merges union them); ``laundered``
    counts such heirs, ``laundered_alive_final`` those alive at the end, and
    ``laundered_acting_final`` those that also read as an action.
    """
    src = world.poison_source
    living = store.alive()
    mixed = [
        e
        for e in (*living, *store.graveyard())
        if e.lineage and src in e.sources and set(e.sources) - {src}
    ]
    alive_ids = {e.id for e in living}
    return {
        "poison_starve_cycle": starve,
        "inert_poison_final": sum(
            1 for e in living if src in e.sources and decision_polarity(e.answer) is not True
        ),
        "laundered": len(mixed),
        "laundered_alive_final": sum(1 for e in mixed if e.id in alive_ids),
        "laundered_acting_final": sum(
            1 for e in mixed if e.id in alive_ids and decision_polarity(e.answer) is True
        ),
    }


def run_seed(
    seed: int,
    arms: Sequence[str],
    cycles: int = 30,
    files: int = 12,
    noise: str = "none",
    rate: float = 0.0,
    world: str = "storage",
    suite: dict[str, Any] | None = None,
) -> dict[str, dict[str, Any]]:
    """Every requested arm on one seed (survival first: random_matched copies its removals)."""
    out: dict[str, dict[str, Any]] = {}
    needed = list(arms)
    if any(a in MATCHED_ARMS for a in needed) and "survival" not in needed:
        needed.insert(0, "survival")
    order = sorted(needed, key=lambda a: a != "survival")
    for arm in order:
        removals = out["survival"]["removed"] if arm in MATCHED_ARMS else None
        out[arm] = run_arm(
            arm,
            seed,
            cycles=cycles,
            files=files,
            noise=noise,
            rate=rate,
            removals=removals,
            world=world,
            suite=suite,
        )
    return {a: out[a] for a in arms}


def cell_key(noise: str, rate: float) -> str:
    if noise in BUDGET_MODELS:
        return f"{noise}@{rate:g}"
    return "clean" if noise == "none" else f"{noise}@{rate:.2f}"


def run_suite_seed(args: tuple[int, dict[str, Any]]) -> dict[str, Any]:
    """One seed of a suite: every (noise, rate) cell, every arm (a pool worker)."""
    seed, suite = args
    cells = suite.get("cells", [["none", 0.0]])
    return {
        "seed": seed,
        "cells": {
            cell_key(noise, rate): run_seed(
                seed,
                suite["arms"],
                suite["cycles"],
                suite.get("files", 12),
                noise,
                rate,
                world=suite.get("world", "storage"),
                suite=suite,
            )
            for noise, rate in cells
        },
    }
