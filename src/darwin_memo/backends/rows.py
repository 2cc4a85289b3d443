"""An entry's row in an SQL store, and the codec between the two.

A row keeps the lesson's question, answer, kind and sources in plain columns and the
rest of the entry in ``data`` (``row_values`` / ``read_row``); ``toks`` is its indexed
token set when that differs from a tokenization of its text (``row_tokens``). Upkeep
is lazy: a row holds its balance at tick ``anchor``, ``_NOW`` is its balance at a
later tick in SQL, and ``death_tick`` the first tick at which it reaches zero.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Iterable

from ..errors import StoreFormatError
from ..records.entry import ALIVE_EPSILON, EntryKind, MemoryEntry, kind_name
from ..retrieval.lexical import tokenize
from .jsonfile import loads

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


__all__ = [
    "death_tick",
    "entry_tokens",
    "read_row",
    "row_tokens",
    "row_values",
    "text_tokens",
    "toks_column",
]

#: An entry's row as ``_materialize`` reads it.
_COLUMNS = "rowid, id, alive, energy, anchor, pinned, data, kind, question, answer, sources"
#: A row's text in SQL (``MemoryEntry.text``): what its tokens are read from.
_TEXT = "question || ' ' || answer"
#: An entry's balance now in SQL: ``_energy_now``'s float operations; parameters
#: (tick, upkeep, tick, upkeep, tick).
_NOW = (
    "CASE WHEN ? - anchor <= 0 THEN energy "
    "WHEN pinned <> 0 AND energy - ? * (? - anchor) < 0.0 THEN 0.0 "
    "ELSE energy - ? * (? - anchor) END"
)


#: What ``json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))``
#: would build at every call.
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def _dumps(value: Any) -> str:
    return _ENCODER.encode(value)


#: What a row's ``data`` leaves out when the entry holds it: fields at these values
#: (the published defaults).
_ROW_DEFAULTS: tuple[tuple[str, Any], ...] = (
    ("born_cycle", 0),
    ("last_used_cycle", -1),
    ("uses", 0),
    ("lineage", []),
)
#: The fields of ``to_dict`` that a row keeps in columns of their own.
_COLUMN_FIELDS = ("id", "energy", "kind", "question", "answer", "sources")


def row_values(entry: MemoryEntry) -> tuple[str, str, str, str, str]:
    """What an entry's row holds besides its balance and flags: ``(kind, question,
    answer, sources, data)``. ``sources`` is a JSON list; ``data`` is the rest of
    ``to_dict`` as a JSON object, without the fields at their published defaults (a
    lesson not settled yet: ``{"recorded_ts": ...}``)."""
    d = entry.to_dict()
    for key in _COLUMN_FIELDS:
        del d[key]
    for key, default in _ROW_DEFAULTS:
        if d.get(key, default) == default:
            d.pop(key, None)
    return entry.kind.value, entry.question, entry.answer, _dumps(entry.sources), _dumps(d)


#: The kinds by name (a row's ``kind``).
_KINDS = {k.value: k for k in EntryKind}


def read_row(
    data: str, entry_id: str, energy: float, kind: str, question: str, answer: str, sources: str
) -> MemoryEntry:
    """The entry a row holds: its ``data`` with its columns. Anything the row does not
    hold as it should (a damaged store) raises StoreFormatError or ValueError."""
    d = loads(data)
    if type(d) is not dict:
        raise StoreFormatError("the row's data is not a JSON object")
    if len(d) == 1 and kind in _KINDS:  # a lesson not settled yet (most rows): no dict
        stamp, held = d.get("recorded_ts"), loads(sources)
        if (
            type(stamp) is str
            and type(question) is str
            and type(answer) is str
            and type(held) is list
            and all(type(s) is str for s in held)
            and math.isfinite(energy)
        ):
            return MemoryEntry(
                question=question,
                answer=answer,
                kind=_KINDS[kind],
                sources=held,
                energy=float(energy),
                recorded_ts=stamp,
                id=entry_id,
            )
    d.update(
        id=entry_id,
        energy=float(energy),
        kind=kind_name(kind),
        question=question,
        answer=answer,
        sources=loads(sources),
    )
    return MemoryEntry.from_dict(d)


def entry_tokens(entry: MemoryEntry) -> list[str]:
    return text_tokens(entry.text)


def text_tokens(text: str) -> list[str]:
    """The set of ``text``'s tokens, sorted: what the index holds a row under."""
    return sorted(set(tokenize(text)))


# -- a row's tokens ------------------------------------------------------------------
#
# The index holds each living row under the tokens of its question and answer. Until
# schema 12 the row kept that set in its ``toks`` column (the tokens joined by spaces,
# sorted); from schema 12 an SQLite store leaves the column empty and reads the set
# from the row's text when it needs it (a burial, a consolidation's join, the
# graveyard's search). Rows an earlier schema wrote keep their ``toks`` until next
# written; both read alike. PostgreSQL stores keep writing the column. The tokenizer
# is part of the store's format: a change to what it makes of a text is a migration
# that re-indexes.


def row_tokens(toks: str, text: str | None) -> str:
    """A row's indexed tokens as text (sorted, joined by spaces): its ``toks`` column,
    or, where that is empty (schema 12), what its text (``_TEXT``: question and answer)
    tokenizes to. A row without text raises StoreFormatError."""
    if toks:
        return toks
    if type(text) is not str:
        raise StoreFormatError(
            "a row holds no question and answer to index: the store is damaged "
            "(run `darwin-memo ledger FILE verify` to find it)"
        )
    return " ".join(text_tokens(text))


def toks_column(conn: Any, toks: Iterable[str]) -> str:
    """What a row written now keeps in ``toks``: nothing on SQLite (schema 12: read
    from its text, ``row_tokens``), the tokens joined by spaces on PostgreSQL."""
    return "" if isinstance(conn, sqlite3.Connection) else " ".join(toks)


def death_tick(energy: float, anchor: int, upkeep: float, pinned: bool) -> int | None:
    """The first tick after ``anchor`` at which lazy upkeep leaves ``energy`` dead."""
    if pinned:
        return None
    if energy <= ALIVE_EPSILON:
        return anchor + 1
    if upkeep <= 0:
        return None
    n = max(1, math.ceil((energy - ALIVE_EPSILON) / upkeep))
    while n > 1 and energy - upkeep * (n - 1) <= ALIVE_EPSILON:
        n -= 1
    while energy - upkeep * n > ALIVE_EPSILON:
        n += 1
    return anchor + n
