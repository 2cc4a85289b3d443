"""``darwin-memo ui``: a live, read-only dashboard of one store, served on loopback.

The standard library's ``ThreadingHTTPServer`` serves a small JSON API under
``/api/`` and a page made of three packaged files (``static/``: HTML, CSS and
JavaScript written by hand, charts drawn as SVG by the script; nothing from a
CDN). The page polls ``/api/version`` and refetches what it shows whenever
another process writes the store, so settlements appear without a reload.

Safe by construction:

* read-only: the server has no route that writes, answers every method but
  GET and HEAD with 405, and reads the store through ``data.StoreView``;
* loopback only: ``serve`` refuses any other interface unless the caller passes
  ``allow_remote=True`` (``--allow-remote``), and then warns; requests whose
  ``Host`` header is not an allowed name get 421, so a web page cannot reach the
  dashboard through DNS rebinding. The allowed names are the loopback names, plus
  ``allowed_hosts`` (``--allowed-host``) and, with ``allow_remote``, the address it
  listens on and this machine's host name: the check stays on when remote;
* a per-run token: every ``/api/`` request must carry the server's random
  ``token`` (header ``X-Darwin-Memo-Token``, or ``?token=``), else 403. The URL
  printed at start (``server.page_url``) carries it; the page keeps it for the tab
  (``sessionStorage``), drops it from the address bar, and sends it with each
  request. Other local users can reach the port but cannot read the store through
  it, whatever the store file's own mode;
* memory text is untrusted: JSON is served with ``<``, ``>`` and ``&`` escaped,
  the page inserts text with ``textContent`` only, and a strict
  Content-Security-Policy (``default-src 'self'``, no inline script or style)
  with ``X-Content-Type-Options: nosniff`` backs that up.

A ``postgresql://`` URL names a PostgreSQL store wherever a path does; the page
and every message show it without its password, and a server that cannot be
reached answers 503.

API (all GET, all JSON): ``/api/version``, ``/api/state`` (the spec's aggregate),
``/api/summary``, ``/api/series``, ``/api/entries``, ``/api/graveyard``,
``/api/entry/<id>``, ``/api/tickets``, ``/api/doctor``, ``/api/events``.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import os
import re
import secrets
import socket
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from ..errors import DarwinMemoError, StoreLockedError, StoreNotFound, StoreUnavailableError
from .data import DEFAULT_EVENTS, DoctorWorker, PageQuery, StoreView, store_ref

__all__ = [
    "CSP",
    "DEFAULT_PORT",
    "LOOPBACK",
    "TOKEN_HEADER",
    "DashboardServer",
    "UiError",
    "make_server",
    "serve",
    "serve_until_stopped",
    "state",
]

DEFAULT_PORT = 8787
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'"
)
#: A Host header: a name or IPv4 address, or a bracketed IPv6 address, and a port.
_HOST_HEADER = re.compile(r"(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9._-]+)(?::\d{1,5})?")
#: The names a Host header may always carry (as ``_host_name`` normalises them).
_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "[::1]"})
#: The request header (or the query parameter ``token``) carrying the per-run token.
TOKEN_HEADER = "X-Darwin-Memo-Token"
_WILDCARD = frozenset({"", "0.0.0.0", "::"})
_STATIC = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}
_BODY_DISCARD_LIMIT = 1 << 20
_DOCTOR_WAIT = 0.5


class UiError(DarwinMemoError):
    """The dashboard could not start (a refused interface, a port in use)."""


class _HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _json_bytes(obj: Any) -> bytes:
    # Escaping <, > and & keeps memory text inert even if the JSON is ever sniffed as HTML.
    text = json.dumps(obj, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return text.encode("utf-8")


def _static_files() -> dict[str, bytes]:
    root = resources.files("darwin_memo") / "dashboard" / "static"
    return {name: (root / name).read_bytes() for name in _STATIC}


# -- the application -------------------------------------------------------------


class Dashboard:
    """Routes to answers: everything the server does besides HTTP itself."""

    def __init__(self, path: str | Path, *, lock_timeout: float = 2.0) -> None:
        self.view = StoreView(path, lock_timeout=lock_timeout)
        self.doctor = DoctorWorker(path)
        self.static = _static_files()

    def close(self) -> None:
        self.doctor.close()
        self.view.close()

    def api(self, route: str, params: dict[str, str]) -> Any:
        if route.startswith("entry/"):
            entry_id = unquote(route[len("entry/") :])
            life = self.view.entry(entry_id)
            if life is None:
                raise _HttpError(404, f"{entry_id} is unknown to this store")
            return life
        handler = self._routes().get(route)
        if handler is None:
            raise _HttpError(404, f"no such API route: /api/{route}")
        return handler(params)

    def _routes(self) -> dict[str, Callable[[dict[str, str]], Any]]:
        return {
            "version": lambda p: {"version": self.view.version()},
            "state": lambda p: self.state(),
            "summary": lambda p: self.view.summary(),
            "series": lambda p: self.view.series(),
            "entries": lambda p: self.view.entries(_page(p)),
            "graveyard": lambda p: self.view.graveyard(_page(p, sort="balance")),
            "tickets": lambda p: self.view.tickets(),
            "doctor": lambda p: self.doctor_findings(_float(p, "wait", _DOCTOR_WAIT, 0, 10)),
            "events": lambda p: self.view.recent_events(
                since=p.get("since") or None,
                last=_int(p, "last", DEFAULT_EVENTS, 0, 100_000),
            ),
        }

    def doctor_findings(self, wait: float) -> dict[str, Any]:
        return self.doctor.findings(self.view.version(), wait=wait)

    def state(self, wait: float = _DOCTOR_WAIT) -> dict[str, Any]:
        """The spec's ``/api/state`` object, with its lists cut to a first page."""
        summary = self.view.summary()
        top = self.view.entries(PageQuery(limit=10))
        dead = self.view.graveyard(PageQuery(limit=10))
        tickets = self.view.tickets()["tickets"]
        return {
            "tick": summary["tick"],
            "upkeep": summary["upkeep"],
            "counts": summary["counts"],
            "total_energy": summary["total_energy"],
            "doctor": self.doctor_findings(wait)["findings"],
            "timeline": self.view.timeline(),
            "economics": summary["economics"],
            "entries": top["entries"],
            "graveyard": [
                {k: row[k] for k in ("id", "question", "cause", "uses", "sources")}
                for row in dead["entries"]
            ],
            "pending": [
                {k: t[k] for k in ("id", "query", "born_tick", "age_ticks")} for t in tickets
            ],
        }


