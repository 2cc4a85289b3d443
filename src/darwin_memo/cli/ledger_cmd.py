"""``darwin-memo ledger FILE [--scale S] OP ...``, ``import`` and ``migrate``.

``ledger`` operations print exactly one JSON object on stdout, in the published
shapes (the OpenClaw plugin parses them). Failures print ``{"error": ...,
"code": ...}`` on stdout and exit non-zero: ``usage`` (exit 2), ``bad_input``,
``store_not_found``, ``store_corrupt``, ``store_locked``, ``store_unavailable`` (a
PostgreSQL server that cannot be reached or went away; retry), ``internal`` (exit 1).

A missing store is created by ``add`` (and by ``import``), so a fresh agent can
start writing at once. Every other operation leaves a missing path alone: it
answers as an empty store would, adds ``"store": "missing"`` to its object, and
warns on stderr, so a mistyped path is noticed instead of quietly creating a
second, empty memory.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import math
import os
import re
import sys
from collections.abc import Sequence

from ..errors import (
    DarwinMemoError,
    StoreFormatError,
    StoreLockedError,
    StoreNotFound,
    StoreUnavailableError,
)
from ..records.entry import EntryKind
from ..retrieval.named import RETRIEVER_NAMES
from .common import CliError, positive_float, query_text, read_text_arg

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any, NoReturn

    from ..backends.interface import Population
    from ..ledger import Ledger

    #: Lends ``serve``'s open ledger for a request (None: open one as a one-shot does).
    Holder = Callable[[argparse.Namespace], Ledger | None]

__all__ = ["main_ledger", "register"]

# argparse takes "-1e3" or "-inf" for an option; measured deltas are often negative.
_NUMBER = re.compile(r"^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$|^-(inf|infinity|nan)$", re.IGNORECASE)

FORGET_REASONS = {
    "escrowed": "escrowed by a pending ticket",
    "pinned": "pinned; unpin first",
}


class UsageError(Exception):
    pass


class JsonArgumentParser(argparse.ArgumentParser):
    """Usage errors become a JSON object (callers parse stdout)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = _NUMBER

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _scale(text: str) -> float:
    value = positive_float(text)
    return value


def build_ledger_parser() -> argparse.ArgumentParser:
    """The ``ledger`` parser: ``STORE [--scale S] OP ...``, one subparser per operation."""
    p = JsonArgumentParser(
        prog="darwin-memo ledger",
        description="Event-driven ledger operations on a store; prints one JSON object.",
    )
    p.add_argument("memory", help="store path (.json = published format; otherwise SQLite)")
    p.add_argument("--scale", type=_scale, default=1.0, help="resource scale (1.0)")
    p.add_argument(
        "--retriever",
        choices=RETRIEVER_NAMES,
        help="rank with this retriever; recorded in the store on first use "
        "(default: the store's recorded one, else lexical)",
    )
    ops = p.add_subparsers(dest="op", metavar="OP", parser_class=JsonArgumentParser)
    ops.required = True

    o = ops.add_parser("decide", help="answer a question; returns a ticket")
    o.add_argument("question", help="the question, or - to read it from stdin")
    o.add_argument("-k", type=int, default=3, help="entries to consult (3)")
    o.add_argument("--half-life", type=positive_float, help="recency half-life in ticks")
    o.add_argument("--kind", choices=[k.value for k in EntryKind])
    o.add_argument("--source")

    o = ops.add_parser("settle", help="report a measured delta for a ticket")
    o.add_argument("ticket_id")
    o.add_argument("delta", help="the measured change (negative numbers need no --)")
    o.add_argument("--detail", default="", help="what was measured (run id, test counts)")

    o = ops.add_parser("abandon", help="release a ticket you did not act on")
    o.add_argument("ticket_id")

    o = ops.add_parser("add", help="write a lesson (creates the store if missing)")
    o.add_argument("question", help="text, or - for stdin")
    o.add_argument("answer", help="text, or - for stdin")
    o.add_argument("--source", default="agent")

    for name, text in (
        ("forget", "bury an entry now"),
        ("pin", "exempt an entry from starvation and merges"),
        ("unpin", "return an entry to survival pressure"),
        ("obituary", "an entry's life story"),
    ):
        o = ops.add_parser(name, help=text)
        o.add_argument("entry_id")

    o = ops.add_parser("related", help="an entry's nearest entries (the organic layer)")
    o.add_argument("entry_id")
    o.add_argument("--k", type=int, default=5, help="how many (5)")

    o = ops.add_parser("tick", help="upkeep, deaths, expiry and consolidation")
    o.add_argument("--expire-after", type=int, default=50, help="ticket expiry in ticks (50)")

    ops.add_parser("stats", help="population and energy")
    o = ops.add_parser(
        "set-retriever",
        help="change the retriever the store records, re-embedding its entries",
    )
    o.add_argument("name", choices=RETRIEVER_NAMES, help="lexical, hybrid or semantic")
    ops.add_parser(
        "verify",
        help="rebuild every balance from the journal and compare; check the index",
    )
    ops.add_parser(
        "serve",
        help="stay running: one JSON array of arguments a line on stdin, one reply a line",
    )
    return p


