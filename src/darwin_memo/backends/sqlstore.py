"""A population that lives in SQLite and is read on demand.

``SqlStore`` is a ``MemoryStore`` whose entries stay in the database: ``get``
reads one row, retrieval walks an inverted index (SQLite: each token's list in its
``tokens`` row or its ``blocks``; PostgreSQL: ``postings``; see below) with the exact
published ranking (see ``index``), and a tick touches only the entries that die.
That keeps a one-shot ``darwin-memo ledger FILE decide`` proportional to the
question, not to the store.

Upkeep is lazy. A row holds its balance at tick ``anchor``; at tick ``T`` the
balance is ``energy - upkeep * (T - anchor)`` (floored at zero when pinned).
``death_tick`` is the first tick at which that reaches zero, so a tick finds
its dead with one indexed query instead of an UPDATE of every row.

Every mutation is written through at once, inside the ledger operation's
transaction, so queries made later in the same operation see it. Entries read
during an operation are cached until the next tick or the next refresh.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sqlite3
import sys
from array import array
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from operator import itemgetter

from .. import collector
from ..errors import StoreFormatError
from ..index import bits_to_ids, top_by_codes, top_by_combinations, top_candidates
from ..jsonfile import loads
from ..retrieval import LexicalRetriever, tokenize
from ..types import ALIVE_EPSILON, EntryKind, MemoryEntry, kind_name
from .population import HeldEntries, finish_ranking
from .sums import ONE, EnergySums, exact, read_sums

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ..consolidate import MergeCandidates
    from ..interfaces import Retriever
    from .sqlite import SqliteBackend

__all__ = [
    "SqlStore",
    "add_df",
    "apply_list_changes",
    "death_tick",
    "entry_tokens",
    "index_problems",
    "living_lists",
    "read_row",
    "rebuild_token",
    "row_tokens",
    "row_values",
    "write_entries_bulk",
]


class ListChanges(dict[str, dict[int, bool]]):
    """Pending list changes: token -> {rowid: whether it now holds the token}.

    ``gone``: rowids that hold no token any more (buried in bulk), with the ``toks``
    they held, taken out of the lists of every token that is a key here after the
    changes by rowid: one set for all tokens instead of a rowid per token (half a
    million burials hold tens of millions of postings). A rowid listed again
    afterwards leaves ``gone`` for a change by rowid per token it held.
    """

    __slots__ = ("gone",)

    def __init__(self) -> None:
        super().__init__()
        self.gone: dict[int, str] = {}

    def relist(self, rowid: int) -> None:
        """``rowid`` is about to be listed again: out of ``gone``, its tokens then
        left by rowid (the new listing overrides those it holds again)."""
        toks = self.gone.pop(rowid, None)
        if toks is not None:
            for t in toks.split():
                self.setdefault(t, {})[rowid] = False

    def clear(self) -> None:
        super().clear()
        self.gone.clear()


#: An entry's row as ``_materialize`` reads it.
_COLUMNS = "rowid, id, alive, energy, anchor, pinned, data, kind, question, answer, sources"
#: A row's text in SQL (``MemoryEntry.text``): what its tokens are read from.
_TEXT = "question || ' ' || answer"
#: A consolidation member's row as read for its burial: rowid, alive, toks, whether
#: its ``data`` is the entry as held (read from that row, not from the cache), and
#: kind, energy, anchor and pinned (what it leaves the running sums).
_MemberRow = tuple[int, int, str, bool, str, float, int, int]
_BIG_ENDIAN = sys.byteorder == "big"
_first = itemgetter(0)
_second = itemgetter(1)
_BIT_OF_LOW = bytes(1 << (b & 7) for b in range(256))  # a rowid's bit in its byte, by low byte
_ID_SIZE = array("I").itemsize
_LOW_BYTE = _ID_SIZE - 1 if _BIG_ENDIAN else 0  # where an array("I") item keeps its low byte
_NONZERO = bytes([0] + [1] * 255)
_CHUNK = 900  # SQLite's bound-parameter limit is 999 on old builds
#: Entries a long-lived handle keeps cached between operations (see ``trim_cache``).
CACHE_LIMIT = 20_000
#: About how much memory of postings lists a handle keeps between searches.
LISTS_CACHE_BYTES = 64 << 20
#: Entries tied at the k-th score from which a search first tries the highest balance.
TIES_BOUNDED = 16
#: How many (pinned, anchor) groups ``_highest_balance`` visits before giving up.
TIE_GROUPS = 4
#: An entry's balance now in SQL: ``_energy_now``'s float operations; parameters
#: (tick, upkeep, tick, upkeep, tick).
_NOW = (
    "CASE WHEN ? - anchor <= 0 THEN energy "
    "WHEN pinned <> 0 AND energy - ? * (? - anchor) < 0.0 THEN 0.0 "
    "ELSE energy - ? * (? - anchor) END"
)


def _fresh() -> list[Any]:
    """What ``flags`` derives from a list of keys, filled on first use: [the keys, the
    blocks they fall in (None: all), a getter of their bytes in a bitmap, their bits
    as an int]."""
    return [None, None, None, 0]


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


def _chunks(items: list[Any]) -> Iterable[list[Any]]:
    for i in range(0, len(items), _CHUNK):
        yield items[i : i + _CHUNK]


def _bump(conn: sqlite3.Connection, name: str, by: int) -> None:
    conn.execute(
        "INSERT INTO counters (name, value) VALUES (?, ?) "
        "ON CONFLICT(name) DO UPDATE SET value = value + excluded.value",
        (name, by),
    )


class _RowWrites:
    """Writes of bulk burials held back (``SqlStore.merge_batches``) to be made in one
    pass in key order: ``columns``, ``(energy, anchor, pinned, damaged, version,
    rowid)`` of rows whose values stay; ``updates``, ``(energy, anchor, pinned, damaged,
    version, kind, question, answer, sources, data, rowid)``; ``lineage``, ``(member,
    heir)`` in the order written. Batch after batch, the burials land on every page of
    the table many times over; in one pass by rowid, each page once (three times faster
    at 1M rows)."""

    __slots__ = ("columns", "lineage", "updates")

    def __init__(self, lineage: list[tuple[str, str]] | None = None) -> None:
        self.columns: list[tuple[Any, ...]] = []
        self.updates: list[tuple[Any, ...]] = []
        self.lineage: list[tuple[str, str]] = lineage if lineage is not None else []

    def write(self, conn: sqlite3.Connection) -> None:
        """Make the writes held (in rowid order; the lineage by member, the last write
        to a member last) and forget them."""
        conn.executemany(
            "UPDATE entries SET alive=0, energy=?, anchor=?, pinned=?, death_tick=NULL, "
            "damaged=?, version=? WHERE rowid=?",
            sorted(self.columns, key=itemgetter(-1)),
        )
        conn.executemany(
            "UPDATE entries SET alive=0, energy=?, anchor=?, pinned=?, death_tick=NULL, "
            "damaged=?, version=?, kind=?, question=?, answer=?, sources=?, data=? "
            "WHERE rowid=?",
            sorted(self.updates, key=itemgetter(-1)),
        )
        conn.executemany(
            "INSERT OR REPLACE INTO lineage (member, heir) VALUES (?, ?)",
            sorted(self.lineage, key=_first),  # stable: the last write stays last
        )
        self.columns, self.updates, self.lineage = [], [], []


class DfChanges(Counter[str]):
    """``df`` changes by token not written yet (``change_df`` writes them), and
    ``known``: tokens seen in the ``tokens`` table meanwhile (it never loses a row)."""

    __slots__ = ("known",)

    def __init__(self) -> None:
        super().__init__()
        self.known: set[str] = set()


def add_df(
    conn: sqlite3.Connection, counts: Mapping[str, int], deferred: DfChanges | None = None
) -> None:
    """Raise each token's ``df`` by its count; a token not in ``tokens`` yet is added.

    SQLite (schema 8) keys the vocabulary by its text; a token's id names its
    ``blocks``, so from schema 15 a new token holds id 0 (no bytes) until its list
    first goes to blocks (``write_token``, from the ``token_ids`` counter; before m008
    the ids were the rowids). PostgreSQL's come from its sequence. With ``deferred`` (SQLite),
    the counts of tokens already there are added to it instead, and the tokens it
    knows are not looked up again.
    """
    if not counts:
        return
    if _postings_kept(conn):
        conn.executemany(
            "INSERT INTO tokens (token, df) VALUES (?, ?) "
            "ON CONFLICT(token) DO UPDATE SET df = tokens.df + excluded.df",
            list(counts.items()),
        )
        return
    seen = deferred.known if deferred is not None else set()
    known = {t for t in counts if t in seen}
    for part in _chunks([t for t in counts if t not in seen]):
        marks = ",".join("?" * len(part))
        known.update(
            map(_first, conn.execute(f"SELECT token FROM tokens WHERE token IN ({marks})", part))
        )
    fresh = [t for t in counts if t not in known]
    if fresh:
        row = conn.execute("SELECT value FROM counters WHERE name = 'token_ids'").fetchone()
        if row is not None:  # (schema 15) an id only once its list goes to blocks
            conn.executemany(
                "INSERT INTO tokens (token, id, df) VALUES (?, 0, ?)",
                [(t, counts[t]) for t in fresh],
            )
        else:  # a store before m008 (its migrations are running): the rowids
            (top,) = conn.execute("SELECT COALESCE(MAX(id), 0) FROM tokens").fetchone()
            conn.executemany(
                "INSERT INTO tokens (token, id, df) VALUES (?, ?, ?)",
                [(t, int(top) + i, counts[t]) for i, t in enumerate(fresh, 1)],
            )
    if deferred is not None:
        for t in known:
            deferred[t] += counts[t]
        seen.update(known, fresh)
    elif known:
        change_df(conn, {t: counts[t] for t in known})


def change_df(conn: sqlite3.Connection, changes: Mapping[str, int]) -> None:
    """Add each change to its token's ``df`` (SQLite; tokens already there), in key order."""
    conn.executemany(
        "UPDATE tokens SET df = df + ? WHERE token = ?",
        sorted(((n, t) for t, n in changes.items() if n), key=itemgetter(1)),
    )


def _index_tokens(
    conn: sqlite3.Connection,
    rowid: int,
    toks: Iterable[str],
    sign: int,
    *,
    blocks: bool = True,
    deferred: ListChanges | None = None,
    postings: bool | None = None,
) -> None:
    """Add (``sign`` > 0) or take out ``rowid``'s tokens: ``df``, postings where the
    store keeps them (``_postings_kept``; ``postings`` says so explicitly), and the
    packs and blocks (``blocks``, SQLite; left in ``deferred`` when given)."""
    toks = list(toks)
    if not toks:
        return
    if postings is None:
        postings = _postings_kept(conn)
    if sign > 0:
        add_df(conn, dict.fromkeys(toks, 1))
        if postings:
            conn.executemany(
                "INSERT OR IGNORE INTO postings (token_id, entry_rowid) "
                "SELECT id, ? FROM tokens WHERE token = ?",
                [(rowid, t) for t in toks],
            )
    else:
        if postings:
            conn.executemany(
                "DELETE FROM postings WHERE entry_rowid = ? AND token_id = "
                "(SELECT id FROM tokens WHERE token = ?)",
                [(rowid, t) for t in toks],
            )
        conn.executemany("UPDATE tokens SET df = df - 1 WHERE token = ?", [(t,) for t in toks])
    if blocks and isinstance(conn, sqlite3.Connection):
        if deferred is not None:
            if sign > 0:
                deferred.relist(rowid)
            for t in toks:
                deferred.setdefault(t, {})[rowid] = sign > 0
        else:
            apply_list_changes(conn, {t: {rowid: sign > 0} for t in toks})


