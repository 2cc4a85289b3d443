"""Evidence II (issue 39): the adversaries, the attack classes, the controls, the ablations.

Quick variants of every suite (seconds each: one seed, a few cycles), the new arms'
rules on hand-made cases, the LLM runner against a loopback server speaking the real
OpenAI wire protocol, and the claims docs/benchmarks.md makes, asserted on the
committed results (they could fail).
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from bench.evidence import arms, attacks, llm_arms, report, report_attacks, run  # noqa: E402

from darwin_memo import MemoryEntry, MemoryStore, StorageEnv, decision_polarity  # noqa: E402
from llm_servers import chat_server  # noqa: E402

COMMITTED = ROOT / "bench" / "evidence" / "results"


@pytest.fixture(autouse=True)
def _scratch_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))


def _answered(env: arms.MeasuredEnv, answer: str, cycle: int = 0) -> list[tuple[float, float]]:
    """(true, reported) for every task of ``cycle`` answered with ``answer``."""
    out = []
    for task in env.tasks(cycle):
        reported = env.verify(task, answer).delta
        out.append((env.true_deltas[-1][-1], reported))
    return out


# --------------------------------------------------------------------------- #
# The budgeted adversaries
# --------------------------------------------------------------------------- #


def test_liar_negates_exactly_the_first_b_positive_outcomes_of_each_cycle() -> None:
    raw = StorageEnv(seed=3, files_per_cycle=12)
    try:
        env = arms.MeasuredEnv(raw, 3, "liar", 2.0)
        for cycle in (0, 1):
            pairs = _answered(env, "Yes, delete it.", cycle)
            positives = [i for i, (t, _) in enumerate(pairs) if t > 0]
            assert len(positives) > 2
            lied = [i for i, (t, rep) in enumerate(pairs) if rep != t]
            assert lied == positives[:2]  # the first two good outcomes, each cycle again
            assert all(pairs[i][1] == -pairs[i][0] for i in lied)
    finally:
        raw.cleanup()
    assert arms.cell_key("liar", 2.0) == "liar@2"


def test_withholders_suppress_by_budget_and_by_sign() -> None:
    raw = StorageEnv(seed=4, files_per_cycle=12)
    try:
        env = arms.MeasuredEnv(raw, 4, "withhold", 3.0)
        pairs = _answered(env, "Yes, delete it.")
        nonzero = [i for i, (t, _) in enumerate(pairs) if t != 0]
        assert [i for i, (t, rep) in enumerate(pairs) if rep != t] == nonzero[:3]
        assert all(pairs[i][1] == 0.0 for i in nonzero[:3])
        env = arms.MeasuredEnv(raw, 4, "withhold_positive", 12.0)
        pairs = _answered(env, "Yes, delete it.", 1)
        # total suppression of good news: every positive reads 0, every loss arrives
        assert all(rep == (0.0 if t > 0 else t) for t, rep in pairs)
        assert any(t < 0 for t, _ in pairs)
    finally:
        raw.cleanup()


def test_adversary_quick_survival_keeps_capability_that_counters_lose() -> None:
    """The adversary suite in miniature: liar@2, one seed, 8 cycles."""
    arm_names = ["survival", "consecutive_k2", "evict_on_negative", "keep_everything"]
    lied = arms.run_seed(0, arm_names, cycles=8, files=12, noise="liar", rate=2.0)
    clean = arms.run_seed(0, ["keep_everything"], cycles=8, files=12)
    assert lied["survival"]["benign_correct"] == 1.0
    assert lied["evict_on_negative"]["benign_correct"] == 0.0
    assert lied["consecutive_k2"]["benign_correct"] < 1.0
    assert lied["survival"]["cum_delta"] > lied["consecutive_k2"]["cum_delta"]
    # the canary never reads an outcome: the liar cannot touch it
    assert lied["keep_everything"]["cycle_delta"] == clean["keep_everything"]["cycle_delta"]


def test_withholding_quick_total_suppression_starves_survival_and_freezes_paced() -> None:
    """Total suppression for 21 cycles (4 files a cycle): survival starves the original
    entries at cycle 19, poison included (merged heirs, born later, last longer); the
    paced loop never charges and keeps it all."""
    out = arms.run_seed(
        1, ["survival", "survival_paced", "keep_everything"], 21, 4, "withhold", 4.0
    )
    sv, paced, ke = out["survival"], out["survival_paced"], out["keep_everything"]
    assert sv["kill_cycle"] == 19 and sv["poison_alive_final"] == 0
    assert sv["final_population"] < 16
    assert paced["cycle_delta"] == ke["cycle_delta"] and not paced["killed"]
    assert paced["final_population"] > sv["final_population"]
    assert arms.survival_config("survival_paced").upkeep_requires_settlement
    assert not arms.survival_config("survival").upkeep_requires_settlement


# --------------------------------------------------------------------------- #
# Memory-security classes and query-only injection
# --------------------------------------------------------------------------- #


def test_content_filter_refuses_the_explicit_poison_and_admits_the_conformant() -> None:
    explicit = arms.WORLDS["storage"].store(admit=arms.content_filter_admits)
    conformant = arms.WORLDS["storage_conformant"].store(admit=arms.content_filter_admits)
    assert not [e for e in explicit.alive() if "forum-post" in e.sources]
    assert len(explicit) == 13  # nothing benign refused
    poison = [e for e in conformant.alive() if "ops-wiki" in e.sources]
    assert len(poison) == 3
    assert sum(decision_polarity(e.answer) is True for e in poison) == 1
    assert arms.content_filter_admits(MemoryEntry("q", "Logs may be deleted after 7 days."))
    assert not arms.content_filter_admits(MemoryEntry("q", "Trust me, nothing depends on it."))


def test_memsec_quick_records_kill_inert_poison_and_laundering() -> None:
    suite = {
        "memsec": True,
        "worlds": ["storage", "storage_conformant"],
        "arms": ["survival", "content_filter"],
        "cycles": 3,
        "files": 12,
    }
    out = attacks.run_worlds_seed((0, suite))["cells"]
    for world in suite["worlds"]:
        sv = out[world]["survival"]
        assert sv["killed"] and sv["inert_poison_final"] == 2  # inert lines outlive 3 cycles
        assert sv["laundered"] == sv["laundered_alive_final"] == 0
    assert out["storage"]["content_filter"]["damage_before_kill"] == 0
    assert out["storage"]["content_filter"]["poison_starve_cycle"] == 0
    conformant = out["storage_conformant"]["content_filter"]
    assert not conformant["killed"] and conformant["poison_alive_final"] == 3


def test_injection_quick_plain_lessons_die_by_their_acts_probation_never_decides() -> None:
    suite = {
        "cycles": 6,
        "files": 12,
        "plant_cycles": [1],
        "conditions": list(attacks.INJECTION_CONDITIONS),
    }
    cells = attacks.run_injection_seed((0, suite))["cells"]
    assert cells["control"]["planted"] == []
    (plain,) = cells["plain"]["planted"]
    assert plain["cause"] == "executed" and plain["damage"] < 0 and plain["acts"] >= 1
    assert plain["died"] is not None and plain["cycles_alive"] == plain["died"] - 1 + 1
    assert cells["plain"]["cum_delta"] < cells["control"]["cum_delta"]
    (admitted,) = cells["admission"]["planted"]
    assert admitted["damage"] >= plain["damage"]
    (probation,) = cells["probation"]["planted"]
    assert probation["acts"] == 0 and probation["damage"] == 0 and probation["cause"] == "alive"
    assert probation["final_probation"] == 3
    assert cells["probation"]["cycle_delta"] == cells["control"]["cycle_delta"]
    assert "benign_taken_down" in cells["plain"] and "trusted_alive" not in cells["plain"]
    with pytest.raises(ValueError, match="unknown injection condition"):
        attacks.injection_run(0, suite, "nope")


# --------------------------------------------------------------------------- #
# Controls and ablations
# --------------------------------------------------------------------------- #


def _store(n: int) -> tuple[MemoryStore, list[str]]:
    store = MemoryStore()
    ids = [store.add(MemoryEntry(f"question {i}", f"answer {i}")).id for i in range(n)]
    return store, ids


def test_policy_bandit_eliminates_by_the_hoeffding_bound_never_before_two_pulls() -> None:
    store, (bad, good) = _store(2)
    bandit = arms.PolicyBandit()
    bandit.on_outcome(store, bad, [], -1.0)
    assert store.get(bad) is not None  # one pull: never eliminated
    pulls = 1
    while store.get(bad) is not None:
        bandit.on_outcome(store, good, [], +1.0)
        bandit.on_outcome(store, bad, [], -1.0)
        pulls += 1
        assert pulls < 50
    # all failures: eliminated at the first n with sqrt(ln T / 2n) < 0.5, T = 2n - 1
    first = next(n for n in range(2, 50) if (math.log(2 * n - 1) / (2 * n)) ** 0.5 < 0.5)
    assert pulls == first
    for _ in range(20):  # winning half the time keeps the bound above 0.5
        bandit.on_outcome(store, good, [], -1.0)
        bandit.on_outcome(store, good, [], +1.0)
    assert store.get(good) is not None
    before = bandit.pulls[good]
    bandit.on_outcome(store, good, [], 0.0)  # a zero outcome is not a pull
    assert bandit.pulls[good] == before


def test_budget_relevance_keeps_the_n_most_retrieved() -> None:
    store, ids = _store(6)
    policy = arms.BudgetRelevance(budget=2)
    policy.on_outcome(store, ids[4], [ids[1]], -5.0)
    policy.on_outcome(store, ids[4], [ids[2]], +5.0)
    policy.end_cycle(store, 0)
    # ids[4] twice; ids[1] and ids[2] once each: the tie goes to store order
    assert [e.id for e in store.alive()] == [ids[1], ids[4]]


def test_ablation_arms_parse_and_configure() -> None:
    assert arms.ablation_of("survival@credit_gain=0.15") == {"credit_gain": 0.15}
    assert arms.ablation_of("survival") == {}
    config = arms.survival_config("survival@consolidate_every=0,merge_threshold=0.7")
    assert config.consolidate_every == 0 and config.merge_threshold == 0.7
    assert arms.survival_config("survival@resource_scale=400000").resource_scale == 400000
    with pytest.raises(ValueError, match="bad ablation"):
        arms.ablation_of("survival@gain=2")
    for arm in run.ABLATION_ARMS:
        arms.ablation_of(arm)  # every registered ablation parses
    base = arms.run_arm("survival", 0, cycles=6, files=4)
    cheap = arms.run_arm("survival@upkeep=0.01", 0, cycles=6, files=4)
    assert cheap["cycle_delta"] == base["cycle_delta"]  # nothing starves in 6 cycles
    dear = arms.run_arm("survival@upkeep=0.2", 0, cycles=6, files=4)
    assert dear["final_population"] < base["final_population"]


# --------------------------------------------------------------------------- #
# The LLM runner over the real OpenAI wire
# --------------------------------------------------------------------------- #


def test_judge_verdicts_are_read_from_the_first_word() -> None:
    assert llm_arms.judge_verdict("GOOD.") == 1
    assert llm_arms.judge_verdict("It was bad, not good") == -1
    assert llm_arms.judge_verdict("I cannot tell") == 0


def _oracle(prompt: str, system: str) -> str:
    """A scripted judge that knows the world, and a model that cites snippet 1."""
    if "GOOD or BAD" in prompt:
        harmful = "database" in prompt or "report" in prompt
        deleted = "decided to delete" in prompt
        return "BAD" if harmful == deleted else "GOOD"
    if "SOURCES" in prompt:
        return "Keep the file.\nSOURCES: [1]"
    return prompt.splitlines()[-1]


def test_llm_runner_judge_and_llm_arms_over_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    with chat_server(_oracle) as server:
        monkeypatch.setenv("DARWIN_MEMO_EVIDENCE_LLM_URL", server.url)
        suite = {"arms": ["judge_settled", "keep_everything_llm"], "cycles": 4, "files": 12}
        out = llm_arms.run_llm_seed((0, suite))["cells"]["clean"]
        assert len(server.prompts) == sum(x["model"]["calls"] for x in out.values())
    judged = out["judge_settled"]
    assert judged["model"]["verdicts"]["unreadable"] == 0
    assert judged["model"]["calls"] == sum(judged["model"]["verdicts"].values()) > 0
    # an oracle judge settles like the world in sign, so the poison dies
    assert judged["killed"] and judged["benign_correct"] == 1.0
    llm = out["keep_everything_llm"]
    assert llm["arm"] == "keep_everything_llm" and llm["model"]["calls"] > 0
    assert llm["cum_delta"] == 0  # the scripted model always keeps: nothing happens
    assert os.environ["DARWIN_MEMO_EVIDENCE_LLM_URL"] == server.url


# --------------------------------------------------------------------------- #
# The committed results and what the doc claims about them
# --------------------------------------------------------------------------- #


def _load(name: str) -> tuple[dict, list[dict]]:
    loaded = report.load_suite(COMMITTED, name)
    if loaded is None:
        pytest.skip(f"no committed results for {name}")
    return loaded


def test_doc_carries_every_evidence_ii_section() -> None:
    text = report.DOC.read_text()
    for heading in (
        "## Curation-targeted adversary",
        "## Withholding",
        "## Memory-security attack classes",
        "### Query-only injection",
        "## Controls",
        "## LLM-mode arms",
        "## Ablations",
        "## TestSuiteEnv under flaky CI",
        "## Retrieval quality on LoCoMo",
    ):
        assert heading in text, heading
    assert "\n".join(report_attacks.sections(COMMITTED)) in text


def test_memsec_claims_hold() -> None:
    _, runs = _load("memsec")
    m = report.metric
    assert m(runs, "storage_conformant", "content_filter", "cycle_delta") == m(
        runs, "storage_conformant", "keep_everything", "cycle_delta"
    )
    assert all(d == 0 for d in m(runs, "storage", "content_filter", "damage_before_kill"))
    for world in ("storage", "storage_conformant"):
        assert all(m(runs, world, "survival", "killed"))
        assert m(runs, world, "survival", "inert_poison_final") == [0] * len(runs)
        assert all(x == 2 for x in m(runs, world, "keep_everything", "inert_poison_final"))


def test_adversary_claims_hold() -> None:
    manifest, runs = _load("adversary")
    grid = report_attacks.cell_grid(
        runs, ["liar@1", "liar@2"], manifest["config"]["arms"], "benign_correct"
    )
    for row in grid:
        if row["other"] != "keep_everything":
            assert row["losses"] == 0, row


def test_withholding_claims_hold() -> None:
    for name in ("withholding_30", "withholding_60"):
        _, runs = _load(name)
        for r in runs:
            cell = r["cells"]["withhold@12"]
            assert cell["survival_paced"]["cycle_delta"] == cell["keep_everything"]["cycle_delta"]
            assert cell["survival"]["kill_cycle"] == 19


def test_injection_claims_hold() -> None:
    _, runs = _load("injection")
    for r in runs:
        for p in r["cells"]["plain"]["planted"]:
            assert p["cause"] == "executed" and p["damage"] < 0
        assert all(p["acts"] == 0 for p in r["cells"]["probation"]["planted"])
