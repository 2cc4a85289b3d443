"""Fuzz ``darwin-memo ledger`` with bad inputs (issue 3, part 3).

For each backend (an SQLite ``.db`` store and a published-format ``.json``
store, seeded with 20 entries and a few open and settled tickets) it runs:

1. a fixed corpus of the issue's bad inputs: NaN / inf / non-numeric deltas;
   unknown, empty, huge and already-settled tickets; empty, whitespace,
   megabyte and non-UTF-8 text through stdin ``-``; NUL bytes in every argument
   (in-process through ``darwin_memo.cli.main``: argv cannot carry NUL);
   non-UTF-8 bytes in every argument (real subprocess, also once with a strict
   ``PYTHONIOENCODING=utf-8`` stdout); corrupt, truncated, empty, deeply nested
   and wrong-shaped store files; an SQLite store from a newer schema (a row with
   version 999 in ``schema_migrations``) and SQLite stores with unreadable rows;
   hostile stores (issue 33): a JSON store whose journal, lock or rotated journal is
   a planted symbolic link (with a crafted ``journal_txn`` the journal lacks), and
   SQLite stores with a crafted schema (a trigger, a recursive view in place of a
   table, a virtual table, a table and an expression index of nobody's, a planted
   ``-wal`` link);
2. ``--cases`` random argv mutations (seeded) of valid commands: tokens
   replaced, inserted, deleted, duplicated, swapped or garbled with hostile
   strings; every ``--subprocess-every``-th one through a real
   ``python -m darwin_memo`` process, the rest in-process.

Targets, checked on every command (exit status 1 when any fails):

* ``no_traceback``: no "Traceback" in stdout or stderr;
* ``failures_are_json_errors``: stdout is exactly one JSON object (valid UTF-8);
  a non-zero exit carries ``"error"`` and ``"code"``;
* ``refused_commands_leave_store_unchanged``: after a refused command (non-zero
  exit) the JSON store's bytes (store file and journal), or the SQLite store's
  full row dump, are unchanged; after a soft refusal (``{"settled": false}``
  and the like) balances, liveness, open tickets and tick are unchanged;
* ``no_internal_errors``: no ``"code": "internal"`` (the CLI's own word for
  "an unexpected exception: please report it");
* ``bad_inputs_refused``: inputs that must be refused (NaN delta, NUL, ...) are;
* ``no_writes_through_links``: after a command on a hostile store, the file its
  planted links lead to is unchanged and a missing one was not created.

    python bench/reliability/fuzz_cli.py                  # corpus + 1000 random per backend
    python bench/reliability/fuzz_cli.py --cases 200 --backends json --seed 7
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import shutil
import sqlite3
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as c

SOFT_REFUSALS = {
    "settled": False,
    "abandoned": False,
    "forgotten": False,
    "pinned": False,
    "unpinned": False,
}


@dataclass
class Case:
    category: str
    argv: list[Any]  # after the program name; argv[1] is the store path for ledger cases
    stdin: bytes | None = None
    via: str = "inprocess"
    env: dict[str, str] | None = None
    fixture: str | None = None  # a corrupt store fixture instead of the live store
    expect_refused: bool = False
    note: str = ""


@dataclass
class Ctx:
    backend: str
    root: Path
    template: Path
    store: Path
    pending: list[str] = field(default_factory=list)
    settled: list[str] = field(default_factory=list)
    entries: list[str] = field(default_factory=list)
    _refreshed: Any = None
    _semantic: dict[Any, Any] = field(default_factory=dict)
    #: The content key as of the last refresh (None once a command may have run since).
    current: Any = None

    def reset(self) -> None:
        live = self.root / "live"
        shutil.rmtree(live, ignore_errors=True)
        shutil.copytree(self.template, live)
        self.store = c.store_path(live, self.backend)
        self.refresh()

    def key(self) -> tuple[Any, ...]:
        """Changes whenever the live store's content does."""
        if self.backend == "json":
            j = self.store.with_name(self.store.stem + ".events.jsonl")
            return (c.file_digest(self.store), c.file_digest(j))
        return (c.sqlite_dump(self.store),)

    def refresh(self) -> None:
        """Re-read open tickets, settled tickets and entries if the store changed."""
        from darwin_memo.ledger import Ledger

        key = self.key()
        if key == self._refreshed:
            self.current = key
            return
        with Ledger.open(self.store, create=False) as ledger:
            self.pending = [t.id for t in ledger.pending()]
            self.entries = [e.id for e in ledger.store.alive()]
            settled = [e.get("ticket") for e in ledger.events() if e.get("event") == "settle"]
            self.settled = [t for t in settled if isinstance(t, str)]
            if len(self.pending) < 3:
                rng = random.Random(len(self.settled))
                for _ in range(10):
                    t = ledger.decide(c.topic_query(rng.choice(c.TOPICS)))
                    if t.provenance:
                        self.pending.append(t.id)
        self._refreshed = self.current = self.key()

    def semantic(self, key: Any) -> dict[str, Any]:
        if key not in self._semantic:
            self._semantic = {key: c.semantic_state(self.store)}
        return self._semantic[key]

    def ticket(self) -> str:
        return self.pending[0] if self.pending else "0" * 24

    def done(self) -> str:
        return self.settled[0] if self.settled else "f" * 24

    def entry(self) -> str:
        return self.entries[0] if self.entries else "0" * 12


