"""A code-repair world: patches are applied to a real file and the suite is run.

Each cycle writes a small module, ``app.py`` (six helpers: ``clamp``,
``slugify``, ``parse_version``, ``format_date``, ``dedupe``, ``retry_after``),
and ``test_app.py`` (ten plain-assert tests, ``TEST_NAMES``) into
``root/cycle-<n>/``. Some of the four defectable helpers carry a planted bug.
The tasks are patches, each a single textual replacement: one fix per planted
defect, a destructive "dead code cleanup" that deletes ``dedupe`` (which two
tests need), and a cosmetic change to the module comment.

``verify`` measures, it does not grade: an answer that reads as "apply"
rewrites ``app.py`` on disk, the suite runs before and after, and the outcome
is the change in the number of passing tests. Declining is free here;
``RentedTestSuiteEnv`` charges for the repairs a declined fix would have made.

The suite runs in a child process (``sys.executable -I -S``, one per run,
with a timeout), so generated code never executes inside the caller and a
hanging or crashing suite counts as zero passing tests. A tiny runner in the
child loads ``app.py`` and ``test_app.py`` as modules from source (no
bytecode caches, so a rewrite within the same second is never missed), calls
every ``test_*`` function and prints the names that did not raise (no
imports beyond ``os``/``sys``: a child costs about 20 ms). Results
are cached per cycle by source text: the run is deterministic, so the same
source is never run twice.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from ..aliases import keyword_aliases
from ..records.entry import Outcome, Task
from .environments import _SandboxedEnv, cycle_rng, decision_polarity

__all__ = [
    "DEFECTS",
    "TEST_NAMES",
    "TEST_SOURCE",
    "RentedTestSuiteEnv",
    "TestSuiteEnv",
    "app_source",
    "run_suite",
    "run_suite_detail",
]

#: The ten tests in ``test_app.py``, in file order.
TEST_NAMES: tuple[str, ...] = (
    "test_clamp_inclusive_upper",
    "test_clamp_mid",
    "test_slugify_separator",
    "test_slugify_lower",
    "test_parse_version",
    "test_dedupe_keeps_order",
    "test_dedupe_empty",
    "test_format_date",
    "test_retry_one",
    "test_retry_three",
)

#: The helpers that can carry a planted defect, in source order.
DEFECTS: tuple[str, ...] = ("clamp", "slugify", "parse_version", "format_date")

# helper -> (correct line, defective line); each defect breaks exactly one test.
_LINES: dict[str, tuple[str, str]] = {
    "clamp": (
        "    return min(max(value, low), high)\n",
        "    return min(max(value, low), high - 1)\n",
    ),
    "slugify": (
        '    return "-".join(text.lower().split())\n',
        '    return "_".join(text.lower().split())\n',
    ),
    "parse_version": (
        '    return tuple(int(part) for part in text.split("."))\n',
        '    return tuple(int(part) for part in text.split(","))\n',
    ),
    "format_date": (
        '    return f"{year:04d}-{month:02d}-{day:02d}"\n',
        '    return f"{year:04d}-{day:02d}-{month:02d}"\n',
    ),
}

_COMMENT = "# app.py: small helpers the service relies on.\n"
_COMMENT_REWORDED = "# app.py: small, dependency-free helpers that the service relies on.\n"

_DEDUPE = '''def dedupe(items):
    """Drop repeated items, keeping the first occurrence of each."""
    seen = set()
    out = []
    for item in items:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out


'''


def app_source(planted: tuple[str, ...] | list[str] | frozenset[str] = ()) -> str:
    """The text of ``app.py`` with the named helpers' defects planted."""
    unknown = set(planted) - set(DEFECTS)
    if unknown:
        raise ValueError(f"unknown defects {sorted(unknown)}; known: {', '.join(DEFECTS)}")

    def line(helper: str) -> str:
        return _LINES[helper][1 if helper in planted else 0]

    return (
        _COMMENT
        + '"""Helpers for the service: numbers, text, versions, dates, lists, backoff."""\n'
        + "\n\n"
        + "def clamp(value, low, high):\n"
        + '    """Limit value to the closed interval [low, high]."""\n'
        + line("clamp")
        + "\n\n"
        + "def slugify(text):\n"
        + '    """Lowercase words joined by hyphens."""\n'
        + line("slugify")
        + "\n\n"
        + "def parse_version(text):\n"
        + '    """"1.2.3" -> (1, 2, 3)."""\n'
        + line("parse_version")
        + "\n\n"
        + "def format_date(year, month, day):\n"
        + '    """ISO 8601 calendar date."""\n'
        + line("format_date")
        + "\n\n"
        + _DEDUPE
        + "def retry_after(attempt, base=1.0):\n"
        + '    """Seconds to wait before retry number attempt (exponential backoff)."""\n'
        + "    return base * 2 ** (attempt - 1)\n"
    )


