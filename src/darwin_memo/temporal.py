"""Compatibility path: this module moved to ``darwin_memo.retrieval.temporal``.

``darwin_memo.temporal`` is a published module path, so it stays importable; code inside
the package imports from the new home.
"""

from .retrieval.temporal import (
    CONFLICT_HEADER,
    CONFLICT_LABEL,
    age_annotation,
    conflict_clusters,
    newest_first,
    recency_weight,
    render_consult,
)

__all__ = [
    "CONFLICT_HEADER",
    "CONFLICT_LABEL",
    "age_annotation",
    "conflict_clusters",
    "newest_first",
    "recency_weight",
    "render_consult",
]
