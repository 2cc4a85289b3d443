"""``darwin-memo ui``: serve a live, read-only dashboard of a store on loopback.

The server (``darwin_memo.ui``) and its HTTP stack are imported only when this
command runs, so the rest of the command line starts without them.
"""

from __future__ import annotations

import argparse
import re

__all__ = ["DEFAULT_PORT", "register"]

#: Same as ``darwin_memo.ui.DEFAULT_PORT`` (kept here so parsing does not import the server).
DEFAULT_PORT = 8787
_HOST_NAME = re.compile(r"\[?[A-Za-z0-9._:-]+\]?")


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is between 0 and 65535, got {value}")
    return value


def _hosts(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    for name in names:
        if not _HOST_NAME.fullmatch(name):
            raise argparse.ArgumentTypeError(f"not a host name or address: {name!r}")
    if not names:
        raise argparse.ArgumentTypeError("name at least one host")
    return names


def _run(args: argparse.Namespace) -> int:
    from ..dashboard.server import serve_until_stopped

    allowed = [name for group in args.allowed_host or [] for name in group]
    return serve_until_stopped(
        args.memory,
        port=args.port,
        host=args.host,
        allow_remote=args.allow_remote,
        allowed_hosts=allowed,
        open_browser=not args.no_open,
    )


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "ui",
        help="a live read-only dashboard of a store in your browser (loopback only)",
        description=(
            "Serve a read-only dashboard of MEMORY at http://127.0.0.1:PORT. It shows who "
            "is alive, who died of what, where energy comes from and goes, and updates as "
            "other processes write the store. It listens on loopback only unless --host is "
            "given together with --allow-remote. The URL it prints carries a per-run "
            "token that every API request needs; requests naming any other Host than "
            "loopback, --allowed-host names and (with --allow-remote) the --host address "
            "and this machine's name are refused."
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
        help="allow a --host other than loopback (whoever has the printed URL reads the store)",
    )
    p.add_argument(
        "--allowed-host",
        action="append",
        type=_hosts,
        metavar="HOST[,HOST]",
        help="also accept requests naming HOST (a name or address the dashboard is reached by)",
    )
    p.add_argument("--no-open", action="store_true", help="do not open a browser")
    p.set_defaults(func=_run)