@functools.cache
def _ledger_parser() -> argparse.ArgumentParser:
    """The parser, built once per process (``serve`` parses every request with it)."""
    return build_ledger_parser()


def _parse(argv: list[str]) -> argparse.Namespace:
    """``argv`` as the ledger parser reads it; a usage error names the usage line."""
    parser = _ledger_parser()
    try:
        return parser.parse_args(argv)
    except UsageError as exc:
        raise UsageError(f"{exc} (usage: {parser.format_usage().strip()[7:]})") from None


def _emit(obj: dict[str, Any]) -> None:
    text = json.dumps(obj, ensure_ascii=False)
    # An argument that was not valid UTF-8 reaches us surrogate-escaped; echoed in a
    # message (argparse's "unrecognized arguments: ...") it would make stdout invalid
    # UTF-8 for the JSON parser on the other end. Show such bytes as escapes instead.
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    if not text.isascii():  # stored text's C1 controls, invisible characters: escaped
        from ..answer.fencing import for_json

        text = for_json(text)
    if sys.stdout is None:  # started with stdout closed: as if the reader went away
        raise BrokenPipeError("stdout is closed")
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _fail(message: str, code: str, exit_code: int = 1) -> int:
    _emit({"error": message, "code": code})
    return exit_code


def _code(exc: DarwinMemoError) -> str:
    if isinstance(exc, StoreNotFound):
        return "store_not_found"
    if isinstance(exc, StoreLockedError):
        return "store_locked"
    if isinstance(exc, StoreUnavailableError):
        return "store_unavailable"
    if isinstance(exc, StoreFormatError):
        return "store_corrupt"
    return "bad_input"


def _missing(args: argparse.Namespace) -> dict[str, Any]:
    """What an operation answers when the store does not exist (nothing is created)."""
    from ..backends.postgres import shown  # a URL's password is never printed

    print(
        f"darwin-memo: warning: no store at {shown(args.memory)}; nothing was created "
        "(the first `ledger add` creates it)",
        file=sys.stderr,
    )
    op = args.op
    out: dict[str, Any]
    if op == "decide":
        out = {"answer": None, "ticket_id": None, "silent": True}
    elif op == "settle":
        out = {"settled": False}
    elif op == "abandon":
        out = {"abandoned": False}
    elif op == "forget":
        out = {"forgotten": False}
    elif op == "pin":
        out = {"pinned": False}
    elif op == "unpin":
        out = {"unpinned": False}
    elif op == "obituary":
        out = {"obituary": f"{args.entry_id}: unknown to this store"}
    elif op == "tick":
        out = {
            "tick": 0,
            "population": 0,
            "deaths": 0,
            "merges": 0,
            "pending": 0,
            "expired": 0,
            "total_energy": 0,
            "upkeep_charged": 0.0,
        }
    elif op == "verify":
        out = {"ok": True, "problems": []}
    elif op == "related":
        out = {"entry_id": args.entry_id, "alive": False, "related": []}
    else:
        out = {
            "alive": 0,
            "graveyard": 0,
            "pending_tickets": 0,
            "total_energy": 0,
            "energy_share_by_kind": {},
        }
    out["store"] = "missing"
    return out