#: The text of ``test_app.py``. It imports the module, not names from it, so a
#: missing helper fails only the tests that call it.
TEST_SOURCE = """import app


def test_clamp_inclusive_upper():
    assert app.clamp(10, 0, 10) == 10


def test_clamp_mid():
    assert app.clamp(5, 0, 10) == 5


def test_slugify_separator():
    assert app.slugify("Hello World") == "hello-world"


def test_slugify_lower():
    assert app.slugify("ABC") == "abc"


def test_parse_version():
    assert app.parse_version("1.2.3") == (1, 2, 3)


def test_dedupe_keeps_order():
    assert app.dedupe([3, 1, 3, 2, 1]) == [3, 1, 2]


def test_dedupe_empty():
    assert app.dedupe([]) == []


def test_format_date():
    assert app.format_date(2024, 3, 9) == "2024-03-09"


def test_retry_one():
    assert app.retry_after(1) == 1.0


def test_retry_three():
    assert app.retry_after(3) == 4.0
"""

# --------------------------------------------------------------------------- #
# Running the suite
# --------------------------------------------------------------------------- #

_MARK = "DARWIN_MEMO_PASSED "

# Runs in the child: argv[1] is the directory holding app.py and test_app.py.
_RUNNER = """
import os, sys
here = sys.argv[1]
real_stdout = sys.stdout
passed = []
try:
    modules = {}
    for name in ("app", "test_app"):
        path = os.path.join(here, name + ".py")
        with open(path, encoding="utf-8") as f:
            source = f.read()
        module = type(sys)(name)
        module.__file__ = path
        sys.modules[name] = module
        exec(compile(source, path, "exec"), module.__dict__)
        modules[name] = module
    tests = [
        (k, v) for k, v in vars(modules["test_app"]).items()
        if isinstance(k, str) and k.startswith("test_") and k.isidentifier() and callable(v)
    ]
except BaseException:
    tests = []
for name, fn in tests:
    try:
        fn()
    except BaseException:
        continue
    passed.append(name)
real_stdout.write("\\n" + __MARK__ + " ".join(sorted(passed)) + "\\n")
real_stdout.flush()
""".replace("__MARK__", repr(_MARK))


def _run_in(directory: Path, timeout: float) -> frozenset[str]:
    """Run the suite already written in ``directory``; names of passing tests."""
    if not sys.executable:
        raise RuntimeError("cannot run the test suite: sys.executable is unknown")
    try:
        proc = subprocess.run(
            [sys.executable, "-I", "-S", "-B", "-c", _RUNNER, str(directory)],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=directory,
        )
    except subprocess.TimeoutExpired:
        return frozenset()
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(_MARK):
            return frozenset(line[len(_MARK) :].split())
    return frozenset()


def _write_suite(directory: Path, app_src: str, test_src: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "app.py").write_text(app_src, encoding="utf-8")
    (directory / "test_app.py").write_text(test_src, encoding="utf-8")


@keyword_aliases(app_src="app_source", test_src="test_source")
def run_suite_detail(app_source: str, test_source: str, *, timeout: float = 30.0) -> frozenset[str]:
    """Names of the ``test_*`` functions in ``test_source`` that pass against ``app_source``.

    Both sources are written to a fresh temp dir and run in a child process.
    A module that fails to load (either one), a crash or a timeout gives an
    empty set. ``app_src``/``test_src`` are accepted as keyword spellings too.
    """
    with tempfile.TemporaryDirectory(prefix="darwin-memo-suite-") as tmp:
        _write_suite(Path(tmp), app_source, test_source)
        return _run_in(Path(tmp), timeout)


@keyword_aliases(app_src="app_source", test_src="test_source")
def run_suite(app_source: str, test_source: str, *, timeout: float = 30.0) -> int:
    """How many tests pass (see ``run_suite_detail``)."""
    return len(run_suite_detail(app_source, test_source, timeout=timeout))


# --------------------------------------------------------------------------- #
# Environments
# --------------------------------------------------------------------------- #


