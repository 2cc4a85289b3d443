"""Decide latency of the recommended retriever at 10k and 100k entries, and embedding ingest.

    python bench/retrieval/speed.py                    # 10k and 100k, a table
    python bench/retrieval/speed.py --sizes 10000 --json

Entries are LoCoMo turns (read at run time, as bench/retrieval/locomo.py reads
them) repeated with a numbered suffix until the store holds N. Their vectors are
"cached", as a store that embedded them once holds them: the real MiniLM vectors
of the turns, each copy nudged by a little seeded noise and renormalized, loaded
through the retriever's own ``load_state``. Queries are LoCoMo questions, embedded
live on every decide (as a host process does). Reported: in-process
``Ledger.decide`` wall time p50 / p95 (each answered ticket abandoned outside the
timing), and how many turns per second ``SentenceEmbedder.batch`` embeds.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "src"))
sys.path.insert(0, str(HERE))

import locomo  # noqa: E402

from darwin_memo.ledger import Ledger  # noqa: E402
from darwin_memo.records.entry import MemoryEntry  # noqa: E402
from darwin_memo.store import MemoryStore  # noqa: E402


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def embed_rate(embedder: Any, texts: list[str]) -> float:
    """Texts per second that ``embedder.batch`` embeds (one pass, model already loaded)."""
    embedder.batch(texts[:8])  # load the model outside the timing
    started = time.perf_counter()
    embedder.batch(texts)
    return len(texts) / (time.perf_counter() - started)


def decide_latency(
    size: int,
    turns: list[locomo.Turn],
    vectors: list[list[float]],
    questions: list[str],
    embedder: Any,
    make: Any,
) -> dict[str, Any]:
    import numpy as np

    rng = np.random.default_rng(size)
    retriever = make(embedder)
    store = MemoryStore(retriever=retriever)
    cached: dict[str, list[float]] = {}
    base = np.asarray(vectors, dtype=np.float64)
    started = time.perf_counter()
    for i in range(size):
        turn = turns[i % len(turns)]
        entry = locomo.entry_for(turn, captions=False)
        if i >= len(turns):
            suffix = f" (copy {i // len(turns)})"
            entry = MemoryEntry(entry.question + suffix, entry.answer, sources=entry.sources)
        store.add(entry)
        v = base[i % len(turns)] + rng.normal(0.0, 0.02, base.shape[1])
        cached[entry.id] = (v / np.linalg.norm(v)).tolist()
    dense = getattr(retriever, "dense", retriever)
    dense.load_state({"vectors": cached, "model": embedder.model_id})
    built = time.perf_counter() - started
    ledger = Ledger(store)
    ledger.decide(questions[0])  # lists and fills the indexes outside the timing
    wall: list[float] = []
    for q in questions:
        t = time.perf_counter()
        ticket = ledger.decide(q)
        wall.append((time.perf_counter() - t) * 1e3)
        if ticket.deciding_entry:
            ledger.abandon(ticket.id)
    return {
        "entries": size,
        "decides": len(wall),
        "decide_ms_p50": round(statistics.median(wall), 1),
        "decide_ms_p95": round(_p(wall, 0.95), 1),
        "build_s": round(built, 1),
    }


def main(argv: Sequence[str] | None = None) -> int:
    from darwin_memo.retrieval.embedding import HybridRetriever, SentenceEmbedder

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=locomo.DEFAULT_DATA)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--embed-sample", type=int, default=500)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    convs, digest = locomo.load(args.data)
    turns = [t for c in convs for t in c.turns]
    questions = [q.text for c in convs for q in c.questions if q.category in locomo.CATEGORIES]
    random.Random(0).shuffle(questions)
    questions = questions[: args.queries]
    embedder = SentenceEmbedder()
    texts = [locomo.entry_for(t, captions=False).text for t in turns]
    rate = embed_rate(embedder, texts[: args.embed_sample])
    vectors = embedder.batch(texts)
    load_before = os.getloadavg()
    report: dict[str, Any] = {
        "data_sha256": digest,
        "retriever": "HybridRetriever()",
        "embed_entries_per_s": round(rate, 1),
        "embed_sample": min(args.embed_sample, len(texts)),
        "decide": [
            decide_latency(int(n), turns, vectors, questions, embedder, HybridRetriever)
            for n in args.sizes.split(",")
        ],
    }
    # Wall clock on a shared machine: its load average says how busy it was.
    report["load_average"] = [round(x, 1) for x in (*load_before, *os.getloadavg())]
    text = json.dumps(report, indent=2)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    if args.json:
        print(text)
    else:
        print(f"embedding ingest: {report['embed_entries_per_s']} entries/s")
        for row in report["decide"]:
            print(
                f"{row['entries']:>7} entries: decide p50 {row['decide_ms_p50']} ms, "
                f"p95 {row['decide_ms_p95']} ms ({row['decides']} decides)"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
