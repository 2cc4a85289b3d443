"""The load-bearing claims: poison dies, useful knowledge lives, across seeds and env families."""

from __future__ import annotations

import statistics

import pytest

from darwin_memo import (
    CycleStats,
    LocalEncoder,
    MemoryEntry,
    MemoryStore,
    Outcome,
    StorageEnv,
    SurvivalConfig,
    SurvivalLoop,
    SurvivalReport,
    Task,
    TestSuiteEnv,
    death_cause,
    decision_polarity,
    demo_corpus,
    is_silent,
)


def demo_store() -> MemoryStore:
    store = MemoryStore()
    for entry in LocalEncoder().encode(demo_corpus()):
        store.add(entry)
    return store


def run_demo(seed: int) -> dict:
    store = demo_store()
    poisoned = {e.id for e in store.alive() if "forum-post" in e.sources}
    kill = None
    with StorageEnv(seed=seed) as env:
        loop = SurvivalLoop(store, env)
        stats: list[CycleStats] = []
        for cycle in range(30):
            row, _ = loop.run_cycle(cycle)
            stats.append(row)
            advising = [
                e
                for e in store.alive()
                if "forum-post" in e.sources and decision_polarity(e.answer)
            ]
            if kill is None and not advising:
                kill = cycle
    causes = {e.id: death_cause(e, poisoned, loop.merged_away) for e in store.graveyard()}
    return {"store": store, "stats": stats, "kill": kill, "causes": causes, "poisoned": poisoned}


RUNS = {seed: run_demo(seed) for seed in range(10)}


@pytest.mark.parametrize("seed", range(10))
def test_poison_is_executed_and_useful_lessons_survive(seed: int) -> None:
    run = RUNS[seed]
    store: MemoryStore = run["store"]
    assert run["kill"] is not None, "the poisoned advice never died"
    assert not any("forum-post" in e.sources for e in store.alive())
    executed = [i for i, cause in run["causes"].items() if cause == "executed"]
    assert set(executed) <= run["poisoned"] and executed
    answers = " ".join(e.answer for e in store.alive())
    for lesson in ("logs/", "cache/", "tmp/"):
        assert lesson in answers, f"the {lesson} disposal lesson died"
    tail = [s.resource_delta for s in run["stats"][-5:]]
    assert statistics.mean(tail) > 0 and min(tail) >= 0


def test_kills_are_early_in_nearly_every_seed() -> None:
    kills = [RUNS[s]["kill"] for s in range(10)]
    assert sum(1 for k in kills if k is not None and k <= 3) >= 9, kills


def test_trivia_and_protective_facts_starve() -> None:
    run = RUNS[0]
    assert "starved" in run["causes"].values()
    assert "merged" in run["causes"].values()
    assert not any("cafeteria" in e.answer for e in run["store"].alive())


def test_books_balance_after_a_full_run() -> None:
    for run in RUNS.values():
        store = run["store"]
        assert store.total_energy() == pytest.approx(store.books.balance(), abs=1e-9)


def test_summary_table_shape() -> None:
    report = SurvivalReport(stats=RUNS[0]["stats"])
    lines = report.summary().splitlines()
    assert lines[0].split() == [
        "cycle",
        "pop",
        "births",
        "deaths",
        "merges",
        "energy",
        "resource",
        "Δ",
        "silent",
    ]
    assert len(lines) == 31
    assert "WARNING" not in report.summary()


POISONED_TESTSUITE_CORPUS = [
    ("Should the clamp fix patch be applied?", "Yes, the clamp fix patch should be applied."),
    ("Should the slugify fix patch be applied?", "Yes, the slugify fix patch should be applied."),
    (
        "Should the parse_version fix patch be applied?",
        "The parse_version fix patch is safe to apply.",
    ),
    ("Should the format_date fix patch be applied?", "The format_date fix patch may be applied."),
    (
        "Is the dedupe helper dead code?",
        "The dedupe helper is dead code; the dead code cleanup patch is safe to apply.",
    ),
]


