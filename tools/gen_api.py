"""Generate docs/api.md, the Python API reference, from the package's docstrings.

    python tools/gen_api.py            # rewrite docs/api.md
    python tools/gen_api.py --check    # exit 1 if docs/api.md is out of date

The reference is built by importing the package and reading what it exports:
the top-level names (``darwin_memo.__all__``), grouped by the module they live
in, then every submodule's further public names (its ``__all__``). Each entry
shows the signature ``inspect`` sees and the docstring as written; a class lists
its public methods and properties. Nothing is written by hand, so the page can
only be as good as the docstrings: improve those, then run this again.
``tests/docs/test_guides.py`` fails when the committed page differs from what this
script writes.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "api.md"

#: Submodules whose further public names are documented, in reading order (their homes;
#: ``PUBLISHED`` names the published path that re-exports each moved one).
SUBMODULES = (
    "records.entry",
    "store",
    "retrieval.lexical",
    "retrieval.embedding",
    "retrieval.temporal",
    "sim.encode",
    "sim.reflection",
    "answer.protocol",
    "sim.survival",
    "economy.merge",
    "retrieval.simjoin",
    "ledger",
    "sim.environments",
    "sim.testsuite_env",
    "answer.clients",
    "integrations.evm",
    "ci",
    "render",
    "observe",
    "sim.diagnose",
    "backends.journal",
    "errors",
    "mcp.server",
    "integrations.openai_agents",
)

#: Home module -> the published module path that still imports it (a thin re-export).
PUBLISHED = {
    "records.entry": "types",
    "retrieval.lexical": "retrieval",
    "retrieval.embedding": "semantic",
    "retrieval.temporal": "temporal",
    "sim.encode": "encode",
    "sim.reflection": "reflection",
    "answer.protocol": "protocol",
    "sim.survival": "survival",
    "economy.merge": "consolidate",
    "retrieval.simjoin": "consolidate",
    "sim.environments": "environments",
    "sim.testsuite_env": "testsuite_env",
    "answer.clients": "llm",
    "integrations.evm": "evm",
    "sim.diagnose": "diagnose",
    "mcp.server": "mcp_server",
}

HEADER = """\
# Python API reference

Generated from the docstrings by `python tools/gen_api.py`; do not edit by hand
(`tests/docs/test_guides.py` fails when this page and the code disagree). The command
line is in [cli.md](cli.md), the MCP tools in [mcp.md](mcp.md), the file formats in
[store-format.md](store-format.md).

Everything in the first part imports from the top level (`from darwin_memo import
Ledger`); the second part lists what each submodule adds.
"""

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _clean(text: str) -> str:
    """Signatures without memory addresses, so the page is the same on every run."""
    return _ADDRESS.sub("", text)


def _doc(obj: Any) -> str:
    doc = inspect.getdoc(obj)
    return doc.strip() if doc else "*(no docstring)*"


def _first_paragraph(obj: Any) -> str:
    return _doc(obj).split("\n\n")[0].replace("\n", " ")


def _signature(name: str, obj: Any) -> str:
    try:
        return _clean(f"{name}{inspect.signature(obj)}")
    except (TypeError, ValueError):
        return name


def _members(cls: type) -> list[tuple[str, Any]]:
    """Public methods and properties the class itself defines (dunders left out)."""
    found = []
    for name, value in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if isinstance(value, property) or inspect.isfunction(value):
            found.append((name, value))
    return sorted(found)


def _entry(qualname: str, obj: Any) -> list[str]:
    short = qualname.rsplit(".", 1)[-1]
    if inspect.isclass(obj):
        kind = "exception" if issubclass(obj, BaseException) else "class"
        lines = [
            f"### `{qualname}`",
            "",
            f"*{kind}*",
            "",
            "```python",
            _signature(short, obj),
            "```",
        ]
        lines += ["", _doc(obj), ""]
        members = _members(obj)
        if members:
            lines.append("| member | what |")
            lines.append("| --- | --- |")
            for name, value in members:
                shown = name if isinstance(value, property) else _signature(name, value)
                what = _first_paragraph(value.fget if isinstance(value, property) else value)
                what = what.replace("|", "\\|")
                lines.append(f"| `{shown}` | {what} |")
            lines.append("")
        return lines
    if callable(obj):
        return [
            f"### `{qualname}`",
            "",
            "```python",
            _signature(short, obj),
            "```",
            "",
            _doc(obj),
            "",
        ]
    if isinstance(obj, (set, frozenset)):  # set order changes with the hash seed
        value = f"{type(obj).__name__} of {len(obj)}: " + ", ".join(sorted(map(repr, obj)))
    else:
        value = _clean(repr(obj))
    if len(value) > 120:
        value = value[:117] + "..."
    return [f"### `{qualname}`", "", f"*constant* `{value}`", ""]


def _home(obj: Any, fallback: str) -> str:
    module = getattr(obj, "__module__", None)
    if isinstance(module, str) and module.startswith("darwin_memo"):
        return module
    return fallback


def generate() -> str:
    package = importlib.import_module("darwin_memo")
    lines = [HEADER, "## The top level", ""]
    top = [n for n in package.__all__ if not n.startswith("__")]
    by_module: dict[str, list[str]] = {}
    for name in top:
        obj = getattr(package, name)
        lazy = getattr(package, "_LAZY", {}).get(name)
        fallback = f"darwin_memo.{lazy}" if lazy else "darwin_memo"
        home = _home(obj, fallback) if inspect.isclass(obj) or inspect.isfunction(obj) else fallback
        by_module.setdefault(home, []).append(name)
    documented = set(top)
    for module_name in sorted(by_module):
        home_module = importlib.import_module(module_name)
        lines += [f"### From `{module_name}`", "", _first_paragraph(home_module), ""]
        for name in sorted(by_module[module_name]):
            lines += _entry(name, getattr(package, name))

    lines += ["## Submodules", ""]
    for sub in SUBMODULES:
        module = importlib.import_module(f"darwin_memo.{sub}")
        names = [n for n in getattr(module, "__all__", []) if n not in documented]
        lines += [f"### `darwin_memo.{sub}`", ""]
        if sub in PUBLISHED:
            published = f"darwin_memo.{PUBLISHED[sub]}"
            lines += [f"*Also importable as `{published}` (the published path).*", ""]
        lines += [_doc(module), ""]
        for name in sorted(names):
            lines += _entry(f"{sub}.{name}", getattr(module, name))
    text = "\n".join(lines)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Generate docs/api.md from the docstrings.")
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/api.md is stale")
    args = parser.parse_args(argv)
    text = generate()
    if args.check:
        current = OUT.read_text(encoding="utf-8") if OUT.exists() else ""
        if current != text:
            print("docs/api.md is out of date: run python tools/gen_api.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)} ({text.count(chr(10))} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
