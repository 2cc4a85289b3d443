"""Pages of a population for people browsing it: filter, search, sort, window.

The dashboard asks a population for one page of its living entries or of its dead
(``page_entries`` and ``page_graveyard``, declared by ``interface.Pages``) and
holds no SQL of its own. Two implementations answer it with the same rows:

* in memory (``MemoryStore``, and so JSON stores): the rule itself, as Python
  over the entries (``matches``, ``sort_key``);
* in SQL (``SqlStore`` on SQLite and PostgreSQL): the same rule as a query over
  the ``entries`` table. A living entry's balance in SQL is ``sqlstore``'s
  ``_NOW``, the float operations of the store's own lazy upkeep, so both sort
  alike. Where the dialects differ (JSON fields, substring search, collation) a
  statement takes the fragment from its store's ``dialect`` (``backends.dialect``);
  where the schemas differ (the token lists: SQLite's packs and blocks,
  PostgreSQL's ``postings`` table) each gets its own query.

The search rule: a hex text of 3 to 32 characters matches the ids it prefixes;
a text with word tokens matches the entries holding every token; any other text
matches the entries whose question or answer contains it (case-insensitive).
Ties in every sort are broken by id, ascending.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..records.entry import MemoryEntry
from ..retrieval.lexical import tokenize

if TYPE_CHECKING:
    from .interface import Population
    from .sqlstore import SqlStore

__all__ = [
    "FLAGS",
    "SORT_KEYS",
    "PageRequest",
    "matches",
    "sort_key",
    "sql_dead_page",
    "sql_living_page",
]

#: Sort keys of a page of living entries (each a ``top --json`` field).
SORT_KEYS = (
    "balance",
    "ticks_to_starvation",
    "age_ticks",
    "last_settled_tick",
    "uses",
    "kind",
    "id",
    "question",
)
#: Flags a page of living entries may be narrowed to.
FLAGS = ("pinned", "probation")
_ID_PREFIX = re.compile(r"[0-9a-f]{3,32}")


@dataclass(frozen=True)
class PageRequest:
    """One page asked for: filters, search text, sort and window (validated)."""

    sort: str = "balance"
    order: str = "desc"
    kind: str = ""
    flag: str = ""
    search: str = ""
    offset: int = 0
    limit: int = 50

    def __post_init__(self) -> None:
        if self.sort not in SORT_KEYS:
            raise ValueError(f"sort must be one of {', '.join(SORT_KEYS)}; got {self.sort!r}")
        if self.order not in ("asc", "desc"):
            raise ValueError(f"order must be asc or desc; got {self.order!r}")
        if self.flag and self.flag not in FLAGS:
            raise ValueError(f"flag must be one of {', '.join(FLAGS)}; got {self.flag!r}")
        if self.offset < 0 or self.limit < 1:
            raise ValueError("offset must be >= 0 and limit >= 1")

    @property
    def desc(self) -> bool:
        return self.order == "desc"

    def tokens(self) -> list[str]:
        return sorted(set(tokenize(self.search)))

    def id_prefix(self) -> str | None:
        text = self.search.lower()
        return text if _ID_PREFIX.fullmatch(text) else None


# -- the rule, in memory ---------------------------------------------------------------


def matches(entry: MemoryEntry, request: PageRequest) -> bool:
    """Whether ``entry`` passes the request's filters and search."""
    if request.kind and entry.kind.value != request.kind:
        return False
    if request.flag == "pinned" and not entry.pinned:
        return False
    if request.flag == "probation" and entry.probation <= 0:
        return False
    if not request.search:
        return True
    prefix = request.id_prefix()
    if prefix is not None and entry.id.startswith(prefix):
        return True
    tokens = request.tokens()
    if tokens:
        return set(tokens) <= set(tokenize(entry.text))
    needle = request.search.lower()
    return needle in entry.question.lower() or needle in entry.answer.lower()


