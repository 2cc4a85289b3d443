"""Wire-level tests of the LLM clients against loopback servers speaking each real API."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from darwin_memo.answer import clients as llm
from darwin_memo.answer.clients import (
    AnthropicClient,
    LLMClient,
    OllamaClient,
    OllamaEmbedder,
    OllamaError,
    OpenAICompatClient,
    ollama_available,
    ollama_model_digest,
    parse_json_array,
    strip_think,
)
from darwin_memo.errors import DarwinMemoError, LLMError

SECRET = "sk-test-DO-NOT-LEAK-0123456789"


@dataclass
class Reply:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class Server:
    """Answers each request with the next scripted reply (the last one repeats)."""

    def __init__(self) -> None:
        self.replies: dict[str, list[Reply]] = {}
        self.seen: list[Seen] = []
        self.release = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _answer(self, body: Any) -> None:
                server.seen.append(
                    Seen(
                        self.command,
                        self.path,
                        {k.lower(): v for k, v in self.headers.items()},
                        body,
                    )
                )
                queue = server.replies.get(self.path) or [
                    Reply(404, {"error": "404 page not found"})
                ]
                reply = queue.pop(0) if len(queue) > 1 else queue[0]
                if reply.delay:
                    server.release.wait(reply.delay)
                raw = (
                    reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
                )
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(raw)))
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(raw)
                except OSError:
                    pass  # the client gave up (timeout test)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                self._answer(json.loads(self.rfile.read(length) or b"null"))

            def do_GET(self) -> None:
                self._answer(None)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self.thread.start()

    def script(self, path: str, *replies: Reply) -> None:
        self.replies[path] = list(replies)

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def server() -> Iterator[Server]:
    srv = Server()
    yield srv
    srv.close()


@pytest.fixture(autouse=True)
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Backoff waits are recorded, not slept."""
    recorded: list[float] = []
    monkeypatch.setattr(llm, "_sleep", recorded.append)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("DARWIN_MEMO_MODEL", raising=False)
    return recorded


# ---- real response shapes ------------------------------------------------------------


def ollama_chat(content: str, thinking: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if thinking is not None:
        message["thinking"] = thinking
    return {
        "model": "llama3.2",
        "created_at": "2026-01-01T00:00:00Z",
        "message": message,
        "done_reason": "stop",
        "done": True,
        "total_duration": 1,
        "eval_count": 3,
    }


def openai_chat(content: str | None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "smollm2",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
    }


def anthropic_message(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": list(blocks),
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 5, "output_tokens": 3},
    }


def openai_error(message: str, kind: str = "server_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def anthropic_error(message: str, kind: str = "api_error") -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


# ---- Ollama --------------------------------------------------------------------------


def test_ollama_chat_request_and_answer(server: Server) -> None:
    server.script("/api/chat", Reply(body=ollama_chat("Paris")))
    client = OllamaClient("llama3.2", base_url=server.url, max_tokens=64, temperature=0.2)
    assert isinstance(client, LLMClient)
    assert client.complete("Capital of France?", system="Be brief.") == "Paris"
    (seen,) = server.seen
    assert seen.method == "POST" and seen.path == "/api/chat"
    assert seen.body == {
        "model": "llama3.2",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Capital of France?"},
        ],
        "stream": False,
        "options": {"temperature": 0.2, "num_predict": 64},
    }
    assert "think" not in seen.body


def test_ollama_default_system_and_think_flag(server: Server) -> None:
    server.script("/api/chat", Reply(body=ollama_chat("42", thinking="let me see")))
    client = OllamaClient("qwen3", base_url=server.url, think=False)
    assert client.complete("q") == "42"
    body = server.seen[0].body
    assert body["think"] is False
    assert body["messages"][0] == {"role": "system", "content": llm.DEFAULT_SYSTEM}


def test_think_blocks_pass_through_and_are_stripped_by_the_helpers(server: Server) -> None:
    raw = '<think>which entries?\n[9]</think>\n```json\n["a", "b"]\n```'
    server.script("/api/chat", Reply(body=ollama_chat(raw)))
    text = OllamaClient(base_url=server.url).complete("list")
    assert text == raw  # the client returns what the model said; parsing strips reasoning
    assert parse_json_array(text) == ["a", "b"]
    assert "<think>" not in strip_think(text)


