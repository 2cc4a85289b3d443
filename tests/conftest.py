"""Shared fixtures, and the rule that makes skips honest under CI.

Skips under CI
--------------
A test may skip where something it needs is missing (an optional package, PostgreSQL's
server programs, Chromium), so that ``pytest`` runs anywhere. Under CI that would hide
whole layers: CI installs ``.[dev]`` and the programs ``.ci/run`` names, so a skip there
means CI lost something it should have. ``.ci/run`` therefore sets ``DARWIN_MEMO_CI=1``,
and then **every skip is a failure**, with exactly two exceptions, which the skip's
reason must state:

1. it names an extra as ``[NAME] extra`` (e.g. "the [distill] extra (torch, ...) is not
   installed") and that extra of pyproject.toml is *not* covered by the ``dev`` extra,
   the one CI installs (today: ``distill``, whose torch is about 2 GB; ``bench``-only
   and empty extras are covered). An extra whose packages are all in ``dev`` (mcp,
   agents, postgres, embeddings, organic, fast) is covered, so its skips fail;
2. it contains one of the fragments in ``OUTSIDE_CI``: a program or file that CI cannot
   have, each with the reason why.

Platform skips (``os.name != "posix"``) never trigger on CI's Linux, and an ``xfail``
is not a skip. To let a new test skip under CI, add the extra to nothing (keep it out of
``dev``) or add its program to ``OUTSIDE_CI`` with a reason a reviewer can judge.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
PUBLISHED = FIXTURES / "published-0.7.1"
ROOT = Path(__file__).resolve().parent.parent

#: Set by ``.ci/run``: every skip is a failure unless ``allowed_skip`` says otherwise.
CI = os.environ.get("DARWIN_MEMO_CI") == "1"

#: Fragments of a skip reason naming something CI cannot have, and why not.
OUTSIDE_CI: dict[str, str] = {
    "the seed README is not beside this checkout": (
        "the seed README lives in the project's shared folder, outside the repository; "
        "a clean clone has only tests/fixtures' copy of its blocks"
    ),
    "../shared/data/locomo-dev.zip is not here": (
        "a data set outside the repository, not redistributable in it"
    ),
}

_EXTRA_IN_REASON = re.compile(r"\[([A-Za-z0-9_-]+)\] extra")


def _requirement_name(spec: str) -> str:
    match = re.match(r"[A-Za-z0-9_.-]+", spec.strip())
    return (match.group(0) if match else spec).lower().replace("_", "-")


def extras_outside_ci() -> set[str]:
    """The extras of pyproject.toml that ``.[dev]`` (what CI installs) does not cover."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras: dict[str, list[str]] = project["optional-dependencies"]
    dev = {_requirement_name(s) for s in extras["dev"]}
    return {
        name for name, specs in extras.items() if not {_requirement_name(s) for s in specs} <= dev
    }


def allowed_skip(reason: str) -> str | None:
    """Why CI may skip for ``reason`` (None: it may not, the skip is a failure)."""
    for fragment, why in OUTSIDE_CI.items():
        if fragment in reason:
            return why
    for extra in _EXTRA_IN_REASON.findall(reason):
        if extra in extras_outside_ci():
            return f"the [{extra}] extra is not in .[dev], which CI installs"
    return None