def _int(params: dict[str, str], name: str, default: int, low: int, high: int) -> int:
    raw = params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise _HttpError(400, f"{name} must be a whole number, got {raw[:40]!r}") from None
    if not low <= value <= high:
        raise _HttpError(400, f"{name} must be between {low} and {high}, got {value}")
    return value


def _float(params: dict[str, str], name: str, default: float, low: float, high: float) -> float:
    raw = params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise _HttpError(400, f"{name} must be a number, got {raw[:40]!r}") from None
    if not low <= value <= high:
        raise _HttpError(400, f"{name} must be between {low:g} and {high:g}")
    return value


def _page(params: dict[str, str], sort: str | None = None) -> PageQuery:
    try:
        return PageQuery(
            q=params.get("q", ""),
            sort=sort or params.get("sort") or "balance",
            order=params.get("order") or "desc",
            offset=_int(params, "offset", 0, 0, 10**9),
            limit=_int(params, "limit", 50, 1, 10**6),
            kind=params.get("kind", "")[:64],
            flag=params.get("flag", ""),
        )
    except ValueError as exc:
        raise _HttpError(400, str(exc)) from None


# -- HTTP ------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    server: DashboardServer
    server_version = "darwin-memo-ui"
    sys_version = ""

    # Quiet by default: errors are reported by _fail, not by an access log.
    def log_message(self, format: str, *args: Any) -> None:
        return None

    def _headers(self, status: int, ctype: str, length: int, extra: dict[str, str]) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(length))
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("X-Frame-Options", "DENY")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cross-Origin-Opener-Policy", "same-origin")
        self.send_header("Cross-Origin-Resource-Policy", "same-origin")
        self.send_header("Cache-Control", "no-store")
        for key, value in extra.items():
            self.send_header(key, value)
        self.end_headers()

    def _send(
        self,
        status: int,
        body: bytes,
        ctype: str = "application/json; charset=utf-8",
        extra: dict[str, str] | None = None,
    ) -> None:
        self._headers(status, ctype, len(body), extra or {})
        if self.command != "HEAD":
            self.wfile.write(body)

    def _send_json(self, status: int, obj: Any, extra: dict[str, str] | None = None) -> None:
        self._send(status, _json_bytes(obj), extra=extra)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        # The stdlib's HTML error page carries none of our headers: answer in JSON instead.
        self.close_connection = True
        with contextlib.suppress(OSError):
            self._send_json(code, {"error": message or HTTPStatus(code).phrase})

    def _host_ok(self) -> bool:
        match = _HOST_HEADER.fullmatch(self.headers.get("Host", "").strip())
        return match is not None and _host_name(match.group(1)) in self.server.allowed_hosts

    def _token_ok(self, params: dict[str, str]) -> bool:
        sent = self.headers.get(TOKEN_HEADER) or params.get("token") or ""
        return hmac.compare_digest(sent.encode("utf-8", "replace"), self.server.token.encode())

    def do_GET(self) -> None:
        started, cpu = time.perf_counter(), time.thread_time()
        if not self._host_ok():
            message = "unexpected Host; the dashboard is loopback-only"
            if self.server.allow_remote:
                message = "unexpected Host; name it with --allowed-host to serve it"
            self._send_json(421, {"error": message})
            return
        url = urlsplit(self.path)
        path = url.path
        try:
            if path.startswith("/api/"):
                try:
                    fields = parse_qs(url.query, max_num_fields=32)
                except ValueError:
                    raise _HttpError(400, "too many query parameters") from None
                params = {k: v[-1] for k, v in fields.items()}
                if not self._token_ok(params):
                    raise _HttpError(
                        403,
                        "missing or wrong token: open the URL `darwin-memo ui` printed "
                        "(it carries ?token=...)",
                    )
                body = _json_bytes(self.server.app.api(path[len("/api/") :], params))
                timing = (
                    f"app;dur={(time.perf_counter() - started) * 1000:.1f}, "
                    f"cpu;dur={(time.thread_time() - cpu) * 1000:.1f}"
                )
                self._send(200, body, extra={"Server-Timing": timing})
                return
            name = "index.html" if path in ("/", "/index.html") else path.lstrip("/")
            content = self.server.app.static.get(name)
            if content is None:
                self._send(404, b"not found\n", "text/plain; charset=utf-8")
                return
            self._send(200, content, _STATIC[name])
        except _HttpError as exc:
            self._send_json(exc.status, {"error": str(exc)})
        except StoreLockedError:
            self._send_json(
                503, {"error": "store is locked by another darwin-memo process; retry in a moment"}
            )
        except StoreNotFound as exc:
            self._send_json(404, {"error": str(exc)})
        except StoreUnavailableError as exc:  # the message names the store without a password
            self._send_json(503, {"error": str(exc)})
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                self._send_json(
                    503, {"error": "store is busy with another darwin-memo process; retry"}
                )
            else:
                self._fail(exc)
        except Exception as exc:  # one line in the answer and on stderr, never a traceback
            self._fail(exc)

    def _fail(self, exc: BaseException) -> None:
        message = f"{type(exc).__name__}: {exc}"
        print(f"darwin-memo ui: {self.command} {self.path[:200]}: {message}", file=sys.stderr)
        self._send_json(500, {"error": message})

    def do_HEAD(self) -> None:
        self.do_GET()

    def _refuse(self) -> None:
        length = self.headers.get("Content-Length", "0")
        if length.isdigit() and 0 < int(length) <= _BODY_DISCARD_LIMIT:
            self.rfile.read(int(length))  # let the client finish sending before we answer
        self._send_json(
            405,
            {"error": "the dashboard is read-only: only GET and HEAD are served"},
            extra={"Allow": "GET, HEAD"},
        )

    do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_TRACE = do_CONNECT = _refuse


