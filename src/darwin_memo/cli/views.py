"""Read-only views of a store: ``top``, ``why``, ``audit``, ``doctor``.

None of them writes the store or its journal, and none creates a missing store.
``--json`` prints the same objects the dashboard API serves. Stored text (questions,
sources, notes, details, finding evidence) is printed through
``answer.fencing.for_terminal``: a store cloned from elsewhere cannot send the terminal
escape sequences or rewrite a line.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from ..answer.fencing import for_json
from ..answer.fencing import for_terminal as shown
from .common import CliError, non_negative_int

if TYPE_CHECKING:
    from ..ledger import Ledger

__all__ = ["register"]


def _open(path: str) -> Ledger:
    from ..errors import StoreNotFound
    from ..ledger import Ledger

    try:
        return Ledger.open(path, create=False)
    except StoreNotFound:
        from ..backends.postgres import shown  # a URL's password is never printed

        raise CliError(f"{shown(path)}: no such store") from None


def _print_json(obj: Any) -> None:
    print(for_json(json.dumps(obj, ensure_ascii=False, indent=2)))


def cmd_top(args: argparse.Namespace) -> int:
    from ..observe import top

    with _open(args.memory) as ledger:
        board = top(ledger, limit=args.limit)
    if args.json:
        _print_json(board)
        return 0
    if not board["entries"]:
        print("no living entries")
        return 0
    print(f"tick {board['tick']}, {board['alive']} living entries")
    print(f"{'balance':>8}  {'id':<12}  {'kind':<12} {'age':>4} {'settled':>7}  source / question")
    for row in board["entries"]:
        settled = "never" if row["last_settled_tick"] is None else f"t{row['last_settled_tick']}"
        flags = ""
        if row["pinned"]:
            flags += " [pinned]"
        if row["probation"]:
            flags += f" [probation {row['probation']}]"
        source = shown(",".join(row["sources"])) or "-"
        print(
            f"{row['balance']:>8.3f}  {shown(row['id']):<12}  {shown(row['kind']):<12} "
            f"{row['age_ticks']:>4} {settled:>7}  {source} / {shown(row['question'][:60])}{flags}"
        )
    return 0


def cmd_why(args: argparse.Namespace) -> int:
    from ..observe import entry_life

    with _open(args.memory) as ledger:
        life = entry_life(ledger, args.entry_id)
        story = _story_lines(ledger, args.entry_id)
    if life is None:
        print(f"{shown(args.entry_id)}: unknown to this store", file=sys.stderr)
        return 1
    if args.json:
        _print_json(life)
    else:
        print("\n".join(story))
        print(f"  status: {life['status']}", end="")
        if life.get("cause_of_death"):
            print(f" ({shown(str(life['cause_of_death']))})", end="")
        print()
    return 0


def _story_lines(ledger: Ledger, entry_id: str) -> list[str]:
    """``Ledger.obituary``'s lines, each note made safe on its own: a note whose text
    holds a line break (a settle detail) cannot add a forged line to the story."""
    from ..ledger import note_text

    story = ledger.obituary(entry_id).split("\n")
    notes = [note_text(n) for n in ledger.history(entry_id)]
    # With notes, the story is two or three header lines then one "  <note>" per note
    # (a note may span lines): the header is what comes before the notes' lines.
    noted = sum(len(n.split("\n")) for n in notes)
    if not notes or len(story) < noted + 2:
        return [shown(line) for line in story]
    head = story[: len(story) - noted]
    return [shown(line) for line in head] + [f"  {shown(n)}" for n in notes]


def cmd_audit(args: argparse.Namespace) -> int:
    from ..observe import audit_digest, filter_events, ledger_events

    with _open(args.memory) as ledger:
        events = filter_events(ledger_events(ledger), since=args.since, last=args.last)
        ledger.refresh()
        digest = audit_digest(events, ledger.store)
    if args.json:
        _print_json(digest)
        return 0
    window = digest["window"]
    print(
        f"{digest['events']} events, {shown(str(window['first_ts']))} .. "
        f"{shown(str(window['last_ts']))}"
    )
    d, s = digest["decides"], digest["settles"]
    print(f"decides: {d['total']} ({d['silent']} silent)")
    print(
        f"settles: {s['landed']} landed, {s['dropped']} dropped, "
        f"measured delta total {s['delta_total']:+g}"
    )
    e = digest["energy"]
    print(f"energy: +{e['credited']:.3f} credited, -{e['debited']:.3f} debited")
    print(f"ticks: {digest['ticks']}, merges: {digest['merges']}, expired: {digest['expired']}")
    print(f"culled: {digest['culled']['count']}")
    for label in ("top_gainers", "top_losers"):
        for row in digest[label]:
            question = shown(str(row["question"])[:60])
            print(f"  {label[4:-1]:<6} {row['net']:+.3f}  {shown(row['entry'])}  {question}")
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from ..observe import doctor, ledger_events

    with _open(args.memory) as ledger:
        findings = doctor(ledger, ledger_events(ledger))
    if args.json:
        _print_json({"findings": [f.as_dict() for f in findings]})
    elif not findings:
        print("clean: no degeneracy detected")
    else:
        for f in findings:
            print(f"{f.severity.upper()} [{f.code}]: {shown(f.summary)}")
            print(f"  evidence: {shown(str(f.evidence))}")
            print(f"  fix: {shown(f.fix)}")
    return 1 if any(f.severity == "error" for f in findings) else 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("top", help="living entries by balance")
    p.add_argument("memory")
    p.add_argument("--limit", type=non_negative_int, default=10, help="rows (10)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_top)

    p = sub.add_parser("why", help="one entry's life story, living, merged or dead")
    p.add_argument("memory")
    p.add_argument("entry_id")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_why)

    p = sub.add_parser("audit", help="a digest of the journal")
    p.add_argument("memory")
    p.add_argument("--since", help="ISO timestamp floor (string compare)")
    p.add_argument("--last", type=non_negative_int, help="only the last N events")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_audit)

    p = sub.add_parser("doctor", help="name the failure mode of a store that is not earning")
    p.add_argument("memory")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_doctor)
