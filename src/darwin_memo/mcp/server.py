"""``darwin-memo-mcp``: a store served to an agent as MCP tools over stdio.

``darwin-memo-mcp --memory PATH`` and ``darwin-memo mcp --memory PATH`` are the
same command. The server opens the store with ``Ledger.open`` (created if
missing; ``.json`` is the published file format, anything else SQLite) and
serves nine tools: ``memory_query``, ``memory_settle``, ``memory_abandon``,
``memory_add``, ``memory_tick``, ``memory_stats``, ``memory_obituary`` and
``memory_audit`` (see ``darwin_memo.mcp.tools`` and docs/mcp.md).

Every tool call is one transaction on the store, so several servers (one per
agent session) and CLI calls can share a store, and open tickets survive a
restart. Nothing is held back for a final save.

For code written against the published module, ``DEFAULT_MEMORY``,
``build_server(memory_path, resource_scale)`` and ``save_with_retry(ledger, path)`` are
here too, as thin layers over that design (see each one's docstring).

This module imports only the standard library. The MCP SDK (2.x, the ``mcp``
extra) is imported when the server starts, so without it the command prints one
line with the install command instead of a traceback. Stdout is the protocol
channel: everything else goes to stderr.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from ..aliases import keyword_aliases
from ..cli.common import positive_float
from ..retrieval.named import RETRIEVER_NAMES

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from mcp.server import MCPServer

    from ..ledger import Ledger

__all__ = [
    "DEFAULT_MEMORY",
    "INSTALL_HINT",
    "build_parser",
    "build_server",
    "default_memory_path",
    "main",
    "save_with_retry",
    "serve",
]

#: The store served when neither ``--memory`` nor ``$DARWIN_MEMO_PATH`` names one (the
#: published constant; ``default_memory_path`` also honours ``$DARWIN_MEMO_HOME``).
DEFAULT_MEMORY = "~/.darwin-memo/memory.json"

INSTALL_HINT = "pip install 'darwin-memo[mcp]'"
#: Import failures under these packages mean the ``mcp`` extra is missing or too old.
_SDK_PACKAGES = {"mcp", "mcp_types", "pydantic", "pydantic_core", "anyio"}


def default_memory_path() -> str | Path:
    """``$DARWIN_MEMO_PATH`` (a path, or a ``postgresql://`` URL kept as it is), else
    ``memory.json`` in ``$DARWIN_MEMO_HOME`` or ~/.darwin-memo."""
    explicit = os.environ.get("DARWIN_MEMO_PATH")
    if explicit:
        from ..backends import is_postgres_url

        return explicit if is_postgres_url(explicit) else Path(explicit).expanduser()
    home = os.environ.get("DARWIN_MEMO_HOME")
    base = Path(home).expanduser() if home else Path.home() / ".darwin-memo"
    return base / "memory.json"


def _store_ref(path: str | Path) -> str | Path:
    """A ``postgresql://`` URL as it is; anything else a path with ``~`` expanded."""
    from ..backends import is_postgres_url

    text = str(path)
    return text if is_postgres_url(text) else Path(text).expanduser()


@keyword_aliases(path="memory_path")
def build_server(
    memory_path: str | Path = DEFAULT_MEMORY, resource_scale: float = 1.0
) -> MCPServer[Any]:
    """The MCP server (not yet running) for the store at ``memory_path``: the published call.

    Opens the store with ``Ledger.open`` (created with its directory if missing) and
    returns ``mcp_tools.build_server`` of it; ``.run()`` serves it on stdio. Every tool
    call is its own transaction, so nothing needs saving afterwards; the ledger is
    the server's ``ledger`` attribute, for a host that wants to close it. Needs the
    ``mcp`` extra (an ``ImportError`` otherwise).
    """
    from ..ledger import Ledger
    from . import tools as mcp_tools

    ledger = Ledger.open(_store_ref(memory_path), resource_scale=resource_scale, create=True)
    server = mcp_tools.build_server(ledger)
    server.ledger = ledger  # type: ignore[attr-defined]
    return server


def save_with_retry(
    ledger: Ledger, path: str | Path, retries: int = 5, backoff: float = 0.05
) -> None:
    """``ledger.save(path)``, retried while another process holds the store's lock.

    The published server saved its in-memory ledger this way after each mutating
    call: up to ``retries`` attempts (at least one), sleeping ``backoff * attempt``
    seconds after each ``StoreLockedError``; the last one is raised. Our server does
    not need it (each call commits its own transaction, and the lock itself waits),
    so it is kept for hosts that drive an in-memory ``Ledger`` and save it to a file.
    """
    from ..errors import StoreLockedError

    attempts = max(1, retries)
    for attempt in range(1, attempts + 1):
        try:
            ledger.save(path)
            return
        except StoreLockedError:
            if attempt == attempts:
                raise
            time.sleep(backoff * attempt)


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
    parser.add_argument(
        "--retriever",
        choices=RETRIEVER_NAMES,
        help="rank with this retriever (lexical, hybrid or semantic), recorded in the store "
        "on first use; default: the store's recorded one, else lexical",
    )
    return parser


def _error(prog: str, message: str) -> int:
    print(f"{prog}: error: {' '.join(message.split())}", file=sys.stderr)
    return 1


def serve(
    memory: str | Path,
    resource_scale: float = 1.0,
    *,
    prog: str = "darwin-memo-mcp",
    retriever: str | None = None,
) -> int:
    """Open the store and serve it on stdio until the client hangs up; the exit code."""
    try:
        from . import tools as mcp_tools
    except ImportError as exc:
        if (exc.name or "").split(".")[0] not in _SDK_PACKAGES:
            raise
        return _error(prog, f"the MCP server needs the MCP Python SDK 2.x: {INSTALL_HINT} ({exc})")
    from ..errors import DarwinMemoError
    from ..ledger import Ledger

    try:
        ledger = Ledger.open(
            memory, resource_scale=resource_scale, create=True, retriever=retriever
        )
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
        from ..backends import is_postgres_url

        url = is_postgres_url(args.memory)  # a URL is not a path
        memory = args.memory if url else Path(args.memory).expanduser()
    return serve(memory, args.resource_scale, prog=prog, retriever=args.retriever)


if __name__ == "__main__":
    sys.exit(main())
