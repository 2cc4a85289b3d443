"""How small could an indexed SQLite store of the same lessons be? (issue 4, file size)

Reads an SQLite store (``_driver.py build ... --sqlite``) and writes, next to it, the
same entries and index in leaner layouts that darwin-memo does not use, then prints
each file's bytes per entry beside the store's own and the published JSON's:

- ``compact``: the row JSON as schema 7 writes it, but no ``toks`` column, and one
  vocabulary table holding each token's list inline as varint-coded gaps (no packs);
- ``compact+toks``: the same with the ``toks`` column kept;
- ``compact+zlib``: ``compact`` with each row's question and answer deflated against a
  shared 8 KiB dictionary (the first lessons' text);
- ``separate lists``: ``compact`` with today's ``tokens`` + ``packs`` (32-bit ids).

Only the entries, their four indexes and the index count; the other tables (tickets,
notes, events, meta, ...) are left out, so each figure is a floor.

    PYTHONPATH=src python bench/perf/file_floor.py STORE.db
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import tempfile
import zlib
from array import array
from collections import defaultdict
from typing import Any

from darwin_memo.backends.sqlstore import entry_tokens, read_row, row_values

ENTRY_TABLE = """
CREATE TABLE entries (id TEXT PRIMARY KEY, alive INTEGER NOT NULL, energy REAL NOT NULL,
    kind TEXT NOT NULL, damaged INTEGER NOT NULL DEFAULT 0, data BLOB NOT NULL,
    version INTEGER NOT NULL, anchor INTEGER NOT NULL DEFAULT 0,
    pinned INTEGER NOT NULL DEFAULT 0, death_tick INTEGER, toks TEXT NOT NULL DEFAULT '');
CREATE INDEX entries_by_version ON entries(version);
CREATE INDEX entries_death ON entries(alive, pinned, death_tick);
CREATE INDEX entries_damaged ON entries(damaged) WHERE damaged = 1;
CREATE INDEX entries_balance ON entries(alive, pinned, anchor, energy, kind);
"""


def varint_gaps(ids: list[int]) -> bytes:
    out = bytearray()
    last = 0
    for i in ids:
        gap, last = i - last, i
        while gap >= 0x80:
            out.append(gap & 0x7F | 0x80)
            gap >>= 7
        out.append(gap)
    return bytes(out)


def build(
    path: str, rows: list[tuple[Any, ...]], *, toks: bool, deflate: bool, inline: bool
) -> int:
    if os.path.exists(path):
        os.remove(path)
    conn = sqlite3.connect(path)
    conn.executescript(ENTRY_TABLE)
    if inline:
        conn.execute(
            "CREATE TABLE tokens (token TEXT PRIMARY KEY, id INTEGER NOT NULL, "
            "df INTEGER NOT NULL, dense INTEGER NOT NULL DEFAULT 0, ids BLOB) WITHOUT ROWID"
        )
    else:
        conn.execute(
            "CREATE TABLE tokens (token TEXT PRIMARY KEY, id INTEGER NOT NULL, "
            "df INTEGER NOT NULL, dense INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID"
        )
        conn.execute("CREATE TABLE packs (token_id INTEGER PRIMARY KEY, ids BLOB NOT NULL)")
    lists: dict[str, list[int]] = defaultdict(list)
    texts = [f"{e.question}\n{e.answer}" for *_, e in rows]
    zdict = "\n".join(texts[:300]).encode()[-8192:]
    out = []
    for (
        rowid,
        entry_id,
        alive,
        energy,
        anchor,
        pinned,
        death,
        kind,
        damaged,
        version,
        e,
    ), text in zip(rows, texts, strict=True):
        tokens = entry_tokens(e)
        for t in tokens:
            lists[t].append(rowid)
        d = {"sources": e.sources, **json.loads(row_values(e)[4])}  # all but the text
        rest = json.dumps(d, separators=(",", ":"), ensure_ascii=False).encode()
        if deflate:
            packer = zlib.compressobj(6, zlib.DEFLATED, -15, 9, zlib.Z_DEFAULT_STRATEGY, zdict)
            data = packer.compress(text.encode()) + packer.flush() + b"\0" + rest
        else:
            data = json.dumps([e.question, e.answer], ensure_ascii=False).encode() + rest
        out.append(
            (rowid, entry_id, alive, energy, anchor, pinned, death, kind, damaged, version, data,
             " ".join(tokens) if toks else "")
        )  # fmt: skip
    conn.executemany(
        "INSERT INTO entries (rowid, id, alive, energy, anchor, pinned, death_tick, kind, "
        "damaged, version, data, toks) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        out,
    )
    for i, (t, ids) in enumerate(sorted(lists.items()), 1):
        if inline:
            conn.execute(
                "INSERT INTO tokens VALUES (?, ?, ?, 0, ?)", (t, i, len(ids), varint_gaps(ids))
            )
        else:
            conn.execute("INSERT INTO tokens VALUES (?, ?, ?, 0)", (t, i, len(ids)))
            conn.execute("INSERT INTO packs VALUES (?, ?)", (i, array("I", ids).tobytes()))
    conn.commit()
    conn.execute("VACUUM")
    conn.close()
    return os.path.getsize(path)


def main() -> None:
    store = sys.argv[1]
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    rows = [
        (*row[:-4], read_row(row[-4], row[1], row[3], row[7], *row[-3:]))
        for row in conn.execute(
            "SELECT rowid, id, alive, energy, anchor, pinned, death_tick, kind, damaged, "
            "version, data, question, answer, sources FROM entries WHERE alive = 1 ORDER BY rowid"
        )
    ]
    conn.close()
    n = len(rows)
    own = sum(os.path.getsize(store + s) for s in ("", "-wal") if os.path.exists(store + s))
    json_bytes = None
    twin = os.path.splitext(store)[0] + ".json"
    if os.path.exists(twin):
        json_bytes = os.path.getsize(twin)
    report = {"entries": n, "store (bytes/entry)": round(own / n, 1)}
    if json_bytes:
        report["published JSON (bytes/entry)"] = round(json_bytes / n, 1)
    with tempfile.TemporaryDirectory() as tmp:
        layouts = {
            "compact": {"toks": False, "deflate": False, "inline": True},
            "compact+toks": {"toks": True, "deflate": False, "inline": True},
            "compact+zlib": {"toks": False, "deflate": True, "inline": True},
            "separate lists": {"toks": False, "deflate": False, "inline": False},
        }
        for name, options in layouts.items():
            size = build(os.path.join(tmp, f"{name}.db"), rows, **options)
            report[f"{name} (bytes/entry)"] = round(size / n, 1)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
