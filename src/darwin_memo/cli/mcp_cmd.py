"""``darwin-memo mcp``: the MCP server, the same command as ``darwin-memo-mcp``.

The flags are parsed by ``darwin_memo.mcp_server`` (one parser for both
spellings), which is imported only when this command runs, so the rest of the
command line never loads the server or the MCP SDK.
"""

from __future__ import annotations

import argparse

__all__ = ["register"]


def _run(args: argparse.Namespace) -> int:
    from ..mcp import server as mcp_server

    return mcp_server.main(args.rest, prog="darwin-memo mcp")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    # No prefix characters: every argument, --help included, goes to the server's parser.
    p = sub.add_parser(
        "mcp",
        help="serve a store to an agent as MCP tools over stdio (--memory PATH)",
        add_help=False,
        prefix_chars="\x00",
    )
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p.set_defaults(func=_run)
