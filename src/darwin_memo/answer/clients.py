"""Talking to language models: the one small protocol every client speaks.

A client has one method, ``complete(prompt, system="") -> str``. Helpers here
clean up what models send back: reasoning blocks (``<think>...</think>``) are
stripped before anything is parsed, and JSON arrays are dug out of code fences
and surrounding prose.

The clients speak HTTP with the standard library (``urllib``) only:

- ``OllamaClient`` / ``OllamaEmbedder``: Ollama's native API (``/api/chat``,
  ``/api/embed``), by default on ``http://localhost:11434``.
- ``OpenAICompatClient``: OpenAI chat completions (``POST {base_url}/chat/completions``),
  which OpenAI and local servers (llama.cpp, vLLM, LM Studio...) all speak.
- ``AnthropicClient``: the Anthropic Messages API (``POST {base_url}/v1/messages``).

Requests go through ``darwin_memo.answer.http.exchange``: the timeout is a deadline
for the whole answer (a server trickling bytes cannot stretch it), bodies over
``http.MAX_RESPONSE_BYTES`` (16 MiB) are refused, and redirects are never
followed (the API key would travel to the new host, and a 302/303 would turn the
POST into a GET): set ``base_url`` to the final URL. HTTP 429 and 5xx answers,
refused connections and dropped or cut-short answers are retried with exponential
backoff (a ``Retry-After`` header wins, capped); timeouts are not retried, since a
generation that ran out of time once will again. Every failure raises ``LLMError``
(``OllamaError`` for Ollama) in one line naming the client, the model and the
endpoint. API keys go only into request headers: they are scrubbed from every
message and error body and never logged.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import logging
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any, Protocol, runtime_checkable

from ..errors import LLMError
from . import http as httpwire

__all__ = [
    "DEFAULT_ANTHROPIC_MODEL",
    "DEFAULT_ANTHROPIC_URL",
    "DEFAULT_OLLAMA_URL",
    "DEFAULT_OPENAI_URL",
    "DEFAULT_SYSTEM",
    "THINK_RE",
    "AnthropicClient",
    "LLMClient",
    "LLMError",
    "OllamaClient",
    "OllamaEmbedder",
    "OllamaError",
    "OpenAICompatClient",
    "client_from_spec",
    "ollama_available",
    "ollama_model_digest",
    "parse_json_array",
    "strip_think",
]

log = logging.getLogger("darwin_memo.llm")  # the published path's name, kept

DEFAULT_OLLAMA_URL = "http://localhost:11434"
DEFAULT_OPENAI_URL = "https://api.openai.com/v1"
DEFAULT_ANTHROPIC_URL = "https://api.anthropic.com"
DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-4-6"
ANTHROPIC_VERSION = "2023-06-01"
USER_AGENT = "darwin-memo-llm/1"
DEFAULT_RETRIES = 3
#: ``OpenAICompatClient(json_mode=...)``: how ``complete_json`` asks for structured output.
JSON_MODES = (None, "json_object", "json_schema")
DEFAULT_BACKOFF = 0.5
MAX_BACKOFF = 30.0
_BODY_LIMIT = 500
_DETAIL_LIMIT = 200
#: Transport failures worth another attempt: no connection, or one that broke.
#: Timeouts, refused redirects and oversize or malformed answers are not retried.
_RETRY_KINDS = ("connect", "dropped")

# Indirection so tests can record waits instead of sleeping.
_sleep: Callable[[float], None] = time.sleep

DEFAULT_SYSTEM = (
    "You are a precise knowledge-engineering assistant: answer only from what you are given."
)

THINK_RE = re.compile(r"<think>.*?</think>", re.IGNORECASE | re.DOTALL)
_FENCE_RE = re.compile(r"```(?:json)?", re.IGNORECASE)


@runtime_checkable
class LLMClient(Protocol):
    """Anything that turns a prompt into text."""

    def complete(self, prompt: str, system: str = "") -> str: ...


def strip_think(text: str) -> str:
    """Remove reasoning blocks; an unterminated ``<think>`` hides everything after it."""
    text = THINK_RE.sub("", text)
    lowered = text.lower()
    start = lowered.find("<think>")
    if start >= 0:
        text = text[:start]
    return text


def parse_json_array(text: str) -> list[Any]:
    """The first JSON array in a model reply (fences and prose tolerated), else ``[]``."""
    cleaned = _FENCE_RE.sub("", strip_think(text))
    start = cleaned.find("[")
    end = cleaned.rfind("]")
    if start < 0 or end <= start:
        return []
    try:
        value = httpwire.parse_json(cleaned[start : end + 1])
    except (ValueError, RecursionError):  # not JSON, or nested absurdly deep
        return []
    return value if isinstance(value, list) else []


class OllamaError(LLMError):
    """An Ollama server failed or answered with something unusable."""


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _scrub(text: str, secrets: tuple[str, ...]) -> str:
    """``text`` with each secret (the API key, the key parts of the URL) replaced."""
    for secret in secrets:
        text = text.replace(secret, "[redacted]")
    return text


def _error_detail(body: str) -> str:
    """The human part of an error body: ``{"error": "..."}`` or ``{"error": {"message": ...}}``."""
    try:
        value = httpwire.parse_json(body)
    except (ValueError, RecursionError):
        return _one_line(body, _DETAIL_LIMIT)
    if isinstance(value, dict):
        err = value.get("error", value)
        if isinstance(err, dict):
            err = err.get("message", err)
        if isinstance(err, str):
            return _one_line(err, _DETAIL_LIMIT)
    return _one_line(body, _DETAIL_LIMIT)


def _retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or HTTP date), else ``None``."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


def _retryable(status: int) -> bool:
    return status == 429 or status >= 500


class _Http:
    """JSON over HTTP with timeouts, retries and key-safe one-line errors."""

    def __init__(
        self,
        *,
        client: str,
        model: str,
        base_url: str,
        timeout: float,
        retries: int,
        backoff: float,
        headers: Mapping[str, str] | None = None,
        secret: str | None = None,
        error: type[LLMError] = LLMError,
    ) -> None:
        if not timeout > 0:  # also refuses NaN
            raise ValueError("timeout must be positive")
        if retries < 0:
            raise ValueError("retries must be >= 0")
        self.client = client
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self._headers = dict(headers or {})
        # The API key, and any key the URL carries (``.../v2/<key>``, ``?key=...``):
        # messages show the URL through ``redact_url`` and scrub these from the rest.
        self._secrets = ((secret,) if secret else ()) + httpwire.url_secrets(self.base_url)
        self.error = error

    def url(self, path: str) -> str:
        return self.base_url + path

    def fail(self, what: str, url: str, status: int = 0, body: str = "") -> LLMError:
        message = f"{self.client} (model {self.model!r}, {httpwire.redact_url(url)}): {what}"
        return self.error(_scrub(message, self._secrets), status, _scrub(body, self._secrets))

    def delay(self, attempt: int, retry_after: str | None) -> float:
        asked = _retry_after(retry_after)
        wait = asked if asked is not None else self.backoff * (2**attempt)
        return min(wait, MAX_BACKOFF)

    def request(
        self,
        path: str,
        payload: Mapping[str, Any] | None = None,
        *,
        retries: int | None = None,
        hint: Callable[[int, str], str] | None = None,
    ) -> dict[str, Any]:
        """POST ``payload`` (GET when ``None``) and return the JSON object answered."""
        url = self.url(path)
        data = None if payload is None else json.dumps(payload).encode("utf-8")
        headers = {"User-Agent": USER_AGENT, "Accept": "application/json", **self._headers}
        if data is not None:
            headers["Content-Type"] = "application/json"
        budget = self.retries if retries is None else retries
        attempt = 0
        while True:
            try:
                answer = httpwire.exchange(url, data=data, headers=headers, timeout=self.timeout)
            except httpwire.WireError as exc:
                if exc.kind in _RETRY_KINDS and attempt < budget:
                    wait = self.delay(attempt, None)
                    log.info(
                        "%s: %s (%s); retry in %.2fs",
                        self.client, exc, httpwire.redact_url(url), wait,
                    )  # fmt: skip
                    _sleep(wait)
                    attempt += 1
                    continue
                what = str(exc)
                if exc.kind == "redirect":
                    what += " (set base_url to the final URL)"
                raise self.fail(what, url, exc.status) from None
            status = answer.status
            if status >= 400:
                body = answer.body[: _BODY_LIMIT * 4].decode("utf-8", "replace")[:_BODY_LIMIT]
                if _retryable(status) and attempt < budget:
                    wait = self.delay(attempt, answer.headers.get("Retry-After"))
                    log.info(
                        "%s: HTTP %d from %s; retry %d/%d in %.2fs",
                        self.client, status, httpwire.redact_url(url), attempt + 1, budget, wait,
                    )  # fmt: skip
                    _sleep(wait)
                    attempt += 1
                    continue
                reason = http.client.responses.get(status, "error")
                what = f"HTTP {status}: {_error_detail(body) or reason}"
                if _retryable(status) and budget:
                    what += f" (gave up after {budget + 1} attempts)"
                if hint is not None:
                    what += hint(status, body)
                raise self.fail(what, url, status, body)
            text = answer.body.decode("utf-8", "replace")
            try:
                value = httpwire.parse_json(text)
            except (ValueError, RecursionError) as exc:
                what = "answer is not JSON"
                if not isinstance(exc, json.JSONDecodeError):
                    what += f" we accept ({exc})"
                raise self.fail(what, url, status, text[:_BODY_LIMIT]) from None
            if not isinstance(value, dict):
                raise self.fail("answer is not a JSON object", url, status, text[:_BODY_LIMIT])
            return value


def _messages(prompt: str, system: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": system or DEFAULT_SYSTEM},
        {"role": "user", "content": prompt},
    ]


def _ollama_hint(model: str) -> Callable[[int, str], str]:
    def hint(status: int, body: str) -> str:
        if "not found" in body.lower():
            return f" (pull the model first: ollama pull {model})"
        return ""

    return hint


class OllamaClient:
    """A model served by Ollama, over its native ``/api/chat`` endpoint."""

    def __init__(
        self,
        model: str = "llama3.2",
        base_url: str = DEFAULT_OLLAMA_URL,
        temperature: float = 0.0,
        timeout: float = 120.0,
        max_tokens: int = 1024,
        think: bool | None = None,
        *,
        retries: int = DEFAULT_RETRIES,
        backoff: float = DEFAULT_BACKOFF,
    ) -> None:
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.temperature = temperature
        self.timeout = timeout
        self.max_tokens = max_tokens
        self.think = think
        self._http = _Http(
            client="OllamaClient",
            model=model,
            base_url=self.base_url,
            timeout=timeout,
            retries=retries,
            backoff=backoff,
            error=OllamaError,
        )

    def __repr__(self) -> str:
        shown = httpwire.redact_url(self.base_url)
        return f"OllamaClient(model={self.model!r}, base_url={shown!r})"

    def complete(self, prompt: str, system: str = "") -> str:
        return self._chat(prompt, system, None)

    def complete_json(self, prompt: str, system: str, schema: Mapping[str, Any]) -> str:
        """Like ``complete``, with Ollama's ``format`` set to ``schema`` (structured output)."""
        return self._chat(prompt, system, dict(schema))

    def _chat(self, prompt: str, system: str, schema: dict[str, Any] | None) -> str:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": _messages(prompt, system),
            "stream": False,
            "options": {"temperature": self.temperature, "num_predict": self.max_tokens},
        }
        if self.think is not None:
            payload["think"] = self.think
        if schema is not None:
            payload["format"] = schema
        answer = self._http.request("/api/chat", payload, hint=_ollama_hint(self.model))
        url = self._http.url("/api/chat")
        if "error" in answer:
            raise self._http.fail(f"error: {_one_line(str(answer['error']), _DETAIL_LIMIT)}", url)
        message = answer.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, str):
            raise self._http.fail("answer has no message.content", url, 200, json.dumps(answer))
        return content


