"""A loopback HTTP proxy that records every model exchange as it went over the wire.

``recording_proxy(upstream)`` listens on a free 127.0.0.1 port and forwards each
request, byte for byte, to ``upstream`` (the llama.cpp server's root); the answer
goes back to the client unchanged. Every ``POST`` is kept as an ``Exchange``: the
path, the request body and the response body as JSON, the HTTP status and the
seconds the model took. Recording here, between the client and the server, means
the transcript holds what darwin-memo really sent and what the model really said,
not what a wrapper inside the process believed it sent.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["Exchange", "RecordingProxy", "recording_proxy"]


@dataclass
class Exchange:
    """One request to the model server and its answer, as they crossed the wire."""

    path: str
    request: Any
    status: int
    response: Any
    seconds: float

    def as_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "request": self.request,
            "status": self.status,
            "response": self.response,
            "seconds": round(self.seconds, 2),
        }


def _decode(raw: bytes) -> Any:
    """JSON when the bytes are JSON (they are, for this API), else the text itself."""
    text = raw.decode("utf-8", "replace")
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


class RecordingProxy:
    """Forwards to ``upstream``; ``exchanges`` lists every POST in the order answered."""

    def __init__(self, upstream: str, timeout: float = 600.0) -> None:
        self.upstream = upstream.rstrip("/")
        self.timeout = timeout
        self.exchanges: list[Exchange] = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                proxy._forward(self, None)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                proxy._forward(self, self.rfile.read(length))

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.root = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def _forward(self, handler: BaseHTTPRequestHandler, body: bytes | None) -> None:
        headers = {
            k: v for k, v in handler.headers.items() if k.lower() in ("content-type", "accept")
        }
        req = urllib.request.Request(
            self.upstream + handler.path,
            data=body,
            headers=headers,
            method="GET" if body is None else "POST",
        )
        started = time.perf_counter()
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                status, raw = int(resp.status), resp.read()
                kind = resp.headers.get("Content-Type", "application/json")
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
            kind = exc.headers.get("Content-Type", "application/json")
            exc.close()
        seconds = time.perf_counter() - started
        if body is not None:
            exchange = Exchange(handler.path, _decode(body), status, _decode(raw), seconds)
            with self._lock:
                self.exchanges.append(exchange)
        handler.send_response(status)
        handler.send_header("Content-Type", kind)
        handler.send_header("Content-Length", str(len(raw)))
        handler.end_headers()
        handler.wfile.write(raw)

    def start(self) -> RecordingProxy:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@contextmanager
def recording_proxy(upstream: str) -> Iterator[RecordingProxy]:
    """A started ``RecordingProxy`` in front of ``upstream`` (a server root, no ``/v1``)."""
    proxy = RecordingProxy(upstream).start()
    try:
        yield proxy
    finally:
        proxy.stop()
