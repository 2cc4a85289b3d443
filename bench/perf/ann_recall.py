"""Recall and speed of ``IvfIndex`` (approximate) against the exact embedding search.

    PYTHONPATH=src python bench/perf/ann_recall.py LESSONS.jsonl QUERIES.json \
        [--n 100000] [--nprobe 8,16,32,64] [--k 10]

Indexes the first ``--n`` lessons (``bench/perf/lessons.py`` writes LESSONS.jsonl and
QUERIES.json) in an ``EmbeddingRetriever(HashingEmbedder())``, embeds them once, then
for each ``--nprobe`` builds an ``IvfIndex`` over the same matrix and answers the
realistic queries both ways. Prints per setting: the training time, recall@k (the
share of the exact top-k that the index also returns), the median search time of
each path (query embedding and the exact re-scoring included) and the share of rows
the index scanned.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from darwin_memo.records.entry import MemoryEntry
from darwin_memo.retrieval.ann import IvfIndex
from darwin_memo.retrieval.lexical import EmbeddingRetriever, HashingEmbedder


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("lessons")
    ap.add_argument("queries")
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--nprobe", default="8,16,32,64,0", help="0: the default (a tenth)")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--max-queries", type=int, default=200)
    args = ap.parse_args()
    entries = []
    with open(args.lessons, encoding="utf-8") as fh:
        for line, _ in zip(fh, range(args.n), strict=False):
            eid, question, answer, _source = json.loads(line)
            entries.append(MemoryEntry(question=question, answer=answer, id=eid))
    with open(args.queries, encoding="utf-8") as fh:
        queries = json.load(fh)["realistic"][: args.max_queries]
    embed = HashingEmbedder()
    exact = EmbeddingRetriever(embed)
    start = time.perf_counter()
    for entry in entries:
        exact.index(entry)
    exact.search("warm up", 1)
    print(json.dumps({"rows": len(entries), "embed_s": round(time.perf_counter() - start, 1)}))
    truth, exact_ms = [], []
    for q in queries:
        t = time.perf_counter()
        truth.append({i for i, _ in exact.search(q, args.k)})
        exact_ms.append((time.perf_counter() - t) * 1e3)
    for nprobe in (int(x) for x in args.nprobe.split(",")):
        index = IvfIndex(nprobe=nprobe or None)
        approx = EmbeddingRetriever(embed, ann=index)
        # The same rows and vectors: only the search differs.
        approx.__dict__.update(
            {key: exact.__dict__[key] for key in ("_vectors", "_row_of", "_row_ids", "_members")}
        )
        approx._matrix = exact._matrix
        start = time.perf_counter()
        approx.search("warm up", 1)  # trains the index
        train_s = time.perf_counter() - start
        found = total = 0
        ann_ms, scanned = [], []
        import numpy as np

        for q, want in zip(queries, truth, strict=True):
            t = time.perf_counter()
            got = {i for i, _ in approx.search(q, args.k)}
            ann_ms.append((time.perf_counter() - t) * 1e3)
            found += len(want & got)
            total += len(want)
            unit = np.asarray(approx._embed(q), dtype=np.float32)
            unit /= max(float(np.linalg.norm(unit)), 1e-12)
            scanned.append(len(index.scores(np, approx._matrix, len(entries), unit)[0]))
        print(
            json.dumps(
                {
                    "nprobe": nprobe,
                    "nlist": len(index._lists),
                    "train_s": round(train_s, 2),
                    f"recall_at_{args.k}": round(found / max(total, 1), 3),
                    "exact_p50_ms": round(statistics.median(exact_ms), 2),
                    "ann_p50_ms": round(statistics.median(ann_ms), 2),
                    "rows_scanned_share": round(statistics.mean(scanned) / len(entries), 4),
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