class OllamaEmbedder:
    """Text embeddings from Ollama (``/api/embed``; legacy ``/api/embeddings`` as fallback).

    Callable like every embedder (``embedder(text) -> list[float]``); ``batch(texts)``
    embeds many texts in one request.
    """

    def __init__(
        self,
        model: str = "nomic-embed-text",
        base_url: str = DEFAULT_OLLAMA_URL,
        timeout: float = 60.0,
        *,
        retries: int = DEFAULT_RETRIES,
        backoff: float = DEFAULT_BACKOFF,
    ) -> None:
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self._legacy = False
        self._http = _Http(
            client="OllamaEmbedder",
            model=model,
            base_url=self.base_url,
            timeout=timeout,
            retries=retries,
            backoff=backoff,
            error=OllamaError,
        )

    def __repr__(self) -> str:
        shown = httpwire.redact_url(self.base_url)
        return f"OllamaEmbedder(model={self.model!r}, base_url={shown!r})"

    def __call__(self, text: str) -> list[float]:
        return self.batch([text])[0]

    def batch(self, texts: Sequence[str]) -> list[list[float]]:
        items = list(texts)
        if not items:
            return []
        if not self._legacy:
            try:
                answer = self._http.request(
                    "/api/embed",
                    {"model": self.model, "input": items},
                    hint=_ollama_hint(self.model),
                )
            except OllamaError as exc:
                # Old servers lack /api/embed; a 404 naming the model is a missing model.
                if exc.status != 404 or "model" in exc.body.lower():
                    raise
                log.info(
                    "OllamaEmbedder: %s has no /api/embed; using /api/embeddings",
                    httpwire.redact_url(self.base_url),
                )
                self._legacy = True
            else:
                return self._vectors(answer, len(items))
        return [self._legacy_one(text) for text in items]

    def _vectors(self, answer: dict[str, Any], count: int) -> list[list[float]]:
        url = self._http.url("/api/embed")
        if "error" in answer:
            raise self._http.fail(f"error: {_one_line(str(answer['error']), _DETAIL_LIMIT)}", url)
        vectors = answer.get("embeddings")
        if not isinstance(vectors, list) or len(vectors) != count:
            raise self._http.fail(f"expected {count} embeddings", url, 200)
        return [_floats(vector, self._http, url) for vector in vectors]

    def _legacy_one(self, text: str) -> list[float]:
        url = self._http.url("/api/embeddings")
        answer = self._http.request(
            "/api/embeddings", {"model": self.model, "prompt": text}, hint=_ollama_hint(self.model)
        )
        if "error" in answer:
            raise self._http.fail(f"error: {_one_line(str(answer['error']), _DETAIL_LIMIT)}", url)
        return _floats(answer.get("embedding"), self._http, url)


