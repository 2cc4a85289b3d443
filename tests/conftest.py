from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
PUBLISHED = FIXTURES / "published-0.7.1"


@pytest.fixture(autouse=True)
def _isolated_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No test touches the real ~/.darwin-memo."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("DARWIN_MEMO_HOME", str(home / ".darwin-memo"))


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
    ``DARWIN_MEMO_REQUIRE_EXTENSION=1`` (as ``.ci/run`` sets) makes that a failure."""
    import importlib
    import os

    try:
        return importlib.import_module(f"darwin_memo.{name}")
    except ImportError:
        if os.environ.get("DARWIN_MEMO_REQUIRE_EXTENSION") == "1":
            raise
        pytest.skip(f"darwin_memo.{name} is not built (no C compiler at install time)")
