"""The organic memory layer (experimental, opt-in): relatedness, recall and importance.

Four phases over one ``MemoryStore``, all on mechanical or measured signals, no judge:

1. ``associative``: entries linked by the cosine of their embeddings
   (``AssociativeGraph``, ``build_graph``, ``store_related``);
2. ``activation``: an entry shows its gist until recalled, then its detail
   (``ActivationState``, ``surface``, ``detail``);
3. ``dynamics``: a recall spreads one hop and strengthens the links it travels
   (``HebbianWeights``, ``OrganicMemory``);
4. ``importance``: recalls, earned credit and centrality as an importance in [0, 1]
   (``EarnedImportance``), and ``OrganicMemory.upkeep_scale()`` for callers who choose
   to let importance slow upkeep.

``related_json`` is an entry's related entries in the JSON that ``darwin-memo ledger
STORE related`` prints and the MCP tool ``memory_related`` returns.

Phases 1-3 never touch energy. Phase 4 changes upkeep only when the caller passes
``om.upkeep_scale()`` to ``store.charge_upkeep(scale=...)``; docs/organic.md measures
why that is a risk (usage becomes a retention signal a query-only attacker can buy).
Not imported by ``darwin_memo``; ``TurbovecBackend`` (the ``organic`` extra) lives in
``darwin_memo.organic.turbovec_backend``.
"""

from __future__ import annotations

from .activation import ActivationState, detail, surface
from .associative import AssociativeGraph, BruteForceBackend, build_graph, store_related
from .dynamics import HebbianWeights, OrganicMemory
from .importance import EarnedImportance
from .report import related_json

__all__ = [
    "ActivationState",
    "AssociativeGraph",
    "BruteForceBackend",
    "EarnedImportance",
    "HebbianWeights",
    "OrganicMemory",
    "build_graph",
    "detail",
    "related_json",
    "store_related",
    "surface",
]