def _floats(vector: Any, http: _Http, url: str) -> list[float]:
    if not isinstance(vector, list) or not vector:
        raise http.fail("embedding is not a non-empty list of numbers", url, 200)
    try:
        return [float(x) for x in vector]
    except (TypeError, ValueError):
        raise http.fail("embedding is not a non-empty list of numbers", url, 200) from None


def _tags(base_url: str, timeout: float) -> dict[str, Any]:
    http = _Http(
        client="ollama",
        model="-",
        base_url=base_url,
        timeout=timeout,
        retries=0,
        backoff=0.0,
        error=OllamaError,
    )
    return http.request("/api/tags")


def ollama_available(base_url: str = DEFAULT_OLLAMA_URL, timeout: float = 2.0) -> bool:
    """True when an Ollama server answers ``GET /api/tags`` at ``base_url``."""
    try:
        _tags(base_url, timeout)
    except LLMError:
        return False
    return True


def ollama_model_digest(
    model: str, base_url: str = DEFAULT_OLLAMA_URL, timeout: float = 5.0
) -> str | None:
    """The digest of ``model`` as the server lists it (bare names match ``name:latest``)."""
    wanted = {model} if ":" in model else {model, f"{model}:latest"}
    listed = _tags(base_url, timeout).get("models")
    for item in listed if isinstance(listed, list) else []:
        if isinstance(item, dict) and (item.get("name") in wanted or item.get("model") in wanted):
            digest = item.get("digest")
            return digest if isinstance(digest, str) else None
    return None


