"""The survival loop in LLM mode, with a local model deciding every task.

The demo's world (``StorageEnv``: delete files to free space, lose 3x a file's
size when a protected one is destroyed) runs with ``QueryProtocol`` in LLM mode:
for every task the model splits the question, reads numbered snippets and cites
the ones it used, and only the cited entries are paid or punished. By default
the model is SmolLM2-135M-Instruct served on loopback (see bench/llm/_server.py
for the install); ``--url`` uses any OpenAI-compatible server instead, e.g. a
bigger local model::

    python bench/llm/survival.py --server-python .llm-venv/bin/python
    python bench/llm/survival.py --url http://127.0.0.1:8080/v1 --model NAME --cycles 30
    python bench/llm/survival.py ... --reflect     # encode with ReflectionEncoder too

It prints the survival table, the survivors and the graveyard with causes, and
the model's citation behaviour (answers with a SOURCES line, explicit none,
fallback spreads), then writes the numbers to ``--out`` as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "src"))
sys.path.insert(0, str(HERE))

from _server import MODEL_ALIAS, default_python, find_gguf, llama_server  # noqa: E402

from darwin_memo.answer.clients import OpenAICompatClient  # noqa: E402
from darwin_memo.answer.model_protocol import split_citations  # noqa: E402
from darwin_memo.answer.protocol import QueryProtocol  # noqa: E402
from darwin_memo.economy.config import SurvivalConfig  # noqa: E402
from darwin_memo.economy.lifecycle import death_cause  # noqa: E402
from darwin_memo.sim.encode import LocalEncoder, demo_corpus  # noqa: E402
from darwin_memo.sim.environments import StorageEnv  # noqa: E402
from darwin_memo.sim.reflection import ReflectionEncoder  # noqa: E402
from darwin_memo.sim.survival import SurvivalLoop  # noqa: E402
from darwin_memo.store import MemoryStore  # noqa: E402

POISON = "forum-post"


class Counting:
    """Counts answer-call replies by how they attribute credit."""

    def __init__(self, inner: OpenAICompatClient) -> None:
        self.inner = inner
        self.calls = 0
        self.seconds = 0.0
        self.cited = self.none = self.unparsed = 0

    def complete(self, prompt: str, system: str = "") -> str:
        started = time.perf_counter()
        reply = self.inner.complete(prompt, system)
        self.seconds += time.perf_counter() - started
        self.calls += 1
        if "SOURCES: [1] [3]" in prompt:  # the answer-seeking prompt
            _, cited = split_citations(reply, 10_000)
            if cited is None:
                self.unparsed += 1
            elif cited:
                self.cited += 1
            else:
                self.none += 1
        return reply


def run(url: str, model: str, args: argparse.Namespace) -> dict[str, Any]:
    client = Counting(OpenAICompatClient(model, base_url=url, api_key="", timeout=300))
    docs = demo_corpus()
    if args.reflect:
        entries = ReflectionEncoder(client, max_workers=1).encode(docs)
    else:
        entries = LocalEncoder().encode(docs)
    store = MemoryStore()
    for e in entries:
        store.add(e)
    poisoned = {e.id for e in store.alive() if POISON in e.sources}
    print(f"{len(store)} entries ({len(poisoned)} from the poisoned {POISON}); model {model}")
    started = time.perf_counter()
    with StorageEnv(files_per_cycle=args.files_per_cycle, seed=args.seed) as env:
        loop = SurvivalLoop(
            store,
            env,
            protocol=QueryProtocol(store, client),
            config=SurvivalConfig(cycles=args.cycles),
        )
        report = loop.run()
    seconds = time.perf_counter() - started
    print(report.summary())
    causes: dict[str, int] = {}
    for e in store.graveyard():
        cause = death_cause(e, poisoned, loop.merged_away)
        causes[cause] = causes.get(cause, 0) + 1
    alive_poison = sum(1 for e in store.alive() if POISON in e.sources)
    print(f"survivors {len(store)}, graveyard {causes}, poisoned still alive {alive_poison}")
    print(
        f"answers citing snippets {client.cited}, explicit none {client.none}, "
        f"no SOURCES line (even spread) {client.unparsed}; "
        f"{client.calls} model calls, {client.seconds:.0f}s in the model"
    )
    return {
        "model": model,
        "cycles": args.cycles,
        "files_per_cycle": args.files_per_cycle,
        "seed": args.seed,
        "encoder": "reflection" if args.reflect else "local",
        "entries": len(entries),
        "poisoned": len(poisoned),
        "poisoned_alive_at_end": alive_poison,
        "survivors": len(store),
        "graveyard": causes,
        "answers_cited": client.cited,
        "answers_none": client.none,
        "answers_unparsed": client.unparsed,
        "model_calls": client.calls,
        "seconds": round(seconds, 1),
        "summary": report.summary(),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="an OpenAI-compatible server already running (API root)")
    parser.add_argument("--model", default=MODEL_ALIAS, help="model name sent to --url")
    parser.add_argument("--server-python", default=default_python(), help="python with llama_cpp")
    parser.add_argument("--gguf", type=Path)
    parser.add_argument("--cycles", type=int, default=5)
    parser.add_argument("--files-per-cycle", type=int, default=4)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--reflect", action="store_true", help="encode with the model too")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, help="write the numbers here as JSON")
    args = parser.parse_args(argv)
    if args.url:
        result = run(args.url, args.model, args)
    else:
        gguf = args.gguf or find_gguf(args.server_python)
        with llama_server(args.server_python, gguf, threads=args.threads) as url:
            result = run(url, MODEL_ALIAS, args)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
