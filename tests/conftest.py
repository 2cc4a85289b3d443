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


@pytest.fixture(autouse=True, scope="session")
def _remove_store_dirs():  # type: ignore[no-untyped-def]
    """Remove the folders ``new_store`` made once the session is over."""
    yield
    import shutil

    for directory in _TEMP_DIRS:
        shutil.rmtree(directory, ignore_errors=True)


def new_store(kind: str, **kwargs: object):  # type: ignore[no-untyped-def]
    """A fresh empty store: in memory, or SQLite-backed (entries live in the database)."""
    from darwin_memo import MemoryStore

    if kind == "memory":
        return MemoryStore(**kwargs)  # type: ignore[arg-type]
    import tempfile

    from darwin_memo.backends.sqlite import SqliteBackend
    from darwin_memo.backends.sqlstore import SqlStore

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