class DashboardServer(ThreadingHTTPServer):
    """A ``ThreadingHTTPServer`` bound to one store (see ``make_server`` and ``serve``).

    ``server_close`` (or leaving a ``with`` block) also stops the serving thread that
    ``serve`` started, so one call ends a dashboard however it was run.
    """

    daemon_threads = True
    allow_reuse_address = True
    #: The thread ``serve`` runs ``serve_forever`` in; None when the caller runs it.
    thread: threading.Thread | None = None

    def __init__(
        self,
        address: tuple[str, int],
        app: Dashboard,
        *,
        allow_remote: bool = False,
        allowed_hosts: Iterable[str] = (),
    ) -> None:
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.app = app
        self.allow_remote = allow_remote
        #: The per-run secret every ``/api/`` request must carry (see ``page_url``).
        self.token = secrets.token_urlsafe(24)
        #: The names a request's ``Host`` header may carry (normalised: lower case,
        #: IPv6 addresses bracketed).
        self.allowed_hosts = _allowed_names(address[0], allow_remote, allowed_hosts)
        super().__init__(address, _Handler)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    @property
    def url(self) -> str:
        host = self.server_address[0]
        name = host.decode() if isinstance(host, bytes) else str(host)
        shown = f"[{name}]" if ":" in name else name
        return f"http://{shown}:{self.port}"

    @property
    def page_url(self) -> str:
        """The dashboard's address with its token: what to open in a browser."""
        return f"{self.url}/?token={self.token}"

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError)):
            return  # the browser went away mid-answer
        print(f"darwin-memo ui: unexpected {type(exc).__name__}: {exc}", file=sys.stderr)

    def server_close(self) -> None:
        thread = self.thread
        if thread is not None and thread.is_alive() and thread is not threading.current_thread():
            self.shutdown()
            thread.join()
        super().server_close()
        self.app.close()


def _host_name(name: str) -> str:
    """A host name or address as the Host check compares it: lower case, an IPv6
    address in brackets."""
    name = name.strip().lower().rstrip(".")
    if ":" in name and not name.startswith("["):
        name = f"[{name}]"
    return name


