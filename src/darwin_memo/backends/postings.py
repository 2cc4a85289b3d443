"""The lexical index of an SQL store: each token's list of the rows that hold it.

SQLite keeps a token's list as a pack of varint rowid gaps in its ``tokens`` row
(``pack_ids``) or, for a dense token (``DENSE_MIN`` rows on, back under
``DENSE_DROP``), as bitmaps of ``2**BLOCK_SHIFT`` rowids in ``blocks``; PostgreSQL
keeps ``postings`` rows. ``df`` counts a token's living rows (the IDF of the
ranking). Changes made in bulk are gathered (``ListChanges``, ``DfChanges``) and each
list is rewritten once. ``index_problems`` compares the lists with the rows.

Code in other modules reads this module's tunables and list writers through the
module (``postings.DENSE_MIN``), so a test may set them in one place.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from array import array
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from operator import itemgetter

from .. import collector
from ..errors import StoreFormatError
from ..retrieval.index import bits_to_ids
from .rows import (
    _TEXT,
    row_tokens,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


__all__ = [
    "BLOCK_SHIFT",
    "DENSE_DROP",
    "DENSE_MIN",
    "DfChanges",
    "ListChanges",
    "add_df",
    "apply_list_changes",
    "block_bits",
    "bulk_writing",
    "bump_count",
    "change_df",
    "chunks",
    "first_column",
    "index_problems",
    "living_lists",
    "pack_ids",
    "postings_kept",
    "rebuild_token",
    "set_count",
    "token_ids",
    "unindex_many",
    "unpack_ids",
    "unsettle",
    "write_token",
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


#: The first value of a row (ids out of ``SELECT id ...`` without a Python loop).
first_column = itemgetter(0)
_second = itemgetter(1)
_CHUNK = 900  # SQLite's bound-parameter limit is 999 on old builds


def chunks(items: list[Any]) -> Iterable[list[Any]]:
    """``items`` in slices that fit one statement's bound parameters."""
    for i in range(0, len(items), _CHUNK):
        yield items[i : i + _CHUNK]


def bump_count(conn: sqlite3.Connection, name: str, by: int) -> None:
    """Add ``by`` to the store's counter ``name`` (the ``counters`` table)."""
    conn.execute(
        "INSERT INTO counters (name, value) VALUES (?, ?) "
        "ON CONFLICT (name) DO UPDATE SET value = counters.value + excluded.value",
        (name, by),
    )


def set_count(conn: sqlite3.Connection, name: str, value: int) -> None:
    """Set the store's counter ``name`` to ``value`` (the ``counters`` table)."""
    conn.execute(
        "INSERT INTO counters (name, value) VALUES (?, ?) "
        "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
        (name, value),
    )


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
    if postings_kept(conn):
        conn.executemany(
            "INSERT INTO tokens (token, df) VALUES (?, ?) "
            "ON CONFLICT(token) DO UPDATE SET df = tokens.df + excluded.df",
            list(counts.items()),
        )
        return
    seen = deferred.known if deferred is not None else set()
    known = {t for t in counts if t in seen}
    for part in chunks([t for t in counts if t not in seen]):
        marks = ",".join("?" * len(part))
        known.update(
            map(
                first_column,
                conn.execute(f"SELECT token FROM tokens WHERE token IN ({marks})", part),
            )
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
    store keeps them (``postings_kept``; ``postings`` says so explicitly), and the
    packs and blocks (``blocks``, SQLite; left in ``deferred`` when given)."""
    toks = list(toks)
    if not toks:
        return
    if postings is None:
        postings = postings_kept(conn)
    if sign > 0:
        add_df(conn, dict.fromkeys(toks, 1))
        if postings:
            conn.executemany(
                "INSERT INTO postings (token_id, entry_rowid) "
                "SELECT id, ? FROM tokens WHERE token = ? ON CONFLICT DO NOTHING",
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


def postings_kept(conn: Any) -> bool:
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
                "INSERT INTO blocks (token_id, block, bits) VALUES (?, ?, ?) "
                "ON CONFLICT (token_id, block) DO UPDATE SET bits = excluded.bits",
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
    for part in chunks(wanted):
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
    bump_count(conn, "token_ids", 1)
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
    set_count(conn, "index_stamp", int.from_bytes(os.urandom(7), "little"))


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
    for part in chunks(list(changes)):
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
        for part in chunks(wanted):
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
    for part in chunks(tokens):
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
def bulk_writing(conn: sqlite3.Connection) -> Iterator[None]:
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


def unindex_many(
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
    if not postings_kept(conn):
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
