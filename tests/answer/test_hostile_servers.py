"""Model and RPC clients against hostile servers on loopback (issue 33).

Each server here is a real ``http.server`` in a thread that misbehaves on the wire
the way an attacker-controlled ``base_url`` could: it redirects to a second server
on another port (to collect the API key and answer a GET in place of the POST),
trickles its answer a byte at a time (to hold a short timeout open), cuts its body
short, or sends far more than any model or RPC answer needs. Every client (OpenAI-
compatible, Anthropic, Ollama chat and embeddings, EvmRpc) must fail fast, with its
own error class and a one-line message, and never talk to the second server.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from darwin_memo.answer import clients as llm
from darwin_memo.answer import http as httpwire
from darwin_memo.answer.clients import (
    AnthropicClient,
    OllamaClient,
    OllamaEmbedder,
    OllamaError,
    OpenAICompatClient,
)
from darwin_memo.errors import LLMError
from darwin_memo.integrations.evm import EvmRpc, EvmRpcError

SECRET = "sk-hostile-test-DO-NOT-FORWARD-42"
CAP = httpwire.MAX_RESPONSE_BYTES


# -- servers -------------------------------------------------------------------------------------


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]


Behaviour = Callable[["Handler", "Server"], None]


class Handler(BaseHTTPRequestHandler):
    server_ref: Server  # set per server class below

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        srv = self.server_ref
        with srv.lock:
            srv.seen.append(
                Seen(self.command, self.path, {k.lower(): v for k, v in self.headers.items()})
            )
        self.close_connection = True
        with contextlib.suppress(OSError):  # the client hung up: what these tests want
            srv.behaviour(self, srv)

    do_GET = _handle
    do_POST = _handle

    def send_raw(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        if "Content-Length" not in (headers or {}):
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@dataclass
class Server:
    behaviour: Behaviour
    seen: list[Seen] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        handler = type("BoundHandler", (Handler,), {"server_ref": self})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.root = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self.thread.start()

    def close(self) -> None:
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def serve() -> Iterator[Callable[[Behaviour], Server]]:
    started: list[Server] = []

    def start(behaviour: Behaviour) -> Server:
        srv = Server(behaviour)
        started.append(srv)
        return srv

    yield start
    for srv in started:
        srv.close()


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Backoff waits are recorded, not slept; no key or URL leaks in from the environment."""
    recorded: list[float] = []
    monkeypatch.setattr(llm, "_sleep", recorded.append)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    return recorded


# -- the clients under attack --------------------------------------------------------------------


def rpc_reply(result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "result": result}


@dataclass(frozen=True)
class Target:
    name: str
    error: type[Exception]
    path: str  # the path the client requests, below the server root
    good: dict[str, Any]  # a valid answer for that path
    key_header: str | None  # the header that carries the credential
    call: Callable[[str, float, int], Any]  # (root, timeout, retries) -> result


TARGETS = [
    Target(
        "openai",
        LLMError,
        "/v1/chat/completions",
        {"choices": [{"message": {"role": "assistant", "content": "stolen answer"}}]},
        "authorization",
        lambda root, timeout, retries: OpenAICompatClient(
            "m", base_url=root + "/v1", api_key=SECRET, timeout=timeout, retries=retries
        ).complete("q"),
    ),
    Target(
        "anthropic",
        LLMError,
        "/v1/messages",
        {"content": [{"type": "text", "text": "stolen answer"}]},
        "x-api-key",
        lambda root, timeout, retries: AnthropicClient(
            "claude-x", api_key=SECRET, base_url=root, timeout=timeout, retries=retries
        ).complete("q"),
    ),
    Target(
        "ollama",
        OllamaError,
        "/api/chat",
        {"message": {"role": "assistant", "content": "stolen answer"}, "done": True},
        None,
        lambda root, timeout, retries: OllamaClient(
            "tiny", base_url=root, timeout=timeout, retries=retries
        ).complete("q"),
    ),
    Target(
        "ollama-embed",
        OllamaError,
        "/api/embed",
        {"embeddings": [[0.1, 0.2]]},
        None,
        lambda root, timeout, retries: OllamaEmbedder(
            "emb", base_url=root, timeout=timeout, retries=retries
        )("q"),
    ),
    Target(
        "evm",
        EvmRpcError,
        "/",
        rpc_reply("0x10"),
        None,
        lambda root, timeout, retries: EvmRpc(root + "/", timeout=timeout).block_number(),
    ),
]
IDS = [t.name for t in TARGETS]