def _parse_delta(text: str) -> float:
    from ..economy.rules import MAX_MAGNITUDE

    try:
        value = float(text)
    except ValueError:
        raise CliError(f"delta must be a number, got {text!r}") from None
    if not math.isfinite(value):
        raise CliError(f"delta must be a finite number, got {text!r}; nothing was settled")
    if abs(value) > MAX_MAGNITUDE:
        raise CliError(
            f"delta {text} is beyond the limit of {MAX_MAGNITUDE:g} either way; nothing was settled"
        )
    return value


def run_op(args: argparse.Namespace, held: Holder | None = None) -> dict[str, Any]:
    """Run one operation as one transaction. ``held`` (``serve``) lends an open ledger."""
    from ..answer.fencing import strip_invisible
    from ..ledger import Ledger, decide_json

    op = args.op
    # Validate what we can before touching the store.
    if op == "decide":
        question = query_text(read_text_arg(args.question, "the question"), "the question")
        if not question.strip():
            raise CliError("the question is empty")
        if args.k < 1:
            raise CliError(f"-k must be at least 1, got {args.k}")
    elif op == "settle":
        delta = _parse_delta(args.delta)
        detail = query_text(args.detail, "the detail")
    elif op == "add":
        question = read_text_arg(args.question, "the question").strip()
        answer = read_text_arg(args.answer, "the answer").strip()
        if not question or not answer:
            raise CliError("add requires a non-empty question and answer")
        query_text(question, "the question")
        query_text(answer, "the answer", limit=1024 * 1024)
    elif op == "related" and args.k < 1:
        raise CliError(f"--k must be at least 1, got {args.k}")
    elif op == "tick" and args.expire_after < 0:
        raise CliError(f"--expire-after must be >= 0, got {args.expire_after}")

    if op == "set-retriever":
        drop = getattr(held, "drop", None)
        if drop is not None:
            drop()  # serve's open ledger ranks the old way: it is opened again after
        return _set_retriever(args)
    lent = held(args) if held is not None else None
    closer: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
    if lent is not None:
        ledger = lent  # kept open by its holder: each operation is still one transaction
    else:
        try:
            ledger = Ledger.open(
                args.memory,
                resource_scale=args.scale,
                create=(op == "add"),
                retriever=args.retriever,
            )
        except StoreNotFound:
            if op == "add":
                raise
            return _missing(args)
        closer = ledger
    with closer:
        if op == "decide":
            ticket = ledger.decide(
                question, args.k, half_life=args.half_life, kind=args.kind, source=args.source
            )
            decided = decide_json(ticket)
            if decided["answer"] is not None:  # recalled text: nothing an agent reads unseen
                decided["answer"] = strip_invisible(decided["answer"])
            return decided
        if op == "settle":
            return {"settled": ledger.settle(args.ticket_id, delta, detail)}
        if op == "abandon":
            return {"abandoned": ledger.abandon(args.ticket_id)}
        if op == "add":
            return {"entry_id": ledger.add(question, answer, source=args.source).id}
        if op == "forget":
            result = ledger.forget(args.entry_id)
            out: dict[str, Any] = {"forgotten": result == "buried"}
            if result in FORGET_REASONS:
                out["reason"] = FORGET_REASONS[result]
            return out
        if op == "pin":
            return {"pinned": ledger.pin(args.entry_id)}
        if op == "unpin":
            return {"unpinned": ledger.unpin(args.entry_id)}
        if op == "tick":
            return ledger.tick(expire_after=args.expire_after)
        if op == "stats":
            return ledger.stats()
        if op == "related":
            return _related(ledger, args.entry_id, args.k)
        if op == "obituary":
            return {"obituary": strip_invisible(ledger.obituary(args.entry_id))}
        if op == "verify":
            problems = ledger.verify()
            return {
                "ok": not problems,
                "problems": problems,
                "alive": len(ledger.store),
                "graveyard": ledger.store.dead_count(),
                "pending": len(ledger.pending()),
                "tick": ledger.tick_count,
            }
    raise CliError(f"unknown operation {op!r}")  # pragma: no cover - argparse guards it


