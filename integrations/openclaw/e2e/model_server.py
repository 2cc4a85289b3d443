"""A scripted model on loopback, speaking the OpenAI chat-completions API with tool calls.

    python3 model_server.py PORT_FILE LOG_FILE

It listens on 127.0.0.1 (a free port, written to PORT_FILE once it is listening) and
serves ``POST /v1/chat/completions`` (streamed as server-sent events when the
request asks for ``stream``, else one JSON body) and ``GET /v1/models``. Every
request body is appended to LOG_FILE as one JSON line, so the test can check what
OpenClaw sent (the tools' schemas, the system prompt).

What it answers is scripted by the last user message, a command word then text:

- ``recall: QUERY``: first a ``memory_recall`` call with QUERY, then (once the tool
  result is in) a final answer quoting the result's first line.
- ``store: QUESTION || ANSWER``: a ``memory_store`` call, then a final answer.
- ``forget: ENTRY_ID``: a ``memory_forget`` call, then a final answer.
- ``recall-then-fail: QUERY``: the ``memory_recall`` call, then HTTP 400 (the run
  fails after the recall).
- anything else: a plain answer.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

LOG_LOCK = threading.Lock()


def _text(content: Any) -> str:
    """A message's text, whether content is a string or a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


COMMAND = re.compile(r"^(?:\[[^\]]*\]\s*)?(recall-then-fail|recall|store|forget):\s*(.+)$", re.M)


def plan(messages: list[dict[str, Any]]) -> tuple[str, Any]:
    """What to answer: ("tool", (name, args)), ("text", str) or ("fail", message).

    The command is the latest user message that holds one (OpenClaw prefixes the
    prompt with a timestamp and appends context messages of its own).
    """
    command, rest, at = "", "", -1
    for i, m in enumerate(messages):
        if m.get("role") == "user":
            found = COMMAND.search(_text(m.get("content")))
            if found:
                command, rest, at = found.group(1), found.group(2).strip(), i
    if at < 0:
        return "text", "Nothing to do."
    tool_results = [m for m in messages[at + 1 :] if m.get("role") == "tool"]
    if tool_results:
        result = _text(tool_results[-1].get("content"))
        if command == "recall-then-fail":
            return "fail", "scripted failure after the recall"
        first = next((ln for ln in result.splitlines() if ln.strip()), "")
        return "text", f"Done ({command}). The tool said: {first[:200]}"
    if command in ("recall", "recall-then-fail"):
        return "tool", ("memory_recall", {"query": rest})
    if command == "store":
        question, _, answer = rest.partition("||")
        return "tool", ("memory_store", {"question": question.strip(), "answer": answer.strip()})
    return "tool", ("memory_forget", {"entryId": rest})


class Handler(BaseHTTPRequestHandler):
    server_version = "scripted-model/1"
    log_file: Path
    calls = 0

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _json(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._json(200, {"object": "list", "data": [{"id": "scripted", "object": "model"}]})
        else:
            self._json(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw)
        except ValueError:
            self._json(400, {"error": {"message": "body is not JSON"}})
            return
        with LOG_LOCK, self.log_file.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps({"path": self.path, "body": body}) + "\n")
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._json(404, {"error": {"message": f"no route {self.path}"}})
            return
        kind, what = plan(body.get("messages") or [])
        if kind == "fail":
            self._json(400, {"error": {"message": what, "type": "invalid_request_error"}})
            return
        Handler.calls += 1
        call_id = f"call_{Handler.calls}"
        model = body.get("model", "scripted")
        if kind == "tool":
            name, args = what
            message: dict[str, Any] = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(args)},
                    }
                ],
            }
            finish = "tool_calls"
        else:
            message = {"role": "assistant", "content": what}
            finish = "stop"
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        if not body.get("stream"):
            self._json(
                200,
                {
                    "id": f"chatcmpl-{Handler.calls}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": model,
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                    "usage": usage,
                },
            )
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()

        def event(delta: dict[str, Any], finish_reason: str | None, **extra: Any) -> None:
            chunk = {
                "id": f"chatcmpl-{Handler.calls}",
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
                **extra,
            }
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())

        if kind == "tool":
            call = message["tool_calls"][0]
            event(
                {"role": "assistant", "content": None, "tool_calls": [{"index": 0, **call}]}, None
            )
        else:
            event({"role": "assistant", "content": message["content"]}, None)
        event({}, finish, usage=usage)
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


def main() -> None:
    port_file, log_file = Path(sys.argv[1]), Path(sys.argv[2])
    Handler.log_file = log_file
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    tmp = port_file.with_suffix(".tmp")
    tmp.write_text(str(server.server_address[1]))
    tmp.rename(port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