def answering(body: dict[str, Any]) -> Behaviour:
    raw = json.dumps(body).encode()

    def behave(h: Handler, srv: Server) -> None:
        h.send_raw(200, raw, {"Content-Type": "application/json"})

    return behave


def one_line(exc: BaseException) -> str:
    message = str(exc)
    assert "\n" not in message and "\r" not in message
    assert SECRET not in message and SECRET not in repr(exc)
    return message


# -- redirects -----------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
@pytest.mark.parametrize("target", TARGETS, ids=IDS)
def test_redirect_to_another_host_is_refused_and_the_key_stays_home(
    serve: Callable[[Behaviour], Server], target: Target, status: int
) -> None:
    collector = serve(answering(target.good))
    location = collector.root + target.path

    def redirect(h: Handler, srv: Server) -> None:
        h.send_raw(status, b"", {"Location": location})

    origin = serve(redirect)
    with pytest.raises(target.error) as info:
        target.call(origin.root, 5.0, 3)
    message = one_line(info.value)
    assert f"redirected to {location}; refusing to follow" in message
    assert "final URL" in message
    assert origin.root in message  # the client names the URL it was given
    # the configured server got the one POST (with the key); the other host got nothing
    (seen,) = origin.seen
    assert seen.method == "POST"
    if target.key_header:
        assert SECRET in seen.headers[target.key_header]
    assert collector.seen == []


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
def test_same_origin_redirect_is_refused_too(
    serve: Callable[[Behaviour], Server], target: Target
) -> None:
    def redirect(h: Handler, srv: Server) -> None:
        if h.path == "/moved":
            h.send_raw(200, json.dumps(target.good).encode())
        else:
            h.send_raw(307, b"", {"Location": "/moved"})

    origin = serve(redirect)
    with pytest.raises(target.error) as info:
        target.call(origin.root, 5.0, 3)
    assert f"redirected to {origin.root}/moved; refusing to follow" in one_line(info.value)
    assert [s.path for s in origin.seen] == [target.path]


def test_redirect_location_with_control_characters_stays_on_one_line(
    serve: Callable[[Behaviour], Server],
) -> None:
    def redirect(h: Handler, srv: Server) -> None:
        h.send_raw(302, b"", {"Location": "http://evil.invalid/\x1b]0;pwned\x07x"})

    origin = serve(redirect)
    with pytest.raises(LLMError) as info:
        OpenAICompatClient("m", base_url=origin.root + "/v1", api_key=SECRET).complete("q")
    message = one_line(info.value)
    assert "\x1b" not in message and "\x07" not in message
    assert "redirected to http://evil.invalid/" in message


# -- a server that trickles its answer -----------------------------------------------------------


def trickle_body(h: Handler, srv: Server) -> None:
    """Headers at once, then one byte of a 4000-byte body every 0.05 s (for up to 20 s)."""
    h.send_response(200)
    h.send_header("Content-Type", "application/json")
    h.send_header("Content-Length", "4000")
    h.end_headers()
    h.wfile.flush()
    for _ in range(400):
        if srv.stop.wait(0.05):
            return
        h.wfile.write(b" ")
        h.wfile.flush()


def trickle_headers(h: Handler, srv: Server) -> None:
    """A status line, then one header byte every 0.05 s: the answer never starts."""
    h.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
    h.wfile.flush()
    for _ in range(400):
        if srv.stop.wait(0.05):
            return
        h.wfile.write(b"a")
        h.wfile.flush()


@pytest.mark.parametrize("behaviour", [trickle_body, trickle_headers], ids=["body", "headers"])
@pytest.mark.parametrize("target", TARGETS, ids=IDS)
def test_timeout_is_a_deadline_for_the_whole_answer(
    serve: Callable[[Behaviour], Server],
    target: Target,
    behaviour: Behaviour,
    no_backoff: list[float],
) -> None:
    slow = serve(behaviour)
    start = time.monotonic()
    with pytest.raises(target.error) as info:
        target.call(slow.root, 1.0, 3)
    elapsed = time.monotonic() - start
    assert "timed out after 1s" in one_line(info.value)
    assert 0.9 <= elapsed < 2.5, elapsed  # ~ the timeout: not 20 s of trickle
    assert len(slow.seen) == 1 and no_backoff == []  # a timeout is not retried


# -- a body cut short ----------------------------------------------------------------------------


