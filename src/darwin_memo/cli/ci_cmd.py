"""``darwin-memo settle-ci``: settle the tickets a pull request names from its CI results.

A thin adapter over ``darwin_memo.ci.settle_ci``. It prints the result as one
JSON object on stdout and exits 0. When the results are not a measurement (a
collection error, a missing or broken junit file) it abstains: it prints
``{"abstained": true, "reason": ...}``, says ``abstained, store untouched`` on
stderr and exits 3, having written nothing. Bad options exit 1 with one
``error:`` line.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

from .common import non_negative_int, positive_float

__all__ = ["register"]


def _count(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number of passing tests, got {text!r}"
        ) from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text!r}")
    return value


def _positive_int(text: str) -> int:
    value = non_negative_int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text!r}")
    return value


def cmd_settle_ci(args: argparse.Namespace) -> int:
    from ..answer.fencing import for_json, for_terminal
    from ..ci import EXIT_ABSTAINED, InfraFailure, settle_ci

    pr_body = args.pr_body if args.pr_body is not None else os.environ.get("PR_BODY", "")
    try:
        result = settle_ci(
            args.memory,
            base_xml=args.base_xml,
            head_xml=args.head_xml,
            passes_before=args.passes_before,
            passes_after=args.passes_after,
            pr_body=pr_body,
            opened_since=args.opened_since,
            detail=args.detail,
            scale=args.scale,
            state=args.state,
            window=args.window,
            flip_threshold=args.flip_threshold,
            expire_after=args.expire_after,
        )
    except InfraFailure as exc:
        print(for_json(json.dumps({"abstained": True, "reason": str(exc)}, ensure_ascii=False)))
        print(f"abstained, store untouched: {for_terminal(str(exc))}", file=sys.stderr)
        return EXIT_ABSTAINED
    if result.get("store") == "missing":
        print(
            f"darwin-memo: warning: no store at {args.memory}; nothing was created and "
            "no ticket was settled",
            file=sys.stderr,
        )
    print(for_json(json.dumps(result, ensure_ascii=False, indent=2)))
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "settle-ci",
        help="settle a pull request's tickets from CI results (junit diff or pass counts)",
        description=(
            "Settle every 'darwin-memo-ticket: <id>' named in the pull request description "
            "with the measured change in passing tests between the base and the head run. "
            "Prints one JSON object; exit 0 when settled, 3 when it abstained (the results "
            "were not a measurement; nothing was written), 1 on bad options."
        ),
    )
    p.add_argument("memory", help="lesson store to settle (.json or SQLite)")
    p.add_argument("--base-xml", metavar="FILE", help="junit XML of the base commit's run")
    p.add_argument("--head-xml", metavar="FILE", help="junit XML of the head commit's run")
    p.add_argument(
        "--passes-before", type=_count, metavar="N", help="passing tests on the base commit"
    )
    p.add_argument(
        "--passes-after", type=_count, metavar="N", help="passing tests on the head commit"
    )
    p.add_argument(
        "--pr-body",
        metavar="TEXT",
        help="text naming the tickets (default: the PR_BODY environment variable)",
    )
    p.add_argument(
        "--opened-since",
        metavar="BASE_STORE",
        help="the store as of the base commit: tickets already pending there are refused",
    )
    p.add_argument("--detail", default="", help="what was measured (default: a summary)")
    p.add_argument(
        "--scale", type=positive_float, default=1.0, help="resource scale of a delta (1.0)"
    )
    p.add_argument(
        "--state",
        metavar="FILE",
        help="flaky-test history (default: flaky.json next to the store)",
    )
    p.add_argument(
        "--window", type=_positive_int, default=10, help="observations kept per test (10)"
    )
    p.add_argument(
        "--flip-threshold",
        type=_positive_int,
        default=3,
        help="flips within the window that quarantine a test (3)",
    )
    p.add_argument(
        "--expire-after",
        type=non_negative_int,
        default=50,
        help="ticket expiry in ticks for the tick that follows (50)",
    )
    p.set_defaults(func=cmd_settle_ci)