def sort_key(store: Population, key: str) -> Callable[[MemoryEntry], Any]:
    """What living entries sort by under ``key`` (before the id that breaks ties)."""
    if key == "balance":
        return lambda e: e.energy
    if key == "ticks_to_starvation":
        # Entries that cannot starve have the longest runway of all.
        return lambda e: (1, 0.0) if store.ticks_to_starvation(e) is None else (0, e.energy)
    if key == "age_ticks":
        return lambda e: -e.born_cycle
    if key == "last_settled_tick":
        return lambda e: e.last_used_cycle
    if key == "uses":
        return lambda e: e.uses
    if key == "kind":
        return lambda e: e.kind.value
    if key == "question":
        return lambda e: e.question.lower()
    return lambda e: e.id


# -- the rule, in SQL ------------------------------------------------------------------


def _balance(store: SqlStore) -> tuple[str, list[Any]]:
    """A living row's balance now and its parameters: the store's own ``_NOW``."""
    from .rows import _NOW

    t, u = store.tick, store.upkeep
    return "(" + _NOW + ")", [t, u, t, u, t]


def _holding_all_sqlite(conn: Any, tokens: list[str]) -> list[int] | None:
    """The rowids holding every token (SQLite's packs and blocks, shortest first);
    None when some token is in no list at all."""
    from .postings import token_ids

    found = conn.execute(
        f"SELECT token, id, dense FROM tokens WHERE token IN ({','.join('?' * len(tokens))})",
        tokens,
    ).fetchall()
    if len(found) != len(tokens):
        return None
    held: set[int] | None = None
    for token, token_id, dense in sorted(found, key=lambda row: row[2]):  # packs before bits
        ids = token_ids(conn, str(token), int(token_id), bool(dense))
        held = set(ids) if held is None else held.intersection(ids)
        if not held:
            return []
    return sorted(held or ())


def _living_filter(store: SqlStore, request: PageRequest) -> tuple[list[str], list[Any]] | None:
    """WHERE conditions (and parameters) for the request's filters and search on
    living rows; None when nothing can match."""
    sql = store.dialect
    conds: list[str] = []
    params: list[Any] = []
    if request.kind:
        conds.append("kind = ?")
        params.append(request.kind)
    if request.flag == "pinned":
        conds.append("pinned = 1")
    elif request.flag == "probation":
        conds.append(sql.json_number("probation", 0) + " > 0")
    if request.search:
        either: list[str] = []
        prefix = request.id_prefix()
        if prefix is not None:
            either.append("(id >= ? AND id < ?)")
            params += [prefix, prefix + "~"]
        tokens = request.tokens()
        if tokens and sql.postgres:  # its postings table, not packs
            either.append(
                "("
                + " AND ".join(
                    "rowid IN (SELECT p.entry_rowid FROM postings p "
                    "JOIN tokens t ON t.id = p.token_id WHERE t.token = ?)"
                    for _ in tokens
                )
                + ")"
            )
            params += tokens
        elif tokens:
            rows = _holding_all_sqlite(store.conn, tokens)
            if rows:
                either.append("rowid IN (SELECT value FROM json_each(?))")
                params.append(json.dumps(rows))
        else:
            either.append(f"({sql.contains('question')} OR {sql.contains('answer')})")
            needle = request.search.lower()
            params += [needle, needle]
        if not either:
            return None
        conds.append("(" + " OR ".join(either) + ")")
    return conds, params


