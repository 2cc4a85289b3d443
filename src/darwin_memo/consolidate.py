"""Compatibility path: this module moved to ``darwin_memo.economy.merge`` (the merge rule)
and ``darwin_memo.retrieval.simjoin`` (the similarity join and ``merge_groups``).

``darwin_memo.consolidate`` is a published module path, so it stays importable; code
inside the package imports from the new homes.
"""

from .economy.merge import DEFAULT_MERGE_THRESHOLD, MERGE_SIMILARITIES, SOURCE_POLICIES, Merge
from .retrieval.simjoin import consolidate, merge_groups

__all__ = [
    "DEFAULT_MERGE_THRESHOLD",
    "MERGE_SIMILARITIES",
    "SOURCE_POLICIES",
    "Merge",
    "consolidate",
    "merge_groups",
]