def make_template(directory: Path, backend: str) -> None:
    from darwin_memo.ledger import Ledger

    store = c.store_path(directory, backend)
    c.seed_store(store, 20)
    rng = random.Random(3)
    with Ledger.open(store) as ledger:
        tickets = []
        while len(tickets) < 8:
            t = ledger.decide(c.topic_query(rng.choice(c.TOPICS)))
            if t.provenance:
                tickets.append(t.id)
        for t in tickets[:3]:
            ledger.settle(t, 0.5, "seed")
        ledger.tick()


# -- corrupt store fixtures -------------------------------------------------------------------


def _sqlite_edit(src: Path, dest: Path, sql: str) -> None:
    shutil.copy(src, dest)
    conn = sqlite3.connect(dest)
    try:
        conn.execute(sql)
        conn.commit()
    finally:
        conn.close()


def make_fixture(ctx: Ctx, name: str) -> Path:
    """A fresh copy of a broken store named ``name`` (next to the template)."""
    d = ctx.root / "fixtures"
    d.mkdir(exist_ok=True)
    suffix = c.SUFFIX[ctx.backend]
    dest = d / f"{name}{suffix}"
    for p in d.glob(f"{name}*"):
        p.unlink()
    src = c.store_path(ctx.template, ctx.backend)
    raw = src.read_bytes()
    if name == "truncated-half":
        dest.write_bytes(raw[: len(raw) // 2])
    elif name == "truncated-100":
        dest.write_bytes(raw[:100])
    elif name == "truncated-1":
        dest.write_bytes(raw[:1])
    elif name == "empty":
        dest.write_bytes(b"")
    elif name == "garbage":
        dest.write_bytes(random.Random(5).randbytes(4096))
    elif name == "zeroed-header":
        dest.write_bytes(b"\0" * 16 + raw[16:])
    elif name == "scribbled-middle":
        mid = len(raw) // 2
        dest.write_bytes(raw[:mid] + random.Random(6).randbytes(1024) + raw[mid + 1024 :])
    elif name == "json-array":
        dest.write_bytes(b"[]")
    elif name == "json-wrong-shape":
        dest.write_bytes(b'{"entries": 5, "ledger": []}')
    elif name == "json-nan-energy":
        dest.write_bytes(re.sub(rb'"energy": -?[0-9.e+-]+', b'"energy": NaN', raw, count=1))
    elif name == "json-invalid-utf8":
        dest.write_bytes(raw[:200] + b"\xff\xfe" + raw[200:])
    elif name == "json-deep":
        dest.write_bytes(b'{"entries": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
    elif name == "sqlite-newer-schema":
        _sqlite_edit(src, dest, "INSERT INTO schema_migrations VALUES (999, 'm999_future', 'x')")
    elif name == "sqlite-bad-entry-row":
        _sqlite_edit(src, dest, "UPDATE entries SET data = '{' WHERE rowid = 2")
    elif name == "sqlite-bad-meta-row":
        _sqlite_edit(src, dest, "UPDATE meta SET value = 'nope' WHERE key = 'tick_count'")
    elif name == "sqlite-bad-ticket-row":
        _sqlite_edit(src, dest, "UPDATE tickets SET data = 'nope' WHERE open = 1")
    elif name == "sqlite-missing-table":
        _sqlite_edit(src, dest, "DROP TABLE tickets")
    elif name in HOSTILE_SQL:
        shutil.copy(src, dest)
        conn = sqlite3.connect(dest)
        try:
            for sql in HOSTILE_SQL[name]:
                conn.execute(sql)
            conn.commit()
        finally:
            conn.close()
    elif name == "sqlite-wal-link":
        shutil.copy(src, dest)
        Path(f"{dest}-wal").symlink_to(_bait(d))
    elif name in ("json-journal-link", "json-lock-link", "json-rotated-link"):
        payload = json.loads(raw)
        payload["ledger"]["journal_txn"] = {
            "id": "0badc0de0badc0de",
            "events": [{"event": "tick", "tick": 99, "note": "$(touch PWNED)"}],
        }
        dest.write_text(json.dumps(payload), encoding="utf-8")
        journal = dest.with_name(dest.stem + ".events.jsonl")
        if name == "json-journal-link":
            journal.symlink_to(_bait(d))
        elif name == "json-lock-link":
            dest.with_name(dest.name + ".lock").symlink_to(_bait(d, missing=True))
        else:
            shutil.copy(src.with_name(src.stem + ".events.jsonl"), journal)
            journal.with_name(journal.name + ".1").symlink_to(_bait(d))
    else:  # pragma: no cover
        raise ValueError(name)
    return dest


#: Crafted schemas: each must be refused, by name, before any of its SQL runs.
HOSTILE_SQL = {
    "sqlite-trigger": [
        "CREATE TRIGGER boost AFTER INSERT ON events BEGIN UPDATE entries SET energy = 5; END"
    ],
    "sqlite-recursive-view": [
        "DROP TABLE tickets",
        "CREATE VIEW tickets (id, open, born_tick, data, version) AS WITH RECURSIVE "
        "r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT x, 1, 0, '{}', 0 FROM r",
    ],
    "sqlite-virtual-table": ["CREATE VIRTUAL TABLE search USING fts5(body)"],
    "sqlite-foreign-table": ["CREATE TABLE exfil (x)"],
    "sqlite-expression-index": ["CREATE INDEX sneaky ON entries(length(data) * 2)"],
}
#: Fixtures holding a planted link, and the bait its target is.
LINK_FIXTURES = {"sqlite-wal-link", "json-journal-link", "json-lock-link", "json-rotated-link"}
BAIT = b"# the victim's ~/.bashrc\nexport PATH=$HOME/bin:$PATH\n"


def _bait(directory: Path, missing: bool = False) -> Path:
    """The file a planted link leads to: fresh bait, or a name that must stay missing."""
    bait = directory / ("bait-missing" if missing else "bait")
    bait.unlink(missing_ok=True)
    if not missing:
        bait.write_bytes(BAIT)
    return bait


def bait_problem(fixtures: Path) -> str | None:
    """What a command wrote through a planted link, if anything."""
    if (fixtures / "bait").exists() and (fixtures / "bait").read_bytes() != BAIT:
        return "the target of a planted link was written"
    if os.path.lexists(fixtures / "bait-missing"):
        return "the missing target of a planted link was created"
    return None


FIXTURES = {
    "db": [
        "truncated-half", "truncated-100", "truncated-1", "empty", "garbage", "zeroed-header",
        "scribbled-middle", "sqlite-newer-schema", "sqlite-bad-entry-row",
        "sqlite-bad-meta-row", "sqlite-bad-ticket-row", "sqlite-missing-table",
        *HOSTILE_SQL, "sqlite-wal-link",
    ],
    "json": [
        "truncated-half", "truncated-100", "truncated-1", "empty", "garbage", "json-array",
        "json-wrong-shape", "json-nan-energy", "json-invalid-utf8", "json-deep",
        "json-journal-link", "json-lock-link", "json-rotated-link",
    ],
}  # fmt: skip
#: Operations each hostile JSON fixture must refuse: writers meet the planted journal
#: or lock; ``verify`` reads the journal. (Reading the store alone needs neither.)
JSON_LINK_REFUSED = {
    "json-journal-link": {"add", "tick", "verify"},
    "json-lock-link": {"add", "tick"},
    "json-rotated-link": {"verify"},
}


# -- the fixed corpus ----------------------------------------------------------------------------

BAD_DELTAS = [
    "nan", "NaN", "-nan", "+nan", "inf", "-inf", "Infinity", "-Infinity", "1e309", "-1e309",
    "abc", "", " ", "1,5", "0x10", "1e", "--1", "+-1", "1.2.3", "nan(1)", "∞", "½", "1/2",
    "true", "None", "0b1", "\t",
]  # fmt: skip
ODD_BUT_FINITE = ["٣", "1_000", " 1 ", "+0", "-0", "1e-320", "1e308"]


class Slot(str):
    """A placeholder in a corpus argv, filled in when the case runs."""


STORE, TICKET, DONE, ENTRY, FIXTURE = (
    Slot(n) for n in ("store", "ticket", "done", "entry", "fixture")
)


@dataclass(frozen=True)
class StorePlus:
    """The live store's path with something appended (str: in-process; bytes: argv)."""

    extra: str | bytes


def fill(x: Ctx, argv: list[Any], fixture: Path | None) -> list[Any]:
    values = {STORE: str(x.store), TICKET: x.ticket(), DONE: x.done(), ENTRY: x.entry()}
    out: list[Any] = []
    for a in argv:
        if isinstance(a, StorePlus):
            out.append(str(x.store) + a.extra if isinstance(a.extra, str)
                       else str(x.store).encode() + a.extra)  # fmt: skip
        elif isinstance(a, Slot):
            out.append(str(fixture) if a == FIXTURE else values[a])
        else:
            out.append(a)
    return out


def corpus(backend: str) -> list[Case]:
    """The issue's bad inputs, as cases (argv slots are filled in at run time)."""
    out: list[Case] = []
    L = ["ledger", STORE]

    # 1. deltas: the ticket is live, and must still be pending after each refusal
    for d in BAD_DELTAS:
        out.append(Case("bad_delta", [*L, "settle", TICKET, d], expect_refused=True))
    for d in ["nan", "-inf", "1e309", "abc", ""]:
        out.append(Case("bad_delta", [*L, "settle", TICKET, d], via="subprocess",
                        expect_refused=True))  # fmt: skip
    for d in ODD_BUT_FINITE:  # accepted by float(): only the contract is checked
        out.append(Case("odd_delta", [*L, "settle", "f" * 24, d]))
    # 2. unknown, odd and already-settled tickets and entries: soft refusals
    odd_ids = ["0" * 24, "deadbeef", "", " ", "-", "--", "\n", "x" * 100_000, "é" * 30,
               "../../etc/passwd", "' OR 1=1 --", "%s%n"]  # fmt: skip
    for op, tail in (("settle", ["0.5"]), ("abandon", [])):
        for t in odd_ids:
            out.append(Case("bad_ticket", [*L, op, t, *tail]))
        out.append(Case("settled_ticket", [*L, op, DONE, *tail]))
        out.append(Case("settled_ticket", [*L, op, DONE, *tail], via="subprocess"))
    for op in ("forget", "pin", "unpin", "obituary"):
        for e in ["0" * 12, "", "-", "x" * 100_000]:
            out.append(Case("bad_entry", [*L, op, e]))
    # 3. text through stdin (-)
    mega = (b"clear the nginx cache " * ((1 << 20) // 22 + 1))[: 1 << 20]
    stdin_inputs = {
        "empty": (b"", True),
        "whitespace": (b" \n\t \n", True),
        "megabyte": (mega, True),
        "limit+1": (b"a" * (64 * 1024 + 1), True),
        "at_limit": (b"clear the nginx cache " + b"a" * (64 * 1024 - 22), False),
        "invalid_utf8": (b"clear the \xff\xfe cache", True),
        "utf8_surrogate": (b"clear \xed\xa0\x80 cache", True),
        "overlong": (b"clear \xc0\xaf cache", True),
        "nul": (b"clear the\x00 cache", True),
        "bom": (b"\xef\xbb\xbfclear the nginx cache", False),
    }
    for name, (data, refuse) in stdin_inputs.items():
        for via in ("inprocess", "subprocess"):
            out.append(Case("stdin_query", [*L, "decide", "-"], stdin=data, via=via,
                            expect_refused=refuse, note=name))  # fmt: skip
    for name in ("invalid_utf8", "nul", "empty"):
        data = stdin_inputs[name][0]
        for argv in ([*L, "add", "-", "an answer"], [*L, "add", "a question", "-"]):
            out.append(Case("stdin_add", argv, stdin=data, via="subprocess",
                            expect_refused=True, note=name))  # fmt: skip
    out.append(Case("stdin_add", [*L, "add", "a question", "-"], stdin=b"a" * ((1 << 20) + 1),
                    via="subprocess", expect_refused=True, note="answer over 1 MiB"))  # fmt: skip
    out.append(Case("stdin_add", [*L, "add", "-", "-"], stdin=b"abc", expect_refused=True,
                    note="stdin twice"))  # fmt: skip
    # 4. NUL bytes (in-process: argv cannot carry them) and 5. non-UTF-8 bytes (real argv)
    for spot in BAD_SPOTS:
        out.append(with_bad(spot, "nu\x00l", "nul_byte"))
    for spot in BAD_SPOTS:
        out.append(with_bad(spot, b"bad\xff\xfeutf8", "invalid_utf8_argv"))
    for spot in ("ticket", "entry", "question"):
        out.append(with_bad(spot, b"bad\xffutf8", "invalid_utf8_strict_stdout",
                            env={"PYTHONIOENCODING": "utf-8"}))  # fmt: skip
    # 6. usage errors
    for argv in (
        ["ledger"], [*L], [*L, "bogus"], [*L, "decide"], [*L, "settle", "t"],
        [*L, "decide", "q", "-k", "0"], [*L, "decide", "q", "-k", "x"],
        [*L, "decide", "q", "--half-life", "nan"], [*L, "decide", "q", "--kind", "nope"],
        [*L, "tick", "--expire-after", "-1"], ["ledger", "--scale", "0", STORE, "stats"],
        ["ledger", "--scale", "inf", STORE, "stats"], [*L, "--scale", "-1", "stats"],
    ):  # fmt: skip
        out.append(Case("usage", argv, expect_refused=True))
    # 7. broken stores: every operation is refused and the file is left as it was
    ops = [["stats"], ["verify"], ["decide", "clear the nginx cache"], ["settle", TICKET, "0.5"],
           ["abandon", TICKET], ["add", "q?", "a."], ["forget", ENTRY], ["pin", ENTRY],
           ["tick"], ["obituary", ENTRY]]  # fmt: skip
    for fx in FIXTURES[backend]:
        if fx in HOSTILE_SQL or fx in LINK_FIXTURES:
            for i, op in enumerate(ops):
                refused = fx.startswith("sqlite-") or op[0] in JSON_LINK_REFUSED[fx]
                out.append(Case("hostile_store", ["ledger", FIXTURE, *op], fixture=fx,
                                via="subprocess" if i in (0, 5) else "inprocess",
                                expect_refused=refused))  # fmt: skip
            continue
        for i, op in enumerate(ops):
            out.append(Case("broken_store", ["ledger", FIXTURE, *op], fixture=fx,
                            via="subprocess" if i in (0, 5) else "inprocess",
                            # scribbled pages may lie where this command never reads, and
                            # SQLite stores read entry rows on demand and open tickets when
                            # first needed (decide, add, pin and obituary do not): a damaged
                            # row is refused by the commands that read it, not by every one
                            expect_refused=fx not in ("scribbled-middle",
                                                      "sqlite-bad-entry-row")
                            and not (fx == "sqlite-bad-ticket-row"
                                     and op[0] in ("decide", "add", "pin",
                                                   "obituary"))))  # fmt: skip
    return out


BAD_SPOTS = ["question", "answer", "detail", "ticket", "entry", "source", "kind", "delta",
             "store", "scale", "expire"]  # fmt: skip


def with_bad(spot: str, bad: str | bytes, category: str, env: dict[str, str] | None = None) -> Case:
    """A valid command with ``bad`` in one argument (``spot``)."""
    s: Any = STORE
    refuse = True
    if spot == "store":
        s, bad = StorePlus(bad), "a"
        # a non-UTF-8 file name is legal on POSIX; a NUL is not
        refuse = isinstance(s.extra, str)
    argv = {
        "question": ["ledger", s, "decide", bad],
        "answer": ["ledger", s, "add", "q", bad],
        "detail": ["ledger", s, "settle", TICKET, "0.5", "--detail", bad],
        "ticket": ["ledger", s, "settle", bad, "0.5"],
        "entry": ["ledger", s, "obituary", bad],
        "source": ["ledger", s, "add", "q", "a", "--source", bad],
        "kind": ["ledger", s, "decide", "q", "--kind", bad],
        "delta": ["ledger", s, "settle", TICKET, bad],
        "scale": ["ledger", "--scale", bad, s, "stats"],
        "expire": ["ledger", s, "tick", "--expire-after", bad],
        "store": ["ledger", s, "add", "q", bad],
    }[spot]
    if spot in ("ticket", "entry"):
        refuse = False  # an unknown ticket or entry is a soft refusal ({"settled": false})
    has_bytes = isinstance(bad, bytes) or (isinstance(s, StorePlus) and isinstance(s.extra, bytes))
    return Case(category, argv, via="subprocess" if has_bytes else "inprocess", env=env,
                expect_refused=refuse, note=spot)  # fmt: skip


# -- random argv mutations --------------------------------------------------------------------

HOSTILE = [
    "-", "--", "-k", "-k0", "-k-1", "--scale", "--scale=0", "--scale=-1", "--half-life",
    "--half-life=0", "--kind", "--kind=", "--detail", "--source", "--expire-after",
    "--expire-after=-1", "nan", "-nan", "inf", "-inf", "1e309", "-1e-309", "0", "-0", "-1",
    "999999999999999999999999", "0.5", "", " ", "\t", "\n", "\x00", "\x7f", "\u202e", "\udcff",
    "🙂", "é", "x" * 70_000, "ledger", "decide", "settle", "abandon", "add", "forget", "pin",
    "unpin", "tick", "stats", "verify", "obituary", "migrate", "import", "/", ".", "..",
    "/dev/null", "%s", "{}", "[]", '{"a":1}', "null", "true", "--scale=1e-300",
]  # fmt: skip
HOSTILE_VALUES = [
    h for h in HOSTILE if not h.startswith("-") or h in ("-", "-1", "-0", "-inf", "-nan", "-1e-309")
]
GARBLE_CHARS = ["\x00", "\udcfe", "\u202e", "\n", " ", "-", "=", "\\", '"', "é", "🙂", "\x1b"]


def templates(rng: random.Random, x: Ctx) -> list[list[str]]:
    q = c.topic_query(rng.choice(c.TOPICS))
    return [
        ["decide", q],
        ["decide", q, "-k", "2"],
        ["decide", q, "--kind", "experience", "--half-life", "3", "--source", "agent"],
        ["settle", x.ticket(), "0.5", "--detail", "fuzz"],
        ["settle", x.done(), "-0.25"],
        ["abandon", x.ticket()],
        ["add", "How do I fuzz the CLI?", "Mutate argv.", "--source", "fuzz"],
        ["forget", x.entry()],
        ["pin", x.entry()],
        ["unpin", x.entry()],
        ["obituary", x.entry()],
        ["tick", "--expire-after", "5"],
        ["stats"],
        ["verify"],
    ]


def _garble(rng: random.Random, token: str) -> str:
    if not token:
        return rng.choice(GARBLE_CHARS)
    i = rng.randrange(len(token) + 1)
    how = rng.randrange(3)
    if how == 0:
        return token[:i] + rng.choice(GARBLE_CHARS) + token[i:]
    if how == 1:
        return token[:i] + rng.choice(GARBLE_CHARS) + token[i + 1 :]
    return token[:i]


def random_case(rng: random.Random, x: Ctx, via: str) -> Case:
    tail = list(rng.choice(templates(rng, x)))
    head: list[Any] = ["ledger", str(x.store)]
    if rng.random() < 0.15:
        head[1:1] = ["--scale", rng.choice(["2", "0.5", "1e-9", "nan", "-1", "x"])]
    n_mutations = rng.choices([1, 2, 3], weights=[6, 3, 1])[0]
    for _ in range(n_mutations):
        kind = rng.choices(range(6), weights=[55, 6, 6, 4, 4, 25])[0]
        pos = rng.randrange(len(tail) + 1)
        values = [k for k, t in enumerate(tail) if k > 0 and not t.startswith("-")]
        if kind == 0 and values:  # a positional or option value becomes hostile
            tail[rng.choice(values)] = rng.choice(HOSTILE_VALUES)
        elif kind == 1:
            tail.insert(pos, rng.choice(HOSTILE))
        elif kind == 2 and tail:
            del tail[min(pos, len(tail) - 1)]
        elif kind == 3 and tail:
            tail.insert(pos, tail[rng.randrange(len(tail))])
        elif kind == 4 and len(tail) > 1:
            i, j = rng.sample(range(len(tail)), 2)
            tail[i], tail[j] = tail[j], tail[i]
        elif tail:  # garble a character (rarely the operation's name)
            k = (
                rng.randrange(len(tail))
                if rng.random() < 0.2 or len(tail) == 1
                else rng.randrange(1, len(tail))
            )
            tail[k] = _garble(rng, tail[k])
    if rng.random() < 0.04:  # the store path itself, from a safe list
        head[-1] = rng.choice(
            [str(x.root / "missing" / "new.json"), str(x.root / "nope.db"), str(x.root),
             "/dev/null", str(x.store) + "\x00", str(x.store) + "\udcff"]
        )  # fmt: skip
    argv = head + tail
    stdin = None
    if "-" in tail:
        stdin = rng.choice([b"", b"clear the nginx cache", b"\xff\xfe", b"a" * (1 << 20),
                            b"x\x00y", "é🙂".encode()])  # fmt: skip
    if via == "subprocess" and any("\x00" in a for a in argv if isinstance(a, str)):
        via = "inprocess"
    return Case("random_mutation", argv, stdin=stdin, via=via)


# -- running and judging one case ------------------------------------------------------------


def _is_text_bad(a: Any) -> bool:
    if isinstance(a, bytes):
        try:
            a.decode("utf-8")
        except UnicodeDecodeError:
            return True
        return False
    return any(0xD800 <= ord(ch) <= 0xDFFF for ch in a)


def _snapshot(x: Ctx, path: Path, deep: bool) -> dict[str, Any]:
    if not deep:
        return {"bytes": c.file_digest(path)}
    key = x.current if x.current is not None else x.key()
    if x.backend == "json":
        snap: dict[str, Any] = {"bytes": key[0], "journal": key[1]}
    else:
        snap = {"bytes": True, "dump": key[0]}
    if snap["bytes"] is not None:
        try:
            snap["semantic"] = x.semantic(key)  # cached per store content
        except Exception as exc:  # a broken store: bytes are all we compare
            snap["semantic_error"] = repr(exc)
    return snap


def _to_subprocess_arg(a: Any) -> str | bytes:
    if isinstance(a, bytes):
        return a
    if _is_text_bad(a):
        return a.encode("utf-8", "surrogateescape")
    return a


def run_case(x: Ctx, case: Case, cwd: Path, inprocess_only: bool = False) -> dict[str, Any]:
    if case.fixture:
        target = make_fixture(x, case.fixture)
        deep = False
    else:
        target, deep = x.store, True
    argv = fill(x, case.argv, target if case.fixture else None)
    before = _snapshot(x, target, deep)
    if inprocess_only and case.via == "subprocess" and case.env:
        # a strict stdout only exists in a real process
        return {"category": case.category, "via": "skipped", "outcome": "skipped",
                "code": None, "rc": None, "elapsed": 0.0}  # fmt: skip
    via = "inprocess" if inprocess_only else case.via
    if via == "subprocess":
        env = c.child_env(case.env)
        res = c.run_subprocess([_to_subprocess_arg(a) for a in argv], case.stdin, env=env, cwd=cwd)
    else:
        old = os.getcwd()
        os.chdir(cwd)
        try:
            res = c.run_inprocess([a.decode("utf-8", "surrogateescape") if isinstance(a, bytes)
                                   else a for a in argv], case.stdin)  # fmt: skip
        finally:
            os.chdir(old)
    x.current = None
    obj, _ = c.one_json_object(res.stdout)
    problems: list[tuple[str, str]] = []
    contract = c.contract_problem(res)
    help_text = res.rc == 0 and res.stdout.startswith(b"usage:")
    # `verify` reports unsound books as {"ok": false, "problems": [...]} with exit 1 (by design)
    verdict = res.rc == 1 and obj is not None and obj.get("ok") is False and "problems" in obj
    if verdict:
        contract = None
        if not case.fixture:
            problems.append(("unsound", c.short(obj["problems"], 300)))
    if contract == "traceback in output":
        problems.append(("traceback", c.short(res.text[-600:], 600)))
    elif contract and not help_text:
        problems.append(("contract", f"{contract}; exit {res.rc}; {c.short(res.text, 300)}"))
    code = obj.get("code") if obj else None
    if code == "internal":
        problems.append(("internal", c.short(obj.get("error"), 300)))
    refused = res.rc != 0
    soft = (
        res.rc == 0
        and obj is not None
        and any(k in obj and obj[k] is v for k, v in SOFT_REFUSALS.items())
    )
    if refused or soft:
        after = _snapshot(x, target, deep)
        if refused:
            keys = ["bytes", "journal"] if x.backend == "json" else ["dump"]
            if not deep:
                keys = ["bytes"]
            changed = [k for k in keys if before.get(k) != after.get(k)]
            if deep and x.backend == "db" and "dump" not in before:
                changed = ["bytes"] if before["bytes"] != after["bytes"] else []
            if changed:
                problems.append(("store_changed", f"refused (exit {res.rc}) but {changed} changed"))
        elif not deep and case.expect_refused and before["bytes"] != after["bytes"]:
            # an unreadable store must be refused; answering it (even "false") must not write
            problems.append(
                ("store_changed", "soft refusal on a broken store, but its bytes changed")
            )
        elif before.get("semantic") != after.get("semantic"):
            problems.append(("store_changed", "soft refusal but balances/tickets/tick changed"))
    if case.expect_refused and res.rc == 0 and not soft:
        problems.append(("accepted_bad_input", c.short(res.stdout.decode("utf-8", "replace"), 200)))
    if case.fixture in LINK_FIXTURES:
        wrote = bait_problem(target.parent)
        if wrote:
            problems.append(("link_written", wrote))
    outcome = (
        "verify_failed" if verdict
        else "refused" if refused
        else "soft_refusal" if soft
        else "help" if help_text
        else "ok"
    )  # fmt: skip
    record: dict[str, Any] = {
        "category": case.category,
        "via": via,
        "outcome": outcome,
        "code": code,
        "rc": res.rc,
        "elapsed": res.elapsed,
    }
    if problems:
        record["problems"] = problems
        record["argv"] = c.describe_argv([a if isinstance(a, str) else repr(a) for a in argv])
        record["note"] = case.note
        record["fixture"] = case.fixture
    return record


# -- the driver ---------------------------------------------------------------------------------

TARGETS = {
    "traceback": "no_traceback",
    "contract": "failures_are_json_errors",
    "store_changed": "refused_commands_leave_store_unchanged",
    "internal": "no_internal_errors",
    "accepted_bad_input": "bad_inputs_refused",
    "unsound": "live_store_verifies",
    "link_written": "no_writes_through_links",
}


def run(
    backends: list[str],
    cases: int,
    seed: int = 1,
    subprocess_every: int = 10,
    corpus_only: bool = False,
    skip_corpus: bool = False,
    workdir: Path | None = None,
    reset_every: int = 100,
    inprocess_only: bool = False,
) -> dict[str, Any]:
    base = Path(tempfile.mkdtemp(prefix="dm-fuzz-")) if workdir is None else workdir
    base.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    rng = random.Random(seed)
    results = []
    try:
        for backend in backends:
            root = base / backend
            shutil.rmtree(root, ignore_errors=True)
            template = root / "template"
            make_template(template, backend)
            x = Ctx(backend, root, template, template)
            x.reset()
            cwd = root / "cwd"
            cwd.mkdir()
            records: list[dict[str, Any]] = []
            t_backend = time.time()
            if not skip_corpus:
                for case in corpus(backend):
                    records.append(run_case(x, case, cwd, inprocess_only))
                    x.refresh()
            n_random = 0 if corpus_only else cases
            for i in range(n_random):
                if reset_every and i % reset_every == 0:
                    records.extend(_verify_live(x))
                    x.reset()
                via = (
                    "subprocess" if subprocess_every and i % subprocess_every == 0 else "inprocess"
                )
                records.append(run_case(x, random_case(rng, x, via), cwd, inprocess_only))
                with contextlib.suppress(Exception):
                    x.refresh()
            records.extend(_verify_live(x))
            results.append(_summarize(backend, records, time.time() - t_backend))
    finally:
        if workdir is None:
            shutil.rmtree(base, ignore_errors=True)
    return {
        "benchmark": "fuzz_cli",
        "machine": c.machine(),
        "seed": seed,
        "inprocess_only": inprocess_only,
        "random_cases_per_backend": 0 if corpus_only else cases,
        "total_wall_s": round(time.time() - t0, 1),
        "results": results,
        "failing_commands": sum(r["failing_commands"] for r in results),
        "ok": all(r["ok"] for r in results),
    }


def _verify_live(x: Ctx) -> list[dict[str, Any]]:
    """After a stretch of fuzzing, the live store's books must still balance."""
    from darwin_memo.ledger import Ledger

    try:
        with Ledger.open(x.store, create=False) as ledger:
            problems = ledger.verify()
    except Exception as exc:
        problems = [f"cannot open: {type(exc).__name__}: {exc}"]
    if not problems:
        return []
    return [{"category": "live_store_verify", "via": "library", "outcome": "verify_failed",
             "code": None, "rc": None, "elapsed": 0.0,
             "problems": [("unsound", c.short(problems, 400))], "argv": [], "note": "",
             "fixture": None}]  # fmt: skip


def _summarize(backend: str, records: list[dict[str, Any]], wall: float) -> dict[str, Any]:
    failing = [r for r in records if r.get("problems")]
    by_target: Counter[str] = Counter()
    for r in failing:
        for kind in {k for k, _ in r["problems"]}:
            by_target[TARGETS[kind]] += 1
    samples: list[dict[str, Any]] = []
    seen: Counter[tuple[Any, ...]] = Counter()
    for r in failing:
        key = (r["category"], tuple(sorted({k for k, _ in r["problems"]})))
        seen[key] += 1
        if seen[key] <= 2:
            samples.append(r)
    targets = {t: by_target[t] == 0 for t in TARGETS.values()}
    return {
        "backend": backend,
        "commands": len(records),
        "wall_s": round(wall, 1),
        "via": dict(Counter(r["via"] for r in records)),
        "outcomes": dict(Counter(r["outcome"] for r in records)),
        "codes": dict(Counter(r["code"] for r in records if r["code"])),
        "by_category": {
            cat: dict(Counter(r["outcome"] for r in records if r["category"] == cat))
            for cat in dict.fromkeys(r["category"] for r in records)
        },
        "failing_commands": len(failing),
        "failing_by_target": dict(by_target),
        "failure_samples": samples[:40],
        "targets": targets,
        "ok": all(targets.values()),
    }


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--cases", type=int, default=1000, help="random mutations per backend (1000)")
    p.add_argument("--backends", default="db,json", help="comma list of db,json (db,json)")
    p.add_argument("--seed", type=int, default=1, help="random seed (1)")
    p.add_argument(
        "--subprocess-every",
        type=int,
        default=10,
        help="run every Nth random case as a real process (10); 0 = never",
    )
    p.add_argument("--corpus-only", action="store_true", help="only the fixed bad-input corpus")
    p.add_argument("--skip-corpus", action="store_true", help="only the random mutations")
    p.add_argument(
        "--inprocess-only",
        action="store_true",
        help="run every case through darwin_memo.cli.main (fast; skips the strict-stdout cases)",
    )
    p.add_argument("--workdir", type=Path, help="keep stores here (default: a temp dir)")
    return p


def main(argv: list[str] | None = None) -> int:
    ns = build_parser().parse_args(argv)
    summary = run(
        [b.strip() for b in ns.backends.split(",") if b.strip()],
        ns.cases,
        ns.seed,
        ns.subprocess_every,
        ns.corpus_only,
        ns.skip_corpus,
        ns.workdir,
        inprocess_only=ns.inprocess_only,
    )
    print(json.dumps(summary, indent=2))
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
