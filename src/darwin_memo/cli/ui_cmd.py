"""``darwin-memo ui``: serve a live, read-only dashboard of a store on loopback.

The server (``darwin_memo.ui``) and its HTTP stack are imported only when this
command runs, so the rest of the command line starts without them.
"""

from __future__ import annotations

import argparse

__all__ = ["DEFAULT_PORT", "register"]

#: Same as ``darwin_memo.ui.DEFAULT_PORT`` (kept here so parsing does not import the server).
DEFAULT_PORT = 8787


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is between 0 and 65535, got {value}")
    return value


def _run(args: argparse.Namespace) -> int:
    from ..ui import serve_until_stopped

    return serve_until_stopped(
        args.memory,
        port=args.port,
        host=args.host,
        allow_remote=args.allow_remote,
        open_browser=not args.no_open,
    )


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "ui",
        help="a live read-only dashboard of a store in your browser (loopback only)",
        description=(
            "Serve a read-only dashboard of MEMORY at http://127.0.0.1:PORT. It shows who "
            "is alive, who died of what, where energy comes from and goes, and updates as "
            "other processes write the store. It has no authentication, so it listens on "
            "loopback only unless --host is given together with --allow-remote."
        ),
    )
    p.add_argument(
        "memory", help="the store (.db SQLite, .json, or a postgresql:// URL; see docs/postgres.md)"
    )
    p.add_argument(
        "--port", type=_port, default=DEFAULT_PORT, help=f"port ({DEFAULT_PORT}; 0 = any free port)"
    )
    p.add_argument("--host", default="127.0.0.1", help="interface to listen on (127.0.0.1)")
    p.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a --host other than loopback (anyone who can reach it reads the store)",
    )
    p.add_argument("--no-open", action="store_true", help="do not open a browser")
    p.set_defaults(func=_run)
