"""An entry's related entries as JSON: what ``darwin-memo ledger STORE related`` prints
and what the MCP tool ``memory_related`` returns.

One shape for both surfaces, so a client can read either::

    {"entry_id": ID, "alive": bool,
     "related": [{"entry_id", "score", "link", "question"}, ...]}

``score`` is ``OrganicMemory.related``'s effective relatedness and ``link`` the learned
(Hebbian) strength between the two entries, both rounded to 6 places. An entry that is
not alive has no related entries.
"""

from __future__ import annotations

from typing import Any

from .dynamics import OrganicMemory

__all__ = ["related_json"]


def related_json(om: OrganicMemory, entry_id: str, k: int = 5) -> dict[str, Any]:
    """Up to ``k`` entries related to ``entry_id``, in the shape the module docstring shows.

    ``om.related`` reads the store first (a persisted layer sees every process's
    recalls), so the questions come from the store as it is now.
    """
    pairs = om.related(entry_id, k)
    entry = om.store.get(entry_id)
    related = []
    for other, score in pairs:
        found = om.store.get(other)
        related.append(
            {
                "entry_id": other,
                "score": round(score, 6),
                "link": round(om.hebbian.weight(entry_id, other), 6),
                "question": found.question if found is not None else "",
            }
        )
    return {"entry_id": entry_id, "alive": bool(entry and entry.alive), "related": related}