class OpenAICompatClient:
    """Any server speaking OpenAI chat completions (OpenAI itself, llama.cpp, vLLM...).

    ``base_url`` is the API root including ``/v1`` (default: env ``OPENAI_BASE_URL``,
    else OpenAI). The key comes from ``api_key`` or env ``OPENAI_API_KEY``; without one
    no ``Authorization`` header is sent, which local servers accept.
    """

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        max_tokens: int = 1024,
        *,
        api_key: str | None = None,
        temperature: float | None = 0.0,
        timeout: float = 120.0,
        retries: int = DEFAULT_RETRIES,
        backoff: float = DEFAULT_BACKOFF,
        json_mode: str | None = None,
    ) -> None:
        if json_mode not in JSON_MODES:
            raise ValueError(f"json_mode must be one of {JSON_MODES}, got {json_mode!r}")
        self.model = model
        self.base_url = (
            base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_OPENAI_URL
        ).rstrip("/")
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.json_mode = json_mode
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._http = _Http(
            client="OpenAICompatClient",
            model=model,
            base_url=self.base_url,
            timeout=timeout,
            retries=retries,
            backoff=backoff,
            headers=headers,
            secret=key,
        )

    def __repr__(self) -> str:
        shown = httpwire.redact_url(self.base_url)
        return f"OpenAICompatClient(model={self.model!r}, base_url={shown!r})"

    def complete(self, prompt: str, system: str = "") -> str:
        return self._chat(prompt, system, None)

    def complete_json(self, prompt: str, system: str, schema: Mapping[str, Any]) -> str:
        """Like ``complete``, asking the server to constrain the reply to ``schema``.

        Only with ``json_mode`` set: ``"json_object"`` sends ``response_format:
        {"type": "json_object", "schema": ...}`` (llama-cpp-python's server turns the
        schema into a grammar), ``"json_schema"`` sends OpenAI's structured-output form
        (``{"type": "json_schema", "json_schema": {"name", "schema"}}``). Without it
        this is ``complete``: the prompt alone asks for JSON.
        """
        if self.json_mode == "json_object":
            return self._chat(prompt, system, {"type": "json_object", "schema": dict(schema)})
        if self.json_mode == "json_schema":
            spec = {"name": "reply", "schema": dict(schema)}
            return self._chat(prompt, system, {"type": "json_schema", "json_schema": spec})
        return self._chat(prompt, system, None)

    def _chat(self, prompt: str, system: str, response_format: dict[str, Any] | None) -> str:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": _messages(prompt, system),
            "max_tokens": self.max_tokens,
        }
        if self.temperature is not None:
            payload["temperature"] = self.temperature
        if response_format is not None:
            payload["response_format"] = response_format
        answer = self._http.request("/chat/completions", payload)
        choices = answer.get("choices")
        first = choices[0] if isinstance(choices, list) and choices else None
        message = first.get("message") if isinstance(first, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, str):
            url = self._http.url("/chat/completions")
            raise self._http.fail("answer has no choices[0].message.content", url, 200)
        return content


