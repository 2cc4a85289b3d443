"""Dense decide on PostgreSQL: pgvector exact, pgvector HNSW, and the in-process scan.

    PYTHONPATH=src:<pgserver's site> .venv/bin/python bench/perf/pgvector_scale.py \\
        --sizes 10000,100000 --dims 256

Starts a throwaway PostgreSQL 16 with pgvector from the ``pgserver`` wheel
(``tests/pgcluster.py``), copies a store of N lessons into it (``copy_store``),
and gives every entry a seeded random vector of ``--dims`` float32 components
(a stand-in embedding with a model id: the cost of the real model is not what is
measured). Half the queries are a noisy copy of one entry's vector, half are
random. For each mode (``vectors=exact``, ``vectors=hnsw``, ``vectors=off``, the
last being the in-process exact scan every store used before) it reports the
first search (which builds the vector table, and the index for HNSW), the decide
p50/p90 and, against the exact scan, whether the top 10 is identical (exact
modes) and the recall@10 (HNSW). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))


class Vectors:
    """Seeded float32 vectors; ``near <j> <i>`` is entry j's plus noise.

    With ``clusters`` > 0, entry i lies around one of that many random centres (topics,
    as real embeddings have them); with 0, every vector is independent noise (the
    hardest case for an approximate index).
    """

    def __init__(self, dims: int, texts: dict[str, int], clusters: int = 0) -> None:
        import numpy as np

        self.np = np
        self.dims = dims
        self.clusters = clusters
        self.model_id = f"bench-random-{dims}-{clusters}"
        self.texts = texts  # entry text -> ordinal, so a query can be near an entry

    def _of(self, seed: int) -> Any:
        return self.np.random.default_rng(seed).standard_normal(self.dims)

    def entry(self, i: int) -> Any:
        if not self.clusters:
            return self._of(i)
        return self._of(2 * 10**10 + i % self.clusters) + 0.8 * self._of(i)

    def __call__(self, text: str) -> list[float]:
        np = self.np
        if text.startswith("near "):
            _, j, i = text.split()
            v = self.entry(int(j)) + 0.9 * self._of(10**9 + int(i))
        elif text in self.texts:
            v = self.entry(self.texts[text])
        else:
            v = self._of(zlib.crc32(text.encode()) + 10**10)
        return [float(x) for x in v.astype(np.float32)]

    def batch(self, texts: list[str]) -> list[list[float]]:
        return [self(t) for t in texts]


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(p * len(xs)))] * 1000, 2)


def run(
    n: int, dims: int, base: str, workdir: Path, count: int, slow: int, args: Any
) -> dict[str, Any]:
    import lessons as L

    from darwin_memo import EmbeddingRetriever, MemoryEntry, MemoryStore
    from darwin_memo.ledger import Ledger
    from darwin_memo.transfer import copy_store

    store = MemoryStore()
    texts: dict[str, int] = {}
    for i, (eid, q, a, source) in enumerate(L.lessons(1, n)):
        entry = MemoryEntry(q, a, sources=[source], id=eid)
        store.add(entry)
        texts[entry.text] = i
    src = workdir / f"v{n}.json"
    Ledger(store).save(src)
    url = f"{base}?store=vec_{n}_{dims}_{int(time.time())}"
    t0 = time.perf_counter()
    copy_store(src, url)
    out: dict[str, Any] = {"n": n, "dims": dims, "clusters": args.clusters}
    out["copy_s"] = round(time.perf_counter() - t0, 1)
    embed = Vectors(dims, texts, args.clusters)
    queries = [f"near {(i * 7919) % n} {i}" if i % 2 == 0 else f"random {i}" for i in range(count)]
    tops: dict[str, list[list[str]]] = {}
    for mode in args.modes.split(","):
        qs = queries if mode != "off" else queries[:slow]
        with Ledger.open(f"{url}&vectors={mode}") as ledger:
            ledger.store.retriever = EmbeddingRetriever(embed, min_similarity=0.1)
            t0 = time.perf_counter()
            ledger.store.retrieve("first search", 3)
            first = time.perf_counter() - t0
            lat = []
            for q in qs:
                t0 = time.perf_counter()
                ledger.decide(q, 3)
                lat.append(time.perf_counter() - t0)
            tops[mode] = [[e.id for e, _ in ledger.store.retrieve(q, 10)] for q in qs]
        out[mode] = {
            "first_search_s": round(first, 2),
            "decide_p50_ms": pct(lat, 0.5),
            "decide_p90_ms": pct(lat, 0.9),
            "queries": len(qs),
        }
        print(json.dumps({mode: out[mode]}), file=sys.stderr, flush=True)
    if "off" in tops and "exact" in tops:
        ref = tops["off"]
        out["exact_top10_identical_to_scan"] = tops["exact"][: len(ref)] == ref
    if "hnsw" in tops and "exact" in tops:
        pairs = list(zip(tops["hnsw"], tops["exact"], strict=True))
        for name, part in (("all", pairs), ("near", pairs[::2]), ("random", pairs[1::2])):
            total = sum(len(b) for _, b in part)
            hits = sum(len(set(a) & set(b)) for a, b in part)
            out[f"hnsw_recall_at_10_{name}"] = round(hits / total, 4) if total else None
        top1 = [(a[:1], b[:1]) for a, b in pairs[::2] if b]
        out["hnsw_recall_at_1_near"] = round(sum(a == b for a, b in top1) / max(1, len(top1)), 4)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000")
    parser.add_argument("--dims", type=int, default=256)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--slow-queries", type=int, default=4, help="for vectors=off")
    parser.add_argument("--clusters", type=int, default=0, help="topics (0: pure noise)")
    parser.add_argument("--modes", default="exact,hnsw,off")
    parser.add_argument("--ef-search", type=int, default=None, help="least hnsw.ef_search")
    args = parser.parse_args()
    if args.ef_search is not None:
        from darwin_memo.backends import pgdense

        pgdense.HNSW_EF_SEARCH = args.ef_search
    from pgcluster import PgCluster, pgserver_bindir

    bindir = pgserver_bindir()
    if bindir is None:
        sys.exit("needs pgserver (pip install pgserver), which bundles PostgreSQL 16 + pgvector")
    cluster = PgCluster(bindir)
    cluster.init()
    with (cluster.data / "postgresql.conf").open("a") as fh:
        fh.write("shared_buffers = 512MB\nmaintenance_work_mem = 512MB\n")
    cluster.start()
    try:
        base = cluster.url("x").split("?")[0]
        with tempfile.TemporaryDirectory() as tmp:
            results = [
                run(int(n), args.dims, base, Path(tmp), args.queries, args.slow_queries, args)
                for n in args.sizes.split(",")
            ]
    finally:
        cluster.destroy()
    print(json.dumps({"results": results}, indent=1))


if __name__ == "__main__":
    main()
