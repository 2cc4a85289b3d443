"""Pieces every command shares: errors, argument types, input limits."""

from __future__ import annotations

import math
import sys
from argparse import ArgumentTypeError

from ..errors import DarwinMemoError

__all__ = [
    "DEMO_SEED",
    "MAX_QUERY_CHARS",
    "POISON_SOURCE",
    "CliError",
    "non_negative_int",
    "positive_float",
    "query_text",
    "read_text_arg",
]

MAX_QUERY_CHARS = 64 * 1024
#: The longest text any argument takes (an answer: 1 MiB characters). Stdin is read
#: up to what that many characters can take in UTF-8 and no further.
MAX_TEXT_CHARS = 1024 * 1024
DEMO_SEED = 11
POISON_SOURCE = "forum-post"


def _type_error(message: str) -> Exception:
    return ArgumentTypeError(message)


class CliError(DarwinMemoError):
    """A problem with what was asked of the command line."""

    code = "bad_input"


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise _type_error(f"expected a number, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise _type_error(f"must be a positive number, got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise _type_error(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise _type_error(f"must be >= 0, got {text!r}")
    return value


def query_text(text: str, what: str = "the query", limit: int = MAX_QUERY_CHARS) -> str:
    if "\x00" in text:
        raise CliError(f"{what} contains a NUL byte; pass plain text")
    if len(text) > limit:
        raise CliError(f"{what} is {len(text):,} characters long; the limit is {limit:,}")
    if any(0xDC80 <= ord(c) <= 0xDCFF for c in text):  # undecodable bytes in argv
        raise CliError(f"{what} is not valid UTF-8 text")
    return text


_stdin_used = False


def read_text_arg(value: str, what: str, limit: int = MAX_TEXT_CHARS) -> str:
    """An argument, or the whole of stdin when it is ``-`` (for text over 128 KiB).

    One trailing line break is dropped (``echo text |`` adds it), as a shell drops
    it from ``$(...)``; anything else is kept as sent. Stdin is read only up to the
    bytes ``limit`` characters can take (4 a character, and a CRLF): more is refused
    without reading the rest, so a 200 MB stream costs a few megabytes, not 400.
    """
    global _stdin_used
    if value != "-":
        return value
    if _stdin_used:
        raise CliError(f"{what}: stdin (-) can only be used for one argument")
    _stdin_used = True
    cap = 4 * limit + 2
    raw = sys.stdin.buffer.read(cap + 1)
    if len(raw) > cap:
        raise CliError(
            f"{what} read from stdin is over {cap:,} bytes; the limit is {limit:,} characters"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CliError(f"{what} read from stdin is not valid UTF-8 (byte {exc.start})") from None
    if text.endswith("\r\n"):
        return text[:-2]
    return text[:-1] if text.endswith("\n") else text