class AnthropicClient:
    """Claude over the Anthropic Messages API; the reply's text blocks are joined.

    ``model`` defaults to env ``DARWIN_MEMO_MODEL``, else ``claude-sonnet-4-6``. The key
    comes from ``api_key`` or env ``ANTHROPIC_API_KEY``; ``base_url`` from the argument,
    env ``ANTHROPIC_BASE_URL``, else the public API.
    """

    def __init__(
        self,
        model: str | None = None,
        max_tokens: int = 1024,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 120.0,
        retries: int = DEFAULT_RETRIES,
        backoff: float = DEFAULT_BACKOFF,
    ) -> None:
        self.model = model or os.environ.get("DARWIN_MEMO_MODEL") or DEFAULT_ANTHROPIC_MODEL
        self.max_tokens = max_tokens
        self.base_url = (
            base_url or os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_ANTHROPIC_URL
        ).rstrip("/")
        key = api_key if api_key is not None else os.environ.get("ANTHROPIC_API_KEY")
        if not key:
            raise LLMError(
                f"AnthropicClient (model {self.model!r}, {httpwire.redact_url(self.base_url)}): "
                "no API key; set ANTHROPIC_API_KEY or pass api_key="
            )
        self._http = _Http(
            client="AnthropicClient",
            model=self.model,
            base_url=self.base_url,
            timeout=timeout,
            retries=retries,
            backoff=backoff,
            headers={"x-api-key": key, "anthropic-version": ANTHROPIC_VERSION},
            secret=key,
        )

    def __repr__(self) -> str:
        shown = httpwire.redact_url(self.base_url)
        return f"AnthropicClient(model={self.model!r}, base_url={shown!r})"

    def complete(self, prompt: str, system: str = "") -> str:
        payload = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "system": system or DEFAULT_SYSTEM,
            "messages": [{"role": "user", "content": prompt}],
        }
        answer = self._http.request("/v1/messages", payload)
        blocks = answer.get("content")
        if not isinstance(blocks, list):
            raise self._http.fail(
                "answer has no content blocks", self._http.url("/v1/messages"), 200
            )
        return "".join(
            block["text"]
            for block in blocks
            if isinstance(block, dict)
            and block.get("type") == "text"
            and isinstance(block.get("text"), str)
        )