# -- postings in memory-ready form ------------------------------------------------------
#
# PostgreSQL keeps the index as ``postings`` (one row per token and living entry).
# Reading a list from such a table costs about a microsecond per row, and testing
# whether a candidate holds a token one primary-key probe, so an SQLite store keeps
# every token's list in a form Python reads in one step instead:
#
# - a pack (``tokens.ids``, schema 13): a token held by fewer than DENSE_MIN entries
#   has its rowids in its own vocabulary row, as varints (unsigned LEB128): the first
#   rowid, then each next one's distance from the one before, less one (``pack_ids``).
#   A 10k-entry store's lists take about 1.4 bytes a rowid so; rowids stay under
#   2**32 (four billion entries ever written). Schemas 4 to 12 kept each list in a
#   ``packs`` row of 32-bit integers (m013 moves them);
# - ``blocks``: a common token (``tokens.dense = 1``) has its rowids as bits, in
#   blocks of 2**BLOCK_SHIFT rowids (trailing zero bytes trimmed), so a membership
#   test is a byte lookup. It goes back to a pack under DENSE_DROP holders (the gap
#   keeps a token near the bar from flapping).
#
# They hold exactly the living rows whose ``toks`` hold the token, and ``tokens.df``
# counts them (tests compare them with the rows). SQLite stores kept ``postings`` too
# until schema 6 (m006 drops it: writing and deleting its rows was most of a bulk
# burial's cost, and a quarter of the file).


def _postings_kept(conn: Any) -> bool:
    """Whether this connection's store keeps the ``postings`` table (PostgreSQL)."""
    return not isinstance(conn, sqlite3.Connection)


DENSE_MIN = 8192
DENSE_DROP = 4096
BLOCK_SHIFT = 16  # rowids per block: 65,536, so at most 8 KiB of bits
_BLOCK_MASK = (1 << BLOCK_SHIFT) - 1


def pack_ids(ids: Iterable[int]) -> bytes:
    """Strictly increasing rowids as a pack: the first, then each gap less one, as
    unsigned LEB128 varints."""
    out = bytearray()
    last = -1
    for rowid in ids:
        if rowid <= last:
            raise ValueError("a pack's rowids must be strictly increasing")
        if rowid > 0xFFFFFFFF:
            raise OverflowError("a rowid past 2**32 - 1 does not fit a pack")
        value = rowid if last < 0 else rowid - last - 1
        last = rowid
        while value >= 0x80:
            out.append(value & 0x7F | 0x80)
            value >>= 7
        out.append(value)
    return bytes(out)


_TORN_PACK = (
    "a token's list in the index is torn (a varint cut short or past 32 bits): the store "
    "is damaged (run `darwin-memo ledger FILE verify` to find it)"
)


def unpack_ids(blob: bytes) -> array[int]:
    """A pack's rowids (``pack_ids``); StoreFormatError when it is torn."""
    arr = array("I")
    value = shift = 0
    last = -1
    for byte in blob:
        value |= (byte & 0x7F) << shift
        if byte & 0x80:
            shift += 7
            if shift >= 35:
                raise StoreFormatError(_TORN_PACK)
            continue
        last = value if last < 0 else last + 1 + value
        if last > 0xFFFFFFFF:
            raise StoreFormatError(_TORN_PACK)
        arr.append(last)
        value = shift = 0
    if shift:
        raise StoreFormatError(_TORN_PACK)
    return arr


def _set_bits(bits: bytes, offsets: Iterable[int], on: bool) -> bytes:
    buf = bytearray(bits)
    for offset in offsets:
        byte = offset >> 3
        if byte >= len(buf):
            if not on:
                continue
            buf.extend(bytes(byte + 1 - len(buf)))
        if on:
            buf[byte] |= 1 << (offset & 7)
        else:
            buf[byte] &= ~(1 << (offset & 7)) & 0xFF
    return bytes(buf).rstrip(b"\0")


def _write_blocks(conn: sqlite3.Connection, token_id: int, rowids: Iterable[int], on: bool) -> None:
    """Set (or clear) the bits of ``rowids`` in ``token_id``'s blocks."""
    by_block: dict[int, list[int]] = {}
    for rowid in rowids:
        by_block.setdefault(rowid >> BLOCK_SHIFT, []).append(rowid & _BLOCK_MASK)
    for block, offsets in by_block.items():
        row = conn.execute(
            "SELECT bits FROM blocks WHERE token_id = ? AND block = ?", (token_id, block)
        ).fetchone()
        bits = _set_bits(row[0] if row else b"", offsets, on)
        if bits:
            conn.execute(
                "INSERT OR REPLACE INTO blocks (token_id, block, bits) VALUES (?, ?, ?)",
                (token_id, block, bits),
            )
        elif row:
            conn.execute("DELETE FROM blocks WHERE token_id = ? AND block = ?", (token_id, block))


def rebuild_token(
    conn: sqlite3.Connection,
    token: str,
    token_id: int,
    dense: bool,
    held: dict[int, bool],
    gone: Collection[int] = (),
) -> None:
    """Move ``token_id``'s list from bits to a pack or back (``dense``: its form now),
    with the changes ``held`` (rowid -> whether it now holds the token) applied and
    the rowids ``gone`` taken out."""
    ids = _changed(array("I", token_ids(conn, token, token_id, dense)), held)
    conn.execute("DELETE FROM blocks WHERE token_id = ?", (token_id,))
    write_token(conn, token, token_id, [r for r in ids if r not in gone], dense=not dense)


def _gone_masks(gone: Collection[int]) -> dict[int, int]:
    """``gone`` as one integer bit mask per block (bit ``rowid & _BLOCK_MASK``)."""
    bufs: dict[int, bytearray] = {}
    size = 1 << (BLOCK_SHIFT - 3)
    for rowid in gone:
        block = rowid >> BLOCK_SHIFT
        buf = bufs.get(block)
        if buf is None:
            buf = bufs[block] = bytearray(size)
        offset = rowid & _BLOCK_MASK
        buf[offset >> 3] |= 1 << (offset & 7)
    return {block: int.from_bytes(buf, "little") for block, buf in bufs.items()}


def _clear_blocks(conn: sqlite3.Connection, token_id: int, masks: Mapping[int, int]) -> None:
    """Clear the bits of ``masks`` (``_gone_masks``) in ``token_id``'s blocks."""
    wanted = list(masks)
    for part in _chunks(wanted):
        marks = ",".join("?" * len(part))
        rows = conn.execute(
            f"SELECT block, bits FROM blocks WHERE token_id = ? AND block IN ({marks})",
            (token_id, *part),
        ).fetchall()
        for block, bits in rows:
            kept = int.from_bytes(bits, "little") & ~masks[int(block)]
            fresh = kept.to_bytes(len(bits), "little").rstrip(b"\0")
            if fresh == bits:
                continue
            if fresh:
                conn.execute(
                    "UPDATE blocks SET bits = ? WHERE token_id = ? AND block = ?",
                    (fresh, token_id, block),
                )
            else:
                conn.execute(
                    "DELETE FROM blocks WHERE token_id = ? AND block = ?", (token_id, block)
                )


def write_token(
    conn: sqlite3.Connection, token: str, token_id: int, ids: list[int], *, dense: bool
) -> None:
    """Store a token's sorted rowids as blocks (``dense``; none there yet) or as its pack.
    A token going to blocks for the first time (id 0, schema 15) takes an id first."""
    if dense:
        if not token_id:
            token_id = _next_token_id(conn)
            conn.execute("UPDATE tokens SET id = ? WHERE token = ?", (token_id, token))
        _write_blocks(conn, token_id, ids, True)
    pack = pack_ids(ids) if ids and not dense else None
    conn.execute("UPDATE tokens SET dense = ?, ids = ? WHERE token = ?", (int(dense), pack, token))


def _next_token_id(conn: sqlite3.Connection) -> int:
    """The next id from the ``token_ids`` counter (taken)."""
    _bump(conn, "token_ids", 1)
    (top,) = conn.execute("SELECT value FROM counters WHERE name = 'token_ids'").fetchone()
    return int(top)


def _changed(ids: array[int], held: dict[int, bool]) -> array[int] | list[int]:
    """Sorted ``ids`` with ``held``'s rowids added (True) or removed (False)."""
    if len(held) > 32:
        added = sorted(r for r, on in held.items() if on)
        removed = {r for r, on in held.items() if not on}
        kept = [r for r in ids if r not in removed] if removed else list(ids)
        if added and kept and added[0] <= kept[-1]:
            return sorted(set(kept).union(added))
        return kept + added  # new rows (a merge's heirs) come after every old one
    for rowid, on in held.items():
        at = bisect_left(ids, rowid)
        present = at < len(ids) and ids[at] == rowid
        if on and not present:
            ids.insert(at, rowid)
        elif present and not on:
            del ids[at]
    return ids


def new_stamp(conn: sqlite3.Connection) -> None:
    """Write a fresh ``index_stamp``: long-lived handles drop the lists and token counts
    they hold in memory. Random, not a counter: a rolled-back change must not leave a
    number another writer could reach with different postings."""
    conn.execute(
        "INSERT OR REPLACE INTO counters (name, value) VALUES ('index_stamp', ?)",
        (int.from_bytes(os.urandom(7), "little"),),
    )


def _dropper(gone: Collection[int]) -> Callable[[bytes], bytes]:
    """``drop(pack)``: the pack (``pack_ids``) without the rowids ``gone``; the very
    object passed when none of its rowids is gone."""

    def drop(pack: bytes) -> bytes:
        ids = unpack_ids(pack)
        kept = [r for r in ids if r not in gone]
        return pack if len(kept) == len(ids) else pack_ids(kept)

    return drop if gone else lambda pack: pack