def test_ollama_error_field_on_200(server: Server) -> None:
    server.script("/api/chat", Reply(body={"error": "model is loading"}))
    with pytest.raises(OllamaError, match="model is loading"):
        OllamaClient(base_url=server.url).complete("q")


def test_ollama_missing_model_hint(server: Server, waits: list[float]) -> None:
    server.script("/api/chat", Reply(404, {"error": "model 'nope' not found"}))
    with pytest.raises(OllamaError) as info:
        OllamaClient("nope", base_url=server.url).complete("q")
    assert info.value.status == 404
    message = str(info.value)
    assert "ollama pull nope" in message and "'nope'" in message and server.url in message
    assert "\n" not in message
    assert waits == []  # 404 is not retried


def test_ollama_non_object_json(server: Server) -> None:
    server.script("/api/chat", Reply(body=[1, 2]))
    with pytest.raises(OllamaError, match="not a JSON object"):
        OllamaClient(base_url=server.url).complete("q")


def test_ollama_embed_batch_and_single(server: Server) -> None:
    server.script(
        "/api/embed",
        Reply(body={"model": "nomic-embed-text", "embeddings": [[0.1, 0.2], [0.3, 0.4]]}),
        Reply(body={"model": "nomic-embed-text", "embeddings": [[1, 0]]}),
    )
    embedder = OllamaEmbedder(base_url=server.url)
    assert embedder.batch(["a", "b"]) == [[0.1, 0.2], [0.3, 0.4]]
    assert embedder("c") == [1.0, 0.0]
    assert server.seen[0].body == {"model": "nomic-embed-text", "input": ["a", "b"]}
    assert len(server.seen) == 2  # one request per batch
    assert embedder.batch([]) == []


def test_ollama_embed_falls_back_to_legacy_endpoint(server: Server) -> None:
    server.script("/api/embed", Reply(404, b"404 page not found"))
    server.script("/api/embeddings", Reply(body={"embedding": [0.5, 0.25]}))
    embedder = OllamaEmbedder("all-minilm", base_url=server.url)
    assert embedder.batch(["x", "y"]) == [[0.5, 0.25], [0.5, 0.25]]
    assert [s.path for s in server.seen] == ["/api/embed", "/api/embeddings", "/api/embeddings"]
    assert server.seen[1].body == {"model": "all-minilm", "prompt": "x"}
    assert embedder("z") == [0.5, 0.25]  # remembers: no second /api/embed try
    assert server.seen[-1].path == "/api/embeddings"


def test_ollama_embed_404_naming_the_model_is_not_a_fallback(server: Server) -> None:
    server.script("/api/embed", Reply(404, {"error": 'model "nomic-embed-text" not found'}))
    with pytest.raises(OllamaError, match="ollama pull nomic-embed-text"):
        OllamaEmbedder(base_url=server.url)("x")
    assert [s.path for s in server.seen] == ["/api/embed"]


def test_ollama_tags_available_and_digest(server: Server) -> None:
    server.script(
        "/api/tags",
        Reply(
            body={
                "models": [
                    {"name": "llama3.2:latest", "model": "llama3.2:latest", "digest": "abc123"},
                    {"name": "qwen3:0.6b", "model": "qwen3:0.6b", "digest": "def456"},
                ]
            }
        ),
    )
    assert ollama_available(server.url)
    assert ollama_model_digest("llama3.2", base_url=server.url) == "abc123"
    assert ollama_model_digest("qwen3:0.6b", base_url=server.url) == "def456"
    assert ollama_model_digest("qwen3", base_url=server.url) is None


def test_ollama_unavailable_when_nothing_listens() -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    assert not ollama_available(f"http://127.0.0.1:{port}", timeout=0.5)


# ---- OpenAI-compatible ---------------------------------------------------------------


def test_openai_request_shape_and_auth(server: Server) -> None:
    server.script("/v1/chat/completions", Reply(body=openai_chat("blue")))
    client = OpenAICompatClient("smollm2", base_url=server.url + "/v1/", api_key=SECRET)
    assert client.complete("Sky colour?", system="Short.") == "blue"
    (seen,) = server.seen
    assert seen.path == "/v1/chat/completions"
    assert seen.headers["authorization"] == f"Bearer {SECRET}"
    assert seen.headers["content-type"] == "application/json"
    assert seen.body == {
        "model": "smollm2",
        "messages": [
            {"role": "system", "content": "Short."},
            {"role": "user", "content": "Sky colour?"},
        ],
        "max_tokens": 1024,
        "temperature": 0.0,
    }
    assert SECRET not in repr(client)


