"""The ``darwin-memo`` command line: thin adapters over the library.

One module per command group: ``core`` (demo, encode, query, stats),
``ledger_cmd`` (ledger operations, import, migrate) and ``views`` (top, why,
audit, doctor). Library errors become one ``error: ...`` line on stderr with
exit code 1 (``ledger`` operations print a JSON error object on stdout instead);
usage errors exit 2. Nothing prints a traceback unless ``DARWIN_MEMO_DEBUG=1``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from .. import __version__
from ..errors import DarwinMemoError
from .common import CliError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

__all__ = ["CliError", "build_parser", "main", "run"]


def build_parser() -> argparse.ArgumentParser:
    # Imported here, not at the top: a one-shot `darwin-memo ledger ...` (what agents and
    # the OpenClaw plugin run on every recall) loads only the ledger's modules.
    import argparse

    from . import ci_cmd, core, ledger_cmd, mcp_cmd, render_cmd, ui_cmd, views

    parser = argparse.ArgumentParser(
        prog="darwin-memo",
        description="Memory for LLM agents that dies unless it earns its keep.",
    )
    parser.add_argument("--version", action="version", version=f"darwin-memo {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    core.register(sub)
    ledger_cmd.register(sub)
    views.register(sub)
    mcp_cmd.register(sub)
    render_cmd.register(sub)
    ci_cmd.register(sub)
    ui_cmd.register(sub)
    from . import distill_cmd

    distill_cmd.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["ledger"]:
        from .ledger_cmd import main_ledger

        try:
            return main_ledger(args_list[1:])
        except BrokenPipeError:  # the reader closed stdout: nobody is left to tell
            _quiet_stdout()
            return 1
    parser = build_parser()
    args = parser.parse_args(args_list)
    try:
        result: int = args.func(args)
        return result
    except DarwinMemoError as exc:  # (a message may quote a store's text: made safe)
        from ..answer.fencing import for_terminal

        print(f"error: {for_terminal(str(exc))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        _quiet_stdout()
        return 1
    except Exception as exc:  # a bug: one line, not a traceback, unless debugging
        if os.environ.get("DARWIN_MEMO_DEBUG"):
            raise
        from ..answer.fencing import for_terminal

        print(
            f"error: unexpected {type(exc).__name__}: {for_terminal(str(exc))} "
            "(set DARWIN_MEMO_DEBUG=1 for a traceback, and please report it)",
            file=sys.stderr,
        )
        return 1


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so flushing it at exit cannot raise again."""
    if sys.stdout is None:  # started with stdout closed: nothing to quiet
        return
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # not a real file (a test's StringIO): nothing to quiet
        pass


def run() -> None:
    """The ``darwin-memo`` command (and ``python -m darwin_memo``): ``main`` as a process.

    Output is flushed before the interpreter exits, so a reader that went away (a closed
    pipe) ends the command with exit code 1 and no traceback, as it does inside ``main``.
    """
    # Set before anything imports numpy (a user's own setting stands): a command does at
    # most a few matrix-vector products, which gain nothing from more threads, while
    # OpenBLAS's pool would spin a second core for about 0.1 s after numpy loads (30 ms
    # of a one-shot decide on 2 cores).
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    code = main(sys.argv[1:])
    try:
        if sys.stdout is not None:  # None: started with stdout closed
            sys.stdout.flush()
    except (OSError, ValueError):  # a closed pipe: the reader went away
        _quiet_stdout()
        code = code or 1
    raise SystemExit(code)