#: Entries embedded per batch by ``set-retriever`` (one progress line each).
WARM_BATCH = 64


def _set_retriever(args: argparse.Namespace) -> dict[str, Any]:
    """``set-retriever NAME``: record the new choice and embed every living entry (on
    SQLite, those whose vector of the model the store does not keep; it keeps them)."""
    from ..ledger import Ledger
    from ..retrieval.named import make_retriever

    retriever = make_retriever(args.name)  # without the extra: fails before opening
    with Ledger.open(args.memory, resource_scale=args.scale, create=False) as ledger:
        backend = ledger.backend
        assert backend is not None
        previous = getattr(backend, "recorded_retriever", None)
        ledger.reload(retriever)  # indexed by the new retriever
        entries = list(ledger.store.alive())
        stored = getattr(ledger.store, "ready_vectors", None)
        if stored is not None:  # a SQLite store's vectors of this model: read, not embedded
            stored(entries, embed=False)
        embedded = 0
        warm = getattr(retriever, "warm", None)
        if warm is not None and entries:
            batch = getattr(getattr(retriever, "embed", None), "batch", None)
            for start in range(0, len(entries), WARM_BATCH):
                part = entries[start : start + WARM_BATCH]
                embedded += warm(part) if batch is None else warm(part, batch)
                done = min(start + WARM_BATCH, len(entries))
                print(
                    f"\rdarwin-memo: embedding {done}/{len(entries)} entries",
                    end="\n" if done == len(entries) else "",
                    file=sys.stderr,
                    flush=True,
                )
        backend.record_retriever(args.name, retriever.dump_state())
    return {
        "retriever": args.name,
        "previous": previous or "lexical",
        "alive": len(entries),
        "embedded": embedded,
    }


def _related(ledger: Ledger, entry_id: str, k: int) -> dict[str, Any]:
    """``related``: the organic layer's nearest entries, with the persisted links."""
    from ..organic import OrganicMemory, related_json

    try:
        om = OrganicMemory.open(ledger)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    return related_json(om, entry_id, k)  # (the MCP tool memory_related returns the same)


def _check_text_args(args: argparse.Namespace) -> None:
    """Every text argument must be text: no NUL, no undecodable bytes (``-`` aside)."""
    for name, value in vars(args).items():
        if isinstance(value, str) and value != "-":
            what = "the store path" if name == "memory" else f"the {name.replace('_', ' ')}"
            query_text(value, what, limit=max(len(value), 1))


