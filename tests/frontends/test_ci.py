"""``darwin-memo settle-ci`` on real junit files written by pytest runs of a fixture project.

The fixture project has a base and a head version of one test module, chosen so
that every transition occurs once: a regression, two fixes, a passing and a
failing test added, a passing and a failing test removed, a test skipped on one
side, and a stable pass and failure. A third version fails to collect.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from darwin_memo.ci import (
    EXIT_ABSTAINED,
    CiInputError,
    InfraFailure,
    diff_runs,
    flips,
    load_flips,
    parse_junit,
    quarantined,
    record_flips,
    settle_ci,
    ticket_ids,
)
from darwin_memo.ledger import Ledger

ROOT = Path(__file__).resolve().parents[2]
SUITE = "tests.test_suite"

BASE = """\
def test_stable(): pass
def test_breaks(): pass
def test_fixed(): assert False
def test_fixed_too(): assert False
def test_removed_passing(): pass
def test_removed_failing(): assert False
def test_stable_failure(): assert False
def test_skipped_in_head(): pass

class TestGroup:
    def test_method(self): pass
"""

HEAD = """\
import pytest

def test_stable(): pass
def test_breaks(): assert False
def test_fixed(): pass
def test_fixed_too(): pass
def test_stable_failure(): assert False
def test_added_passing(): pass
def test_added_failing(): assert False

@pytest.mark.skip(reason="not measured here")
def test_skipped_in_head(): pass

class TestGroup:
    def test_method(self): pass
"""


def run_pytest(
    project: Path, module: str, junit: Path, extra: dict[str, str] | None = None
) -> Path:
    """Write the project's test files, run pytest on them, return the junit file."""
    tests = project / "tests"
    tests.mkdir(parents=True, exist_ok=True)
    (tests / "test_suite.py").write_text(module, encoding="utf-8")
    for name, text in (extra or {}).items():
        (tests / name).write_text(text, encoding="utf-8")
    env = dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", PYTHONDONTWRITEBYTECODE="1")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(project),
            f"--junitxml={junit}",
            "tests",
        ],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert junit.exists(), f"pytest wrote no {junit}"
    return junit


