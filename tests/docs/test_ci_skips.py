"""Under CI (``DARWIN_MEMO_CI=1``) a skip is a failure unless conftest's rule allows it.

Each case runs a real pytest session in a subprocess, with tests/conftest.py loaded as a
plugin, over a small test file that skips in the ways the suite does.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]

SKIPPING = textwrap.dedent(
    """
    import pytest

    def test_covered_extra():
        pytest.skip("needs the [embeddings] extra (pip install -e '.[dev]')")

    def test_extra_outside_dev():
        pytest.skip("the [distill] extra (torch, transformers, peft) is not installed")

    def test_outside_the_repository():
        pytest.skip("the seed README is not beside this checkout (/nowhere)")

    def test_missing_program():
        pytest.skip("no PostgreSQL server programs (initdb, pg_ctl) on this machine")

    @pytest.mark.xfail(reason="an expected failure is not a skip", strict=True)
    def test_xfail():
        raise AssertionError

    def test_runs():
        pass
    """
)
WHOLE_MODULE = (
    "import pytest\n\npytest.importorskip('no_such_module_here')\n\n\ndef test_x():\n    pass\n"
)


def session(tmp_path: Path, ci: bool) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_skipping.py").write_text(SKIPPING, encoding="utf-8")
    (tmp_path / "test_whole_module.py").write_text(WHOLE_MODULE, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "DARWIN_MEMO_CI"}
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), env.get("PYTHONPATH", "")])
    if ci:
        env["DARWIN_MEMO_CI"] = "1"
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "conftest",
            "-p",
            "no:cacheprovider",
            "-v",
            "--continue-on-collection-errors",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def outcomes(proc: subprocess.CompletedProcess[str]) -> dict[str, str]:
    """Test name -> PASSED / FAILED / SKIPPED / XFAIL / ERROR, from ``-v``'s lines."""
    found: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        head, _, rest = line.partition(" ")
        if "::" in head and rest.split(" ")[0] in ("PASSED", "FAILED", "SKIPPED", "XFAIL"):
            found[head.split("::")[-1]] = rest.split(" ")[0]
        elif line.startswith("ERROR ") and "::" not in line:  # a module that failed to collect
            found[line.split(" ")[1]] = "ERROR"
    return found


def test_outside_ci_every_skip_is_a_skip(tmp_path: Path) -> None:
    got = outcomes(session(tmp_path, ci=False))
    assert got["test_covered_extra"] == got["test_missing_program"] == "SKIPPED"
    assert got["test_runs"] == "PASSED" and got["test_xfail"] == "XFAIL"
    assert "ERROR" not in got.values()


def test_under_ci_only_the_allowed_skips_stay_skips(tmp_path: Path) -> None:
    proc = session(tmp_path, ci=True)
    got = outcomes(proc)
    assert got["test_covered_extra"] == "FAILED", proc.stdout[-3000:]
    assert got["test_missing_program"] == "FAILED"
    assert got["test_extra_outside_dev"] == "SKIPPED"
    assert got["test_outside_the_repository"] == "SKIPPED"
    assert got["test_xfail"] == "XFAIL" and got["test_runs"] == "PASSED"
    # a module skipped whole at import is a collection error
    assert "ERROR" in got.values() and "no_such_module_here" in proc.stdout
    assert "skipped under CI (DARWIN_MEMO_CI=1)" in proc.stdout
    assert proc.returncode == 1


def test_only_the_distill_extra_is_outside_ci() -> None:
    import conftest

    assert conftest.extras_outside_ci() == {"distill"}
    assert conftest.allowed_skip("needs the [mcp] extra") is None
    assert conftest.allowed_skip("the [distill] extra is not installed") is not None