def _answer(
    argv: Sequence[str], *, stdin_ok: bool = True, held: Holder | None = None
) -> tuple[dict[str, Any], int]:
    """One operation's JSON object and exit code (the one-shot command and ``serve``).

    ``serve`` passes ``stdin_ok=False`` (its stdin carries the requests, so ``-`` is
    refused) and ``held``, which lends it the ledger it keeps open.
    """
    from . import common

    common._stdin_used = False  # one stdin per command, also for in-process callers
    try:
        args = _parse(list(argv))
    except UsageError as exc:
        return {"error": str(exc), "code": "usage"}, 2
    try:
        _check_text_args(args)
        if args.op == "serve":
            raise CliError("serve cannot be requested from inside serve")
        if not stdin_ok and "-" in (getattr(args, "question", None), getattr(args, "answer", None)):
            raise CliError(
                "serve reads its requests from stdin, so - cannot mean stdin here; "
                "put the text in the request"
            )
        result = run_op(args, held)
    except DarwinMemoError as exc:
        return {"error": str(exc), "code": _code(exc)}, 1
    except KeyboardInterrupt:
        return {"error": "interrupted", "code": "interrupted"}, 130
    except Exception as exc:  # a bug: still one JSON object, never a traceback
        if os.environ.get("DARWIN_MEMO_DEBUG"):
            raise
        message = f"unexpected {type(exc).__name__}: {exc} (please report it)"
        return {"error": message, "code": "internal"}, 1
    if args.op == "verify" and not result.get("ok", True):
        return result, 1
    return result, 0


def main_ledger(argv: Sequence[str]) -> int:
    if "serve" in argv:  # `ledger STORE [--scale S] serve`: a process that stays
        try:
            args = _parse(list(argv))
        except UsageError:
            args = None  # _answer reports it
        if args is not None and args.op == "serve":
            from .ledger_serve import serve

            try:
                _check_text_args(args)
            except CliError as exc:
                return _fail(str(exc), exc.code)
            return serve(args.memory, args.scale, args.retriever)
    result, code = _answer(argv)
    _emit(result)
    return code


# -- import / migrate ----------------------------------------------------------------


def cmd_import(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..backends import backend_kind, is_postgres_url
    from ..ledger import Ledger
    from ..store import MemoryStore

    # A postgresql:// URL stays a string: Path() would fold its "//".
    src: str | Path = args.src if is_postgres_url(args.src) else Path(args.src)
    dest: str | Path = args.dest if is_postgres_url(args.dest) else Path(args.dest)
    if isinstance(src, Path) and not src.exists():
        raise CliError(f"{src}: no such store to import from")
    if src == dest or (
        isinstance(src, Path)
        and isinstance(dest, Path)
        and dest.exists()
        and src.resolve() == dest.resolve()
    ):
        raise CliError("the source and the destination are the same store")
    source: Population
    if backend_kind(src) == "json":
        source = MemoryStore.load(src)
    else:
        with Ledger.open(src, create=False) as src_ledger:
            source = src_ledger.store
    with Ledger.open(dest) as ledger:
        imported = ledger.import_entries(source.alive(), str(src), probation=args.probation)
    candidates = len(source.alive())
    _emit(
        {
            "imported": len(imported),
            "skipped": candidates - len(imported),
            "probation": max(0, args.probation),
            "entries": [e.id for e in imported],
        }
    )
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    from ..ledger import Ledger
    from ..transfer import copy_store

    summary = copy_store(args.src, args.dest, overwrite=args.force)
    with Ledger.open(args.dest, create=False) as ledger:
        problems = ledger.verify()
    summary["verify"] = problems or "ok"
    _emit(summary)
    return 0 if not problems else 1


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "ledger",
        help="decide/settle/abandon/add/forget/pin/unpin/tick/stats/obituary/verify (JSON)",
        add_help=False,
    )
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p.set_defaults(func=lambda a: main_ledger(a.rest))

    p = sub.add_parser("import", help="adopt another store's living entries on probation")
    p.add_argument("src")
    p.add_argument("dest")
    p.add_argument("--probation", type=int, default=3, help="settlements owed (3)")
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("migrate", help="copy a store between formats, losslessly")
    p.add_argument("src", help="existing store (.json, SQLite or postgresql:// URL)")
    p.add_argument(
        "dest",
        help="new store (.json = published format; postgresql://...?store=NAME; else SQLite)",
    )
    p.add_argument("--force", action="store_true", help="replace an existing destination")
    p.set_defaults(func=cmd_migrate)