def _order(store: SqlStore, key: str, desc: bool) -> tuple[str, list[Any]]:
    """The ORDER BY terms for ``key`` (``sort_key`` in SQL) and their parameters."""
    sql = store.dialect
    d = " DESC" if desc else " ASC"
    balance, bparams = _balance(store)
    if key == "balance":
        return balance + d, bparams
    if key == "ticks_to_starvation":
        # Entries that cannot starve (pinned, or no upkeep) have the longest runway.
        immortal = "(pinned = 1 OR ? <= 0)"
        u = store.upkeep
        return (
            f"{immortal}{d}, (CASE WHEN {immortal} THEN 0 ELSE {balance} END){d}",
            [u, u, *bparams],
        )
    if key == "age_ticks":
        return f"(-{sql.json_number('born_cycle', 0)}){d}", []
    if key == "last_settled_tick":
        return f"{sql.json_number('last_used_cycle', -1)}{d}", []
    if key == "uses":
        return f"{sql.json_number('uses', 0)}{d}", []
    if key == "kind":
        return f"kind{sql.collate_c}{d}", []
    if key == "question":
        return f"lower(question){sql.collate_c}{d}", []
    return f"id{sql.collate_c}{d}", []


def sql_living_page(store: SqlStore, request: PageRequest) -> tuple[list[str], int]:
    """The ids on the requested page of living rows, and how many rows matched."""
    built = _living_filter(store, request)
    if built is None:
        return [], 0
    conds, params = built
    conn = store.conn
    clause = " AND ".join([f"{store.dialect.unindexed('alive')} = 1", *conds])  # a scan
    if not conds:
        total = len(store)
        if request.sort in ("balance", "ticks_to_starvation"):
            fast = _balance_page(store, request)
            if fast is not None:
                return fast, total
    else:
        total = int(
            conn.execute(f"SELECT COUNT(*) FROM entries WHERE {clause}", params).fetchone()[0]
        )
    order, oparams = _order(store, request.sort, request.desc)
    ids = [
        str(i)
        for (i,) in conn.execute(
            f"SELECT id FROM entries WHERE {clause} "
            f"ORDER BY {order}, id{store.dialect.collate_c} LIMIT ? OFFSET ?",
            [*params, *oparams, request.limit, request.offset],
        )
    ]
    return ids, total


def _balance_page(store: SqlStore, request: PageRequest) -> list[str] | None:
    """The page of an unfiltered balance (or runway) sort, through the death-tick index.

    Non-pinned entries: lazy upkeep makes the death tick non-decreasing in the
    balance for every entry with more than one tick to live, so the first
    ``offset + limit`` rows by balance lie within the death ticks up to the
    boundary row's, plus (for ascending order, or a boundary that close) every
    entry at most a tick from death, which is sorted exactly. Pinned entries
    are few and sorted exactly. None: use the plain scan instead.
    """
    conn = store.conn
    if store.upkeep <= 0:
        return None
    if conn.execute(
        "SELECT 1 FROM entries WHERE alive = 1 AND pinned = 0 AND death_tick IS NULL LIMIT 1"
    ).fetchone():
        return None
    need = request.offset + request.limit
    desc = request.desc
    boundary = conn.execute(
        "SELECT death_tick FROM entries WHERE alive = 1 AND pinned = 0 "
        f"ORDER BY death_tick {'DESC' if desc else 'ASC'} LIMIT 1 OFFSET ?",
        (need - 1,),
    ).fetchone()
    near = store.tick + 1  # death ticks at or below this: within a tick of death
    window, wparams = "", []
    if boundary is not None and desc and boundary[0] > near:
        window, wparams = "AND death_tick >= ?", [boundary[0]]
    elif boundary is not None and not desc:
        window, wparams = "AND death_tick <= ?", [max(boundary[0], near)]
    direction = "DESC" if desc else "ASC"
    balance, bparams = _balance(store)
    collate = store.dialect.collate_c
    mortal = conn.execute(
        f"SELECT {balance}, id FROM entries WHERE alive = 1 AND pinned = 0 {window} "
        f"ORDER BY {balance} {direction}, id{collate} LIMIT ?",
        [*bparams, *wparams, *bparams, need],
    ).fetchall()
    pinned = conn.execute(
        f"SELECT {balance}, id FROM entries WHERE alive = 1 AND pinned = 1 "
        f"ORDER BY {balance} {direction}, id{collate} LIMIT ?",
        [*bparams, *bparams, need],
    ).fetchall()
    if request.sort == "ticks_to_starvation":
        # Pinned entries cannot starve: the longest runways, ordered by id.
        immortal = sorted(str(i) for _, i in pinned)
        mortal_ids = [str(i) for _, i in mortal]
        ordered = immortal + mortal_ids if desc else mortal_ids + immortal
    else:
        sign = -1.0 if desc else 1.0
        merged = sorted(
            [(sign * float(b), str(i)) for b, i in mortal]
            + [(sign * float(b), str(i)) for b, i in pinned]
        )
        ordered = [i for _, i in merged]
    return ordered[request.offset : request.offset + request.limit]


