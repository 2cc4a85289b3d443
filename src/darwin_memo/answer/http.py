"""One bounded HTTP exchange for the model and RPC clients: no redirects, a deadline, a cap.

The LLM clients (``darwin_memo.llm``) and ``EvmRpc`` (``darwin_memo.evm``) talk to
URLs that users type and servers we do not control, often with an API key in a
header. ``exchange`` is the one place that makes such a request safe to send:

- **No redirects.** A 3xx answer is refused (``WireError`` of kind ``"redirect"``
  naming the ``Location``), never followed: urllib would otherwise resend the API
  key header to whatever host the ``Location`` names and turn a 302/303 POST into
  a GET whose answer is accepted. Users set the final URL instead.
- **A deadline, not an idle timeout.** ``timeout`` bounds the whole exchange
  (connect, TLS, request, headers, body). A watchdog timer shuts the socket down
  when the time is up, so a server that trickles a byte at a time cannot stretch
  a 3 s timeout into minutes. (Name resolution happens before there is a socket
  to watch and is bounded by the system resolver, not by this deadline.)
- **A bounded body.** A body larger than ``max_bytes`` (default
  ``MAX_RESPONSE_BYTES``, 16 MiB) is refused: a declared ``Content-Length`` over
  the cap before reading anything, otherwise as soon as the count passes it.
- **JSON that cannot crash the parser.** ``parse_json`` refuses nesting deeper
  than ``MAX_JSON_DEPTH`` before ``json.loads`` recurses into it (see there).
- **One error type.** Every transport failure (refused connection, reset, a body
  cut short, a malformed status line, a non-HTTP URL) is a ``WireError`` with a
  one-line message and a ``kind`` the caller uses to decide on retries.
- **URLs shown without their keys.** Hosted providers put the API key in the URL
  itself (``https://mainnet.infura.io/v3/<key>``, ``.../v2/<key>``,
  ``?apikey=...``). ``redact_url`` is how every message shows a URL: scheme and
  host as given, userinfo and key-looking path segments and query values as
  ``[redacted]``; ``url_secrets`` lists those parts so a caller can scrub them from
  text a server sent back too.

Answers with any other status (2xx, 4xx, 5xx) come back as ``Answer``; judging
the status and decoding the body is the caller's job.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from email.message import Message
from typing import Any

__all__ = [
    "KINDS",
    "MAX_JSON_DEPTH",
    "MAX_RESPONSE_BYTES",
    "Answer",
    "WireError",
    "exchange",
    "parse_json",
    "redact_url",
    "url_secrets",
]

#: The largest response body accepted (bytes); model and RPC answers are far smaller.
MAX_RESPONSE_BYTES = 16 * 1024 * 1024
#: The deepest JSON nesting ``parse_json`` accepts; real answers nest a few levels.
MAX_JSON_DEPTH = 256
_CHUNK = 64 * 1024
#: Longer timeouts (``float("inf")`` included) are taken as this one: a week.
_LONGEST_WAIT = 7 * 24 * 3600.0
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_LOCATION_LIMIT = 200

#: ``WireError.kind`` values: what went wrong, so callers can decide on a retry.
#: ``connect``: no connection was made; ``dropped``: the connection broke or the
#: body was cut short; ``timeout``: the deadline passed; ``redirect``: a 3xx was
#: refused; ``oversize``: the body passed the cap; ``invalid``: not an HTTP answer
#: (or not an http(s) URL).
KINDS = ("connect", "dropped", "timeout", "redirect", "oversize", "invalid")


class WireError(Exception):
    """An HTTP exchange failed before a complete, acceptable answer arrived."""

    def __init__(self, kind: str, message: str, status: int = 0, location: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.status = status
        self.location = location


@dataclass(frozen=True)
class Answer:
    """A complete HTTP answer: status, headers and the whole (bounded) body."""

    status: int
    headers: Message
    body: bytes


class _Deadline:
    """A wall-clock deadline that shuts down the exchange's sockets when it passes."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds
        self.expired = False
        self._done = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def remaining(self) -> float:
        return self.end - time.monotonic()

    def passed(self) -> bool:
        return self.expired or self.remaining() <= 0

    def connect(
        self, address: tuple[str, int], timeout: Any = None, source_address: Any = None
    ) -> socket.socket:
        """``socket.create_connection`` whose socket the watchdog can shut down.

        The watchdog keeps a duplicate descriptor: shutting it down ends the TCP
        connection even after TLS has wrapped (and detached) the original object.
        """
        wait = max(0.001, min(self.remaining(), self.seconds))
        sock = socket.create_connection(address, wait, source_address)
        watched = sock.dup()
        with self._lock:
            self._sockets.append(watched)
            late = self.expired
        if late:
            _shutdown(watched)
        return sock

    def _expire(self) -> None:
        with self._lock:
            if self._done:
                return
            self.expired = True
            sockets = list(self._sockets)
        for sock in sockets:
            _shutdown(sock)

    def close(self) -> None:
        """Stop the watchdog and release the duplicate descriptors."""
        with self._lock:
            self._done = True
            sockets, self._sockets = self._sockets, []
        self._timer.cancel()
        for sock in sockets:
            sock.close()


