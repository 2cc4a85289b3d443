"""The optional compiled helpers, and the switch that keeps everything in Python.

Two C extensions are built at install time where a C compiler is found (``setup.py``,
``optional=True``): ``_cjoin`` (the published merge rule's greedy join) and ``_ctext``
(tokens and ``HashingEmbedder``'s n-gram counts). Each has a Python twin that gives
the same result, bit for bit (tests compare them). ``compiled(name)`` returns the
extension, or None where it is not built or ``DARWIN_MEMO_PURE_PYTHON=1`` asks for the
Python twins.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

__all__ = ["PURE_PYTHON_ENV", "compiled"]

#: Set ``DARWIN_MEMO_PURE_PYTHON=1`` to run the Python twins even where the compiled
#: helpers are installed.
PURE_PYTHON_ENV = "DARWIN_MEMO_PURE_PYTHON"


def compiled(name: str) -> ModuleType | None:
    """``darwin_memo.<name>`` (``"_cjoin"``, ``"_ctext"``), or None: not built or not
    wanted."""
    if os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0"):
        return None
    try:
        return importlib.import_module(f"darwin_memo.{name}")
    except ImportError:
        return None