class TestSuiteEnv(_SandboxedEnv):
    """Patches to a real module, paid in passing tests (``resource_scale`` 2.0).

    ``defects_per_cycle`` of the four defectable helpers are broken each
    cycle (drawn from ``cycle_rng(seed, cycle, "testsuite")``); the tasks,
    shuffled, are one fix per defect, the destructive ``dedupe`` removal and
    a cosmetic comment change. Task context: ``patch`` (old, new), ``kind``
    (``fix``, ``destructive``, ``cosmetic``), ``helper``, ``path`` (of
    ``app.py``) and ``cycle``. Patches applied in a cycle accumulate in that
    cycle's ``app.py``; applying one twice finds its target absent.
    """

    __test__ = False  # a library class, not a pytest test class

    resource_scale: float = 2.0

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        defects_per_cycle: int = 3,
        seed: int = 7,
        *,
        timeout: float = 30.0,
    ) -> None:
        if not 0 <= defects_per_cycle <= len(DEFECTS):
            raise ValueError(
                f"defects_per_cycle must be between 0 and {len(DEFECTS)}, got {defects_per_cycle}"
            )
        self.defects_per_cycle = defects_per_cycle
        self.seed = seed
        self.timeout = timeout
        self._results: dict[str, frozenset[str]] = {}
        self._sandbox: Path | None = None
        super().__init__(root)

    def tasks(self, cycle: int) -> list[Task]:
        rng = cycle_rng(self.seed, cycle, "testsuite")
        planted = sorted(rng.sample(DEFECTS, self.defects_per_cycle), key=DEFECTS.index)
        sandbox = self._scratch.fresh(f"cycle-{cycle}")
        self._sandbox = sandbox
        self._results = {}
        _write_suite(sandbox, app_source(planted), TEST_SOURCE)
        app_path = str(sandbox / "app.py")

        def task(prompt: str, kind: str, helper: str, old: str, new: str) -> Task:
            context = {
                "patch": (old, new),
                "kind": kind,
                "helper": helper,
                "path": app_path,
                "cycle": cycle,
            }
            return Task(prompt, context)

        out = [
            task(f"Should the {h} fix patch be applied?", "fix", h, _LINES[h][1], _LINES[h][0])
            for h in planted
        ]
        out.append(
            task(
                "Should the dedupe dead code cleanup patch be applied? It deletes the dedupe "
                "helper from app.py: the dedupe helper is dead code.",
                "destructive",
                "dedupe",
                _DEDUPE,
                "",
            )
        )
        out.append(
            task(
                "Should the module comment patch be applied? It rewords the comment at the top "
                "of app.py.",
                "cosmetic",
                "",
                _COMMENT,
                _COMMENT_REWORDED,
            )
        )
        rng.shuffle(out)
        return out

    # -- measuring -----------------------------------------------------------

    def _app_path(self, task: Task) -> Path:
        path = Path(task.context["path"])
        if not self._scratch.contains(path):
            raise ValueError(f"{path} is not inside this environment's sandbox {self.root}")
        if not path.exists():
            raise FileNotFoundError(
                f"{path} is gone: asking for a later cycle's tasks removes this cycle's "
                "sandbox, so verify a cycle's tasks before moving on"
            )
        return path

    def _passing(self, app_src: str, directory: Path) -> frozenset[str]:
        """Passing tests for this source, writing it to ``directory`` and running it."""
        cached = self._results.get(app_src)
        if cached is None:
            _write_suite(directory, app_src, TEST_SOURCE)
            cached = _run_in(directory, self.timeout)
            self._results[app_src] = cached
        return cached

    def _before_after(self, task: Task) -> tuple[Path, str, str] | None:
        """(app.py, current source, patched source), or None if the target is absent."""
        path = self._app_path(task)
        old, new = task.context["patch"]
        src = path.read_text(encoding="utf-8")
        if not old or old not in src:
            return None
        return path, src, src.replace(old, new, 1)

    def verify(self, task: Task, answer_text: str) -> Outcome:
        if decision_polarity(answer_text) is not True:
            return Outcome(0.0, "patch skipped")
        found = self._before_after(task)
        if found is None:
            return Outcome(0.0, "patch target absent")
        path, src, patched = found
        before = len(self._passing(src, path.parent))
        path.write_text(patched, encoding="utf-8")
        after = len(self._passing(patched, path.parent))
        return Outcome(float(after - before), f"applied: {before} -> {after} tests passing")


class RentedTestSuiteEnv(TestSuiteEnv):
    """``TestSuiteEnv`` where declining a fix costs the repairs not made.

    Declining a ``fix`` patch pays ``hold_cost`` per test it would have
    fixed, found by running the suite on the patched source (in a probe
    directory; ``app.py`` is left as it was). Declining the destructive or
    cosmetic patch, or ``hold_cost == 0``, is exactly ``TestSuiteEnv``.
    """

    __test__ = False

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        defects_per_cycle: int = 3,
        seed: int = 7,
        hold_cost: float = 1.0,
        *,
        timeout: float = 30.0,
    ) -> None:
        if hold_cost < 0:
            raise ValueError(f"hold_cost must be >= 0, got {hold_cost}")
        self.hold_cost = float(hold_cost)
        super().__init__(root, defects_per_cycle, seed, timeout=timeout)

    def verify(self, task: Task, answer_text: str) -> Outcome:
        if (
            self.hold_cost == 0
            or task.context.get("kind") != "fix"
            or decision_polarity(answer_text) is True
        ):
            return super().verify(task, answer_text)
        found = self._before_after(task)
        if found is None:
            return super().verify(task, answer_text)
        path, src, patched = found
        before = len(self._passing(src, path.parent))
        after = len(self._passing(patched, path.parent / "probe"))
        fixed = max(0, after - before)
        if fixed == 0:
            return super().verify(task, answer_text)
        cost = self.hold_cost * fixed
        return Outcome(-cost, f"patch skipped, {fixed} tests left failing")
