"""The top-level surface of ``darwin_memo``: what ``__all__`` promises is really there.

In the style of httpx's ``tests/test_exported_members.py``: every name listed imports,
nothing public is left out of the list, and the 54 names of the published 0.7.1
``__all__`` (spec §1, written out below) are all among them. Our extra names (``Books``,
the error classes) are allowed; a published name missing is not. The opt-in organic
layer is not part of the top-level surface and is not checked here.

Also ``python -m darwin_memo``: importing ``darwin_memo.__main__`` runs nothing.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import darwin_memo

#: ``darwin_memo.__all__`` of the published 0.7.1, in its order (spec §1).
PUBLISHED_ALL = [
    "CONFLICT_HEADER",
    "DEFAULT_BASE_RPC",
    "DEFAULT_MERGE_THRESHOLD",
    "EMBEDDING_MERGE_THRESHOLD",
    "RENT_TIERS",
    "CycleStats",
    "Document",
    "EmbeddingFn",
    "EmbeddingRetriever",
    "EntryKind",
    "Environment",
    "EvmRpc",
    "EvmRpcError",
    "EvmSettler",
    "HashingEmbedder",
    "Ledger",
    "LexicalRetriever",
    "LocalEncoder",
    "MemoryEntry",
    "MemoryStore",
    "OllamaClient",
    "OllamaEmbedder",
    "OllamaError",
    "Outcome",
    "ProtocolAnswer",
    "QueryProtocol",
    "ReflectionEncoder",
    "RentedStorageEnv",
    "RentedTestSuiteEnv",
    "Retriever",
    "StorageEnv",
    "StoreLockedError",
    "SurvivalConfig",
    "SurvivalLoop",
    "SurvivalReport",
    "Task",
    "TestSuiteEnv",
    "Ticket",
    "Trajectory",
    "VerifiableQAEnv",
    "__version__",
    "advance_lifecycle",
    "age_annotation",
    "assign_credit",
    "conflict_clusters",
    "consolidate",
    "death_cause",
    "decision_polarity",
    "demo_corpus",
    "is_silent",
    "newest_first",
    "ollama_available",
    "recency_weight",
    "rent_multipliers",
]

#: Where each published name lives in the published package (spec §1), for the names
#: whose home module the spec fixes; ours must be the very same object.
PUBLISHED_HOMES = {
    "Ledger": "darwin_memo.ledger",
    "Ticket": "darwin_memo.ledger",
    "ReflectionEncoder": "darwin_memo.encode",
    "EvmSettler": "darwin_memo.evm",
    "EvmRpc": "darwin_memo.evm",
    "EvmRpcError": "darwin_memo.evm",
    "DEFAULT_BASE_RPC": "darwin_memo.evm",
    "MemoryStore": "darwin_memo.store",
    "QueryProtocol": "darwin_memo.protocol",
    "SurvivalLoop": "darwin_memo.survival",
    "OllamaClient": "darwin_memo.llm",
}

INIT = Path(darwin_memo.__file__)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=120, check=False
    )


def test_published_list_is_the_specs_54() -> None:
    assert len(PUBLISHED_ALL) == 54
    assert len(set(PUBLISHED_ALL)) == 54


def test_every_name_in_all_imports() -> None:
    for name in darwin_memo.__all__:
        assert getattr(darwin_memo, name) is not None, name


def test_all_has_no_duplicates() -> None:
    assert len(darwin_memo.__all__) == len(set(darwin_memo.__all__))


def test_all_matches_the_public_names() -> None:
    # Load every lazy name first: a submodule imported along the way becomes an attribute
    # of the package, which is not an exported member.
    for name in darwin_memo.__all__:
        getattr(darwin_memo, name)
    public = {
        name
        for name in dir(darwin_memo)
        if (not name.startswith("_") or name == "__version__")
        and not isinstance(getattr(darwin_memo, name), ModuleType)
    }
    assert public == set(darwin_memo.__all__)


def test_published_names_are_a_subset() -> None:
    missing = [name for name in PUBLISHED_ALL if name not in darwin_memo.__all__]
    assert missing == []


def test_published_names_are_the_submodules_objects() -> None:
    import importlib

    for name, module in PUBLISHED_HOMES.items():
        assert getattr(darwin_memo, name) is getattr(importlib.import_module(module), name)


def test_star_import_gives_every_name() -> None:
    namespace: dict[str, object] = {}
    exec("from darwin_memo import *", namespace)
    assert set(darwin_memo.__all__) <= set(namespace)


def test_unknown_name_is_an_attribute_error() -> None:
    try:
        darwin_memo.NoSuchName  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchName" in str(exc)
    else:
        raise AssertionError("darwin_memo.NoSuchName did not raise AttributeError")


def test_type_checking_imports_match_the_lazy_table() -> None:
    """Type checkers see each lazy name imported from the module that really serves it."""
    tree = ast.parse(INIT.read_text(encoding="utf-8"))
    seen: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name):
            if node.test.id != "TYPE_CHECKING":
                continue
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom) and stmt.level == 1
                for alias in stmt.names:
                    seen[alias.name] = str(stmt.module)
    lazy = dict(darwin_memo._LAZY)  # type: ignore[attr-defined]
    assert seen.pop("DEFAULT_MERGE_THRESHOLD") == lazy.pop("DEFAULT_MERGE_THRESHOLD")
    assert seen == lazy


def test_importing_the_package_stays_cheap() -> None:
    """The lazy names load nothing until used: the one-shot CLI depends on it."""
    heavy = [
        *("ledger", "evm", "reflection", "llm", "store", "protocol", "survival", "encode"),
        *("integrations.evm", "sim", "answer", "sim.survival", "backends"),
    ]
    code = (
        "import sys, darwin_memo\n"
        f"print([m for m in {heavy!r} if 'darwin_memo.' + m in sys.modules])\n"
        "from darwin_memo import Ledger, ReflectionEncoder, EvmSettler\n"
        "print(Ledger.__module__, ReflectionEncoder.__module__, EvmSettler.__module__)\n"
    )
    done = _run("-c", code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "[]",
        # The classes' own modules (the published paths re-export them).
        "darwin_memo.ledger darwin_memo.sim.reflection darwin_memo.integrations.evm",
    ]


def test_importing_main_runs_nothing() -> None:
    # With a command line that would make the CLI exit 2, the import must still be silent.
    code = (
        "import sys\n"
        "sys.argv = ['darwin-memo', 'no-such-command']\n"
        "import darwin_memo.__main__ as entry, darwin_memo.cli as cli\n"
        "print(entry.main is cli.main)\n"
    )
    done = _run("-c", code)
    assert (done.returncode, done.stdout, done.stderr) == (0, "True\n", "")


def test_python_m_darwin_memo_version() -> None:
    done = _run("-m", "darwin_memo", "--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"darwin-memo {darwin_memo.__version__}"


def test_python_m_darwin_memo_keeps_the_exit_code() -> None:
    done = _run("-m", "darwin_memo", "no-such-command")
    assert done.returncode == 2
    assert "invalid choice" in done.stderr
    assert "Traceback" not in done.stderr
