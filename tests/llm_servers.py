"""A loopback model server scripted by a Python function, speaking three real APIs.

Tests that drive a model through the real HTTP wire (the encoder, the query
protocol, the CLI in a subprocess) start one of these. It answers OpenAI chat
completions (``POST /v1/chat/completions``; ``server.url`` is that API root),
Ollama (``GET /api/tags``, ``POST /api/chat``; ``server.root``) and Anthropic
Messages (``POST /v1/messages``; ``server.root``). ``respond(prompt, system)``
returns the reply text, or an ``(status, body)`` pair for an HTTP error. Given
``embed(text) -> vector``, it also answers Ollama embeddings (``POST /api/embed``).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["ChatServer", "chat_server"]

Respond = Callable[[str, str], "str | tuple[int, Any]"]
Embed = Callable[[str], "list[float]"]


class ChatServer:
    def __init__(self, respond: Respond, embed: Embed | None = None) -> None:
        self.respond = respond
        self.embed = embed
        self.prompts: list[str] = []
        self.paths: list[str] = []
        self.bodies: list[Any] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                if self.path == "/api/tags":
                    self._send(200, {"models": [{"name": "scripted:latest", "digest": "d1"}]})
                else:
                    self._send(404, {"error": f"no route {self.path}"})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if self.path == "/api/embed" and server.embed is not None:
                    with server.lock:
                        server.paths.append(self.path)
                        server.bodies.append(body)
                    texts = body.get("input")
                    texts = [texts] if isinstance(texts, str) else list(texts or [])
                    self._send(200, {"embeddings": [server.embed(t) for t in texts]})
                    return
                if self.path not in ("/v1/chat/completions", "/api/chat", "/v1/messages"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                messages = body.get("messages", [])
                system = body.get("system") or next(
                    (m["content"] for m in messages if m["role"] == "system"), ""
                )
                prompt = next((m["content"] for m in messages if m["role"] == "user"), "")
                with server.lock:
                    server.prompts.append(prompt)
                    server.paths.append(self.path)
                    server.bodies.append(body)
                reply = server.respond(prompt, system)
                if isinstance(reply, tuple):
                    self._send(reply[0], reply[1])
                    return
                if self.path == "/api/chat":
                    self._send(
                        200,
                        {
                            "model": body.get("model"),
                            "done": True,
                            "message": {"role": "assistant", "content": reply},
                        },
                    )
                    return
                if self.path == "/v1/messages":
                    self._send(
                        200,
                        {
                            "type": "message",
                            "role": "assistant",
                            "content": [{"type": "text", "text": reply}],
                        },
                    )
                    return
                self._send(
                    200,
                    {
                        "id": "chatcmpl-test",
                        "object": "chat.completion",
                        "model": body.get("model"),
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": reply},
                                "finish_reason": "stop",
                            }
                        ],
                    },
                )

            def _send(self, status: int, payload: Any) -> None:
                raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.root = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.url = self.root + "/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def start(self) -> ChatServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@contextmanager
def chat_server(respond: Respond, embed: Embed | None = None) -> Iterator[ChatServer]:
    server = ChatServer(respond, embed).start()
    try:
        yield server
    finally:
        server.stop()
