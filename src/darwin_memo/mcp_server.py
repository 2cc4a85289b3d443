"""``darwin-memo-mcp``: a store served to an agent as MCP tools over stdio.

``darwin-memo-mcp --memory PATH`` and ``darwin-memo mcp --memory PATH`` are the
same command. The server opens the store with ``Ledger.open`` (created if
missing; ``.json`` is the published file format, anything else SQLite) and
serves eight tools: ``memory_query``, ``memory_settle``, ``memory_abandon``,
``memory_add``, ``memory_tick``, ``memory_stats``, ``memory_obituary`` and
``memory_audit`` (see ``darwin_memo.mcp_tools`` and docs/mcp.md).

Every tool call is one transaction on the store, so several servers (one per
agent session) and CLI calls can share a store, and open tickets survive a
restart. Nothing is held back for a final save.

This module imports only the standard library. The MCP SDK (2.x, the ``mcp``
extra) is imported when the server starts, so without it the command prints one
line with the install command instead of a traceback. Stdout is the protocol
channel: everything else goes to stderr.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from .cli.common import positive_float

__all__ = ["INSTALL_HINT", "build_parser", "default_memory_path", "main", "serve"]

INSTALL_HINT = "pip install 'darwin-memo[mcp]'"
#: Import failures under these packages mean the ``mcp`` extra is missing or too old.
_SDK_PACKAGES = {"mcp", "mcp_types", "pydantic", "pydantic_core", "anyio"}


def default_memory_path() -> str | Path:
    """``$DARWIN_MEMO_PATH`` (a path, or a ``postgresql://`` URL kept as it is), else
    ``memory.json`` in ``$DARWIN_MEMO_HOME`` or ~/.darwin-memo."""
    explicit = os.environ.get("DARWIN_MEMO_PATH")
    if explicit:
        from .backends import is_postgres_url

        return explicit if is_postgres_url(explicit) else Path(explicit).expanduser()
    home = os.environ.get("DARWIN_MEMO_HOME")
    base = Path(home).expanduser() if home else Path.home() / ".darwin-memo"
    return base / "memory.json"


def build_parser(prog: str = "darwin-memo-mcp") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Serve a darwin-memo store to an agent as MCP tools over stdio.",
        epilog=f"Needs the mcp extra: {INSTALL_HINT}",
    )
    parser.add_argument(
        "--memory",
        metavar="PATH",
        help="the store (.json = published format, otherwise SQLite), created if missing; "
        "default $DARWIN_MEMO_PATH, else ~/.darwin-memo/memory.json",
    )
    parser.add_argument(
        "--resource-scale",
        type=positive_float,
        default=1.0,
        metavar="S",
        help="the size of a typical measured delta; credit is gain * tanh(delta / S) (1.0)",
    )
    return parser


def _error(prog: str, message: str) -> int:
    print(f"{prog}: error: {' '.join(message.split())}", file=sys.stderr)
    return 1


def serve(memory: str | Path, resource_scale: float = 1.0, *, prog: str = "darwin-memo-mcp") -> int:
    """Open the store and serve it on stdio until the client hangs up; the exit code."""
    try:
        from . import mcp_tools
    except ImportError as exc:
        if (exc.name or "").split(".")[0] not in _SDK_PACKAGES:
            raise
        return _error(prog, f"the MCP server needs the MCP Python SDK 2.x: {INSTALL_HINT} ({exc})")
    from .errors import DarwinMemoError
    from .ledger import Ledger

    try:
        ledger = Ledger.open(memory, resource_scale=resource_scale, create=True)
    except DarwinMemoError as exc:
        return _error(prog, str(exc))
    except OSError as exc:
        return _error(prog, f"cannot open {memory}: {exc.strerror or exc}")
    try:
        with ledger:
            mcp_tools.build_server(ledger).run()
    except KeyboardInterrupt:
        return 130
    return 0


def main(argv: Sequence[str] | None = None, prog: str = "darwin-memo-mcp") -> int:
    args = build_parser(prog).parse_args(argv)
    memory: str | Path = default_memory_path()
    if args.memory:
        from .backends import is_postgres_url

        url = is_postgres_url(args.memory)  # a URL is not a path
        memory = args.memory if url else Path(args.memory).expanduser()
    return serve(memory, args.resource_scale, prog=prog)


if __name__ == "__main__":
    sys.exit(main())
