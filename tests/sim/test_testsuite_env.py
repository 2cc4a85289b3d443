"""TestSuiteEnv runs a real suite against real patched files."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from darwin_memo.records.entry import Outcome, Task
from darwin_memo.sim.environments import Environment
from darwin_memo.sim.testsuite_env import (
    DEFECTS,
    TEST_NAMES,
    TEST_SOURCE,
    RentedTestSuiteEnv,
    TestSuiteEnv,
    app_source,
    run_suite,
    run_suite_detail,
)

APPLY = "Yes, this patch should be applied."


def by_kind(tasks: list[Task], kind: str) -> list[Task]:
    return [t for t in tasks if t.context["kind"] == kind]


# --------------------------------------------------------------------------- #
# The suite itself
# --------------------------------------------------------------------------- #


def test_clean_app_passes_every_test() -> None:
    assert len(TEST_NAMES) == 10
    assert run_suite_detail(app_source(), TEST_SOURCE) == frozenset(TEST_NAMES)
    assert run_suite(app_source(), TEST_SOURCE) == 10


@pytest.mark.parametrize(
    ("defect", "broken"),
    [
        ("clamp", "test_clamp_inclusive_upper"),
        ("slugify", "test_slugify_separator"),
        ("parse_version", "test_parse_version"),
        ("format_date", "test_format_date"),
    ],
)
def test_each_defect_breaks_one_test(defect: str, broken: str) -> None:
    assert run_suite_detail(app_source([defect]), TEST_SOURCE) == frozenset(TEST_NAMES) - {broken}


def test_all_defects() -> None:
    assert run_suite(app_source(DEFECTS), TEST_SOURCE) == 6


def test_module_error_means_zero_passing() -> None:
    assert run_suite("def broken(:\n", TEST_SOURCE) == 0
    assert run_suite("raise RuntimeError('import time')\n", TEST_SOURCE) == 0
    assert run_suite(app_source(), "import app\ndef test_x(:\n") == 0
    assert run_suite_detail(app_source(), "import nonexistent_module_xyz\n") == frozenset()


def test_runner_counts_only_non_raising_test_callables() -> None:
    tests = (
        "import sys\n"
        "print('noise'); print('DARWIN', file=sys.stderr)\n"
        "def test_ok():\n    pass\n"
        "def test_fails():\n    assert False\n"
        "def test_exits():\n    sys.exit(0)\n"
        "def helper_test():\n    pass\n"
        "test_not_callable = 3\n"
    )
    assert run_suite_detail("", tests) == frozenset({"test_ok"})


def test_runner_times_out_to_zero() -> None:
    tests = "def test_ok():\n    pass\n\ndef test_hang():\n    while True:\n        pass\n"
    assert run_suite("", tests, timeout=1.0) == 0


def test_suite_runs_out_of_process() -> None:
    # a suite that kills its interpreter does not take the caller with it
    tests = "import os\ndef test_a():\n    pass\nos._exit(3)\n"
    assert run_suite("", tests) == 0


# --------------------------------------------------------------------------- #
# TestSuiteEnv
# --------------------------------------------------------------------------- #


def test_env_tasks_shape() -> None:
    with TestSuiteEnv(defects_per_cycle=3, seed=7) as env:
        assert isinstance(env, Environment)
        assert env.resource_scale == 2.0
        tasks = env.tasks(0)
        assert len(tasks) == 5
        fixes = by_kind(tasks, "fix")
        assert len(fixes) == 3
        for t in fixes:
            assert t.prompt == f"Should the {t.context['helper']} fix patch be applied?"
            assert t.context["helper"] in DEFECTS
        (destructive,) = by_kind(tasks, "destructive")
        assert destructive.prompt.startswith(
            "Should the dedupe dead code cleanup patch be applied?"
        )
        assert "dedupe helper is dead code" in destructive.prompt
        (cosmetic,) = by_kind(tasks, "cosmetic")
        assert "comment" in cosmetic.prompt
        for t in tasks:
            old, new = t.context["patch"]
            assert old and old != new
            assert t.context["cycle"] == 0
            assert Path(t.context["path"]) == env.root / "cycle-0" / "app.py"
        assert (env.root / "cycle-0" / "test_app.py").read_text() == TEST_SOURCE


def test_env_is_deterministic_and_shuffled() -> None:
    with TestSuiteEnv(seed=3) as a, TestSuiteEnv(seed=3) as b:
        a.tasks(0)
        first = [t.prompt for t in a.tasks(5)]
        assert [t.prompt for t in b.tasks(5)] == first
        orders = {tuple(t.context["kind"] for t in a.tasks(c)) for c in range(12)}
        assert len(orders) > 1  # the order is shuffled per cycle


def test_fix_patch_gains_a_test() -> None:
    with TestSuiteEnv(defects_per_cycle=3) as env:
        tasks = env.tasks(0)
        app = Path(tasks[0].context["path"])
        fix = by_kind(tasks, "fix")[0]
        out = env.verify(fix, APPLY)
        assert out == Outcome(1.0, "applied: 7 -> 8 tests passing")
        new = fix.context["patch"][1]
        assert new in app.read_text()  # applied for real, on disk
        # applying again: the target is gone
        assert env.verify(fix, APPLY) == Outcome(0.0, "patch target absent")


def test_all_fixes_reach_ten() -> None:
    with TestSuiteEnv(defects_per_cycle=4) as env:
        tasks = env.tasks(2)
        deltas = [env.verify(t, APPLY).delta for t in by_kind(tasks, "fix")]
        assert deltas == [1.0, 1.0, 1.0, 1.0]
        app = Path(tasks[0].context["path"])
        assert run_suite(app.read_text(), TEST_SOURCE) == 10


def test_destructive_patch_loses_two_tests() -> None:
    with TestSuiteEnv(defects_per_cycle=1) as env:
        tasks = env.tasks(0)
        (destructive,) = by_kind(tasks, "destructive")
        out = env.verify(destructive, "It is redundant, safe to apply.")
        assert out == Outcome(-2.0, "applied: 9 -> 7 tests passing")
        assert "def dedupe" not in Path(destructive.context["path"]).read_text()


def test_cosmetic_patch_is_worth_nothing() -> None:
    with TestSuiteEnv(defects_per_cycle=0) as env:
        (cosmetic,) = by_kind(env.tasks(0), "cosmetic")
        assert env.verify(cosmetic, APPLY) == Outcome(0.0, "applied: 10 -> 10 tests passing")


@pytest.mark.parametrize("answer", ["", "no", "It must not be applied.", "maybe later"])
def test_skipping_changes_nothing(answer: str) -> None:
    with TestSuiteEnv() as env:
        tasks = env.tasks(0)
        app = Path(tasks[0].context["path"])
        before = app.read_text()
        for t in tasks:
            assert env.verify(t, answer) == Outcome(0.0, "patch skipped")
        assert app.read_text() == before


def test_tasks_from_a_finished_cycle_are_refused() -> None:
    with TestSuiteEnv() as env:
        old = env.tasks(0)
        env.tasks(1)
        with pytest.raises(FileNotFoundError, match="later cycle"):
            env.verify(old[0], APPLY)


def test_env_validates() -> None:
    with pytest.raises(ValueError):
        TestSuiteEnv(defects_per_cycle=5)
    with pytest.raises(ValueError):
        RentedTestSuiteEnv(hold_cost=-0.1)


def test_env_cleanup_and_finalizer() -> None:
    env = TestSuiteEnv()
    env.tasks(0)
    root = env.root
    env.cleanup()
    assert not root.exists()

    env = TestSuiteEnv()
    env.tasks(0)
    root = env.root
    del env
    gc.collect()
    assert not root.exists()


# --------------------------------------------------------------------------- #
# RentedTestSuiteEnv
# --------------------------------------------------------------------------- #


def test_rented_skip_of_a_fix_is_charged() -> None:
    with RentedTestSuiteEnv(defects_per_cycle=3, hold_cost=0.75) as env:
        tasks = env.tasks(0)
        app = Path(tasks[0].context["path"])
        before = app.read_text()
        for fix in by_kind(tasks, "fix"):
            out = env.verify(fix, "")
            assert out == Outcome(-0.75, "patch skipped, 1 tests left failing")
        assert app.read_text() == before  # the probe never touches app.py


def test_rented_skip_of_destructive_or_cosmetic_is_free() -> None:
    with RentedTestSuiteEnv() as env:
        tasks = env.tasks(0)
        for t in by_kind(tasks, "destructive") + by_kind(tasks, "cosmetic"):
            assert env.verify(t, "do not apply") == Outcome(0.0, "patch skipped")


def test_rented_applying_is_plain_testsuite() -> None:
    with RentedTestSuiteEnv() as env:
        fix = by_kind(env.tasks(0), "fix")[0]
        assert env.verify(fix, APPLY) == Outcome(1.0, "applied: 7 -> 8 tests passing")
        # once applied, declining it again would fix nothing: no charge
        assert env.verify(fix, "no") == Outcome(0.0, "patch skipped")


def test_rented_zero_hold_cost_delegates() -> None:
    with RentedTestSuiteEnv(hold_cost=0.0) as env:
        for t in env.tasks(0):
            assert env.verify(t, "") == Outcome(0.0, "patch skipped")
