"""Scale of the associative graph: build time, ``related(id)`` latency and ANN recall.

    .venv/bin/python -m bench.organic.scale                 # 100k lessons (a few minutes)
    .venv/bin/python -m bench.organic.scale --n 10000 --out /tmp/scale.json
    .venv/bin/python -m bench.organic.scale --n 1000000 --no-brute --queries 100 \
        --out bench/organic/results/scale_1m.json       # turbovec only (~5 GB of memory)

Builds ``AssociativeGraph`` over ``--n`` synthetic lessons (``bench/perf/lessons.py``,
seed 0: Zipf vocabulary, templated and free text) twice, with the default
``BruteForceBackend`` (exact, pure Python) and with ``TurbovecBackend(256, 4)`` (the
``organic`` extra), and reports for each:

* build time (embedding included, the same ``HashingEmbedder`` for both);
* ``graph.related(id, k)`` latency over random living entries (p50, p95);
* recall@k of the turbovec graph: the share of the exact top-k (the entry's true
  cosine top-k, computed with numpy over the same vectors) that it returns; and the
  same with ties counted (a returned entry exactly as close as the k-th is a hit:
  templated lessons have exact duplicates, and which of them is "the" top-k is
  arbitrary).

Also ``OrganicMemory.related`` with the turbovec backend, over an unchanged store
(``sync`` finds nothing moved and the importance peaks are kept) and right after a
change made through the store: a balance credited (the credit peak is recomputed:
one pass over the population) and an entry added (it joins the graph; the peaks are
recomputed). The brute-force latency is timed on fewer queries (``--brute-queries``):
each scans the whole store; ``--no-brute`` skips it (at a million entries a search
is tens of seconds). Writes ``bench/organic/results/scale.json`` (machine, versions,
peak memory, every number).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import darwin_memo
from darwin_memo import MemoryEntry, MemoryStore
from darwin_memo.organic import AssociativeGraph, BruteForceBackend, OrganicMemory, build_graph
from darwin_memo.organic.turbovec_backend import TurbovecBackend

from ..perf.lessons import lessons

RESULTS = Path(__file__).resolve().parent / "results"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def timed_related(graph: AssociativeGraph, ids: list[str], k: int) -> list[float]:
    times = []
    for entry_id in ids:
        start = time.perf_counter()
        graph.related(entry_id, k)
        times.append((time.perf_counter() - start) * 1000)
    return times


def timed_om(om: OrganicMemory, ids: list[str], k: int, before: Any = None) -> list[float]:
    """``om.related`` latency per id; ``before(i)`` (untimed) changes the store first."""
    times = []
    for n, entry_id in enumerate(ids):
        if before is not None:
            before(n)
        start = time.perf_counter()
        om.related(entry_id, k)
        times.append((time.perf_counter() - start) * 1000)
    return times


def summary(times: list[float]) -> dict[str, Any]:
    return {
        "queries": len(times),
        "p50_ms": round(statistics.median(times), 3),
        "p95_ms": round(percentile(times, 0.95), 3),
    }


def build(store: MemoryStore, backend: Any) -> tuple[AssociativeGraph, float]:
    """``build_graph`` with the given backend, timed (embedding included)."""
    start = time.perf_counter()
    graph = build_graph(store, backend=backend)
    return graph, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--brute-queries", type=int, default=10)
    ap.add_argument("--no-brute", action="store_true", help="skip the brute-force backend")
    ap.add_argument("--out", type=Path, default=RESULTS / "scale.json")
    args = ap.parse_args(argv)

    start = time.perf_counter()
    store = MemoryStore()
    for eid, question, answer, source in lessons(0, args.n):
        store.add(MemoryEntry(question, answer, sources=[source], id=eid))
    store_s = time.perf_counter() - start
    print(f"store: {args.n} lessons in {store_s:.1f} s", flush=True)
    rng = random.Random(0)
    ids = [e.id for e in store.alive()]
    sample = rng.sample(ids, min(args.queries, len(ids)))

    brute: AssociativeGraph | None = None
    brute_ms: list[float] = []
    brute_build = 0.0
    if not args.no_brute:
        brute, brute_build = build(store, BruteForceBackend())
        print(f"brute force: built in {brute_build:.1f} s", flush=True)
        brute_ms = timed_related(brute, sample[: args.brute_queries], args.k)
        print(f"brute force: related p50 {statistics.median(brute_ms):.1f} ms", flush=True)

    tv, tv_build = build(store, TurbovecBackend(256, bit_width=4))
    print(f"turbovec: built in {tv_build:.1f} s", flush=True)
    tv_ms = timed_related(tv, sample, args.k)
    print(f"turbovec: related p50 {statistics.median(tv_ms):.2f} ms", flush=True)

    # Exact top-k by numpy over the very vectors the graphs hold.
    order = ids
    matrix = np.asarray([tv.vector(i) for i in order], dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=1)
    norms[norms == 0] = 1.0
    unit = matrix / norms[:, None]
    row_of = {entry_id: r for r, entry_id in enumerate(order)}
    recalls: dict[int, list[float]] = {k: [] for k in (1, 5, args.k)}
    tie_recalls: dict[int, list[float]] = {k: [] for k in recalls}
    agree_brute = 0
    for entry_id in sample:
        sims = unit @ unit[row_of[entry_id]]
        sims[row_of[entry_id]] = -np.inf
        got = [i for i, _ in tv.related(entry_id, args.k)]
        exact_top = [order[r] for r in np.argsort(-sims, kind="stable")[: args.k]]
        ranked = np.sort(sims)[::-1]
        for k in recalls:
            recalls[k].append(len(set(got[:k]) & set(exact_top[:k])) / k)
            # Tie-aware: a returned entry exactly as close as the k-th counts as found.
            kth = ranked[k - 1]
            found = sum(1 for i in got[:k] if sims[row_of[i]] >= kth - 1e-9)
            tie_recalls[k].append(found / k)
    for entry_id in sample[: args.brute_queries] if brute is not None else []:
        sims = unit @ unit[row_of[entry_id]]
        sims[row_of[entry_id]] = -np.inf
        exact_top = [order[r] for r in np.argsort(-sims, kind="stable")[: args.k]]
        agree_brute += [i for i, _ in brute.related(entry_id, args.k)] == exact_top
    del matrix, unit, norms

    # The facade over the built turbovec graph (no second build). It was made over
    # another store, so its first read (untimed) walks this one once, finding nothing
    # to add; every read after follows only what changed.
    om = OrganicMemory(MemoryStore())
    om.store, om.graph = store, tv
    om_sample = sample[:50]
    om.related(om_sample[0], args.k)
    om_ms = timed_om(om, om_sample, args.k)
    print(f"OrganicMemory.related p50 {statistics.median(om_ms):.2f} ms", flush=True)
    credited = timed_om(om, om_sample[:20], args.k, lambda n: store.credit(ids[n], 0.1, 1))
    added = timed_om(
        om,
        om_sample[:20],
        args.k,
        lambda n: store.add(MemoryEntry(f"late lesson {n}?", "yes", id=f"late{n:06d}")),
    )

    result: dict[str, Any] = {
        "n": args.n,
        "k": args.k,
        "queries": len(sample),
        "brute_queries": len(brute_ms),
        "embedder": "HashingEmbedder(256)",
        "store_s": round(store_s, 2),
    }
    if brute is not None:
        result["brute_force"] = {
            "build_s": round(brute_build, 2),
            "related_p50_ms": round(statistics.median(brute_ms), 2),
            "related_p95_ms": round(percentile(brute_ms, 0.95), 2),
            "matches_numpy_exact_top_k": f"{agree_brute}/{len(brute_ms)}",
        }
    result |= {
        "turbovec": {
            "bit_width": 4,
            "build_s": round(tv_build, 2),
            "related_p50_ms": round(statistics.median(tv_ms), 3),
            "related_p95_ms": round(percentile(tv_ms, 0.95), 3),
            **{f"recall_at_{k}": round(statistics.fmean(v), 4) for k, v in recalls.items()},
            **{
                f"recall_at_{k}_ties_counted": round(statistics.fmean(v), 4)
                for k, v in tie_recalls.items()
            },
        },
        "organic_memory_related_turbovec": summary(om_ms),
        "organic_memory_related_after_a_credit": summary(credited),
        "organic_memory_related_after_an_add": summary(added),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
            "darwin_memo": darwin_memo.__version__,
            "numpy": np.__version__,
        },
        "command": f".venv/bin/python -m bench.organic.scale --n {args.n}"
        + (" --no-brute" if args.no_brute else "")
        + (f" --queries {args.queries}" if args.queries != 300 else ""),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