def _shutdown(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # already closed by the other side
        sock.shutdown(socket.SHUT_RDWR)


class _WatchedHTTPConnection(http.client.HTTPConnection):
    def __init__(self, *args: Any, deadline: _Deadline, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._create_connection = deadline.connect


class _WatchedHTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, *args: Any, deadline: _Deadline, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._create_connection = deadline.connect


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self._deadline = deadline

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        def make(host: str, **kwargs: Any) -> _WatchedHTTPConnection:
            return _WatchedHTTPConnection(host, deadline=self._deadline, **kwargs)

        return self.do_open(make, req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    """HTTPS with the default verified context; only the connection class differs."""

    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self._deadline = deadline

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        def make(host: str, **kwargs: Any) -> _WatchedHTTPSConnection:
            return _WatchedHTTPSConnection(host, deadline=self._deadline, **kwargs)

        return self.do_open(make, req)


class _EveryStatus(urllib.request.HTTPErrorProcessor):
    """Hand every answer back as it is: no ``HTTPError``, and so no redirect handling.

    urllib follows redirects from inside its error processing; passing 3xx
    answers through unprocessed is what keeps it from ever following one.
    """

    def http_response(self, request: Any, response: Any) -> Any:
        return response

    https_response = http_response


def _printable(text: str, limit: int = _LOCATION_LIMIT) -> str:
    """``text`` on one line with control characters replaced, cut at ``limit``."""
    clean = "".join(ch if ch.isprintable() else "?" for ch in text)
    return clean if len(clean) <= limit else clean[: limit - 3] + "..."


#: What ``redact_url`` puts in place of a secret.
_REDACTED = "[redacted]"
#: Query parameters whose value is a credential whatever it looks like (``apikey=``,
#: ``access_token=``, ``x-api-key=``, ``password=``, ``sig=``, ...).
_SECRET_NAME = re.compile(r"key|token|secret|pass|auth|sig|cred|session|jwt", re.IGNORECASE)
#: Runs of the characters API keys are written with (hex, base64, base64url, a UUID's
#: hyphens, percent escapes); a run of 20 or more that ``_looks_secret`` is redacted.
#: In a path, ``/`` separates segments; in a query value it may be base64's.
_PATH_TOKEN = re.compile(r"(?:[A-Za-z0-9+=_~.-]|%[0-9A-Fa-f]{2})+")
_VALUE_TOKEN = re.compile(r"(?:[A-Za-z0-9+/=_~.-]|%[0-9A-Fa-f]{2})+")
_SECRET_MIN = 20
_SCRUB_MIN = 8
_HEX_RUN = re.compile(r"[0-9A-Fa-f]+")


def _looks_secret(token: str) -> bool:
    """Whether a run of key characters looks like a key: 20 or more of them, and
    all hex, or mixing letters with digits, or mixing upper and lower case.

    Plain words joined by ``-``/``_`` (``chat-completions``) never qualify; a
    long path segment that mixes letters and digits is redacted even when it is
    not a key (the message loses a little, the key never leaks).
    """
    if len(token) < _SECRET_MIN:
        return False
    bare = token.replace("-", "").replace("_", "")
    if len(bare) >= _SECRET_MIN and _HEX_RUN.fullmatch(bare.removeprefix("0x")):
        return True
    has_digit = any(ch.isdigit() for ch in token)
    has_alpha = any(ch.isalpha() for ch in token)
    has_upper = any(ch.isupper() for ch in token)
    has_lower = any(ch.islower() for ch in token)
    return (has_digit and has_alpha) or (has_upper and has_lower)


def _redact_text(part: str, found: list[str], token: re.Pattern[str] = _VALUE_TOKEN) -> str:
    """``part`` with each key-looking run of ``token`` replaced; the runs go to ``found``."""

    def swap(match: re.Match[str]) -> str:
        if not _looks_secret(match.group()):
            return match.group()
        found.append(match.group())
        return _REDACTED

    return token.sub(swap, part)


def _redact_query(query: str, found: list[str]) -> str:
    pieces = []
    for piece in query.split("&"):
        name, eq, value = piece.partition("=")
        if eq and value and _SECRET_NAME.search(name):
            found.append(value)
            pieces.append(f"{name}={_REDACTED}")
        elif eq:
            pieces.append(f"{_redact_text(name, found)}={_redact_text(value, found)}")
        else:
            pieces.append(_redact_text(piece, found))
    return "&".join(pieces)


def _redact(url: str) -> tuple[str, list[str]]:
    found: list[str] = []
    scheme, sep, rest = url.partition("://")
    if not sep:  # not a URL with an authority: every part is treated as a path
        return _redact_text(url, found, _PATH_TOKEN), found
    end = len(rest)
    for mark in "/?#":
        at = rest.find(mark)
        if at != -1:
            end = min(end, at)
    netloc, tail = rest[:end], rest[end:]
    userinfo, at_sign, host = netloc.rpartition("@")
    if at_sign:
        found.extend((userinfo, userinfo.partition(":")[2]))
        netloc = f"{_REDACTED}@{host}"
    tail, hash_sign, fragment = tail.partition("#")
    path, qmark, query = tail.partition("?")
    shown = f"{scheme}://{netloc}{_redact_text(path, found, _PATH_TOKEN)}"
    if qmark:
        shown += "?" + _redact_query(query, found)
    if hash_sign:
        shown += "#" + _redact_text(fragment, found)
    return shown, found


def redact_url(url: str) -> str:
    """``url`` as messages show it: keys replaced by ``[redacted]``.

    Scheme, host and port are shown as given; userinfo (``user:pass@``) is
    replaced whole; so is every query value whose name says it is a credential
    (``apikey``, ``key``, ``token``, ``secret``, ``password``, ``auth``, ``sig``,
    ...), and every run of 20 or more key characters in the path, the other query
    values and the fragment that is all hex or mixes letters with digits or case
    (Infura's 32 hex digits, Alchemy's base64url, a UUID). URLs without such parts
    (``http://127.0.0.1:11434``, ``https://api.openai.com/v1``) come back unchanged.
    """
    return _redact(url)[0]


def url_secrets(url: str) -> tuple[str, ...]:
    """The parts of ``url`` that ``redact_url`` hides, longest first, to scrub from
    text a server sent back (a provider may echo the key in an error). Parts under
    8 characters are left out: they would match ordinary text."""
    parts = {part for part in _redact(url)[1] if len(part) >= _SCRUB_MIN}
    return tuple(sorted(parts, key=len, reverse=True))


def _mib(count: int) -> str:
    return f"{count / (1024 * 1024):g} MiB" if count >= 1024 * 1024 else f"{count} bytes"


def _failure(exc: BaseException, deadline: _Deadline, *, answered: bool) -> WireError:
    """The ``WireError`` for an exception raised while talking to the server."""
    if deadline.passed() or isinstance(exc, TimeoutError):
        return _timed_out(deadline)
    if isinstance(exc, urllib.error.URLError):
        reason = exc.reason
        if isinstance(reason, TimeoutError):
            return _timed_out(deadline)
        if isinstance(reason, OSError):
            return WireError("connect", f"cannot connect: {reason}")
        return WireError("invalid", f"cannot send the request: {reason}")
    if isinstance(exc, http.client.IncompleteRead):
        return WireError("dropped", "the answer was cut short (the body ended early)")
    if isinstance(exc, OSError):  # resets, RemoteDisconnected, TLS failures
        what = "the connection broke mid-answer" if answered else "the connection failed"
        return WireError("dropped", f"{what}: {str(exc) or type(exc).__name__}")
    if isinstance(exc, http.client.HTTPException):
        return WireError("invalid", f"not a valid HTTP answer: {type(exc).__name__}")
    return WireError("invalid", f"cannot send the request: {exc}")


def _timed_out(deadline: _Deadline) -> WireError:
    return WireError(
        "timeout", f"timed out after {deadline.seconds:g}s (the whole answer must arrive by then)"
    )


def _read_body(response: http.client.HTTPResponse, deadline: _Deadline, max_bytes: int) -> bytes:
    """Read the body in chunks, checking the clock and the cap after each one."""
    declared = response.getheader("Content-Length")
    length = int(declared) if declared and declared.strip().isdigit() else None
    if length is not None and length > max_bytes:
        raise WireError(
            "oversize", f"the answer is {length} bytes, over the {_mib(max_bytes)} limit"
        )
    chunks: list[bytes] = []
    total = 0
    while True:
        if deadline.passed():
            raise _timed_out(deadline)
        chunk = response.read1(_CHUNK)
        if not chunk:
            break
        total += len(chunk)
        if total > max_bytes:
            raise WireError("oversize", f"the answer is over the {_mib(max_bytes)} limit")
        chunks.append(chunk)
    if deadline.expired:  # the watchdog's shutdown looks like an end of body
        raise _timed_out(deadline)
    if length is not None and total < length:
        raise WireError("dropped", f"the answer was cut short ({total} of {length} bytes arrived)")
    return b"".join(chunks)


def exchange(
    url: str,
    *,
    data: bytes | None = None,
    headers: Mapping[str, str] | None = None,
    timeout: float,
    max_bytes: int = MAX_RESPONSE_BYTES,
) -> Answer:
    """POST ``data`` to ``url`` (GET when ``None``) and return the whole answer.

    ``timeout`` (seconds) is a deadline for the entire exchange. Raises
    ``WireError`` for a refused redirect, a passed deadline, a body over
    ``max_bytes`` and every transport failure.
    """
    if not timeout > 0:  # also refuses NaN
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    scheme = urllib.parse.urlsplit(url).scheme.lower()
    if scheme not in ("http", "https"):
        raise WireError("invalid", f"not an http:// or https:// URL: {_printable(redact_url(url))}")
    method = "GET" if data is None else "POST"
    request = urllib.request.Request(url, data=data, headers=dict(headers or {}), method=method)
    deadline = _Deadline(min(timeout, _LONGEST_WAIT))
    opener = urllib.request.build_opener(
        _HTTPHandler(deadline), _HTTPSHandler(deadline), _EveryStatus()
    )
    try:
        try:
            response = opener.open(request, timeout=timeout)
        except (OSError, http.client.HTTPException, ValueError) as exc:
            raise _failure(exc, deadline, answered=False) from None
        with response:
            status = int(response.status)
            if 300 <= status < 400:
                location = response.getheader("Location")
                if location:
                    target = _printable(redact_url(urllib.parse.urljoin(url, location.strip())))
                    raise WireError(
                        "redirect",
                        f"redirected to {target}; refusing to follow",
                        status,
                        target,
                    )
                raise WireError("redirect", f"HTTP {status} without a Location header", status)
            try:
                body = _read_body(response, deadline, max_bytes)
            except WireError:
                raise
            except (OSError, http.client.HTTPException, ValueError) as exc:
                raise _failure(exc, deadline, answered=True) from None
            return Answer(status, response.headers, body)
    finally:
        deadline.close()


def parse_json(text: str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``json.loads(text)``, refusing nesting deeper than ``max_depth`` first.

    The standard decoder recurses once per ``[`` or ``{``. With Python's default
    recursion limit that ends in ``RecursionError``, but a process that raised the
    limit (py-evm and py_ecc raise it to 100,000 on import) overflows the C stack
    and crashes on a few hundred kilobytes of ``[``. So the brackets outside
    strings are counted before parsing. Raises ``ValueError`` (``json``'s own
    ``JSONDecodeError`` for text that is not JSON).
    """
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    if len(brackets) > max_depth:  # else it cannot nest that deep
        depth = 0
        for char in brackets:
            if char in "[{":
                depth += 1
                if depth > max_depth:
                    raise ValueError(f"JSON nested deeper than {max_depth} levels")
            else:
                depth -= 1
    return json.loads(text)