MODEL_SPEC_HELP = "ollama:NAME[@URL], anthropic:NAME or openai:NAME@URL"


def client_from_spec(spec: str, *, timeout: float = 120.0) -> LLMClient:
    """A client for a ``--model`` spec: ``ollama:NAME[@URL]``, ``anthropic:NAME[@URL]``
    or ``openai:NAME@URL`` (URL = the API root, e.g. ``http://127.0.0.1:8080/v1``;
    without it ``OPENAI_BASE_URL``, else OpenAI).

    An Ollama server is asked for ``/api/tags`` first, so a missing server is one
    clear error before any work starts. Raises ``LLMError`` for an unknown spec, a
    missing key or an unreachable Ollama.
    """
    provider, sep, rest = spec.partition(":")
    name, at, url = rest.partition("@")
    name, url = name.strip(), url.strip()
    if not sep or not name or (at and not url):
        raise LLMError(f"unknown model spec {spec!r}: expected {MODEL_SPEC_HELP}")
    if provider == "ollama":
        base = url or DEFAULT_OLLAMA_URL
        if not ollama_available(base, timeout=min(timeout, 5.0)):
            raise OllamaError(
                f"OllamaClient (model {name!r}, {base}): no Ollama server answers there "
                "(start one with `ollama serve`, or name another with ollama:NAME@URL)"
            )
        return OllamaClient(name, base_url=base, timeout=timeout)
    if provider == "openai":
        return OpenAICompatClient(name, base_url=url or None, timeout=timeout)
    if provider == "anthropic":
        return AnthropicClient(name, base_url=url or None, timeout=timeout)
    raise LLMError(f"unknown model spec {spec!r}: expected {MODEL_SPEC_HELP}")