def _allowed_names(bind: str, allow_remote: bool, extra: Iterable[str]) -> frozenset[str]:
    """Loopback names, the names given, and with ``allow_remote`` the address served on
    (unless a wildcard) and this machine's host name."""
    names = set(_LOOPBACK_NAMES)
    names.update(_host_name(n) for n in extra if n.strip())
    if allow_remote:
        if bind not in _WILDCARD:
            names.add(_host_name(bind))
        for name in (socket.gethostname(), socket.getfqdn()):
            if name:
                names.add(_host_name(name))
    return frozenset(names)


def make_server(
    memory: str | Path,
    port: int = DEFAULT_PORT,
    host: str = "127.0.0.1",
    *,
    allow_remote: bool = False,
    allowed_hosts: Iterable[str] = (),
    lock_timeout: float = 2.0,
) -> DashboardServer:
    """Open the store and bind the server (call ``serve_forever`` to run it).

    ``allowed_hosts`` adds names a request's ``Host`` header may carry (a name or
    address people reach a remote dashboard by). Raises ``StoreNotFound`` for a
    missing store and ``UiError`` for a refused interface or a port that cannot be
    bound.
    """
    if host not in LOOPBACK and not allow_remote:
        raise UiError(
            f"refusing to serve on {host}: the dashboard listens on loopback only; pass "
            "--allow-remote as well to expose it (plain HTTP: whoever reaches the port "
            "with the printed URL reads the store)"
        )
    path = store_ref(memory)
    if isinstance(path, Path) and not path.exists():
        raise StoreNotFound(f"{path}: store not found")
    app = Dashboard(path, lock_timeout=lock_timeout)
    try:
        return DashboardServer(
            (host, port), app, allow_remote=allow_remote, allowed_hosts=allowed_hosts
        )
    except OSError as exc:
        app.close()
        reason = exc.strerror or str(exc)
        raise UiError(
            f"cannot listen on {host}:{port}: {reason}; pick another port with --port "
            "(0 = any free port)"
        ) from None


def _can_open_browser() -> bool:
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def _warn_if_remote(host: str) -> None:
    if host not in LOOPBACK:
        print(
            f"warning: serving on {host}: anyone who can reach this port and holds the "
            "URL's token can read every entry in the store, over plain HTTP",
            file=sys.stderr,
        )


def serve(
    memory: str | Path,
    port: int = DEFAULT_PORT,
    host: str = "127.0.0.1",
    *,
    allow_remote: bool = False,
    allowed_hosts: Iterable[str] = (),
) -> DashboardServer:
    """Start the dashboard on a background thread and return the running server.

    The published form: it does not block. ``server.url`` / ``server.port`` say
    where it listens (``port=0`` picks a free one), ``server.token`` is the token
    every API request must carry and ``server.page_url`` the address to open;
    ``server.server_close()`` (or a ``with`` block) stops it and releases the store.
    Raises as ``make_server``. ``serve_until_stopped`` is the blocking form the CLI
    runs.
    """
    server = make_server(memory, port, host, allow_remote=allow_remote, allowed_hosts=allowed_hosts)
    _warn_if_remote(host)
    server.thread = threading.Thread(
        target=server.serve_forever,
        kwargs={"poll_interval": 0.25},
        name=f"darwin-memo ui {server.port}",
        daemon=True,
    )
    server.thread.start()
    return server


def serve_until_stopped(
    memory: str | Path,
    port: int = DEFAULT_PORT,
    host: str = "127.0.0.1",
    *,
    allow_remote: bool = False,
    allowed_hosts: Iterable[str] = (),
    open_browser: bool = False,
) -> int:
    """Serve the dashboard in this thread until interrupted; returns an exit code.

    Prints the page's address with its token (``server.page_url``) on stdout.
    """
    server = make_server(memory, port, host, allow_remote=allow_remote, allowed_hosts=allowed_hosts)
    _warn_if_remote(host)
    print(f"darwin-memo ui: {server.page_url}  (ctrl-c to stop)", flush=True)
    if open_browser and _can_open_browser():
        import webbrowser

        threading.Timer(0.3, webbrowser.open, args=(server.page_url,)).start()
    try:
        server.serve_forever(poll_interval=0.25)
    except KeyboardInterrupt:
        print("darwin-memo ui: stopped", file=sys.stderr)
    finally:
        server.server_close()
    return 0


def state(memory: str | Path) -> dict[str, Any]:
    """The ``/api/state`` object for a store, computed once (doctor included)."""
    path = store_ref(memory)
    if isinstance(path, Path) and not path.exists():
        raise StoreNotFound(f"{path}: store not found")
    app = Dashboard(path)
    try:
        return app.state(wait=600.0)
    finally:
        app.close()