@pytest.fixture(scope="module")
def junit(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Real junit files: ``base``, ``head`` and ``broken`` (a collection error)."""
    root = tmp_path_factory.mktemp("ci-fixture")
    return {
        "base": run_pytest(root / "base", BASE, root / "base.xml"),
        "head": run_pytest(root / "head", HEAD, root / "head.xml"),
        "broken": run_pytest(
            root / "broken",
            HEAD,
            root / "broken.xml",
            {"test_broken.py": "import a_module_that_does_not_exist\n"},
        ),
    }


def lesson_store(path: Path) -> tuple[str, str]:
    """A store with one lesson and one pending ticket on it: (entry id, ticket id)."""
    with Ledger.open(path) as ledger:
        entry = ledger.add("How do I fix the flaky export test?", "Pin the export clock to UTC.")
        ticket = ledger.decide("How do I fix the flaky export test?")
    assert ticket.provenance == [entry.id]
    return entry.id, ticket.id


def cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if k not in ("DARWIN_MEMO_DEBUG", "PR_BODY")}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "darwin_memo", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=120,
    )


# -- parsing and diffing real pytest output ------------------------------------------------


def test_parse_junit_reads_pytest_output(junit: dict[str, Path]) -> None:
    base = parse_junit(junit["base"], "base")
    head = parse_junit(junit["head"], "head")
    assert base[f"{SUITE}::test_stable"] is True
    assert base[f"{SUITE}::test_fixed"] is False
    assert base[f"{SUITE}.TestGroup::test_method"] is True
    assert head[f"{SUITE}::test_skipped_in_head"] is None
    assert len(base) == len(head) == 9


def test_diff_buckets_every_transition(junit: dict[str, Path]) -> None:
    moves = diff_runs(parse_junit(junit["base"]), parse_junit(junit["head"]))
    assert moves.regressions == [f"{SUITE}::test_breaks"]
    assert moves.improvements == [f"{SUITE}::test_fixed", f"{SUITE}::test_fixed_too"]
    assert moves.added_passing == [f"{SUITE}::test_added_passing"]
    assert moves.added_failing == [f"{SUITE}::test_added_failing"]
    assert moves.removed_passing == [f"{SUITE}::test_removed_passing"]
    assert moves.removed_failing == [f"{SUITE}::test_removed_failing"]
    # 2 fixed + 1 added passing - 1 broken - 1 removed passing; the skip moves nothing.
    assert moves.delta() == 1.0


def test_duplicate_ids_merge_failure_over_pass_over_skip(tmp_path: Path) -> None:
    xml = tmp_path / "dup.xml"
    xml.write_text(
        '<testsuite><testcase classname="a" name="t"/><testcase classname="a" name="t">'
        '<failure message="x"/></testcase><testcase classname="a" name="s"><skipped/>'
        '</testcase><testcase classname="a" name="s"/><testcase name="bare"/></testsuite>',
        encoding="utf-8",
    )
    assert parse_junit(xml) == {"a::t": False, "a::s": True, "bare": True}


# -- settling ------------------------------------------------------------------------------


def test_settle_ci_pays_the_ticket_the_measured_delta(
    junit: dict[str, Path], tmp_path: Path
) -> None:
    store = tmp_path / "lessons.json"
    entry_id, ticket = lesson_store(store)
    body = f"Fix the export.\n\ndarwin-memo-ticket: {ticket}\ndarwin-memo-ticket: {ticket}\n"
    proc = cli(
        "settle-ci",
        str(store),
        "--base-xml",
        str(junit["base"]),
        "--head-xml",
        str(junit["head"]),
        "--pr-body",
        body,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert list(out) == [
        "mode",
        "delta",
        "regressions",
        "improvements",
        "added",
        "removed",
        "quarantined",
        "ticket_provenance",
        "settled",
        "tick",
    ]
    assert out["mode"] == "junit" and out["delta"] == 1.0
    assert out["regressions"] == [f"{SUITE}::test_breaks"]
    assert out["added"] == {
        "passing": [f"{SUITE}::test_added_passing"],
        "failing": [f"{SUITE}::test_added_failing"],
    }
    assert out["removed"] == {
        "passing": [f"{SUITE}::test_removed_passing"],
        "failing": [f"{SUITE}::test_removed_failing"],
    }
    assert out["quarantined"] == [] and out["ticket_provenance"] == "unverified"
    assert out["settled"] == {ticket: True}
    assert out["tick"]["tick"] == 1 and out["tick"]["pending"] == 0
    with Ledger.open(store) as ledger:
        assert ledger.pending() == []
        notes = [n for n in ledger.history(entry_id) if n.get("event") == "settle"]
    assert notes[0]["delta"] == 1.0 and "2 fixed, 1 broken" in notes[0]["detail"]
    state = json.loads((tmp_path / "flaky.json").read_text(encoding="utf-8"))
    assert state["tests"][f"{SUITE}::test_breaks"] == [True, False]
    assert list(state["tests"]) == sorted(state["tests"])


def test_a_second_run_drops_the_settled_ticket_but_still_ticks(
    junit: dict[str, Path], tmp_path: Path
) -> None:
    store = tmp_path / "lessons.json"
    _, ticket = lesson_store(store)
    kwargs = {"base_xml": junit["base"], "head_xml": junit["head"]}
    body = f"darwin-memo-ticket: {ticket}"
    assert settle_ci(store, pr_body=body, **kwargs)["settled"] == {ticket: True}  # type: ignore[arg-type]
    again = settle_ci(store, pr_body=body, **kwargs)  # type: ignore[arg-type]
    assert again["settled"] == {ticket: False} and again["tick"]["tick"] == 2


def test_no_ticket_means_no_tick_and_an_untouched_store(
    junit: dict[str, Path], tmp_path: Path
) -> None:
    store = tmp_path / "lessons.json"
    lesson_store(store)
    before = store.read_bytes()
    out = settle_ci(store, base_xml=junit["base"], head_xml=junit["head"], pr_body="no tickets")
    assert out["settled"] == {} and out["tick"] is None
    assert store.read_bytes() == before


def test_a_missing_store_is_not_created(junit: dict[str, Path], tmp_path: Path) -> None:
    store = tmp_path / "nowhere.json"
    proc = cli(
        "settle-ci",
        str(store),
        "--passes-before",
        "3",
        "--passes-after",
        "5",
        cwd=tmp_path,
        env={"PR_BODY": "darwin-memo-ticket: 0123456789ab"},
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["store"] == "missing" and out["settled"] == {"0123456789ab": False}
    assert out["tick"] is None and not store.exists()
    assert "no store at" in proc.stderr


def test_pass_count_mode(tmp_path: Path) -> None:
    store = tmp_path / "lessons.db"
    _, ticket = lesson_store(store)
    proc = cli(
        "settle-ci",
        str(store),
        "--passes-before",
        "40",
        "--passes-after",
        "38",
        "--detail",
        "run 7",
        cwd=tmp_path,
        env={"PR_BODY": f"darwin-memo-ticket: {ticket}"},
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert list(out) == ["mode", "delta", "ticket_provenance", "settled", "tick"]
    assert out["mode"] == "pass-counts" and out["delta"] == -2.0
    assert out["settled"] == {ticket: True}
    assert not (tmp_path / "flaky.json").exists()  # the sidecar is for junit mode only


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "nothing to measure"),
        (["--base-xml", "b.xml"], "needs both --base-xml and --head-xml"),
        (["--passes-after", "3"], "never taken as zero"),
        (
            ["--base-xml", "b", "--head-xml", "h", "--passes-before", "1", "--passes-after", "2"],
            "not both",
        ),
    ],
)
def test_one_mode_exactly(tmp_path: Path, args: list[str], message: str) -> None:
    proc = cli("settle-ci", str(tmp_path / "s.json"), *args, cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: ") and message in proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stdout == ""
    with pytest.raises(CiInputError, match=re.escape(message)):
        settle_ci(
            tmp_path / "s.json",
            **{
                a.lstrip("-").replace("-", "_"): (float(v) if "passes" in a else v)
                for a, v in zip(args[::2], args[1::2], strict=True)
            },  # type: ignore[arg-type]
        )


# -- provenance ----------------------------------------------------------------------------


def test_opened_since_refuses_tickets_already_pending_on_the_base_commit(
    junit: dict[str, Path], tmp_path: Path
) -> None:
    store = tmp_path / "lessons.json"
    _, old_ticket = lesson_store(store)
    base_store = tmp_path / "base-lessons.json"
    base_store.write_bytes(store.read_bytes())  # in CI: git show BASE:lessons.json
    with Ledger.open(store) as ledger:
        new_ticket = ledger.decide("How do I fix the flaky export test?").id
    body = f"darwin-memo-ticket: {old_ticket}\ndarwin-memo-ticket: {new_ticket}"
    out = settle_ci(
        store,
        base_xml=junit["base"],
        head_xml=junit["head"],
        pr_body=body,
        opened_since=base_store,
    )
    assert out["refused_not_opened_here"] == [old_ticket]
    assert "ticket_provenance" not in out
    assert out["settled"] == {new_ticket: True}
    assert sorted(p.name for p in tmp_path.glob("base-lessons*")) == ["base-lessons.json"]

    # A base commit without a store had no tickets; an unreadable one abstains.
    out = settle_ci(
        store, passes_before=1, passes_after=1, pr_body=body, opened_since=tmp_path / "none.json"
    )
    assert out["refused_not_opened_here"] == []
    (tmp_path / "bad.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(InfraFailure, match="cannot read the base store"):
        settle_ci(store, passes_before=1, passes_after=1, opened_since=tmp_path / "bad.json")


def test_ticket_ids_in_a_description() -> None:
    long_id, short_id = "0123456789abcdef01234567", "89abcdef0123"
    text = (
        f"darwin-memo-ticket: {long_id}\ndarwin-memo-ticket:{short_id} and again "
        f"darwin-memo-ticket: {long_id}; darwin-memo-ticket: 0123456789abc (13 hex: no) "
        "darwin-memo-ticket: 0123456789AB (upper case: no)"
    )
    assert ticket_ids(text) == [long_id, short_id]


# -- flaky tests ---------------------------------------------------------------------------


def test_a_test_that_keeps_flipping_is_quarantined(junit: dict[str, Path], tmp_path: Path) -> None:
    """The same base/head pair seen twice: the moved tests flip three times and drop out."""
    store = tmp_path / "lessons.json"
    state = tmp_path / "ci" / "flaky.json"
    state.parent.mkdir()
    first = settle_ci(store, base_xml=junit["base"], head_xml=junit["head"], state=state)
    assert first["quarantined"] == [] and first["delta"] == 1.0
    second = settle_ci(store, base_xml=junit["base"], head_xml=junit["head"], state=state)
    flaky = [f"{SUITE}::test_breaks", f"{SUITE}::test_fixed", f"{SUITE}::test_fixed_too"]
    assert second["quarantined"] == flaky
    assert second["regressions"] == [] and second["improvements"] == []
    # What is left: 1 added passing - 1 removed passing.
    assert second["delta"] == 0.0
    history = load_flips(state)
    assert history[f"{SUITE}::test_breaks"] == [True, False, True, False]
    assert f"{SUITE}::test_skipped_in_head" in history  # its base observations count
    # A smaller window forgets: with 2 observations there is at most one flip.
    third = settle_ci(store, base_xml=junit["base"], head_xml=junit["head"], state=state, window=2)
    assert third["quarantined"] == [] and third["delta"] == 1.0


def test_flip_bookkeeping() -> None:
    assert flips([True, False, True, True, False]) == 3
    history = record_flips(
        {"a": [True] * 9 + [False], "gone": [True]}, {"a": True, "s": None}, {"a": None}, 3
    )
    assert history == {"a": [True, False, True]}  # skips are not observations
    assert quarantined({"a": [True, False, True, False]}, 3) == {"a"}
    assert quarantined({"a": [True, False, True]}, 3) == set()


def test_a_malformed_sidecar_reads_as_empty_history(tmp_path: Path) -> None:
    for text in ("[1, 2]", '{"tests": {"a": [1, "x"]}}', "not json", ""):
        (tmp_path / "flaky.json").write_text(text, encoding="utf-8")
        assert load_flips(tmp_path / "flaky.json") == {}
    assert load_flips(tmp_path / "missing.json") == {}


# -- abstention ----------------------------------------------------------------------------


def test_a_collection_error_abstains_and_touches_nothing(
    junit: dict[str, Path], tmp_path: Path
) -> None:
    store = tmp_path / "lessons.json"
    _, ticket = lesson_store(store)
    before = store.read_bytes()
    proc = cli(
        "settle-ci",
        str(store),
        "--base-xml",
        str(junit["base"]),
        "--head-xml",
        str(junit["broken"]),
        "--pr-body",
        f"darwin-memo-ticket: {ticket}",
        cwd=tmp_path,
    )
    assert proc.returncode == EXIT_ABSTAINED == 3
    out = json.loads(proc.stdout)
    assert out == {
        "abstained": True,
        "reason": "head run hit a collection error (tests.test_broken): the suite never loaded",
    }
    assert proc.stderr.startswith("abstained, store untouched: head run hit a collection error")
    assert store.read_bytes() == before
    assert not (tmp_path / "flaky.json").exists()


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (None, "does not exist"),
        ("<testsuite><testcase", "is not valid XML"),
        ("<testsuites><testsuite/></testsuites>", "holds no test cases"),
        (
            '<!DOCTYPE t [<!ENTITY a "aaaa">]><testsuite><testcase name="&a;"/></testsuite>',
            "declares XML entities",
        ),
        ("dir", "cannot be read"),
    ],
    ids=["missing", "not-xml", "no-cases", "entities", "directory"],
)
def test_unusable_junit_files_abstain(
    junit: dict[str, Path], tmp_path: Path, content: str | None, reason: str
) -> None:
    head = tmp_path / "head.xml"
    if content == "dir":
        head.mkdir()
    elif content is not None:
        head.write_text(content, encoding="utf-8")
    with pytest.raises(InfraFailure, match=reason):
        settle_ci(tmp_path / "s.json", base_xml=junit["base"], head_xml=head)
    assert not (tmp_path / "flaky.json").exists()


# -- the pattern, end to end ---------------------------------------------------------------


def test_the_example_script_runs_the_pattern_end_to_end(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "06_ci_lesson_store.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        env={k: v for k, v in os.environ.items() if k != "PR_BODY"},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert '"delta": 2.0' in proc.stdout
    assert re.search(r'"settled": \{\s*"[0-9a-f]{24}": true', proc.stdout)
    assert "credit +" in proc.stdout  # the lesson's life story shows the payment
    agents = (tmp_path / "project" / "AGENTS.md").read_text(encoding="utf-8")
    assert "round(amount * 100)" in agents


def test_the_workflow_in_the_docs_is_the_shipped_file_and_uses_real_flags() -> None:
    workflow = (ROOT / "docs" / "github-actions" / "darwin-memo.yml").read_text(encoding="utf-8")
    guide = (ROOT / "docs" / "ci.md").read_text(encoding="utf-8")
    assert workflow.strip() in guide
    from darwin_memo.cli import build_parser

    parser = build_parser()
    for command in ("settle-ci", "render"):
        calls = re.findall(rf"darwin-memo {command}\b((?:[^\n]|\\\n)*)", workflow)
        assert calls, f"the workflow never runs darwin-memo {command}"
        sub = parser._subparsers._group_actions[0].choices[command]  # type: ignore[union-attr]
        known = {opt for action in sub._actions for opt in action.option_strings}
        for call in calls:
            for flag in re.findall(r"(?<!\S)(--?[a-z][a-z-]*)", call):
                assert flag in known, f"{command} has no {flag}"