#: Whether a row holds the token of the next parameter (the one after it is that token
#: between spaces): its tokens as ``sqlstore.row_tokens`` reads them (SQLite). An ASCII
#: row holds its tokens as they are, lowercase, in its text, so one whose text does not
#: contain the token is passed by without reading its tokens; a row that is not ASCII
#: (NFKC may have changed its tokens) always reads them.
_HOLDS_TOKEN = (
    "(instr(lower(question || ' ' || answer), ?) > 0 "
    "OR length(question || ' ' || answer) <> length(CAST(question || ' ' || answer AS BLOB))) "
    "AND instr(' ' || darwin_row_tokens(toks, question || ' ' || answer) || ' ', ?) > 0"
)


def sql_dead_page(store: SqlStore, request: PageRequest) -> tuple[list[str], int]:
    """The ids on the requested page of dead rows (most recently buried first), and
    how many matched. Only ``kind`` and ``search`` of the request apply."""
    sql = store.dialect
    conn = store.conn
    conds, params = ["alive = 0"], list[Any]()
    if request.kind:
        conds.append("kind = ?")
        params.append(request.kind)
    order = "ORDER BY version DESC, rowid DESC"
    if request.search and sql.postgres:
        # The dead hold no postings on PostgreSQL: their text is tokenized here.
        where = " AND ".join(conds)
        ids: list[str] = []
        for entry_id, question, answer in conn.execute(
            f"SELECT id, question, answer FROM entries WHERE {where} {order}", params
        ):
            if _text_matches(str(entry_id), str(question), str(answer), request):
                ids.append(str(entry_id))
        return ids[request.offset : request.offset + request.limit], len(ids)
    if request.search:
        either = []
        prefix = request.id_prefix()
        if prefix is not None:
            either.append("(id >= ? AND id < ?)")
            params += [prefix, prefix + "~"]
        tokens = request.tokens()
        if tokens:
            either.append("(" + " AND ".join(_HOLDS_TOKEN for _ in tokens) + ")")
            for token in tokens:
                params += [token, f" {token} "]
        else:
            either.append(f"({sql.contains('question')} OR {sql.contains('answer')})")
            params += [request.search.lower()] * 2
        conds.append("(" + " OR ".join(either) + ")")
    where = " AND ".join(conds)
    total = int(conn.execute(f"SELECT COUNT(*) FROM entries WHERE {where}", params).fetchone()[0])
    ids = [
        str(i)
        for (i,) in conn.execute(
            f"SELECT id FROM entries WHERE {where} {order} LIMIT ? OFFSET ?",
            [*params, request.limit, request.offset],
        )
    ]
    return ids, total


def _text_matches(entry_id: str, question: str, answer: str, request: PageRequest) -> bool:
    """``matches``'s search rule over a row's id and text."""
    prefix = request.id_prefix()
    if prefix is not None and entry_id.startswith(prefix):
        return True
    tokens = request.tokens()
    if tokens:
        return set(tokens) <= set(tokenize(question + " " + answer))
    needle = request.search.lower()
    return needle in question.lower() or needle in answer.lower()
