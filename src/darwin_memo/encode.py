"""Compatibility path: this module moved to ``darwin_memo.sim.encode``.

``darwin_memo.encode`` is a published module path, so it stays importable; code inside
the package imports from the new home.
"""

from .sim.encode import (
    Document,
    LocalEncoder,
    ReflectionEncoder,
    demo_corpus,
)

__all__ = [
    "Document",
    "LocalEncoder",
    "ReflectionEncoder",
    "demo_corpus",
]
