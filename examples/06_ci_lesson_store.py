"""06: a CI lesson store, settled by the change in passing tests.

The primary production shape, end to end, on this machine.

What happens in a repository that uses docs/github-actions/darwin-memo.yml:

1. The repository keeps a lesson store (``lessons.json``) next to its code.
2. An agent working on a change consults it (``darwin-memo ledger ... decide``),
   gets a ticket, acts on the advice, and writes ``darwin-memo-ticket: <id>``
   into the pull request's description.
3. CI runs the tests on the base commit and on the head commit (junit XML),
   and ``darwin-memo settle-ci`` pays the ticket the change in passing tests.
4. ``darwin-memo render`` projects the lessons that keep earning into AGENTS.md.

This script plays every part in a temporary directory: a tiny project whose
rounding helper fails its tests, a lesson about the fix, the agent's ticket,
both test runs (real pytest runs writing junit XML), the settlement and the
render. Run it with ``python examples/06_ci_lesson_store.py``; it needs pytest and
darwin-memo installed, and keeps its files if given a directory to work in.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

BUGGY = '''\
def to_cents(amount):
    """Dollars to whole cents."""
    return int(amount * 100)
'''

FIXED = '''\
def to_cents(amount):
    """Dollars to whole cents."""
    return round(amount * 100)
'''

TESTS = """\
from money import to_cents


def test_whole_dollars():
    assert to_cents(3) == 300


def test_float_cents():
    assert to_cents(0.29) == 29


def test_more_float_cents():
    assert to_cents(1.15) == 115
"""

LESSON_Q = "Why does converting float dollars to cents lose a cent?"
LESSON_A = (
    "int(amount * 100) truncates 28.999999 to 28; use round(amount * 100) "
    "when converting float dollars to cents."
)
QUERY = "How do I stop converting float dollars to cents from losing a cent?"


def sh(*args: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a darwin-memo command (through this Python) and echo it as a shell line."""
    print(f"$ darwin-memo {shlex.join(args)}")
    proc = subprocess.run(
        [sys.executable, "-m", "darwin_memo", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if proc.stdout:
        print(proc.stdout.rstrip())
    if proc.stderr:
        print(proc.stderr.rstrip(), file=sys.stderr)
    if check and proc.returncode != 0:
        raise SystemExit(f"darwin-memo {args[0]} failed with exit code {proc.returncode}")
    return proc


def run_tests(project: Path, junit: Path) -> None:
    """One CI test run: pytest writes junit XML (failing tests are expected here)."""
    print(f"$ pytest --junitxml={junit.name}")
    env = dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    summary = proc.stdout.strip().splitlines()[-1:] or ["(no output)"]
    print(f"  {summary[0]}")
    if not junit.exists():
        raise SystemExit(f"pytest wrote no junit file (exit {proc.returncode}):\n{proc.stdout}")


def main(workdir: Path) -> int:
    project = workdir / "project"
    (project / "tests").mkdir(parents=True, exist_ok=True)
    (project / "money.py").write_text(BUGGY, encoding="utf-8")
    (project / "tests" / "test_money.py").write_text(TESTS, encoding="utf-8")
    (project / "tests" / "conftest.py").write_text(
        "import sys, pathlib\nsys.path.insert(0, str(pathlib.Path(__file__).parent.parent))\n",
        encoding="utf-8",
    )
    store = project / "lessons.json"

    print("# 1. The repository's lesson store holds a lesson from an earlier change.")
    added = sh(
        "ledger", "lessons.json", "add", LESSON_Q, LESSON_A, "--source", "pr-17", cwd=project
    )
    entry_id = json.loads(added.stdout)["entry_id"]
    base_store = workdir / "base-lessons.json"  # in CI: git show BASE:lessons.json
    base_store.write_bytes(store.read_bytes())

    print("\n# 2. CI's base run, on the commit the change starts from.")
    run_tests(project, workdir / "base.xml")

    print("\n# 3. The agent consults the store, acts on the advice, names its ticket.")
    decided = sh("ledger", "lessons.json", "decide", QUERY, cwd=project)
    ticket = json.loads(decided.stdout)["ticket_id"]
    if not ticket:
        raise SystemExit("the store was silent; the lesson should have matched the question")
    (project / "money.py").write_text(FIXED, encoding="utf-8")
    pr_body = f"Round cents instead of truncating them.\n\ndarwin-memo-ticket: {ticket}\n"
    print(f"PR description:\n{pr_body}")

    print("# 4. CI's head run, on the change.")
    run_tests(project, workdir / "head.xml")

    print("\n# 5. CI settles the ticket with the measured change in passing tests.")
    settled = sh(
        "settle-ci",
        "lessons.json",
        "--base-xml",
        str(workdir / "base.xml"),
        "--head-xml",
        str(workdir / "head.xml"),
        "--opened-since",
        str(base_store),
        "--pr-body",
        pr_body,
        cwd=project,
    )
    result = json.loads(settled.stdout)
    if result["settled"].get(ticket) is not True:
        raise SystemExit("the ticket did not settle")

    print("\n# 6. The lesson's life so far, and the memory file agents read.")
    sh("why", "lessons.json", entry_id, cwd=project)
    sh("render", "lessons.json", "-o", "AGENTS.md", cwd=project)
    print((project / "AGENTS.md").read_text(encoding="utf-8").rstrip())
    print(f"\ndelta {result['delta']:+g}: ticket {ticket} settled; files in {workdir}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1:
        target = Path(sys.argv[1])
        target.mkdir(parents=True, exist_ok=True)
        sys.exit(main(target))
    with tempfile.TemporaryDirectory(prefix="darwin-memo-ci-") as tmp:
        sys.exit(main(Path(tmp)))