def apply_list_changes(conn: sqlite3.Connection, changes: Mapping[str, dict[int, bool]]) -> None:
    """Bring the packs and blocks of the changed tokens in step with the rows.

    ``changes[token][rowid]`` says whether ``rowid`` now holds ``token``, and the
    rowids of ``changes.gone`` (a ``ListChanges``) hold none (``tokens.df`` is
    already written). Each pack or block is rewritten once, however many entries
    changed, so a tick burying thousands stays cheap.
    """
    if not changes:
        return
    new_stamp(conn)
    gone: Collection[int] = getattr(changes, "gone", None) or ()
    masks = _gone_masks(gone) if gone else {}
    drop = _dropper(gone)
    for part in _chunks(list(changes)):
        marks = ",".join("?" * len(part))
        writes: list[tuple[bytes | None, str]] = []
        for token, token_id, df, dense, blob in conn.execute(
            f"SELECT token, id, df, dense, ids FROM tokens WHERE token IN ({marks})", part
        ).fetchall():
            token_id = int(token_id)
            held = changes[token]
            if (dense and df < DENSE_DROP) or (not dense and df >= DENSE_MIN):
                # bits to a pack, or back
                rebuild_token(conn, token, token_id, bool(dense), held, gone)
            elif dense:
                if held:
                    _write_blocks(conn, token_id, [r for r, on in held.items() if on], True)
                    _write_blocks(conn, token_id, [r for r, on in held.items() if not on], False)
                if masks:
                    _clear_blocks(conn, token_id, masks)
            else:
                if held or blob is None:
                    ids = unpack_ids(blob) if blob else array("I")
                    fresh = drop(pack_ids(_changed(ids, held)))
                else:  # only rows gone: the pack as read, less them
                    fresh = drop(blob)
                    if fresh is blob:
                        continue  # none of them held the token
                if (fresh or None) != blob:
                    writes.append((fresh or None, token))  # no empty packs are kept
        # In key order, as the rows lie.
        conn.executemany("UPDATE tokens SET ids = ? WHERE token = ?", sorted(writes, key=_second))


def block_bits(
    conn: sqlite3.Connection, token_id: int, blocks: Collection[int] | None = None
) -> bytes:
    """One bitmap over rowids from 0 with ``token_id``'s bits in ``blocks`` (None: all)."""
    size = BLOCK_SHIFT - 3
    parts: list[bytes] = []
    filled = 0
    if blocks is None:
        queries = [("", ())]
        need = 0
    else:
        wanted = sorted(blocks)
        queries = []
        for part in _chunks(wanted):
            queries.append((f" AND block IN ({','.join('?' * len(part))})", tuple(part)))
        need = (wanted[-1] + 1) << size if wanted else 0
    for where, params in queries:
        for block, bits in conn.execute(
            f"SELECT block, bits FROM blocks WHERE token_id = ?{where} ORDER BY block",
            (token_id, *params),
        ):
            start = int(block) << size
            if start > filled:
                parts.append(bytes(start - filled))
            parts.append(bits)
            filled = start + len(bits)
    if filled < need:
        parts.append(bytes(need - filled))
    return b"".join(parts)


def token_ids(conn: sqlite3.Connection, token: str, token_id: int, dense: bool) -> Sequence[int]:
    """A token's rowids, sorted, from its pack or its blocks."""
    if not dense:
        row = conn.execute("SELECT ids FROM tokens WHERE token = ?", (token,)).fetchone()
        return unpack_ids(row[0]) if row and row[0] else ()
    out: list[int] = []
    for block, bits in conn.execute(
        "SELECT block, bits FROM blocks WHERE token_id = ? ORDER BY block", (token_id,)
    ):
        out += bits_to_ids(bits, int(block) << BLOCK_SHIFT)
    return out


def _token_ids_of(conn: sqlite3.Connection, tokens: list[str]) -> dict[str, int]:
    """The ids of those of ``tokens`` the tokens table holds, read in chunks."""
    ids: dict[str, int] = {}
    for part in _chunks(tokens):
        marks = ",".join("?" * len(part))
        for token, token_id in conn.execute(
            f"SELECT token, id FROM tokens WHERE token IN ({marks})", part
        ):
            ids[str(token)] = int(token_id)
    return ids


#: The page cache (KiB) while merges are written: they touch most pages of the
#: entries and the index, and SQLite's default (2 MiB) would spill them to the
#: journal and read them back several times before the commit.
BULK_CACHE_KIB = 256 << 10


@contextlib.contextmanager
def _bulk_writing(conn: sqlite3.Connection) -> Iterator[None]:
    """Pause the cyclic garbage collector (the writes allocate millions of small
    containers, freed by reference counting, while the whole store is in memory)
    and, on SQLite, let the page cache grow to ``BULK_CACHE_KIB``."""
    cache = None
    with collector.paused():
        if isinstance(conn, sqlite3.Connection):
            (cache,) = conn.execute("PRAGMA cache_size").fetchone()
            conn.execute(f"PRAGMA cache_size = {-BULK_CACHE_KIB}")
        try:
            yield
        finally:
            if cache is not None:
                conn.execute(f"PRAGMA cache_size = {int(cache)}")


def _unindex_many(
    conn: sqlite3.Connection, rows: list[tuple[int, str]], deferred: DfChanges | None = None
) -> Counter[str]:
    """``_index_tokens(conn, rowid, toks.split(), -1)`` for each ``(rowid, toks)``, batched.

    Each token's ``df`` is lowered once by its count (returned, by token); with
    ``deferred`` (SQLite), the counts are taken off it instead, for ``change_df``.
    Where the store keeps ``postings`` (PostgreSQL) they go by key, in index order; an
    SQLite store's packs and blocks are the caller's to change (``apply_list_changes``).
    """
    counts = Counter(" ".join([toks for _rowid, toks in rows]).split())
    if not counts:
        return counts
    if not _postings_kept(conn):
        if deferred is not None:
            deferred.subtract(counts)
        else:
            change_df(conn, {t: -n for t, n in counts.items()})
        return counts
    ids = _token_ids_of(conn, list(counts))
    keys = sorted([ids[t] << 32 | rowid for rowid, toks in rows for t in toks.split() if t in ids])
    conn.executemany(
        "DELETE FROM postings WHERE token_id = ? AND entry_rowid = ?",
        [(key >> 32, key & 0xFFFFFFFF) for key in keys],  # in index order
    )
    conn.executemany(
        "UPDATE tokens SET df = df - ? WHERE id = ?",
        sorted((n, ids[t]) for t, n in counts.items() if t in ids),
    )
    return counts


def unsettle(conn: sqlite3.Connection, rowids: list[int]) -> None:
    """These rows are no longer known to be apart from the settled (SQLite's ``settled``).

    Called when a row gets new tokens or comes back to life; see ``consolidate.SETTLED``.
    """
    conn.executemany("DELETE FROM settled WHERE entry_rowid = ?", [(r,) for r in rowids])


def _keeps_sums(conn: sqlite3.Connection) -> bool:
    """Whether the store keeps ``energy_sums`` (SQLite from schema 10, PostgreSQL from 3)."""
    if not isinstance(conn, sqlite3.Connection):
        keeps = getattr(conn, "keeps_sums", None)
        return bool(keeps()) if keeps is not None else False
    return bool(
        conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'energy_sums'"
        ).fetchone()
    )


def write_entry(
    conn: sqlite3.Connection,
    entry: MemoryEntry,
    *,
    alive: bool,
    damaged: bool,
    tick: int,
    upkeep: float,
    version: int,
    deferred: ListChanges | None = None,
    sums: EnergySums | None = None,
) -> None:
    """Insert or update one row, keeping the index and the counters in step.

    With ``deferred``, the packs and blocks are left to ``apply_list_changes``; with
    ``sums``, the row leaves and joins them (``backends.sums``) as it was and is.
    """
    row = conn.execute(
        f"SELECT rowid, alive, toks, pinned, energy, anchor, kind, {_TEXT} FROM entries "
        "WHERE id = ?",
        (entry.id,),
    ).fetchone()
    toks = entry_tokens(entry)
    toks_text = " ".join(toks)
    params = (
        int(alive),
        entry.energy,
        tick,
        int(entry.pinned),
        death_tick(entry.energy, tick, upkeep, entry.pinned) if alive else None,
        toks_column(conn, toks),
        int(damaged),
        version,
        *row_values(entry),
    )
    if row is None:
        cur = conn.execute(
            "INSERT INTO entries (alive, energy, anchor, pinned, death_tick, toks, damaged, "
            "version, kind, question, answer, sources, data, id) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (*params, entry.id),
        )
        rowid = int(cur.lastrowid or 0)
        was_alive, old_toks = False, ""
    else:
        rowid, was_alive = int(row[0]), bool(row[1])
        old_toks = row_tokens(str(row[2]), row[7]) if was_alive else ""
        conn.execute(
            "UPDATE entries SET alive=?, energy=?, anchor=?, pinned=?, death_tick=?, toks=?, "
            "damaged=?, version=?, kind=?, question=?, answer=?, sources=?, data=? "
            "WHERE rowid=?",
            (*params, rowid),
        )
    if was_alive and (not alive or old_toks != toks_text):
        _index_tokens(conn, rowid, old_toks.split(), -1, deferred=deferred)
    if alive and (not was_alive or old_toks != toks_text):
        _index_tokens(conn, rowid, toks, +1, deferred=deferred)
        if isinstance(conn, sqlite3.Connection):  # new tokens, or back to life: not settled
            unsettle(conn, [rowid])
    if alive != was_alive:
        _bump(conn, "alive", 1 if alive else -1)
    if sums is not None:
        if row is not None and was_alive and not row[3]:
            sums.add(kind_name(row[6]), float(row[4]), int(row[5]), -1)
        if alive and not entry.pinned:
            sums.add(entry.kind.value, entry.energy, tick)
    for member in entry.lineage:
        conn.execute(
            "INSERT OR REPLACE INTO lineage (member, heir) VALUES (?, ?)", (member, entry.id)
        )


