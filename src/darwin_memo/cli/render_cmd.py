"""``darwin-memo render``: the top-balance survivors, written into a memory file.

A thin adapter over ``darwin_memo.render``: it parses the flags, calls
``render_store`` and prints one summary line (plus one per topic file). Refusals
(a bad budget, damaged markers, an unreadable store) are ``RenderError``s, which
the command line prints as one ``error:`` line with exit code 1.
"""

from __future__ import annotations

import argparse
import sys

__all__ = ["register"]


def cmd_render(args: argparse.Namespace) -> int:
    from ..render import render_store

    summary = render_store(
        args.memory,
        args.out,
        budget=args.budget,
        split_dir=args.split_dir,
        max_lines=args.max_lines,
    )
    if summary["store"] == "missing":
        print(
            f"darwin-memo: warning: no store at {args.memory}; the block says there is "
            "nothing to show",
            file=sys.stderr,
        )
    note = "" if summary["changed"] else ", unchanged"
    print(
        f"rendered {summary['shown']} of {summary['living']} living entries "
        f"({summary['bytes']} bytes, {summary['lines']} lines, budget {summary['budget']}"
        f"{note}) -> {summary['out']}"
    )
    for topic in summary["topics"]:
        print(
            f"  {topic['kind']}: {topic['shown']} of {topic['entries']} entries "
            f"({topic['bytes']} bytes, budget {topic['budget']}) -> {topic['path']}"
        )
    if summary["probation"]:
        print(f"  ({summary['probation']} living entries on probation are not rendered)")
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "render",
        help="write the top-balance survivors into a marked block of MEMORY.md / AGENTS.md",
        description=(
            "Write the living entries with the highest balances into a marked block of a "
            "memory file (AGENTS.md, CLAUDE.md, Claude Code's MEMORY.md). Text outside the "
            "block is never changed; rendering again replaces the block in place. The whole "
            "file stays within the byte budget and the line cap."
        ),
    )
    p.add_argument("memory", help="store file (.json or SQLite); read only")
    p.add_argument(
        "-o", "--out", default="MEMORY.md", help="memory file holding the block (MEMORY.md)"
    )
    p.add_argument(
        "--budget",
        default="25kb",
        help="bytes the whole file may take: 4096, 25kb, 1mb (25kb, Claude Code's limit)",
    )
    p.add_argument(
        "--max-lines",
        type=int,
        default=200,
        help="lines the whole file may take (200, Claude Code's limit)",
    )
    p.add_argument(
        "--split-dir",
        metavar="DIR",
        help="write one topic file per entry kind into DIR and an index into --out",
    )
    p.set_defaults(func=cmd_render)