def _skip_reason(longrepr: object) -> str:
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def _fail_skip(report: pytest.TestReport | pytest.CollectReport) -> None:
    reason = _skip_reason(report.longrepr)
    if allowed_skip(reason) is not None:
        return
    report.outcome = "failed"
    report.longrepr = (
        f"skipped under CI (DARWIN_MEMO_CI=1), where every skip is a failure: {reason}\n"
        "CI must provide what this test needs, or the reason must name an extra CI does "
        "not install or something in tests/conftest.py's OUTSIDE_CI (see its docstring)."
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    if CI and report.skipped and not hasattr(report, "wasxfail"):
        _fail_skip(report)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    if CI and report.skipped:  # a whole module skipped (pytest.importorskip at its top)
        _fail_skip(report)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every PostgreSQL case ``postgres``, so ``pytest -m "not postgres"`` never starts
    the cluster: the tests that ask for ``pg_cluster``, and the ``"postgres"`` case of the
    tests parametrized over backends (whose fixtures start it on demand)."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        params = list(callspec.params.values()) if callspec is not None else []
        if "pg_cluster" in getattr(item, "fixturenames", ()) or "postgres" in params:
            item.add_marker(pytest.mark.postgres)


@pytest.fixture(scope="session")
def _model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache of derived model files (retrieval/graphcache.py) for the whole session:
    built by the first test that embeds, read by the others (each is about 90 MB)."""
    return tmp_path_factory.mktemp("model-cache")


@pytest.fixture(autouse=True)
def _isolated_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch, _model_cache: Path
) -> None:
    """No test touches the real ~/.darwin-memo, nor the real ~/.cache."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("DARWIN_MEMO_HOME", str(home / ".darwin-memo"))
    monkeypatch.setenv("DARWIN_MEMO_CACHE_DIR", str(_model_cache / "darwin-memo"))


STORE_KINDS = ["memory", "sqlite"]
_TEMP_DIRS: list[str] = []
#: The session's PostgreSQL cluster, once a test asked for one (``pg_cluster``).
_PG: list[object] = []


@pytest.fixture(scope="session")
def pg_cluster():  # type: ignore[no-untyped-def]
    """A throwaway PostgreSQL cluster on loopback for the session (skips without one).

    Set ``DARWIN_MEMO_REQUIRE_POSTGRES=1`` to make a missing server or psycopg fail.
    """
    from pgcluster import find_bindir, start_or_skip

    bindir = find_bindir()
    reason = ""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        reason = "psycopg is not installed (pip install -e .[dev])"
    if bindir is None:
        reason = "no PostgreSQL server programs (initdb, pg_ctl) on this machine"
    cluster = start_or_skip(bindir, reason)
    _PG.append(cluster)
    yield cluster
    _PG.remove(cluster)
    cluster.destroy()


def pg_url(cluster: object) -> str:
    """A URL naming a fresh, unused store in the session's cluster."""
    import secrets

    return cluster.url(f"t_{secrets.token_hex(6)}")  # type: ignore[attr-defined]


@pytest.fixture(autouse=True, scope="session")
def _remove_store_dirs():  # type: ignore[no-untyped-def]
    """Remove the folders ``new_store`` made once the session is over."""
    yield
    import shutil

    for directory in _TEMP_DIRS:
        shutil.rmtree(directory, ignore_errors=True)


def new_store(kind: str, **kwargs: object):  # type: ignore[no-untyped-def]
    """A fresh empty store: in memory, or SQLite- or PostgreSQL-backed (entries in the DB).

    ``"postgres"`` needs the ``pg_cluster`` fixture to have started the session's cluster.
    """
    from darwin_memo import MemoryStore

    if kind == "memory":
        return MemoryStore(**kwargs)  # type: ignore[arg-type]
    import tempfile

    from darwin_memo.backends.sqlite import SqliteBackend
    from darwin_memo.backends.sqlstore import SqlStore

    backend: SqliteBackend
    if kind == "postgres":
        from darwin_memo.backends.postgres import PostgresBackend

        assert _PG, "new_store('postgres') needs the pg_cluster fixture"
        backend = PostgresBackend(pg_url(_PG[0]))
    else:
        directory = tempfile.mkdtemp(prefix="darwin-memo-test-")
        _TEMP_DIRS.append(directory)
        backend = SqliteBackend(Path(directory) / "store.db")
    return SqlStore(
        backend,
        max_energy=float(kwargs.get("max_energy", 5.0)),  # type: ignore[arg-type]
        upkeep=float(kwargs.get("upkeep", 0.05)),  # type: ignore[arg-type]
        retriever=kwargs.get("retriever"),  # type: ignore[arg-type]
    )


@pytest.fixture(params=STORE_KINDS)
def store_kind(request: pytest.FixtureRequest) -> str:
    """Parametrizes a test over the in-memory and the SQLite-backed population."""
    return str(request.param)


@pytest.fixture(params=[*STORE_KINDS, "postgres"])
def db_store_kind(request: pytest.FixtureRequest) -> str:
    """``store_kind`` plus the PostgreSQL-backed population (starts the cluster)."""
    if request.param == "postgres":
        request.getfixturevalue("pg_cluster")
    return str(request.param)


def compiled_or_skip(name: str):  # type: ignore[no-untyped-def]
    """``darwin_memo.<name>``, a compiled helper; skips where it is not built, unless
    ``DARWIN_MEMO_REQUIRE_EXTENSION=1`` or ``DARWIN_MEMO_CI=1`` (as ``.ci/run`` sets)
    makes that a failure."""
    import importlib

    try:
        return importlib.import_module(f"darwin_memo.{name}")
    except ImportError:
        if CI or os.environ.get("DARWIN_MEMO_REQUIRE_EXTENSION") == "1":
            raise
        pytest.skip(f"darwin_memo.{name} is not built (no C compiler at install time)")
