"""Environments measure for real: polarity, storage bytes, rent, QA."""

from __future__ import annotations

import gc
import random
from pathlib import Path

import pytest

from darwin_memo.records.entry import Outcome, Task
from darwin_memo.sim.environments import (
    NEGATIVE_MARKERS,
    POSITIVE_MARKERS,
    RENT_TIERS,
    Environment,
    RentedStorageEnv,
    StorageEnv,
    VerifiableQAEnv,
    cycle_rng,
    decision_polarity,
    rent_multipliers,
)

# --------------------------------------------------------------------------- #
# decision_polarity
# --------------------------------------------------------------------------- #


def test_marker_counts() -> None:
    assert len(NEGATIVE_MARKERS) == 18
    assert len(POSITIVE_MARKERS) == 11


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", None),
        ("   \n", None),
        ("It is safe to delete.", True),
        ("Old logs may be deleted after seven days.", True),
        ("Cache chunks are disposable and safe to remove.", True),
        ("These copies are redundant.", True),
        ("The fix should be applied.", True),
        ("SAFE TO DELETE", True),
        ("safe  to\ndelete", True),
        ("It is not safe to delete this file.", False),
        ("Database files must be retained.", False),
        ("Reports are protected records and must be kept five years.", False),
        ("This is load-bearing.", False),
        ("The patch should not be applied.", False),
        ("Never cancel the nightly job.", False),
        # negative beats positive in the same answer
        ("The copy is redundant, but it is protected.", False),
        # negation just before a positive marker
        ("This is not redundant.", None),
        ("These files aren't really redundant.", None),
        ("It isn't actually very disposable.", None),
        ("They are no longer redundant.", False),  # bare "no" after the negated marker
        ("I wouldn't say redundant.", None),
        ("We don't think it's redundant.", None),
        ("This isn\u2019t redundant.", None),
        # three words between negation and marker: the negation no longer reaches
        ("not at all really redundant", True),
        # a negation in an earlier sentence does not reach
        ("Not sure. Redundant.", True),
        # bare yes / no
        ("yes", True),
        ("Yes.", True),
        ("No.", False),
        ("no way", False),
        ("I don't know.", None),
        ("eyes nose", None),
        ("The answer is 42.", None),
        # other verbs are silence by default
        ("It is safe to cancel.", None),
        # whole words only
        ("unprotected", None),
        ("redundantly", None),
    ],
)
def test_polarity_table(text: str, expected: bool | None) -> None:
    assert decision_polarity(text) is expected


def test_polarity_extra_markers() -> None:
    assert decision_polarity("It is safe to cancel.") is None
    assert decision_polarity("It is safe to cancel.", extra_positive=["safe to cancel"]) is True
    assert decision_polarity("Safe To  Cancel", extra_positive=("safe to cancel",)) is True
    assert decision_polarity("not safe to cancel", extra_positive=["safe to cancel"]) is None
    assert decision_polarity("please hold the order", extra_negative=["hold the order"]) is False
    # extra negatives still win over built-in positives
    assert decision_polarity("redundant, but hold it", extra_negative=["hold it"]) is False
    # empty extra markers are ignored, not matched everywhere
    assert decision_polarity("anything at all", extra_positive=["", "  "]) is None


# --------------------------------------------------------------------------- #
# cycle_rng
# --------------------------------------------------------------------------- #


def test_cycle_rng_is_sha256_seeded() -> None:
    import hashlib

    want = random.Random(int(hashlib.sha256(b"storage:7:3").hexdigest(), 16)).random()
    assert cycle_rng(7, 3, "storage").random() == want
    assert cycle_rng(7, 3).random() == cycle_rng(7, 3, "").random()
    assert cycle_rng(7, 3).random() != cycle_rng(7, 4).random()
    assert cycle_rng(7, 3, "a").random() != cycle_rng(7, 3, "b").random()


# --------------------------------------------------------------------------- #
# StorageEnv
# --------------------------------------------------------------------------- #

SIZES_KIB = {
    "old_log": (40, 120),
    "cache": (30, 90),
    "tmp_artifact": (20, 60),
    "database": (50, 150),
    "report": (30, 80),
}
PARENTS = {
    "old_log": "logs",
    "cache": "cache",
    "tmp_artifact": "tmp",
    "database": "data",
    "report": "reports",
}


def test_storage_is_an_environment() -> None:
    with StorageEnv() as env:
        assert isinstance(env, Environment)
        assert env.resource_scale == 100000.0
    assert isinstance(VerifiableQAEnv([]), Environment)


