"""The package's folders are its layers (docs/architecture.md), and a lower layer never
imports a higher one at run time.

Imports under ``if TYPE_CHECKING:`` are annotations only and are not counted. The few
known exceptions are listed with their reason; a new one fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import darwin_memo

SRC = Path(darwin_memo.__file__).parent

#: The layer of each top-level module or subpackage (docs/architecture.md's table).
LAYERS = {
    "records": 1,
    "economy": 2,
    "retrieval": 3,
    "backends": 4,
    "store": 5,
    "ledger": 5,
    "readonly": 5,
    "transfer": 5,
    "replay": 5,
    "answer": 6,
    "sim": 6,
    "distill": 6,
    "organic": 6,
    "cli": 7,
    "mcp": 7,
    "dashboard": 7,
    "observe": 7,
    "render": 7,
    "ci": 7,
    "integrations": 7,
}

#: (importer, imported) pairs that reach up, each with why it is allowed for now.
KNOWN = {
    # The ledger answers a decide through the query protocol.
    ("ledger", "answer.protocol"),
    # The JSON backend's population is the published MemoryStore, read from the file.
    ("backends.jsonstore", "store"),
}


def _module(path: Path) -> list[str]:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return parts[:-1] if parts[-1] == "__init__" else parts


def _runtime_imports(tree: ast.Module) -> list[ast.ImportFrom]:
    """Every ``from ... import`` outside ``if TYPE_CHECKING:`` blocks."""
    found: list[ast.ImportFrom] = []

    def walk(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and getattr(child.test, "id", "") == "TYPE_CHECKING":
                for other in child.orelse:
                    walk(other)
                continue
            if isinstance(child, ast.ImportFrom):
                found.append(child)
            walk(child)

    walk(tree)
    return found


def _upward_imports() -> set[tuple[str, str]]:
    out: set[tuple[str, str]] = set()
    for path in sorted(SRC.rglob("*.py")):
        me = _module(path)
        if not me or me[0] not in LAYERS:
            continue
        package = me if path.name == "__init__.py" else me[:-1]
        for node in _runtime_imports(ast.parse(path.read_text(encoding="utf-8"))):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                module = base + (node.module.split(".") if node.module else [])
            elif node.module and node.module.startswith("darwin_memo."):
                module = node.module.split(".")[1:]
            else:
                continue
            names = [module] if node.module else [[*module, a.name] for a in node.names]
            for target in names:
                if target and target[0] in LAYERS and LAYERS[target[0]] > LAYERS[me[0]]:
                    out.add((".".join(me), ".".join(target)))
    return out


def test_no_layer_imports_a_higher_one() -> None:
    found = _upward_imports()
    assert found - KNOWN == set()
    assert KNOWN - found == set(), "a known exception is gone: take it off the list"


def test_the_scan_sees_an_upward_import() -> None:
    # The check above is only as good as the scan: it finds the ledger's known one.
    assert ("ledger", "answer.protocol") in _upward_imports()


def test_every_folder_and_top_level_module_has_a_layer() -> None:
    helpers = {"__init__", "__main__", "errors", "aliases", "collector", "native", "data"}
    published = {
        *("types", "survival", "consolidate", "semantic", "temporal", "encode"),
        *("reflection", "protocol", "llm", "environments", "testsuite_env", "evm"),
        *("ui", "mcp_server", "diagnose"),
    }
    names = {p.stem for p in SRC.glob("*.py")} | {
        p.name for p in SRC.iterdir() if p.is_dir() and not p.name.startswith("__")
    }
    assert names - helpers - published - set(LAYERS) == set()
    # The published paths are thin re-exports: no code of their own lives there.
    for name in published:
        tree = ast.parse((SRC / f"{name}.py").read_text(encoding="utf-8"))
        assert "Compatibility path: this module moved to" in str(ast.get_docstring(tree))
        kinds = {type(node).__name__ for node in tree.body[1:]}
        assert kinds <= {"ImportFrom", "Assign", "If"}, name  # imports, __all__, __main__
