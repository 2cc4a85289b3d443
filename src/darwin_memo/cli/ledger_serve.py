"""``darwin-memo ledger STORE serve``: the one-shot ledger command, kept running.

A host that calls the ledger on every recall (the OpenClaw plugin) pays for a new
Python interpreter each time, which is most of a one-shot call's cost. ``serve``
pays it once. It reads requests from stdin, one line each: the JSON array of the
arguments that would follow ``darwin-memo ledger STORE``, such as
``["decide", "Is it safe to delete the logs?", "--half-life", "20"]``. For each it
writes one line on stdout, flushed: the one JSON object the one-shot command would
print, errors included. Replies come in the order of the requests. End of input
ends the process.

Each request is its own transaction, as in the one-shot command: it sees what
other processes wrote before it, and it commits before its reply is written. So
an acknowledged request is on disk, and one-shot commands, MCP servers and other
``serve`` processes can share the store meanwhile.

A line that is not a JSON array of strings is answered with a ``bad_input`` error,
and the process carries on. Blank lines are skipped. ``-`` (read the text from
stdin) is refused, since stdin carries the requests: put the text in the request.

To get there, the process opens the store once, on the first request that finds
it, and keeps it open, as the MCP server does: the library runs every operation on
an open ledger as one transaction that first reads what other processes wrote
since the last one. What ``serve`` saves is the interpreter start, the imports and
the opening of the store. After a request that fails for any reason but its own arguments, and when
the path comes to name another file, the store is opened afresh.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import sys
from typing import Any

from .common import CliError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

    from ..ledger import Ledger

__all__ = ["MAX_REQUEST_BYTES", "parse_request", "serve"]

#: The longest request line: a 1 MiB-character answer, every character escaped.
MAX_REQUEST_BYTES = 16 * 1024 * 1024


def parse_request(line: bytes) -> list[str]:
    """The arguments one request line carries, or CliError saying what is wrong."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CliError(f"the request is not valid UTF-8 (byte {exc.start})") from None
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise CliError(f"the request is not JSON ({exc}); send a JSON array of strings") from None
    if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
        raise CliError(
            'a request is a JSON array of strings, the arguments after "darwin-memo ledger '
            'STORE", for example ["stats"]'
        )
    if not value:
        raise CliError('the request is empty; name an operation, for example ["stats"]')
    if "serve" in value:
        raise CliError("serve cannot be requested from inside serve")
    for arg in value:
        if arg == "--":
            break
        # argparse would print the help on stdout (the reply stream) and exit.
        if arg == "-h" or (arg.startswith("--h") and "--help".startswith(arg.split("=")[0])):
            raise CliError("help is not available inside serve; run `darwin-memo ledger --help`")
    return value


def _read_line(stream: Any) -> tuple[bytes, bool] | None:
    """The next line without its line break and whether it was cut; None at the end.

    A line over MAX_REQUEST_BYTES is read to its end and thrown away (cut: True).
    """
    line: bytes = stream.readline(MAX_REQUEST_BYTES + 1)
    if not line:
        return None
    if len(line) > MAX_REQUEST_BYTES and not line.endswith(b"\n"):
        while True:  # skip the rest of the oversized line
            more = stream.readline(1024 * 1024)
            if not more or more.endswith(b"\n"):
                break
        return b"", True
    return line.rstrip(b"\r\n"), False


class _Holder:
    """The ledger ``serve`` keeps open between requests (lent to each one)."""

    def __init__(self, store: str) -> None:
        self.store = store
        self.ledger: Ledger | None = None
        self.identity: tuple[int, int] | None = None

    def _file_identity(self) -> tuple[int, int] | None:
        from ..backends import is_postgres_url

        if is_postgres_url(self.store):
            return None
        try:
            st = os.stat(self.store)
        except OSError:
            return (-1, -1)  # gone: reopen (and find it missing) on the next request
        return (st.st_dev, st.st_ino)

    def __call__(self, args: argparse.Namespace) -> Ledger | None:
        """The open ledger at the request's scale, or None while the store is missing."""
        from ..errors import StoreNotFound
        from ..ledger import Ledger

        if self.ledger is not None and self._file_identity() != self.identity:
            self.drop()  # replaced or removed under us: a one-shot would open the new one
        if self.ledger is None:
            identity = self._file_identity()
            try:
                self.ledger = Ledger.open(
                    self.store,
                    resource_scale=args.scale,
                    create=False,
                    retriever=getattr(args, "retriever", None),
                )
            except StoreNotFound:
                return None  # run_op answers as a one-shot does (and `add` creates it)
            self.identity = identity
        self.ledger.resource_scale = args.scale
        return self.ledger

    def drop(self) -> None:
        if self.ledger is not None:
            ledger, self.ledger = self.ledger, None
            with contextlib.suppress(Exception):
                ledger.close()


def serve(store: str, scale: float, retriever: str | None = None) -> int:
    """Answer requests on stdin until it ends; returns the exit code (0)."""
    from .ledger_cmd import _answer, _emit

    # The one-shot path turns the cyclic collector off for its short life; a
    # process that stays must collect its garbage.
    gc.enable()
    head = [store] if scale == 1.0 else [store, "--scale", repr(scale)]
    if retriever is not None:
        head += ["--retriever", retriever]
    stream = sys.stdin.buffer
    holder = _Holder(store)
    try:
        while True:
            read = _read_line(stream)
            if read is None:
                return 0
            line, cut = read
            if not cut and not line.strip():
                continue
            if cut:
                reply: dict[str, Any] = {
                    "error": f"the request is over {MAX_REQUEST_BYTES:,} bytes",
                    "code": "bad_input",
                }
            else:
                try:
                    request = parse_request(line)
                except CliError as exc:
                    reply = {"error": str(exc), "code": exc.code}
                else:
                    try:
                        reply, code = _answer([*head, *request], stdin_ok=False, held=holder)
                    except SystemExit:  # argparse exiting on something parse_request let by
                        reply, code = {"error": "the request ended the parser", "code": "usage"}, 2
                    if code != 0 and "error" in reply:
                        holder.drop()  # whatever went wrong, the next request starts clean
            _emit(reply)
    except KeyboardInterrupt:
        return 130
    finally:
        holder.drop()