def truncated(h: Handler, srv: Server) -> None:
    h.send_response(200)
    h.send_header("Content-Type", "application/json")
    h.send_header("Content-Length", "1000")
    h.end_headers()
    h.wfile.write(b'{"choices": [')  # then the connection closes


def truncated_chunked(h: Handler, srv: Server) -> None:
    h.send_response(200)
    h.send_header("Content-Type", "application/json")
    h.send_header("Transfer-Encoding", "chunked")
    h.end_headers()
    h.wfile.write(b"400\r\n" + b'{"choices": [')  # a 1024-byte chunk that never ends


def hang_up(h: Handler, srv: Server) -> None:
    h.close_connection = True  # reads the request, answers nothing


@pytest.mark.parametrize(
    ("behaviour", "words"),
    [
        (truncated, "cut short (13 of 1000 bytes arrived)"),
        (truncated_chunked, "cut short"),
        (hang_up, "connection failed"),
    ],
    ids=["content-length", "chunked", "no-answer"],
)
@pytest.mark.parametrize("target", TARGETS, ids=IDS)
def test_a_broken_answer_is_the_clients_error_in_one_line(
    serve: Callable[[Behaviour], Server], target: Target, behaviour: Behaviour, words: str
) -> None:
    broken = serve(behaviour)
    with pytest.raises(target.error) as info:
        target.call(broken.root, 5.0, 0)
    assert words in one_line(info.value)
    assert info.value.__suppress_context__  # no raw http.client traceback chained on


def test_cut_short_answers_are_retried_like_dropped_connections(
    serve: Callable[[Behaviour], Server], no_backoff: list[float]
) -> None:
    broken = serve(truncated)
    with pytest.raises(LLMError, match="cut short"):
        OpenAICompatClient("m", base_url=broken.root + "/v1", retries=2).complete("q")
    assert len(broken.seen) == 3 and no_backoff == [0.5, 1.0]


# -- a huge answer -------------------------------------------------------------------------------


