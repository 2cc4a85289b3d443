"""The optional compiled helper, and the switch that keeps everything in Python.

One C extension is built at install time where a C compiler is found (``setup.py``,
``optional=True``): ``_cjoin``, the published merge rule's greedy join, which makes a
consolidating tick of a large store four to five times faster (at 100k entries about
5 s of CPU instead of 21 s). It uses only the stable ABI (``Py_LIMITED_API`` 3.10: one
``abi3`` build serves every later Python). Its Python twin in ``consolidate`` gives
the same groups (tests compare them). ``compiled(name)`` returns the extension, or
None where it is not built or ``DARWIN_MEMO_PURE_PYTHON=1`` asks for the Python twin.

A compiled helper is kept only where it makes an operation a user runs at least three
times faster on a realistic store. Tokenizing, index building and ``HashingEmbedder``'s
n-grams did not, and are Python only; so is the schema-16 migration's decoding of
schema-15 rows, which runs once per store on a format no release wrote (the migration
carries its own code).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

__all__ = ["PURE_PYTHON_ENV", "compiled"]

#: Set ``DARWIN_MEMO_PURE_PYTHON=1`` to run the Python twin even where the compiled
#: helper is installed.
PURE_PYTHON_ENV = "DARWIN_MEMO_PURE_PYTHON"


def compiled(name: str) -> ModuleType | None:
    """``darwin_memo.<name>`` (``"_cjoin"``), or None: not built or not wanted."""
    if os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0"):
        return None
    try:
        return importlib.import_module(f"darwin_memo.{name}")
    except ImportError:
        return None