def write_entries_bulk(
    conn: sqlite3.Connection,
    rows: Iterable[tuple[MemoryEntry, bool]],
    *,
    damaged: Collection[str],
    tick: int,
    upkeep: float,
    version: int,
) -> int:
    """Insert many new entries into an empty store in a few statements.

    Equivalent to ``write_entry`` per row (same columns, index and counters) but
    builds the token index in memory and inserts it sorted, which is an order of
    magnitude faster for ``migrate`` and bulk imports. Returns the number of rows.
    """
    if conn.execute("SELECT 1 FROM entries LIMIT 1").fetchone() is not None:
        raise ValueError("write_entries_bulk needs an empty store")
    # The rows' indexes are built once, after them: sorted, their pages full (kept up
    # row by row they take an eighth more pages, and longer to write).
    indexes = (
        conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'index' "
            "AND tbl_name = 'entries' AND sql IS NOT NULL ORDER BY name"
        ).fetchall()
        if isinstance(conn, sqlite3.Connection)
        else []
    )
    for name, _sql in indexes:
        conn.execute(f'DROP INDEX "{name}"')
    sums = EnergySums() if _keeps_sums(conn) else None
    token_rows: dict[str, list[int]] = {}
    lineage: list[tuple[str, str]] = []
    batch: list[tuple[Any, ...]] = []
    rowid = 0
    alive_count = 0

    def flush() -> None:
        conn.executemany(
            "INSERT INTO entries (rowid, alive, energy, anchor, pinned, death_tick, toks, "
            "damaged, version, kind, question, answer, sources, data, id) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            batch,
        )
        batch.clear()

    latest: dict[str, tuple[MemoryEntry, bool]] = {}
    for entry, alive in rows:  # a later row for the same id wins, as with write_entry
        latest[entry.id] = (entry, alive)
    for entry, alive in latest.values():
        rowid += 1
        toks = entry_tokens(entry)
        if alive:
            alive_count += 1
            if sums is not None and not entry.pinned:
                sums.add(entry.kind.value, entry.energy, tick)
            for t in toks:
                plist = token_rows.get(t)
                if plist is None:
                    token_rows[t] = [rowid]
                else:
                    plist.append(rowid)
        batch.append(
            (
                rowid,
                int(alive),
                entry.energy,
                tick,
                int(entry.pinned),
                death_tick(entry.energy, tick, upkeep, entry.pinned) if alive else None,
                toks_column(conn, toks),
                int(entry.id in damaged),
                version,
                *row_values(entry),
                entry.id,
            )
        )
        lineage.extend((member, entry.id) for member in entry.lineage)
        if len(batch) >= 5000:
            flush()
    flush()
    for _name, sql in indexes:
        conn.execute(sql)
    ordered = sorted(token_rows)
    packed = isinstance(conn, sqlite3.Connection) and not _postings_kept(conn)
    dense: list[str] = []  # (packed: the tokens whose lists go to blocks)
    if packed:
        # Each token's row with its pack; a common token's bits go to its blocks.
        # (ids: only the tokens in blocks take one, schema 15; the others hold 0)
        dense += [t for t in ordered if len(token_rows[t]) >= DENSE_MIN]
        dense_ids = {t: i for i, t in enumerate(dense, 1)}
        conn.executemany(
            "INSERT INTO tokens (id, token, df, dense, ids) VALUES (?, ?, ?, ?, ?)",
            (
                (dense_ids[t], t, len(ids), 1, None)
                if len(ids) >= DENSE_MIN
                else (0, t, len(ids), 0, pack_ids(ids))
                for t, ids in ((t, token_rows[t]) for t in ordered)
            ),
        )
        for t in dense:
            _write_blocks(conn, dense_ids[t], token_rows[t], True)
    else:
        conn.executemany(
            "INSERT INTO tokens (id, token, df) VALUES (?, ?, ?)",
            [(i, t, len(token_rows[t])) for i, t in enumerate(ordered, 1)],
        )
        conn.executemany(
            "INSERT INTO postings (token_id, entry_rowid) VALUES (?, ?)",
            ((i, r) for i, t in enumerate(ordered, 1) for r in token_rows[t]),
        )
    if isinstance(conn, sqlite3.Connection):
        conn.execute(
            "INSERT OR REPLACE INTO counters (name, value) VALUES ('token_ids', ?)",
            (len(dense) if packed else len(ordered),),
        )
        new_stamp(conn)
    conn.executemany("INSERT OR REPLACE INTO lineage (member, heir) VALUES (?, ?)", lineage)
    _bump(conn, "alive", alive_count)
    if sums is not None:  # the store was empty: these rows are all it sums
        conn.execute("DELETE FROM energy_sums")
        sums.write(conn)
    return rowid


#: What ``index_problems`` compares per token: the token, its ``df``, its list as
#: stored (None: its pack is torn), and whether it is kept in the wrong form (SQLite: a
#: pack for a dense token, bits for another); a last item ``(None, 0, ids, False)``
#: gives the ids of blocks no token owns, when there are any.
_TokenList = tuple[str | None, int, Sequence[int] | None, bool]


def _sqlite_lists(conn: sqlite3.Connection) -> Iterator[_TokenList]:
    blocks: dict[int, list[tuple[int, bytes]]] = {}
    for token_id, block, bits in conn.execute("SELECT token_id, block, bits FROM blocks"):
        blocks.setdefault(int(token_id), []).append((int(block), bits))
    for token, token_id, df, dense, pack in conn.execute(
        "SELECT token, id, df, dense, ids FROM tokens"
    ):
        bits = blocks.pop(token_id, None)
        if dense:
            got: Sequence[int] = [
                r for b, part in sorted(bits or ()) for r in bits_to_ids(part, b << BLOCK_SHIFT)
            ]
            yield str(token), int(df), got, pack is not None
        else:
            try:
                got = unpack_ids(pack) if pack is not None else array("I")
            except ValueError:
                yield str(token), int(df), None, False  # torn
                continue
            yield str(token), int(df), got, bits is not None
    orphans = sorted(blocks)
    if orphans:
        yield None, 0, orphans, False


def _pg_lists(conn: Any) -> Iterator[_TokenList]:
    by_id: dict[int, tuple[str, int, list[int]]] = {}
    for token_id, token, df in conn.execute("SELECT id, token, df FROM tokens ORDER BY id"):
        by_id[int(token_id)] = (str(token), int(df), [])
    orphans: set[int] = set()
    for token_id, rowid in conn.execute(
        "SELECT token_id, entry_rowid FROM postings ORDER BY token_id, entry_rowid"
    ):
        held = by_id.get(int(token_id))
        if held is None:
            orphans.add(int(token_id))
        else:
            held[2].append(int(rowid))
    for token, df, got in by_id.values():
        yield token, df, got, False
    if orphans:
        yield None, 0, sorted(orphans), False


def living_lists(conn: Any) -> tuple[dict[str, array[int]], list[int]]:
    """Every token's list as the living rows make it (their tokens read from their text,
    ``row_tokens``), and the rowids of rows that hold no question and answer to read."""
    lists: dict[str, array[int]] = {}
    unreadable: list[int] = []
    for rowid, toks, text in conn.execute(
        f"SELECT rowid, toks, CASE WHEN toks = '' THEN {_TEXT} END FROM entries "
        "WHERE alive = 1 ORDER BY rowid"
    ):
        try:
            text = row_tokens(str(toks), text)
        except StoreFormatError:
            unreadable.append(int(rowid))
            continue
        for t in text.split():
            held = lists.get(t)
            if held is None:
                lists[t] = array("I", (rowid,))
            else:
                held.append(rowid)
    return lists, unreadable


def index_problems(conn: Any, limit: int = 20) -> list[str]:
    """Where the lexical index disagrees with the rows (empty: it agrees).

    Every living row is read (its tokens from its text, ``row_tokens``) and each
    token's ``df`` and list (SQLite: its pack or bits; PostgreSQL: its postings)
    are compared with the rows that hold it: a damaged index, or one a change of
    tokenizer left behind, is named, token by token (the first ``limit``, then how
    many more). 13.8 s at a million entries.
    """
    holders, unreadable = living_lists(conn)
    problems = [f"index: the row at rowid {r} has no question and answer" for r in unreadable]
    lists = _sqlite_lists(conn) if isinstance(conn, sqlite3.Connection) else _pg_lists(conn)
    for token, df, got, misplaced in lists:
        if token is None:
            problems.append(f"index: lists of {len(got or ())} unknown token ids")
            continue
        want = holders.pop(token, None) or array("I")
        if got is None:
            problems.append(f"index: token {token!r}'s pack is torn")
        elif df != len(want) or list(got) != list(want) or misplaced:
            problems.append(
                f"index: token {token!r} (df {df}) lists {len(got)} entries, "
                f"{len(want)} living rows hold it"
            )
    for token, want in holders.items():
        problems.append(f"index: {len(want)} living rows hold token {token!r}, not listed")
    if len(problems) > limit:
        problems[limit:] = [f"index: ... and {len(problems) - limit} more"]
    return problems