def test_openai_without_key_sends_no_authorization(server: Server) -> None:
    server.script("/v1/chat/completions", Reply(body=openai_chat("ok")))
    assert OpenAICompatClient("m", base_url=server.url + "/v1").complete("q") == "ok"
    assert "authorization" not in server.seen[0].headers


def test_openai_null_content_is_an_error(server: Server) -> None:
    server.script("/v1/chat/completions", Reply(body=openai_chat(None)))
    with pytest.raises(LLMError, match=r"choices\[0\]\.message\.content"):
        OpenAICompatClient("m", base_url=server.url + "/v1").complete("q")


def test_openai_429_then_success_honours_retry_after(server: Server, waits: list[float]) -> None:
    server.script(
        "/v1/chat/completions",
        Reply(429, openai_error("Rate limit reached", "requests"), {"Retry-After": "2"}),
        Reply(503, openai_error("overloaded")),
        Reply(body=openai_chat("done")),
    )
    client = OpenAICompatClient("m", base_url=server.url + "/v1", api_key=SECRET, backoff=0.25)
    assert client.complete("q") == "done"
    assert len(server.seen) == 3
    assert waits == [2.0, 0.5]  # Retry-After, then backoff * 2**1


def test_openai_retry_after_is_capped(server: Server, waits: list[float]) -> None:
    server.script(
        "/v1/chat/completions",
        Reply(429, openai_error("slow down"), {"Retry-After": "3600"}),
        Reply(body=openai_chat("ok")),
    )
    OpenAICompatClient("m", base_url=server.url + "/v1").complete("q")
    assert waits == [llm.MAX_BACKOFF]


def test_openai_500_exhausts_retries(server: Server, waits: list[float]) -> None:
    server.script("/v1/chat/completions", Reply(500, openai_error(f"boom for key {SECRET}")))
    client = OpenAICompatClient("smollm2", base_url=server.url + "/v1", api_key=SECRET, retries=2)
    with pytest.raises(LLMError) as info:
        client.complete("q")
    err = info.value
    assert isinstance(err, DarwinMemoError)
    assert err.status == 500
    assert len(server.seen) == 3 and waits == [0.5, 1.0]
    message = str(err)
    assert "'smollm2'" in message and "/v1/chat/completions" in message
    assert "HTTP 500" in message and "gave up after 3 attempts" in message
    assert "\n" not in message
    assert SECRET not in message and SECRET not in err.body and SECRET not in repr(err)
    assert "[redacted]" in message


def test_openai_401_is_not_retried_and_key_stays_out(server: Server, waits: list[float]) -> None:
    server.script(
        "/v1/chat/completions",
        Reply(401, openai_error(f"Incorrect API key provided: {SECRET}", "invalid_request_error")),
    )
    with pytest.raises(LLMError, match="HTTP 401") as info:
        OpenAICompatClient("m", base_url=server.url + "/v1", api_key=SECRET).complete("q")
    assert waits == [] and len(server.seen) == 1
    assert SECRET not in str(info.value) and SECRET not in info.value.body


def test_timeout_is_an_error_not_a_hang(server: Server, waits: list[float]) -> None:
    server.script("/v1/chat/completions", Reply(body=openai_chat("late"), delay=5.0))
    client = OpenAICompatClient("m", base_url=server.url + "/v1", api_key=SECRET, timeout=0.3)
    start = time.monotonic()
    with pytest.raises(LLMError, match=r"timed out after 0.3s") as info:
        client.complete("q")
    assert time.monotonic() - start < 3.0
    assert info.value.status == 0 and waits == []
    assert "'m'" in str(info.value) and SECRET not in str(info.value)


def test_connection_refused_retries_then_fails(waits: list[float]) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = OllamaClient("tiny", base_url=f"http://127.0.0.1:{port}", retries=2, timeout=1.0)
    with pytest.raises(OllamaError, match="cannot connect"):
        client.complete("q")
    assert waits == [0.5, 1.0]


def test_non_json_answer(server: Server) -> None:
    server.script("/v1/chat/completions", Reply(body=b"<html>proxy error</html>"))
    with pytest.raises(LLMError, match="not JSON"):
        OpenAICompatClient("m", base_url=server.url + "/v1").complete("q")


# ---- Anthropic -----------------------------------------------------------------------