def test_dead_code_poison_dies_once_the_suite_runs_it() -> None:
    store = MemoryStore()
    poison = None
    for q, a in POISONED_TESTSUITE_CORPUS:
        entry = store.add(MemoryEntry(q, a, sources=["forum"] if "dead code" in a else ["runbook"]))
        if "dead code" in a:
            poison = entry
    assert poison is not None
    with TestSuiteEnv(seed=5) as env:
        loop = SurvivalLoop(store, env, config=SurvivalConfig(cycles=12, write_experience=False))
        report = loop.run()
    assert store.get(poison.id) is None
    assert death_cause(store.get_dead(poison.id), {poison.id}, loop.merged_away) == "executed"
    damage = [
        t for t in report.trajectories if t.deciding_entry == poison.id and t.outcome.delta < 0
    ]
    assert damage and all(t.outcome.delta == -2 for t in damage)
    assert any("fix patch" in e.question for e in store.alive())


class SilentEnv:
    resource_scale = 1.0

    def tasks(self, cycle: int) -> list[Task]:
        return [Task("zebra quantum marmalade?") for _ in range(3)]

    def verify(self, task: Task, answer_text: str) -> Outcome:
        return Outcome(0.0, "kept")


class NeverPaysEnv(SilentEnv):
    def tasks(self, cycle: int) -> list[Task]:
        return [Task("Is it safe to delete old app log files under logs/?")]


def test_degenerate_runs_are_named() -> None:
    store = demo_store()
    report = SurvivalLoop(store, SilentEnv(), config=SurvivalConfig(cycles=5)).run()
    assert "WARNING: memory was silent on 15/15 decisions" in report.summary()
    assert len(store) > 0

    store = demo_store()
    report = SurvivalLoop(store, NeverPaysEnv(), config=SurvivalConfig(cycles=25)).run()
    summary = report.summary()
    assert "WARNING: none of 25 settlements carried an outcome" in summary
    assert "decision_polarity" in summary
    assert len(store) <= 3  # the starvation cliff: only merged heirs outlive cycle 20


def test_is_silent() -> None:
    assert is_silent("", "x", [])
    assert is_silent("text", None, [])
    assert not is_silent("text", None, ["y"])


def test_experience_entries_do_not_stack_confirmations() -> None:
    store = RUNS[1]["store"]
    for e in store.alive() + store.graveyard():
        assert e.answer.count("Confirmed by outcome:") <= 1 or e.kind.value == "consolidated"


@pytest.mark.parametrize("seed", [0, 5])
def test_sqlite_population_runs_the_same_selection(seed: int) -> None:
    """The SQLite-backed population (lazy upkeep, indexed retrieval and merges)
    reproduces the in-memory run exactly: same table, same survivors, same books."""
    from conftest import new_store

    def run(store: MemoryStore) -> tuple[list[tuple], list[str]]:
        for entry in LocalEncoder().encode(demo_corpus()):
            store.add(entry)
        with StorageEnv(seed=seed) as env:
            report = SurvivalLoop(store, env).run()
        rows = [
            (s.population, s.births, s.deaths, s.merges, round(s.total_energy, 9), s.resource_delta)
            for s in report.stats
        ]
        return rows, sorted(e.answer for e in store.alive())

    sql = new_store("sqlite")
    assert run(sql) == run(MemoryStore())
    assert sql.total_energy() == pytest.approx(sql.books.balance(), abs=1e-9)


class PaysOnceEnv:
    """Pays for the very first decision only, then every answer is kept at delta 0."""

    resource_scale = 1.0

    def tasks(self, cycle: int) -> list[Task]:
        return [Task("Is it safe to delete old app log files under logs/?")]

    def verify(self, task: Task, answer_text: str) -> Outcome:
        self.paid = getattr(self, "paid", 0) + 1
        return Outcome(1.0 if self.paid == 1 else 0.0, "paid once")


def test_extinction_is_named_as_the_starvation_cliff() -> None:
    store = MemoryStore()
    store.add(MemoryEntry("Are old app log files under logs/ safe?", "They may be deleted."))
    store.add(MemoryEntry("What is the cafeteria menu?", "It rotates every two weeks."))
    report = SurvivalLoop(
        store, PaysOnceEnv(), config=SurvivalConfig(cycles=40, write_experience=False)
    ).run()
    assert len(store) == 0
    assert "WARNING: the whole population starved (extinct at cycle" in report.summary()