class SqlStore(HeldEntries):
    """The population over an SQLite (or PostgreSQL) database (see the module docstring).

    It implements ``interface.Population`` as ``MemoryStore`` does, holding only the
    entries an operation read; what both do alike is ``HeldEntries``'.
    """

    def __init__(
        self,
        backend: SqliteBackend,
        max_energy: float,
        upkeep: float,
        retriever: Retriever | None = None,
    ) -> None:
        super().__init__(max_energy=max_energy, upkeep=upkeep, retriever=retriever)
        self.backend = backend
        self.conn = backend.conn
        #: The tick lazy upkeep is computed at (kept equal to the ledger's tick).
        self.tick = 0
        self.damaged: set[str] = set()
        # Lists read for retrieval, kept across searches while ``index_stamp`` holds:
        # token -> (bitmap, blocks read) for common tokens, token -> its pack's rowids as
        # dict keys for membership tests. A dict of ints, unlike a set, is not tracked by
        # the cyclic collector, so these thousands of rowids are not walked again at
        # every collection (which paused a long-lived handle's decides for tens of ms).
        self._lists_stamp: int | None = None
        self._bitmaps: dict[str, tuple[bytes, set[int] | None]] = {}
        self._sets: dict[str, dict[int, None]] = {}
        self._ints: dict[str, int] = {}
        # token -> its pack (sorted rowids) and what ``flags`` derived from it
        self._packs: dict[str, tuple[array[int], list[Any]]] = {}
        self._token_stats: dict[str, tuple[int, int, bool] | None] = {}
        self._lists_bytes = 0
        self._deferred: ListChanges | None = None
        #: While ``merge_many`` runs, the entries buried so far (written together after).
        self._merging: list[MemoryEntry] | None = None
        #: The rows (``_MemberRow``) by id of the members a consolidation read, for
        #: ``merge_many`` to bury without reading them again (emptied by it).
        self._member_rows: dict[str, _MemberRow] = {}
        #: Ids of the dead ``merge_many`` wrote, until the next ``flush``.
        self._buried_written: set[str] = set()
        #: Heirs ``merge_many`` wrote, until the next ``flush``: id -> the row's
        #: (tick, version, damaged, data) then, so an unchanged heir is not written twice.
        self._heirs_written: dict[str, tuple[int, int, bool, tuple[str, ...]]] = {}
        #: While ``merge_batches`` runs (SQLite), the ``df`` changes not written yet,
        #: and the buried rows' columns and the lineage (``_RowWrites``).
        self._df_deferred: DfChanges | None = None
        self._rows_deferred: _RowWrites | None = None
        #: Whether the store keeps ``energy_sums`` (SQLite from schema 10, PostgreSQL
        #: from 3), and the sums as this write transaction leaves them (read at its
        #: first change, written before its commit: ``save_sums``; None outside one).
        self._sums_kept = _keeps_sums(self.conn)
        self._sums: EnergySums | None = None

    # -- rows -----------------------------------------------------------------------

    def _energy_now(self, energy: float, anchor: int, pinned: bool) -> float:
        elapsed = self.tick - anchor
        if elapsed <= 0:
            return energy
        now = energy - self.upkeep * elapsed
        return max(now, 0.0) if pinned else now

    def _materialize(self, row: tuple[Any, ...]) -> MemoryEntry:
        _rowid, entry_id, alive, energy, anchor, pinned, data, kind, question, answer, sources = row
        try:
            entry = read_row(data, entry_id, energy, kind, question, answer, sources)
        except (TypeError, ValueError, StoreFormatError) as exc:
            raise StoreFormatError(
                f"{self.backend.path}: unreadable entry {entry_id}: {exc}"
            ) from None
        entry.energy = (
            self._energy_now(float(energy), int(anchor), bool(pinned)) if alive else (float(energy))
        )
        return entry

    def _fetch(self, where: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return self.conn.execute(f"SELECT {_COLUMNS} FROM entries WHERE {where}", params).fetchall()

    def _write(self, entry: MemoryEntry, alive: bool) -> None:
        self._member_rows.pop(entry.id, None)  # a row read before this write is stale
        write_entry(
            self.conn,
            entry,
            alive=alive,
            damaged=entry.id in self.damaged,
            tick=self.tick,
            upkeep=self.upkeep,
            version=self.backend.txn_version,
            deferred=self._deferred,
            sums=self._changing_sums(),
        )
        self._sums_written()

    @contextlib.contextmanager
    def deferred_lists(self) -> Iterator[None]:
        """Write the packs and blocks of everything changed inside once, at the end.

        For bulk changes (a tick's burials, consolidation's merges): each changed
        token's list is rewritten once instead of once per entry. Searches made
        inside still see every change. Nested uses join the outermost.
        """
        if self._deferred is not None:
            yield
            return
        self._deferred = ListChanges()
        try:
            yield
            pending = self._deferred
        finally:
            self._deferred = None
        apply_list_changes(self.conn, pending)

    def flush(self, ids: Iterable[str]) -> None:
        """Write the cached state of these entries (attribute changes included)."""
        # Members ``merge_many`` buried in this operation are written already; the
        # dead do not change after, so they are not written twice.
        written, self._buried_written = self._buried_written, set()
        heirs, self._heirs_written = self._heirs_written, {}
        with self.deferred_lists():
            for entry_id in ids:
                if entry_id in written and entry_id in self._graveyard:
                    continue
                entry = self._population.get(entry_id)
                if entry is not None:
                    row = heirs.get(entry_id)
                    if row is not None and row == (
                        self.tick,
                        self.backend.txn_version,
                        entry_id in self.damaged,
                        row_values(entry),
                    ):
                        continue  # written by merge_many and unchanged since
                    self._write(entry, True)
                    continue
                dead = self._graveyard.get(entry_id)
                if dead is not None:
                    self._write(dead, False)

    def trim_cache(self) -> None:
        """Between operations, drop the entry cache once it outgrows ``CACHE_LIMIT``.

        A long-lived process (an MCP server, the dashboard) would otherwise end up
        holding every entry it ever read. Rows are the truth, so nothing is lost.
        """
        if not self.dirty and len(self._population) + len(self._graveyard) > CACHE_LIMIT:
            self.forget_cached()

    def forget_cached(self, ids: Iterable[str] | None = None) -> None:
        """Drop cached entries (all of them when ``ids`` is None)."""
        if ids is None:
            self._population.clear()
            self._graveyard.clear()
            self._buried_written.clear()
            self._heirs_written.clear()
            self._member_rows.clear()
            return
        for entry_id in ids:
            self._population.pop(entry_id, None)
            self._graveyard.pop(entry_id, None)
            self._member_rows.pop(entry_id, None)

    # -- the population -------------------------------------------------------------

    def _index(self, entry: MemoryEntry) -> None:
        return None  # the SQL index is kept by write_entry

    def add(self, entry: MemoryEntry) -> MemoryEntry:
        if self.conn.execute("SELECT 1 FROM entries WHERE id = ?", (entry.id,)).fetchone():
            raise ValueError(
                f"an entry with id {entry.id} is already in this store; ids must be unique"
            )
        self._hold_new(entry)
        self._write(entry, True)
        return entry

    def get(self, entry_id: str) -> MemoryEntry | None:
        cached = self._population.get(entry_id)
        if cached is not None:
            return cached
        rows = self._fetch("id = ? AND +alive = 1", (entry_id,))
        if not rows:
            return None
        entry = self._materialize(rows[0])
        self._population[entry_id] = entry
        return entry

    def get_dead(self, entry_id: str) -> MemoryEntry | None:
        cached = self._graveyard.get(entry_id)
        if cached is not None:
            return cached
        rows = self._fetch("id = ? AND alive = 0", (entry_id,))
        if not rows:
            return None
        entry = self._materialize(rows[0])
        self._graveyard[entry_id] = entry
        return entry

    def _load_all(self, alive: bool) -> list[MemoryEntry]:
        cache = self._population if alive else self._graveyard
        out = []
        for row in self._fetch("alive = ? ORDER BY rowid", (int(alive),)):
            entry = cache.get(row[1])
            if entry is None:
                entry = cache[row[1]] = self._materialize(row)
            out.append(entry)
        return out

    def alive(self) -> list[MemoryEntry]:
        return self._load_all(True)

    def token_sets(self, entries: Iterable[MemoryEntry]) -> list[frozenset[str]]:
        """The lexical token set of each entry, as indexed (from its row: ``row_tokens``)."""
        wanted = {e.id: e for e in entries}
        found: dict[str, frozenset[str]] = {}
        for entry_id, toks, text in self.conn.execute(
            f"SELECT id, toks, CASE WHEN toks = '' THEN {_TEXT} END FROM entries WHERE alive = 1"
        ):
            if entry_id in wanted:
                found[entry_id] = frozenset(row_tokens(str(toks), text).split())
        out = []
        for entry_id, entry in wanted.items():
            toks = found.get(entry_id)
            out.append(toks if toks is not None else frozenset(entry_tokens(entry)))
        return out

    def merge_candidates(
        self, exclude: Collection[str], need_sources: bool, rule: str | None = None
    ) -> MergeCandidates | None:
        """Consolidation's candidates from the rows, without materializing every entry.

        The same list, in the same order, as ``consolidate._candidates`` over
        ``alive()`` with ``token_sets``: living rows in rowid order, less the excluded,
        pinned, probationary and juvenile, sorted by balance (highest first, stable).
        An entry this handle holds in memory counts as held (its balance and flags),
        as ``alive()`` would return it; the others are judged from their columns and
        fields of their JSON read by SQLite. A row whose fields are not plain values
        is read whole, so a damaged row fails as ``alive()`` fails. None (read
        ``alive()`` instead) on PostgreSQL or when SQLite cannot read a row's JSON.

        With ``rule`` (``consolidate.settled_rule``), also which entries are settled
        under it (``consolidate.SETTLED``); entries settled under another rule are
        forgotten first.
        """
        from ..consolidate import MergeCandidates

        self._member_rows.clear()  # rows a consolidation that did not finish read
        if not isinstance(self.conn, sqlite3.Connection):
            return None
        cache = self._population
        columns = (
            "rowid, id, energy, anchor, pinned, toks, json_extract(data, '$.probation'), "
            f"json_extract(data, '$.juvenile'), CASE WHEN toks = '' THEN {_TEXT} END"
        )
        if need_sources:
            columns += ", sources"
        try:
            rows = self.conn.execute(
                f"SELECT {columns} FROM entries WHERE alive = 1 ORDER BY rowid"
            ).fetchall()
        except sqlite3.OperationalError:  # malformed JSON: alive() names the row
            return None
        known: set[int] | None = None
        if rule is not None:
            known = self._settled_under(rule)
        rowids: list[int] = []
        ids: list[str] = []
        texts: list[str] = []  # the tokens as text: made into sets only where needed
        sources: list[tuple[str, ...]] = []
        energies: list[float] = []
        others: list[frozenset[str]] = []
        others_settled: list[bool] = []

        def left_out(row: tuple[Any, ...]) -> None:
            if known is not None:
                others.append(frozenset(row_tokens(str(row[5]), row[8]).split()))
                others_settled.append(int(row[0]) in known)

        for row in rows:
            entry_id = row[1]
            if entry_id in exclude:
                left_out(row)
                continue
            entry = cache.get(entry_id)
            probation, juvenile = row[6] or 0, row[7] or 0
            held: Any = ()
            if entry is None and need_sources:
                held = loads(row[9]) if type(row[9]) is str else None
            if entry is None and (
                type(probation) is not int
                or type(juvenile) is not int
                or not isinstance(held, (list, tuple))
                or not all(isinstance(s, str) for s in held)
            ):
                entry = self.get(entry_id)  # odd fields: read it whole (and check it)
            if entry is not None:
                if entry.pinned or entry.probation > 0 or entry.juvenile > 0:
                    left_out(row)
                    continue
                energy = entry.energy
                held = entry.sources
            else:
                if row[4] or probation > 0 or juvenile > 0:
                    left_out(row)
                    continue
                energy = self._energy_now(float(row[2]), int(row[3]), False)
            if need_sources:
                sources.append(tuple(held))
            rowids.append(int(row[0]))
            ids.append(str(entry_id))
            texts.append(row_tokens(str(row[5]), row[8]))
            energies.append(energy)
        order = sorted(range(len(ids)), key=energies.__getitem__, reverse=True)  # stable
        rowids = [rowids[i] for i in order]
        texts = [texts[i] for i in order]

        def entries(indices: list[int]) -> list[MemoryEntry]:
            # the members of groups, about to be buried: their rows are kept for that
            return self._entries_at(
                [rowids[i] for i in indices],
                self._member_rows,
                {rowids[i]: texts[i] for i in indices},
            )

        def settle(indices: list[int]) -> None:
            self.conn.executemany(
                "INSERT OR IGNORE INTO settled (entry_rowid) VALUES (?)",
                sorted((rowids[i],) for i in indices),
            )

        return MergeCandidates(
            ids=[ids[i] for i in order],
            tokens=None,
            texts=texts,
            sources=[sources[i] for i in order] if need_sources else [],
            entries=entries,
            settled=None if known is None else [rowids[i] in known for i in range(len(order))],
            others=others,
            others_settled=others_settled,
            settle=None if known is None else settle,
        )

    def _settled_under(self, rule: str) -> set[int]:
        """The rowids settled under ``rule``; under another rule none (the table is emptied)."""
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'settled_rule'").fetchone()
        if row is None or loads(row[0]) != rule:
            self.conn.execute("DELETE FROM settled")
            self.conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('settled_rule', ?)",
                (_dumps(rule),),
            )
            return set()
        return set(map(_first, self.conn.execute("SELECT entry_rowid FROM settled")))

    def _entries_at(
        self,
        rowids: list[int],
        keep: dict[str, _MemberRow] | None = None,
        texts: Mapping[int, str] | None = None,
    ) -> list[MemoryEntry]:
        """The living entries at these rowids, in order (cached ones as held).

        ``keep``: also note each one's row there by id (``_MemberRow``), as
        ``_write_buried`` reads it (consolidation buries these entries next);
        ``texts``: their tokens as text by rowid, where the caller has them.
        """
        rows: dict[int, tuple[Any, ...]] = {}
        for part in _chunks(sorted(set(rowids))):
            marks = ",".join("?" * len(part))
            if keep is None:
                for row in self._fetch(f"rowid IN ({marks}) AND +alive = 1", tuple(part)):
                    rows[int(row[0])] = row
                continue
            for *row, toks, row_text in self.conn.execute(
                f"SELECT {_COLUMNS}, toks, {_TEXT} FROM entries "
                f"WHERE rowid IN ({marks}) AND +alive = 1",
                tuple(part),
            ):
                rows[int(row[0])] = tuple(row)
                entry_id = str(row[1])
                fresh = entry_id not in self._population  # materialized from this row
                # (the columns as SQLite types them: TEXT, REAL, INTEGER NOT NULL)
                text = texts.get(int(row[0])) if texts is not None else None
                if text is None:
                    text = row_tokens(str(toks), row_text)
                kind = kind_name(row[7])
                keep[entry_id] = (
                    int(row[0]), int(row[2]), text, fresh, kind, row[3], row[4], row[5],
                )  # fmt: skip
        out = []
        for rowid in rowids:
            row = rows[rowid]
            entry = self._population.get(row[1])
            if entry is None:
                entry = self._population[row[1]] = self._materialize(row)
            out.append(entry)
        return out

    def graveyard(self) -> list[MemoryEntry]:
        return self._load_all(False)

    def page_entries(
        self,
        *,
        sort: str = "balance",
        order: str = "desc",
        kind: str = "",
        flag: str = "",
        search: str = "",
        offset: int = 0,
        limit: int = 50,
    ) -> tuple[list[MemoryEntry], int]:
        """``MemoryStore.page_entries`` in SQL (``pages.sql_living_page``): only the
        rows on the page are read."""
        from .pages import PageRequest, sql_living_page

        request = PageRequest(sort, order, kind, flag, search, offset, limit)
        ids, total = sql_living_page(self, request)
        entries = [self.get(i) for i in ids]
        return [e for e in entries if e is not None], total

    def page_graveyard(
        self, *, kind: str = "", search: str = "", offset: int = 0, limit: int = 50
    ) -> tuple[list[str], int]:
        """``MemoryStore.page_graveyard`` in SQL (``pages.sql_dead_page``)."""
        from .pages import PageRequest, sql_dead_page

        request = PageRequest(kind=kind, search=search, offset=offset, limit=limit)
        return sql_dead_page(self, request)

    def __len__(self) -> int:
        row = self.conn.execute("SELECT value FROM counters WHERE name = 'alive'").fetchone()
        return int(row[0]) if row else 0

    def __contains__(self, entry_id: object) -> bool:
        return isinstance(entry_id, str) and self.get(entry_id) is not None

    def dead_count(self) -> int:
        row = self.conn.execute("SELECT COUNT(*) FROM entries WHERE alive = 0").fetchone()
        return int(row[0])

    def heir_of(self, entry_id: str) -> str | None:
        row = self.conn.execute("SELECT heir FROM lineage WHERE member = ?", (entry_id,)).fetchone()
        return str(row[0]) if row else None

    # -- economics --------------------------------------------------------------------

    def credit(self, entry_id: str, amount: float, cycle: int) -> None:
        entry = self.get(entry_id)
        if entry is None:
            return
        self._credit_held(entry, amount, cycle)
        self._write(entry, True)

    def set_energy(self, entry_id: str, energy: float, reason: str = "adjust") -> None:
        entry = self.get(entry_id)
        if entry is None:
            raise KeyError(entry_id)
        self._set_held_energy(entry, energy, reason)
        self._write(entry, True)

    def bury(self, entry_id: str, reason: str = "burial") -> None:
        entry = self.get(entry_id)
        if entry is None:
            return
        self._bury_held(entry_id, reason)
        if self._merging is not None:
            self._merging.append(entry)
        else:
            self._write(entry, False)

    def merge_into(self, heir: MemoryEntry, member_ids: Iterable[str]) -> float:
        members = [i for i in member_ids if self.get(i) is not None]
        with self.deferred_lists():
            clipped = self._merge_held(heir, members)
            self._write(heir, True)
        return clipped

    def merge_many(self, merges: Iterable[tuple[MemoryEntry, Iterable[str]]]) -> list[float]:
        """``merge_into`` for each ``(heir, member_ids)``, the members' rows written in bulk.

        The rows, index and counters end as the merges one by one leave them; the
        buried members are written with a few batched statements instead of one
        ``write_entry`` each (their token rows are kept: a burial does not change
        the text).
        """
        return self.merge_batches([merges])

    def merge_batches(
        self, batches: Iterable[Iterable[tuple[MemoryEntry, Iterable[str]]]]
    ) -> list[float]:
        """``merge_many`` over batches of merges, each batch written as it comes.

        Consolidation hands the batches over as the compiled join (on a thread of its
        own) finds them: a batch is merged in memory and its heirs are written while
        the join looks for the next. What is cheaper in one pass waits for the last
        batch (SQLite): the burials' row updates and the lineage (``_RowWrites``, in key
        order), the ``df`` changes, the token lists (packs and blocks). The page cache
        may grow to ``BULK_CACHE_KIB`` meanwhile. The clipped energy of each merge, in
        order.
        """
        clipped: list[float] = []
        with _bulk_writing(self.conn), self.deferred_lists():  # each list rewritten once
            if isinstance(self.conn, sqlite3.Connection):  # and each df changed once,
                self._df_deferred = DfChanges()
                self._rows_deferred = _RowWrites()  # and the burials in rowid order
            try:
                self._merge_batches(batches, clipped)
            finally:
                deferred, self._df_deferred = self._df_deferred, None
                rows, self._rows_deferred = self._rows_deferred, None
            if rows is not None:
                rows.write(self.conn)
            if deferred:
                change_df(self.conn, deferred)  # before the lists: they read df
        return clipped

    def _write_deferred_rows(self) -> None:
        """Write the rows ``merge_batches`` holds back now (before a write one by one)."""
        if self._rows_deferred is not None:
            self._rows_deferred.write(self.conn)

    def _merge_batches(
        self,
        batches: Iterable[Iterable[tuple[MemoryEntry, Iterable[str]]]],
        clipped: list[float],
    ) -> None:
        """Each batch of ``merge_batches``: merged in memory, then its rows written."""
        for batch in batches:
            buried: list[MemoryEntry] = []
            heirs: list[MemoryEntry] = []
            self._merging = buried
            try:
                for heir, member_ids in batch:
                    members = [i for i in member_ids if self.get(i) is not None]
                    clipped.append(self._merge_held(heir, members))
                    heirs.append(heir)
            finally:
                self._merging = None
            self._write_buried(buried)
            self._write_heirs(heirs)

    def _write_heirs(self, heirs: list[MemoryEntry]) -> None:
        """``_write(heir, True)`` for each new heir, in order, in a few statements.

        Rowids, token ids (new tokens in order of first use), ``df``, the packs and
        blocks (or the deferred list changes), the living count and lineage end as
        one by one.
        """
        if not heirs:
            return
        conn = self.conn
        taken = False
        for part in _chunks([h.id for h in heirs]):
            marks = ",".join("?" * len(part))
            if conn.execute(
                f"SELECT 1 FROM entries WHERE id IN ({marks}) LIMIT 1", part
            ).fetchone():
                taken = True
        # Rows to update, or PostgreSQL (its rowids come from a sequence): one by one.
        if (
            taken
            or len({h.id for h in heirs}) < len(heirs)
            or not isinstance(conn, sqlite3.Connection)
        ):
            self._write_deferred_rows()
            for heir in heirs:
                self._write(heir, True)
            return
        (top,) = conn.execute("SELECT MAX(rowid) FROM entries").fetchone()
        rowid = int(top or 0)
        version = self.backend.txn_version
        rows = []
        counts: dict[str, int] = {}  # in order of first use, as one by one assigns ids
        deferred = self._deferred
        changes: ListChanges = deferred if deferred is not None else ListChanges()
        for heir in heirs:
            rowid += 1
            toks = entry_tokens(heir)
            values = row_values(heir)
            damaged = heir.id in self.damaged
            rows.append(
                (
                    rowid,
                    heir.energy,
                    self.tick,
                    int(heir.pinned),
                    death_tick(heir.energy, self.tick, self.upkeep, heir.pinned),
                    toks_column(conn, toks),
                    int(damaged),
                    version,
                    *values,
                    heir.id,
                )
            )
            self._heirs_written[heir.id] = (self.tick, version, damaged, values)
            for t in toks:
                counts[t] = counts.get(t, 0) + 1
                held = changes.get(t)
                if held is None:
                    changes[t] = {rowid: True}
                else:
                    held[rowid] = True
        conn.executemany(
            "INSERT INTO entries (rowid, alive, energy, anchor, pinned, death_tick, toks, "
            "damaged, version, kind, question, answer, sources, data, id) "
            "VALUES (?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
        add_df(conn, counts, self._df_deferred)
        sums = self._changing_sums()
        if sums is not None:
            sums.add_rows((h.kind.value, h.energy, self.tick) for h in heirs if not h.pinned)
            self._sums_written()
        conn.executemany("DELETE FROM settled WHERE entry_rowid = ?", [(row[0],) for row in rows])
        if deferred is None:
            apply_list_changes(conn, changes)
        _bump(conn, "alive", len(heirs))
        lineage = [(member, heir.id) for heir in heirs for member in heir.lineage]
        if self._rows_deferred is not None:
            self._rows_deferred.lineage += lineage
        else:
            _RowWrites(lineage=lineage).write(conn)

    def _write_buried(self, entries: list[MemoryEntry]) -> None:
        """Write living rows as dead (what ``write_entry`` does for a burial), batched."""
        if not entries:
            return
        conn = self.conn
        # Rows consolidation read when it took the members (same transaction), else now.
        kept, self._member_rows = self._member_rows, {}
        rows: dict[str, _MemberRow] = {}
        missing = [e.id for e in entries]
        if kept:
            rows = {e.id: kept[e.id] for e in entries if e.id in kept}
            missing = [e.id for e in entries if e.id not in rows]
        for chunk in _chunks(missing):
            marks = ",".join("?" * len(chunk))
            for entry_id, rowid, alive, toks, kind, energy, anchor, pinned, text in conn.execute(
                "SELECT id, rowid, alive, toks, kind, energy, anchor, pinned, "
                f"CASE WHEN alive = 1 AND toks = '' THEN {_TEXT} END "
                f"FROM entries WHERE id IN ({marks})",
                chunk,
            ):
                rows[str(entry_id)] = (
                    int(rowid), int(alive), row_tokens(str(toks), text) if alive else "", False,
                    kind_name(kind), float(energy), int(anchor), int(pinned),
                )  # fmt: skip
        for entry in entries:
            if entry.id not in rows:  # no row yet: the one-by-one path inserts it
                self._write_deferred_rows()
                self._write(entry, False)
        entries = [e for e in entries if e.id in rows]
        version = self.backend.txn_version
        tick = self.tick
        damaged = self.damaged
        updates = []  # the entry as held written too
        columns = []  # a member read from its row for this burial: only the columns
        for entry in entries:
            rowid, _alive, _toks, as_read, *_ = rows[entry.id]
            if as_read:
                # The burial changed its balance only, and a dead entry's balance is
                # read from ``energy``: its JSON stays as it was (``_materialize``).
                columns.append(
                    (
                        entry.energy,
                        tick,
                        int(entry.pinned),
                        int(entry.id in damaged),
                        version,
                        rowid,
                    )
                )
                continue
            updates.append(
                (
                    entry.energy,
                    tick,
                    int(entry.pinned),
                    int(entry.id in damaged),
                    version,
                    *row_values(entry),
                    rowid,
                )
            )
        lineage = [(member, entry.id) for entry in entries for member in entry.lineage]
        pending = self._rows_deferred if self._rows_deferred is not None else _RowWrites()
        pending.columns += columns
        pending.updates += updates
        pending.lineage += lineage
        if self._rows_deferred is None:
            pending.write(conn)
        held = [rows[e.id] for e in entries]
        unlisted = [(row[0], row[2]) for row in held if row[1]]
        sums = self._changing_sums()
        if sums is not None:  # the living unpinned leave the sums as their rows held them
            sums.add_rows(((row[4], row[5], row[6]) for row in held if row[1] and not row[7]), -1)
            self._sums_written()
        counts = _unindex_many(conn, unlisted, self._df_deferred)
        if isinstance(conn, sqlite3.Connection):  # and the packs and bits (SQLite only)
            changes = self._deferred if self._deferred is not None else ListChanges()
            for t in counts:  # their lists lose the rows gone (one set for every token)
                if t not in changes:
                    changes[t] = {}
            changes.gone.update(unlisted)
            if self._deferred is None:
                apply_list_changes(conn, changes)
        if unlisted:
            _bump(conn, "alive", -len(unlisted))
        self._buried_written.update(e.id for e in entries)

    def charge_upkeep(
        self, protect: Iterable[str] = (), scale: Mapping[str, float] | None = None
    ) -> list[MemoryEntry]:
        """One tick of lazy upkeep: only the dead are read and written."""
        if scale is not None:
            raise ValueError("per-entry upkeep scales are not supported on SQLite stores")
        self.flush(self.dirty & (set(self._population) | set(self._graveyard)))
        protected = set(protect)
        # Pinned entries are few (index entries_death); the unpinned are counted, not scanned.
        pinned_before = [
            self._energy_now(float(e), int(a), True)
            for e, a in self.conn.execute(
                "SELECT energy, anchor FROM entries WHERE alive = 1 AND pinned = 1"
            )
        ]
        unpinned = len(self) - len(pinned_before)
        # A pinned balance floors at zero: it pays what it has (and a negative one is lifted).
        charged = self.upkeep * int(unpinned) + math.fsum(
            e - max(e - self.upkeep, 0.0) for e in pinned_before
        )
        self.tick += 1
        # Entries already in hand pay in place, as in memory (rows pay lazily).
        for cached in self._population.values():
            after = cached.energy - self.upkeep
            cached.energy = max(after, 0.0) if cached.pinned else after
        self.books.post("upkeep", -charged)
        self.last_upkeep_charged = round(charged, 6)
        buried: list[MemoryEntry] = []
        with self.deferred_lists():
            for row in self._fetch(
                "alive = 1 AND pinned = 0 AND death_tick <= ? ORDER BY rowid", (self.tick,)
            ):
                if row[1] in protected:
                    continue
                entry = self._population.get(row[1]) or self._materialize(row)
                if entry.alive:
                    continue
                self._population[entry.id] = entry
                self.bury(entry.id)
                buried.append(entry)
        return buried

    # -- the running sums (schema 10) ------------------------------------------------

    def reset_sums(self) -> None:
        """Forget the sums held (a write transaction starts or ends)."""
        self._sums = None

    def _changing_sums(self) -> EnergySums | None:
        """The sums this write transaction changes (None where the store keeps none)."""
        if not self._sums_kept:
            return None
        if self._sums is None:
            self._sums = read_sums(self.conn)
        return self._sums

    def save_sums(self) -> None:
        """Write the sums this transaction changed (before its commit)."""
        if self._sums is not None and self._sums.changed:
            self._sums.write(self.conn)

    def _sums_written(self) -> None:
        """After a write: outside a transaction (a store used without a ledger, each
        statement its own), the sums changed are written now, and read again next."""
        if self._sums is None:
            return
        inside: Any = self.conn.in_transaction  # (PostgreSQL's connection: a method)
        if not (inside() if callable(inside) else inside):
            self.save_sums()
            self._sums = None

    def exact_balances(self) -> dict[str, int] | None:
        """Each kind's balance now, exact (``sums.ONE`` is 1.0), from the running sums
        and the pinned rows; None where the sums cannot say (a store without them, or
        a row anchored after the tick)."""
        if not self._sums_kept:
            return None
        sums = self._sums if self._sums is not None else read_sums(self.conn)
        # A row anchored after this tick (none is: rows are written at the store's
        # tick) would not have paid for ticks yet to come: the scan then.
        # (one step down the balance index, written so on both SQLite and PostgreSQL)
        top = self.conn.execute(
            "SELECT anchor FROM entries WHERE alive = 1 AND pinned = 0 ORDER BY anchor DESC LIMIT 1"
        ).fetchone()
        if top is not None and int(top[0]) > self.tick:
            return None
        totals = sums.totals(self.tick, self.upkeep)
        for kind, energy, anchor in self.conn.execute(
            "SELECT kind, energy, anchor FROM entries WHERE alive = 1 AND pinned = 1"
        ):
            now = exact(self._energy_now(float(energy), int(anchor), True))
            totals[kind_name(kind)] = totals.get(kind_name(kind), 0) + now
        return totals

    def sums_problems(self) -> list[str]:
        """Where the running sums disagree with a scan of the rows (empty: they agree)."""
        if not self._sums_kept:
            return []
        from .sums import scan_sums

        held, found = read_sums(self.conn), scan_sums(self.conn)
        if held == found:
            return []
        return [
            f"energy_sums: kind {kind!r} holds {held.kinds.get(kind, [0, 0, 0])} "
            f"(rows, anchors, exact energy), the rows {found.kinds.get(kind, [0, 0, 0])}"
            for kind in sorted(set(held.kinds) | set(found.kinds))
            if held.kinds.get(kind, [0, 0, 0]) != found.kinds.get(kind, [0, 0, 0])
        ]

    def index_problems(self, limit: int = 20) -> list[str]:
        """Where the lexical index disagrees with the rows (``index_problems``)."""
        return index_problems(self.conn, limit)

    def total_energy(self) -> float:
        totals = self.exact_balances()
        if totals is not None:
            return sum(totals.values()) / ONE  # rounded once
        t, u = self.tick, self.upkeep
        row = self.conn.execute(
            f"SELECT SUM({_NOW}) FROM entries WHERE alive = 1", (t, u, t, u, t)
        ).fetchone()
        return float(row[0] or 0.0)

    def energy_share_by_kind(self) -> dict[str, float]:
        totals = self.exact_balances()
        if totals is not None:
            whole = sum(totals.values())
            if whole <= 0:
                return {}
            return {kind: totals[kind] / whole for kind in sorted(totals)}
        t, u = self.tick, self.upkeep
        rows = self.conn.execute(
            f"SELECT kind, SUM({_NOW}) FROM entries WHERE alive = 1 GROUP BY kind", (t, u, t, u, t)
        ).fetchall()
        total = math.fsum(float(v or 0.0) for _, v in rows)
        if total <= 0:
            return {}
        shares: dict[str, float] = {}
        for k, v in rows:  # (a store from before schema 15 may hold a kind both ways)
            shares[kind_name(k)] = shares.get(kind_name(k), 0.0) + float(v or 0.0) / total
        return shares

    def now_cycle(self) -> int:
        return max(
            (max(e.born_cycle, e.last_used_cycle) for e in self.alive()),
            default=0,
        )

    # -- retrieval ----------------------------------------------------------------------

    def retrieve(
        self,
        query: str,
        k: int = 3,
        *,
        half_life: float | None = None,
        now_cycle: int | None = None,
        kind: EntryKind | str | None = None,
        source: str | None = None,
    ) -> list[tuple[MemoryEntry, float]]:
        if (
            kind is not None
            or source is not None
            or not isinstance(self.retriever, LexicalRetriever)
            or not isinstance(query, str)
            or isinstance(k, bool)
            or not isinstance(k, int)
            or k <= 0
        ):
            return self._retrieve_scan(
                query, k, half_life=half_life, now_cycle=now_cycle, kind=kind, source=source
            )
        if half_life is not None and (not math.isfinite(half_life) or half_life <= 0):
            raise ValueError(f"half_life must be a positive number of ticks, got {half_life!r}")
        found = self._search(query, None if half_life is not None else k)
        return finish_ranking(
            found, k, half_life, lambda: now_cycle if now_cycle is not None else self.now_cycle()
        )

    def _retrieve_scan(self, query: str, k: int, **kwargs: Any) -> list[tuple[MemoryEntry, float]]:
        """The published scan over every living entry (filters, custom retrievers)."""
        self.alive()  # fill the cache the base implementation ranks over
        count = len(self._population)
        saved = self.retriever
        try:
            return self._rank_held(query, k, **kwargs) if count else []
        finally:
            self.retriever = saved

    def _best_balances(self, tied: list[int], need: int, bounded: bool) -> list[tuple[float, int]]:
        """The ``need`` best of ``tied`` (ascending rowids) by balance now, then rowid,
        as ``(-balance, rowid)`` sorted (fewer when some are dead).

        SQLite computes the balances (``_NOW``, the float operations of ``_energy_now``).
        With ``bounded``, the ``need`` lowest rowids are read first: when each holds the
        highest balance of any living entry (``_highest_balance``), nobody after them
        can beat them, and the other tied rows are never read (a store of entries with
        equal balances: thousands tie on templated lessons, one row read each).
        """
        params = (self.tick, self.upkeep, self.tick, self.upkeep, self.tick)
        best: list[tuple[float, int]] = []
        if bounded and 0 < need <= _CHUNK:
            top = self._highest_balance(TIE_GROUPS)
            if top is not None:
                first = tied[:need]
                rows = self.conn.execute(
                    f"SELECT rowid, {_NOW} FROM entries "
                    f"WHERE rowid IN ({','.join('?' * len(first))}) AND +alive = 1",
                    (*params, *first),
                ).fetchall()
                if len(rows) == need and all(float(now) >= top for _, now in rows):
                    return sorted((-float(now), int(rowid)) for rowid, now in rows)
        for part in _chunks(tied):
            marks = ",".join("?" * len(part))
            best += [
                (-float(now), int(rowid))
                for rowid, now in self.conn.execute(
                    f"SELECT rowid, {_NOW} AS now FROM entries "
                    f"WHERE rowid IN ({marks}) AND +alive = 1 "
                    "ORDER BY now DESC, rowid LIMIT ?",
                    (*params, *part, need),
                )
            ]
        best.sort()
        return best[:need]

    def _highest_balance(self, groups: int) -> float | None:
        """The highest balance now of any living entry, or None past ``groups`` groups.

        Entries of one (pinned, anchor) group rank by balance as by ``energy`` (the
        balance now is a monotonic function of it), so each group's best is one seek
        in ``entries_balance``, and the groups are found by seeks too. Stores whose
        balances were set at many different ticks have many groups: None then.
        """
        conn = self.conn
        params = (self.tick, self.upkeep, self.tick, self.upkeep, self.tick)
        row = conn.execute(
            "SELECT pinned, anchor FROM entries WHERE alive = 1 ORDER BY pinned, anchor LIMIT 1"
        ).fetchone()
        if row is None:
            return None
        pinned, anchor = row
        top: float | None = None
        while True:
            groups -= 1
            if groups < 0:
                return None
            (now,) = conn.execute(
                f"SELECT {_NOW} FROM entries WHERE alive = 1 AND pinned = ? AND anchor = ? "
                "ORDER BY energy DESC LIMIT 1",
                (*params, pinned, anchor),
            ).fetchone()
            top = float(now) if top is None else max(top, float(now))
            (anchor,) = conn.execute(
                "SELECT MIN(anchor) FROM entries WHERE alive = 1 AND pinned = ? AND anchor > ?",
                (pinned, anchor),
            ).fetchone()
            if anchor is None:
                (pinned,) = conn.execute(
                    "SELECT MIN(pinned) FROM entries WHERE alive = 1 AND pinned > ?", (pinned,)
                ).fetchone()
                if pinned is None:
                    return top
                (anchor,) = conn.execute(
                    "SELECT MIN(anchor) FROM entries WHERE alive = 1 AND pinned = ?", (pinned,)
                ).fetchone()

    def _search(self, query: str, k: int | None) -> list[tuple[MemoryEntry, float]]:
        assert isinstance(self.retriever, LexicalRetriever)
        qtokens = list(dict.fromkeys(tokenize(query)))
        if not qtokens:
            return []
        packed = isinstance(self.conn, sqlite3.Connection)  # PostgreSQL: postings only
        bitmaps, sets, ints, packs = self._bitmaps, self._sets, self._ints, self._packs
        known = self._token_stats
        if self._deferred:
            apply_list_changes(self.conn, self._deferred)
            self._deferred.clear()
        if packed:
            # The lists' stamp and the living count (``__len__``) in one statement.
            counters = dict(
                self.conn.execute(
                    "SELECT name, value FROM counters WHERE name IN ('index_stamp', 'alive')"
                ).fetchall()
            )
            stamp = int(counters.get("index_stamp", 0))
            n = int(counters.get("alive", 0))
            if stamp != self._lists_stamp or self._lists_bytes > LISTS_CACHE_BYTES:
                bitmaps.clear()
                sets.clear()
                ints.clear()
                packs.clear()
                known.clear()
                self._lists_bytes = 0
                self._lists_stamp = stamp
        else:
            bitmaps, sets, ints, packs, known = {}, {}, {}, {}, {}
            n = len(self)
        # Each token's (id, df, has bits), or None when no entry holds it: kept with the
        # lists, since every change of a token's df or form writes a new stamp.
        missing = [t for t in qtokens if t not in known]
        columns = "token, id, df, dense" if packed else "token, id, df, 0"
        for part in _chunks(missing):
            marks = ",".join("?" * len(part))
            known.update(dict.fromkeys(part))
            for token, token_id, count, has_bits in self.conn.execute(
                f"SELECT {columns} FROM tokens WHERE token IN ({marks})", part
            ):
                known[token] = (int(token_id), int(count), bool(has_bits))
                self._lists_bytes += 200
        stats: dict[str, tuple[int, int]] = {}
        dense: dict[str, int] = {}  # tokens with bitmaps: token -> id
        for token in qtokens:
            got = known[token]
            if got is not None:
                stats[token] = (got[0], got[1])
                if got[2]:
                    dense[token] = got[0]

        def df(t: str) -> int:
            return stats.get(t, (0, 0))[1]

        def postings(t: str) -> Sequence[int]:
            if t not in stats:
                return []
            if packed:
                if t in dense:
                    return token_ids(self.conn, t, stats[t][0], True)
                return pack(t)[0]
            rows = self.conn.execute(
                "SELECT entry_rowid FROM postings WHERE token_id = ?", (stats[t][0],)
            )
            return list(map(_first, rows))  # no Python loop per row: lists run to 10^5

        def covering(t: str, want: set[int] | None) -> bytes:
            """``t``'s bitmap with (at least) the blocks ``want`` read (None: every
            block), zeros elsewhere; blocks read before are kept, so only the missing
            ones are read. A bitmap read whole may end before the last rowids."""
            bits, have = bitmaps.get(t, (b"", set()))
            if have is None:
                return bits  # read whole
            if want is None:
                fresh = block_bits(self.conn, stats[t][0])
                bitmaps[t] = (fresh, None)
                self._lists_bytes += len(fresh) - len(bits)
                return fresh
            missing = want - have
            if not missing:
                return bits
            fresh = block_bits(self.conn, stats[t][0], missing)
            if have:
                span = 1 << (BLOCK_SHIFT - 3)
                buf = bytearray(bits)
                if len(fresh) > len(buf):
                    buf.extend(bytes(len(fresh) - len(buf)))
                for block in missing:
                    at = block * span
                    buf[at : at + span] = fresh[at : at + span]
                fresh = bytes(buf)
            bitmaps[t] = (fresh, have | missing)
            self._lists_bytes += len(fresh) - len(bits)
            return fresh

        def contains(t: str, keys: Collection[int]) -> list[int]:
            if t not in stats or not keys:
                return []
            token_id = stats[t][0]
            if t in dense:
                # A byte lookup per key in the token's bitmap, reading only the
                # blocks the keys fall in.
                bits = covering(t, {r >> BLOCK_SHIFT for r in keys})
                reach = (max(keys) >> 3) + 1
                if len(bits) < reach:  # a whole map ends at its last set bit
                    bits += bytes(reach - len(bits))
                return [r for r in keys if bits[r >> 3] >> (r & 7) & 1]
            if packed:
                held = sets.get(t)
                if held is None:
                    held = sets[t] = dict.fromkeys(pack(t)[0])
                    self._lists_bytes += 64 * len(held)
                return [r for r in keys if r in held]
            # One primary-key probe of (token_id, entry_rowid) per key, inside SQLite.
            out: list[int] = []
            for part in _chunks(list(keys)):
                marks = ",".join("?" * len(part))
                out += [
                    r
                    for (r,) in self.conn.execute(
                        f"SELECT entry_rowid FROM postings "
                        f"WHERE token_id = ? AND entry_rowid IN ({marks})",
                        (token_id, *part),
                    )
                ]
            return out

        def pack(t: str) -> tuple[array[int], list[Any]]:
            """A rare token's sorted rowids (kept across searches), with what ``flags``
            derived from them when they were tested as one list."""
            got = packs.get(t)
            if got is None:
                ids = token_ids(self.conn, t, stats[t][0], False)
                got = packs[t] = (ids if isinstance(ids, array) else array("I", ids), _fresh())
                self._lists_bytes += 4 * len(got[0])
            return got

        # What ``flags`` derived from the keys it was last given (see ``_fresh``).
        last: list[Any] = _fresh()

        def flags(t: str, keys: Sequence[int]) -> bytes:
            """One byte per key of ``keys`` (ascending): 1 if it holds ``t``, else 0."""
            nonlocal last
            size = len(keys)
            if t not in stats or not size:
                return bytes(size)
            if last[0] is not keys:
                last = _fresh()
                for prepared in (packs.get(tok) for tok in stats):
                    if prepared is not None and prepared[0] is keys:  # a whole pack
                        last = prepared[1]
                        break
                last[0] = keys
            if t in dense:
                # The byte of each key in the token's bitmap (read only for the blocks
                # the keys fall in), ANDed with the key's bit as two big integers.
                if last[2] is None:
                    # A few keys read the blocks they fall in; more read the whole map
                    # (16 blocks at a million rowids, and many keys touch them all).
                    last[1] = {r >> BLOCK_SHIFT for r in keys} if size <= 64 else None
                    offsets = list(map((3).__rrshift__, keys))  # r >> 3, in C
                    offsets.append(0)  # so that itemgetter always returns a tuple
                    last[2] = itemgetter(*offsets)
                    # Each key's bit in its byte, from the keys' low bytes (C slices).
                    low = array("I", keys).tobytes()[_LOW_BYTE::_ID_SIZE]
                    last[3] = int.from_bytes(low.translate(_BIT_OF_LOW), "little")
                    self._lists_bytes += 40 * size
                bits = covering(t, last[1])
                try:
                    picked = bytes(last[2](bits)[:size])
                except IndexError:  # a whole map ends at its last set bit: pad it
                    bits += bytes((max(keys) >> 3) + 1 - len(bits))
                    bitmaps[t] = (bits, bitmaps[t][1])
                    picked = bytes(last[2](bits)[:size])
                both: int = int.from_bytes(picked, "little") & last[3]
                return both.to_bytes(size, "little").translate(_NONZERO)
            held = sets.get(t)
            if held is None:
                ids = pack(t)[0]
                if size * 8 < len(ids):
                    # A few keys against a long list: binary searches, no set built.
                    hits = {
                        r for r in keys if (at := bisect_left(ids, r)) < len(ids) and ids[at] == r
                    }
                    return bytes(map(hits.__contains__, keys)) if hits else bytes(size)
                held = sets[t] = dict.fromkeys(ids)
                self._lists_bytes += 64 * len(held)
            return bytes(map(held.__contains__, keys))  # in C

        def whole(t: str) -> int:
            """A common token's postings as one integer (bit r: rowid r holds it)."""
            value = ints.get(t)
            if value is None:
                bits = covering(t, None)
                value = ints[t] = int.from_bytes(bits, "little")
                self._lists_bytes += len(bits)
            return value

        found: list[tuple[int, float]] | None = None
        if packed and k is not None and all(t in dense for t in qtokens if df(t) > 0):
            # Only common words: walk the combinations of tokens with bitmap ANDs.
            found = top_by_combinations(qtokens, n, df, whole, self.retriever.min_coverage, k)
        if found is None and packed:
            found = top_by_codes(qtokens, n, df, postings, flags, self.retriever.min_coverage, k)
        if found is None:
            found = top_candidates(
                qtokens,
                n,
                df,
                postings,
                contains,
                self.retriever.min_coverage,
                k,
                (lambda t: True) if packed else None,
            )
        if not found:
            return []
        if k is not None and len(found) > k:
            # Many entries tie at the k-th score: SQLite ranks the tied ones by their
            # balance now (``_energy_now`` in SQL, the same float operations), and only
            # the k that win are read whole. ``found`` is best first (every search
            # returns it so), so those above the k-th score come before it.
            kth = found[k - 1][1]
            above = k - 1
            while above and found[above - 1][1] == kth:
                above -= 1
            scores = dict(found[:above])
            tied = sorted(key for key, s in found[above:] if s == kth)
            best = self._best_balances(tied, k - above, packed and len(tied) >= TIES_BOUNDED)
            scores.update((rowid, kth) for _, rowid in best)
            keys = sorted(scores)
        else:
            scores = dict(found)
            keys = sorted(scores)
        rows: list[tuple[Any, ...]] = []
        for part in _chunks(keys):
            marks = ",".join("?" * len(part))
            rows += self.conn.execute(
                f"SELECT {_COLUMNS}, toks FROM entries WHERE rowid IN ({marks}) AND +alive = 1",
                tuple(part),
            ).fetchall()
        rows.sort(key=lambda row: row[0])  # insertion order, as the published scan sees it
        out = []
        for row in rows:
            entry = self._population.get(row[1])
            if entry is None:
                entry = self._population[row[1]] = self._materialize(row[:-1])
                if row[-1]:  # the indexed tokens (rows before schema 12 keep them):
                    # what the consult's similarity would otherwise tokenize again
                    self.retriever.remember_tokens(entry, str(row[-1]).split())
            out.append((entry, scores[int(row[0])]))
        return out

    # -- persistence --------------------------------------------------------------------

    def to_payload(self) -> dict[str, Any]:
        """The published JSON document of every entry (a copy to a JSON store)."""
        self.alive()
        self.graveyard()
        return self._payload_of({})