def test_storage_world_shape(tmp_path: Path) -> None:
    with StorageEnv(tmp_path / "world", files_per_cycle=40, seed=3) as env:
        tasks = env.tasks(0)
        assert len(tasks) == 40
        for i, task in enumerate(tasks):
            ctx = task.context
            assert set(ctx) == {"path", "safe", "size", "category"}
            path = Path(ctx["path"])
            cat = ctx["category"]
            assert path.parent.name == PARENTS[cat]
            assert path.parent.parent == env.root / "cycle-0"
            assert f"-{i}." in path.name
            assert path.stat().st_size == ctx["size"]
            assert ctx["size"] % 1024 == 0
            lo, hi = SIZES_KIB[cat]
            assert lo <= ctx["size"] // 1024 <= hi
            assert ctx["safe"] is (cat in {"old_log", "cache", "tmp_artifact"})
            label = cat.replace("_", " ")
            article = "an" if label[0] in "aeiou" else "a"
            assert task.prompt == (
                f"Is it safe to delete the file {path.name} "
                f"({article} {label} file under {PARENTS[cat]}/)?"
            )
        assert any("(an old log file under logs/)" in t.prompt for t in tasks)
        assert any("(a database file under data/)" in t.prompt for t in tasks)


def _first(tasks: list[Task], safe: bool) -> Task:
    return next(t for t in tasks if t.context["safe"] is safe)


def test_storage_frees_real_bytes() -> None:
    with StorageEnv(files_per_cycle=30) as env:
        task = _first(env.tasks(0), safe=True)
        path = Path(task.context["path"])
        size = path.stat().st_size
        out = env.verify(task, "Yes, it is safe to delete.")
        assert out == Outcome(float(size), f"freed {size} bytes")
        assert not path.exists()
        # nothing left to free the second time
        assert env.verify(task, "safe to delete").delta == 0.0


def test_storage_silence_and_refusal_keep_the_file() -> None:
    with StorageEnv(files_per_cycle=30) as env:
        tasks = env.tasks(1)
        for answer in ("", "I don't know.", "It must be kept.", "no"):
            for task in tasks[:5]:
                assert env.verify(task, answer) == Outcome(0.0, "kept")
                assert Path(task.context["path"]).exists()


def test_storage_destroying_protected_data_costs_three_times() -> None:
    with StorageEnv(files_per_cycle=30) as env:
        task = _first(env.tasks(0), safe=False)
        path = Path(task.context["path"])
        size = path.stat().st_size
        assert path.read_bytes() != bytes(size)
        out = env.verify(task, "These are redundant copies, safe to remove.")
        assert out.delta == -3.0 * size
        assert out.detail == f"destroyed protected data, restore cost {3 * size} bytes"
        # restored: same size, contents lost (zeros)
        assert path.stat().st_size == size
        assert path.read_bytes() == bytes(size)


def test_storage_worlds_are_deterministic_per_seed_and_cycle(tmp_path: Path) -> None:
    def world(env: StorageEnv, cycle: int) -> list[tuple[str, int, str, bytes]]:
        return [
            (
                t.prompt,
                t.context["size"],
                t.context["category"],
                Path(t.context["path"]).read_bytes(),
            )
            for t in env.tasks(cycle)
        ]

    with StorageEnv(tmp_path / "a", seed=5) as a, StorageEnv(tmp_path / "b", seed=5) as b:
        w3 = world(a, 3)
        world(b, 0)  # b's history differs; cycle 3 must not depend on it
        assert world(b, 3) == w3
        assert world(a, 4) != w3
        assert world(a, 3) == w3  # replaying a cycle
    with StorageEnv(tmp_path / "c", seed=6) as c:
        assert world(c, 3) != w3


def test_storage_deletes_previous_sandbox() -> None:
    with StorageEnv(files_per_cycle=3) as env:
        env.tasks(0)
        assert (env.root / "cycle-0").is_dir()
        env.tasks(1)
        assert not (env.root / "cycle-0").exists()
        assert (env.root / "cycle-1").is_dir()


def test_storage_cleanup_removes_temp_root() -> None:
    env = StorageEnv(files_per_cycle=3)
    env.tasks(0)
    root = env.root
    assert root.is_dir()
    assert root.name.startswith("darwin-memo-")
    env.cleanup()
    assert not root.exists()
    env.cleanup()  # idempotent
    with pytest.raises(RuntimeError, match="cleaned up"):
        env.tasks(1)


def test_storage_context_manager_cleans_up_on_error() -> None:
    with pytest.raises(KeyError), StorageEnv(files_per_cycle=2) as env:
        root = env.root
        env.tasks(0)
        raise KeyError("boom")
    assert not root.exists()


def test_storage_finalizer_removes_temp_root_when_dropped() -> None:
    env = StorageEnv(files_per_cycle=3)
    env.tasks(0)
    root = env.root
    del env
    gc.collect()
    assert not root.exists()


def test_storage_user_root_is_left_in_place(tmp_path: Path) -> None:
    keep = tmp_path / "mine.txt"
    keep.write_text("not yours")
    env = StorageEnv(tmp_path, files_per_cycle=3)
    env.tasks(2)
    assert (tmp_path / "cycle-2").is_dir()
    env.cleanup()
    assert tmp_path.is_dir()
    assert keep.read_text() == "not yours"
    assert not (tmp_path / "cycle-2").exists()


def test_storage_created_user_root_is_removed_only_if_empty(tmp_path: Path) -> None:
    root = tmp_path / "new" / "root"
    env = StorageEnv(root, files_per_cycle=2)
    env.tasks(0)
    env.cleanup()
    assert not root.exists()
    assert (tmp_path / "new").is_dir()  # a parent is never removed