def test_anthropic_request_shape_and_text_blocks(server: Server) -> None:
    server.script(
        "/v1/messages",
        Reply(
            body=anthropic_message(
                {"type": "thinking", "thinking": "hmm", "signature": "x"},
                {"type": "text", "text": "The gateway.\n"},
                {"type": "text", "text": "SOURCES: [1]"},
            )
        ),
    )
    client = AnthropicClient(
        "claude-haiku-4-5", max_tokens=200, api_key=SECRET, base_url=server.url
    )
    assert client.complete("Port 8080?", system="Terse.") == "The gateway.\nSOURCES: [1]"
    (seen,) = server.seen
    assert seen.path == "/v1/messages"
    assert seen.headers["x-api-key"] == SECRET
    assert seen.headers["anthropic-version"] == llm.ANTHROPIC_VERSION
    assert seen.body == {
        "model": "claude-haiku-4-5",
        "max_tokens": 200,
        "system": "Terse.",
        "messages": [{"role": "user", "content": "Port 8080?"}],
    }
    assert SECRET not in repr(client)


def test_anthropic_model_and_key_from_env(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    monkeypatch.setenv("DARWIN_MEMO_MODEL", "claude-opus-4-1")
    server.script("/v1/messages", Reply(body=anthropic_message({"type": "text", "text": "hi"})))
    client = AnthropicClient()
    assert client.model == "claude-opus-4-1"
    assert client.complete("q") == "hi"
    monkeypatch.delenv("DARWIN_MEMO_MODEL")
    assert AnthropicClient().model == llm.DEFAULT_ANTHROPIC_MODEL


def test_anthropic_without_key_fails_clearly() -> None:
    with pytest.raises(LLMError, match="ANTHROPIC_API_KEY"):
        AnthropicClient("claude-sonnet-4-6")


def test_anthropic_overloaded_then_success(server: Server, waits: list[float]) -> None:
    server.script(
        "/v1/messages",
        Reply(529, anthropic_error("Overloaded", "overloaded_error")),
        Reply(429, anthropic_error("rate", "rate_limit_error"), {"retry-after": "1"}),
        Reply(body=anthropic_message({"type": "text", "text": "ok"})),
    )
    client = AnthropicClient(api_key=SECRET, base_url=server.url)
    assert client.complete("q") == "ok"
    assert waits == [0.5, 1.0]


def test_anthropic_exhausted_error_names_model_and_endpoint(
    server: Server, waits: list[float]
) -> None:
    server.script("/v1/messages", Reply(500, anthropic_error("Internal server error")))
    client = AnthropicClient("claude-sonnet-4-6", api_key=SECRET, base_url=server.url, retries=1)
    with pytest.raises(LLMError) as info:
        client.complete("q")
    message = str(info.value)
    assert message.startswith("AnthropicClient (model 'claude-sonnet-4-6', http://127.0.0.1:")
    assert "/v1/messages): HTTP 500: Internal server error" in message
    assert SECRET not in message and len(server.seen) == 2 and waits == [0.5]


def test_keys_never_reach_the_log(server: Server, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("DEBUG", logger="darwin_memo.llm")
    server.script(
        "/v1/messages",
        Reply(429, anthropic_error(f"rate for {SECRET}", "rate_limit_error")),
        Reply(body=anthropic_message({"type": "text", "text": "ok"})),
    )
    AnthropicClient(api_key=SECRET, base_url=server.url).complete("q")
    assert caplog.records  # the retry was logged
    assert SECRET not in caplog.text


# ---- the protocol over a real wire ---------------------------------------------------


def test_query_protocol_over_openai_wire_with_think_blocks(server: Server) -> None:
    from darwin_memo import MemoryEntry, MemoryStore, QueryProtocol

    store = MemoryStore()
    entry = store.add(
        MemoryEntry(question="Which service listens on port 8080?", answer="The gateway.")
    )
    server.script(
        "/v1/chat/completions",
        Reply(body=openai_chat("<think>split it</think>Which service listens on port 8080")),
        Reply(body=openai_chat("<think>snippet [1] fits</think>The gateway.\nSOURCES: [1]")),
    )
    client = OpenAICompatClient("smollm2", base_url=server.url + "/v1")
    answer = QueryProtocol(store, client).answer("what is on port 8080?")
    assert answer.deciding_entry == entry.id  # the cited entry decides
    assert answer.text == "The gateway."
    assert "<think>" not in answer.text
    assert len(server.seen) == 2