def declared_huge(h: Handler, srv: Server) -> None:
    h.send_response(200)
    h.send_header("Content-Length", str(4 * CAP))
    h.end_headers()
    block = b" " * 65536
    for _ in range(4 * CAP // len(block)):
        if srv.stop.is_set():
            return
        h.wfile.write(block)


def endless(h: Handler, srv: Server) -> None:
    """No Content-Length: the body ends when the connection does, after 3 caps' worth.

    (Bounded so that a client without a cap runs out of body, not of memory.)
    """
    h.send_response(200)
    h.end_headers()
    block = b"[" * 65536
    for _ in range(3 * CAP // len(block)):
        if srv.stop.is_set():
            return
        h.wfile.write(block)


@pytest.mark.parametrize("behaviour", [declared_huge, endless], ids=["declared", "endless"])
@pytest.mark.parametrize("target", TARGETS, ids=IDS)
def test_huge_answers_stop_at_the_cap(
    serve: Callable[[Behaviour], Server], target: Target, behaviour: Behaviour
) -> None:
    huge = serve(behaviour)
    tracemalloc.start()
    try:
        with pytest.raises(target.error) as info:
            target.call(huge.root, 20.0, 0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "over the 16 MiB limit" in one_line(info.value)
    assert peak < CAP + 8 * 1024 * 1024, peak  # bounded by the cap, not by the server


def test_deeply_nested_json_is_an_error_not_a_crash(
    serve: Callable[[Behaviour], Server],
) -> None:
    def nested(h: Handler, srv: Server) -> None:
        h.send_raw(200, b"[" * 200_000)

    srv = serve(nested)
    deep = r"not JSON we accept \(JSON nested deeper than 256 levels\)"
    with pytest.raises(LLMError, match=deep):
        OpenAICompatClient("m", base_url=srv.root + "/v1", retries=0).complete("q")
    with pytest.raises(EvmRpcError, match=deep):
        EvmRpc(srv.root, timeout=5).block_number()


def test_json_depth_is_checked_before_the_parser_recurses() -> None:
    """py-evm raises the recursion limit to 100,000; deep JSON must then not crash us."""
    script = """
import sys
sys.setrecursionlimit(100_000)  # as py-evm and py_ecc do on import
from darwin_memo.answer import http as httpwire
from darwin_memo.answer.clients import parse_json_array
deep = "[" * 2_000_000 + "]" * 2_000_000
try:
    httpwire.parse_json(deep)
except ValueError as exc:
    print("refused:", exc)
print("array:", parse_json_array("Sure! " + deep))
"""
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]  # -11 was a segfault
    assert proc.stdout.splitlines() == [
        "refused: JSON nested deeper than 256 levels",
        "array: []",
    ]


def test_parse_json_counts_only_structure() -> None:
    assert httpwire.parse_json('{"a": "' + "[{" * 5000 + '\\"]"}') == {"a": "[{" * 5000 + '"]'}
    at_limit = "[" * 256 + "]" * 256
    assert httpwire.parse_json(at_limit) == json.loads(at_limit)
    with pytest.raises(ValueError, match="deeper than 256"):
        httpwire.parse_json("[" * 257 + "]" * 257)
    with pytest.raises(json.JSONDecodeError):
        httpwire.parse_json("<html>")


# -- the same transport still serves honest servers ----------------------------------------------


def chunked_answer(body: dict[str, Any]) -> Behaviour:
    raw = json.dumps(body).encode()

    def behave(h: Handler, srv: Server) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        for i in range(0, len(raw), 7):
            part = raw[i : i + 7]
            h.wfile.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
        h.wfile.write(b"0\r\n\r\n")

    return behave


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
@pytest.mark.parametrize("target", TARGETS, ids=IDS)
def test_honest_answers_still_arrive(
    serve: Callable[[Behaviour], Server], target: Target, chunked: bool
) -> None:
    srv = serve(chunked_answer(target.good) if chunked else answering(target.good))
    result = target.call(srv.root, 5.0, 0)
    assert result in ("stolen answer", [0.1, 0.2], 16)
    assert [s.path for s in srv.seen] == [target.path]


def test_only_http_urls_are_fetched(tmp_path: Any) -> None:
    secret_file = tmp_path / "chat" / "completions"
    secret_file.parent.mkdir()
    secret_file.write_text(json.dumps({"choices": [{"message": {"content": "from disk"}}]}))
    with pytest.raises(LLMError, match="not an http:// or https:// URL"):
        OpenAICompatClient("m", base_url=f"file://{tmp_path}", retries=0).complete("q")
    with pytest.raises(httpwire.WireError) as info:
        httpwire.exchange(f"file://{secret_file}", timeout=1.0)
    assert info.value.kind == "invalid"


def test_an_infinite_timeout_is_accepted_and_nan_is_not(
    serve: Callable[[Behaviour], Server],
) -> None:
    srv = serve(answering(TARGETS[0].good))
    client = OpenAICompatClient("m", base_url=srv.root + "/v1", timeout=float("inf"))
    assert client.complete("q") == "stolen answer"
    with pytest.raises(ValueError, match="timeout"):
        OpenAICompatClient("m", base_url=srv.root + "/v1", timeout=float("nan"))


# -- the same over TLS -----------------------------------------------------------------------------


def self_signed(tmp_path: Any) -> tuple[str, str]:
    """A certificate for 127.0.0.1 and its key, as PEM files."""
    pytest.importorskip("cryptography")
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return str(cert_file), str(key_file)


def test_https_checks_the_certificate_and_keeps_every_rule(
    serve: Callable[[Behaviour], Server], tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ssl

    cert, key = self_signed(tmp_path)
    mode = {"now": "answer"}
    collector = serve(answering(TARGETS[0].good))

    def behave(h: Handler, srv: Server) -> None:
        if mode["now"] == "answer":
            answering(TARGETS[0].good)(h, srv)
        elif mode["now"] == "redirect":
            h.send_raw(302, b"", {"Location": collector.root + "/v1/chat/completions"})
        else:
            trickle_body(h, srv)

    srv = serve(behave)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    srv.httpd.socket = context.wrap_socket(srv.httpd.socket, server_side=True)
    base = srv.root.replace("http://", "https://") + "/v1"

    def call(timeout: float = 5.0) -> str:
        client = OpenAICompatClient("m", base_url=base, api_key=SECRET, timeout=timeout)
        return client.complete("q")

    with pytest.raises(LLMError, match="CERTIFICATE_VERIFY_FAILED"):  # not trusted yet
        call()
    monkeypatch.setenv("SSL_CERT_FILE", cert)
    assert call() == "stolen answer"
    mode["now"] = "redirect"
    with pytest.raises(LLMError, match="refusing to follow"):
        call()
    assert collector.seen == []
    mode["now"] = "trickle"
    start = time.monotonic()
    with pytest.raises(LLMError, match="timed out after 1s"):
        call(timeout=1.0)
    assert time.monotonic() - start < 2.5


# -- keys in the URL itself ----------------------------------------------------------------------

# Hosted node providers issue the key as part of the URL; messages must not repeat it.
INFURA_KEY = "9f86d081884c7d659a2feaa0c55ad015"  # 32 hex digits, as Infura's project ids
ALCHEMY_KEY = "dOc7Jd0bXYnA5bVn7dPLq9Mx_IyzAG0F"  # base64url, as Alchemy's keys
QUERY_KEY = "YTR4K2ZQ8MB9CXWJ3N5E7VHG6D1A"  # an Etherscan-style ?apikey=
URL_KEYS = (INFURA_KEY, ALCHEMY_KEY, QUERY_KEY, "hunter2-password")

KEYED_PATHS = [
    pytest.param(f"/v3/{INFURA_KEY}", id="infura-path"),
    pytest.param(f"/v2/{ALCHEMY_KEY}", id="alchemy-path"),
    pytest.param(f"/api?module=proxy&apikey={QUERY_KEY}", id="query-apikey"),
]


def no_url_key(exc: BaseException, *more: str) -> str:
    """``exc``'s message, after checking that no URL key is in it, its repr or its body."""
    message = one_line(exc)
    for text in (message, repr(exc), str(getattr(exc, "body", "")), *more):
        for key in URL_KEYS:
            assert key not in text, (key, text)
    return message


def echo_path_error(status: int) -> Behaviour:
    """An error answer that quotes the request path (and so the key) back, as some
    providers do ("invalid project id ..."), in an HTTP or a JSON-RPC error."""

    def behave(h: Handler, srv: Server) -> None:
        text = f"invalid project id in {h.path}"
        if status == 502:  # not JSON: the client reports the status and keeps the body
            h.send_raw(status, text.encode(), {"Content-Type": "text/plain"})
            return
        if status == 200:
            body = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32001, "message": text}}
        else:
            body = {"error": {"message": text}}
        h.send_raw(status, json.dumps(body).encode(), {"Content-Type": "application/json"})

    return behave


@pytest.mark.parametrize("status", [200, 401, 502])
@pytest.mark.parametrize("path", KEYED_PATHS)
def test_evm_errors_never_show_a_key_in_the_url(
    serve: Callable[[Behaviour], Server], path: str, status: int
) -> None:
    srv = serve(echo_path_error(status))
    rpc = EvmRpc(srv.root + path, timeout=5)
    with pytest.raises(EvmRpcError) as info:
        rpc.block_number()
    message = no_url_key(info.value, repr(rpc), rpc.shown_url)
    assert "[redacted]" in message
    assert srv.seen[0].path == path  # the key itself went to the server, as it must
    if status == 502:
        assert f"eth_blockNumber: HTTP 502 from {srv.root}/" in message
        assert info.value.body.startswith("invalid project id in /")  # scrubbed, kept
    else:  # the provider's own words, key scrubbed
        assert "eth_blockNumber: invalid project id in /" in message
    assert rpc.url == srv.root + path  # the attribute keeps what was given


@pytest.mark.parametrize("path", KEYED_PATHS)
def test_evm_transport_errors_never_show_a_key_in_the_url(
    serve: Callable[[Behaviour], Server], path: str
) -> None:
    collector = serve(answering(rpc_reply("0x1")))

    def redirect(h: Handler, srv: Server) -> None:  # to the same keyed path elsewhere
        h.send_raw(302, b"", {"Location": collector.root + h.path})

    origin = serve(redirect)
    with pytest.raises(EvmRpcError) as info:
        EvmRpc(origin.root + path, timeout=5).block_number()
    message = no_url_key(info.value)
    assert f"redirected to {collector.root}/" in message and "[redacted]" in message
    assert collector.seen == []
    # nothing listens there any more: a refused connection names the host, not the key
    closed = collector.root
    collector.close()
    with pytest.raises(EvmRpcError, match="cannot reach") as info:
        EvmRpc(closed + path, timeout=5).block_number()
    assert closed in no_url_key(info.value)
    # a key in the userinfo, and a websocket URL given by mistake
    userinfo = origin.root.replace("http://", "http://user:hunter2-password@") + "/"
    with pytest.raises(EvmRpcError) as info:
        EvmRpc(userinfo, timeout=5).block_number()
    no_url_key(info.value)
    with pytest.raises(ValueError, match="http:// or https://") as value_error:
        EvmRpc(f"wss://mainnet.infura.io/ws/v3/{INFURA_KEY}")
    assert "wss://mainnet.infura.io/ws/v3/[redacted]" in no_url_key(value_error.value)


def test_evm_disagreeing_endpoints_are_named_without_their_keys(
    serve: Callable[[Behaviour], Server],
) -> None:
    from darwin_memo.integrations.evm import EvmSettler

    def node(balance: str) -> Behaviour:
        def behave(h: Handler, srv: Server) -> None:  # eth_getBalance, the only call
            h.send_raw(200, json.dumps(rpc_reply(balance)).encode())

        return behave

    a, b = serve(node("0x1")), serve(node("0x2"))
    settler = EvmSettler(
        "0x" + "11" * 20,
        rpc=a.root + f"/v3/{INFURA_KEY}",
        verify_rpc=b.root + f"/v2/{ALCHEMY_KEY}",
    )
    with pytest.raises(EvmRpcError, match="disagree") as info:
        settler.snapshot(block=16)
    message = no_url_key(info.value, repr(settler))
    assert f"{a.root}/v3/[redacted] says 1, {b.root}/v2/[redacted] says 2" in message


@pytest.mark.parametrize("path", KEYED_PATHS)
def test_llm_errors_never_show_a_key_in_the_url(
    serve: Callable[[Behaviour], Server],
    path: str,
    no_backoff: list[float],
    caplog: pytest.LogCaptureFixture,
) -> None:
    srv = serve(echo_path_error(500))
    client = OpenAICompatClient("m", base_url=srv.root + path, api_key=SECRET, retries=1)
    caplog.set_level("INFO", logger="darwin_memo")
    with pytest.raises(LLMError) as info:
        client.complete("q")
    message = no_url_key(info.value, repr(client), caplog.text)
    assert "HTTP 500: invalid project id in /" in message  # the server's words, scrubbed
    assert f"{srv.root}/" in message and "[redacted]" in message
    assert srv.seen[0].path.startswith(path.partition("?")[0])  # the key did go there
    assert len(srv.seen) == 2 and no_backoff  # retried once: its log line is checked too
    assert "retry 1/1" in caplog.text
    embedder = OllamaEmbedder("emb", base_url=srv.root + path, retries=0)
    with pytest.raises(OllamaError) as info:
        embedder("q")
    no_url_key(info.value, repr(embedder))


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (f"https://mainnet.infura.io/v3/{INFURA_KEY}", "https://mainnet.infura.io/v3/[redacted]"),
        (
            f"https://eth-mainnet.g.alchemy.com/v2/{ALCHEMY_KEY}",
            "https://eth-mainnet.g.alchemy.com/v2/[redacted]",
        ),
        (
            f"https://api.etherscan.io/api?module=proxy&apikey={QUERY_KEY}&tag=latest",
            "https://api.etherscan.io/api?module=proxy&apikey=[redacted]&tag=latest",
        ),
        ("https://rpc.example/?key=short", "https://rpc.example/?key=[redacted]"),
        ("https://u:hunter2-password@rpc.example:8545/", "https://[redacted]@rpc.example:8545/"),
        (
            "https://x.quiknode.pro/0123456789abcdef0123456789abcdef01234567/",
            "https://x.quiknode.pro/[redacted]/",
        ),
        (
            "https://eth.blastapi.io/1c3a5f3e-1234-4abc-9def-0123456789ab",
            "https://eth.blastapi.io/[redacted]",
        ),
        ("https://h/x?q=abc/DEF+ghi/JKL0123456789=", "https://h/x?q=[redacted]"),
        # nothing secret-looking: shown exactly as given
        ("http://127.0.0.1:8545", "http://127.0.0.1:8545"),
        ("http://localhost:11434/", "http://localhost:11434/"),
        ("https://api.openai.com/v1", "https://api.openai.com/v1"),
        ("https://api.anthropic.com/v1/messages", "https://api.anthropic.com/v1/messages"),
        ("https://mainnet.base.org", "https://mainnet.base.org"),
        ("https://h/openai/deployments/gpt4/chat_completions", None),
        ("https://h/v1?api-version=2024-02-15-preview", None),
    ],
)
def test_redact_url(url: str, shown: str | None) -> None:
    assert httpwire.redact_url(url) == (url if shown is None else shown)
    hidden = httpwire.url_secrets(url)
    for part in hidden:
        assert part not in httpwire.redact_url(url)
    assert bool(hidden) == (shown not in (None, url) and "key=short" not in url)