def test_storage_refuses_foreign_cycle_dir(tmp_path: Path) -> None:
    (tmp_path / "cycle-0").mkdir()
    (tmp_path / "cycle-0" / "precious").write_text("x")
    with StorageEnv(tmp_path) as env, pytest.raises(FileExistsError):
        env.tasks(0)
    assert (tmp_path / "cycle-0" / "precious").read_text() == "x"


def test_storage_refuses_paths_outside_sandbox(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("data")
    with StorageEnv() as env:
        task = Task("x", {"path": str(victim), "safe": True, "size": 4, "category": "cache"})
        with pytest.raises(ValueError, match="sandbox"):
            env.verify(task, "safe to delete")
    assert victim.exists()


def test_storage_rejects_negative_file_count() -> None:
    with pytest.raises(ValueError):
        StorageEnv(files_per_cycle=-1)


# --------------------------------------------------------------------------- #
# Rent
# --------------------------------------------------------------------------- #


def test_rent_multipliers() -> None:
    assert RENT_TIERS == ("uniform", "aligned", "inverted")
    assert rent_multipliers("uniform") == dict.fromkeys(SIZES_KIB, 1.0)
    assert rent_multipliers("aligned") == {
        "old_log": 1.8611,
        "cache": 1.8611,
        "tmp_artifact": 1.8611,
        "database": 0.0,
        "report": 0.0,
    }
    assert rent_multipliers("inverted") == {
        "old_log": 0.0,
        "cache": 0.0,
        "tmp_artifact": 0.0,
        "database": 2.1613,
        "report": 2.1613,
    }
    with pytest.raises(ValueError, match="uniform"):
        rent_multipliers("steep")


@pytest.mark.parametrize("tier", RENT_TIERS)
def test_rent_tiers_cost_the_same_per_task(tier: str) -> None:
    mean_kib = {c: (lo + hi) / 2 for c, (lo, hi) in SIZES_KIB.items()}
    rent = rent_multipliers(tier)
    expected = sum(rent[c] * mean_kib[c] for c in mean_kib) / len(mean_kib)
    assert expected == pytest.approx(67.0, abs=0.01)


def test_rented_storage_charges_for_keeping() -> None:
    with RentedStorageEnv(files_per_cycle=30, hold_cost=0.5) as env:
        task = env.tasks(0)[0]
        size = task.context["size"]
        out = env.verify(task, "")
        assert out.delta == -0.5 * size
        assert out.detail == f"kept, {0.5 * size:.0f} bytes still occupied"
        assert env.verify(task, "must be kept").delta == -0.5 * size
        assert Path(task.context["path"]).exists()


def test_rented_storage_acting_is_plain_storage() -> None:
    with RentedStorageEnv(files_per_cycle=30) as env:
        task = _first(env.tasks(0), safe=True)
        size = task.context["size"]
        assert env.verify(task, "safe to delete") == Outcome(float(size), f"freed {size} bytes")


def test_rented_storage_exempt_categories_and_zero_cost() -> None:
    with RentedStorageEnv(files_per_cycle=40, rent_tier="aligned") as env:
        tasks = env.tasks(0)
        protected = _first(tasks, safe=False)
        assert env.verify(protected, "keep it") == Outcome(0.0, "kept")
        disposable = _first(tasks, safe=True)
        cost = 1.8611 * disposable.context["size"]
        assert env.verify(disposable, "keep it").delta == pytest.approx(-cost)
    with RentedStorageEnv(files_per_cycle=5, hold_cost=0.0) as env:
        for task in env.tasks(0):
            assert env.verify(task, "") == Outcome(0.0, "kept")


def test_rented_storage_validates() -> None:
    with pytest.raises(ValueError):
        RentedStorageEnv(hold_cost=-1.0)
    with pytest.raises(ValueError):
        RentedStorageEnv(rent_tier="nope")


# --------------------------------------------------------------------------- #
# VerifiableQAEnv
# --------------------------------------------------------------------------- #

QA = [(f"What is item {i}?", f"answer-{i}") for i in range(10)]


def test_qa_tasks_sample_per_cycle() -> None:
    env = VerifiableQAEnv(QA, per_cycle=4, seed=1)
    assert env.resource_scale == 1.0
    tasks = env.tasks(0)
    assert len(tasks) == 4
    assert len({t.prompt for t in tasks}) == 4
    for t in tasks:
        assert (t.prompt, t.context["expected"]) in QA
    assert [t.prompt for t in VerifiableQAEnv(QA, per_cycle=4, seed=1).tasks(0)] == [
        t.prompt for t in tasks
    ]
    assert len(VerifiableQAEnv(QA[:2], per_cycle=5).tasks(0)) == 2


def test_qa_verify() -> None:
    env = VerifiableQAEnv([("Capital of France?", "Paris")])
    task = env.tasks(0)[0]
    assert env.verify(task, "It is PARIS, of course.") == Outcome(1.0, "verified")
    assert env.verify(task, "Lyon") == Outcome(-0.5, "expected 'Paris'")
    assert env.verify(task, "") == Outcome(-0.5, "expected 'Paris'")
