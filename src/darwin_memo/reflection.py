"""Compatibility path: this module moved to ``darwin_memo.sim.reflection``.

``darwin_memo.reflection`` is a published module path, so it stays importable; code inside
the package imports from the new home.
"""

from .sim.reflection import (
    CONSOLIDATE_PROMPT,
    CROSS_DOC_PROMPT,
    ENTITY_PROMPT,
    EXTRACT_PROMPT,
    STEPS,
    VERIFY_PROMPT,
    Progress,
    ReflectionEncoder,
    Skip,
    parse_items,
)

__all__ = [
    "CONSOLIDATE_PROMPT",
    "CROSS_DOC_PROMPT",
    "ENTITY_PROMPT",
    "EXTRACT_PROMPT",
    "STEPS",
    "VERIFY_PROMPT",
    "Progress",
    "ReflectionEncoder",
    "Skip",
    "parse_items",
]
