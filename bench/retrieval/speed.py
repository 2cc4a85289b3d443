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

``--oneshot`` measures instead what an agent's one-shot ``darwin-memo ledger
STORE decide QUESTION`` costs on a SQLite store of ``--sizes``' first size that
recorded the ``hybrid`` retriever: each call a new process that loads the model
and reads the store's kept vectors (``backends/sqlvectors.py``; the vectors are
written as such a store keeps them: the turns' nudged vectors, above), and where
that time goes (Python and imports, opening, reading the living rows and vectors
while the model loads in the background, what is left to wait of that load, the
search, the rest of the decide; and the same phases one after another, where
``model_load`` is the load alone); the model's
optimized graph is cached in a new directory, so the first call, which builds that
cache, is reported apart (``first_call_ms``). ``--before N``
also times N calls on a copy whose ``vectors`` table is empty, as every call was
before the store kept vectors (each embedded every entry).

``--serve`` measures a long-lived process holding such a store open (``ledger
STORE serve``, the MCP server): ``Ledger.open(path)``, then decide after decide,
p50 / p95 (the first decide, which loads the model and reads the vectors, apart).
``--stores DIR`` keeps the stores it builds there and reuses them.

    python bench/retrieval/speed.py --oneshot --sizes 10000 --before 1
    python bench/retrieval/speed.py --serve --sizes 10000,100000 --stores /tmp/stores
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
    wall = locomo.timed_decides(ledger, questions)
    return {
        "entries": size,
        "decides": len(wall),
        "decide_ms_p50": round(statistics.median(wall), 1),
        "decide_ms_p95": round(_p(wall, 0.95), 1),
        "build_s": round(built, 1),
    }


#: Where a one-shot decide's time goes, timed step by step in a fresh process: the
#: steps the first dense search of a process takes (``backends/sqldense.py``), one by one.
_PHASES = """
import json, os, sys, time
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the command sets it
t0 = time.perf_counter()
from darwin_memo.cli import main  # what the command imports first
from darwin_memo.ledger import Ledger
t1 = time.perf_counter()
ledger = Ledger.open(sys.argv[1], create=False)
t2 = time.perf_counter()
import numpy as np
t3 = time.perf_counter()
from darwin_memo.backends.sqlvectors import model_tag
from darwin_memo.backends.sqldense import DenseRows
store = ledger.store
dense = store.retriever.dense
overlap = sys.argv[3] == "overlap"
if overlap:  # as the search does it: the model loads while the vectors are read
    dense.embed.preload()
t4 = time.perf_counter()
rows = store._dense_rows = DenseRows(np, model_tag(dense.embed), dense.embed.dims)
rows.sync(store.conn, dense, store._stored_vectors(), store._entries_of_rows)
t5 = time.perf_counter()
dense.embed._load()
t6 = time.perf_counter()
dense.query_vector(sys.argv[2])
t7 = time.perf_counter()
store.retrieve(sys.argv[2], 3)
t8 = time.perf_counter()
ledger.decide(sys.argv[2])
t9 = time.perf_counter()
ledger.close()
load = "model_wait" if overlap else "model_load"
print(json.dumps({"imports": t1 - t0, "open": t2 - t1, "numpy_import": t3 - t2,
                  "model_imports": t4 - t3, "read_rows_and_vectors": t5 - t4, load: t6 - t5,
                  "embed_query": t7 - t6, "search": t8 - t7, "decide_again": t9 - t8}))
"""


def _write_vectors(path: Path, entries: list[MemoryEntry], vectors: list[Any]) -> None:
    """Fill the store's ``vectors`` table as a store that embedded its entries does."""
    import sqlite3
    from array import array

    from darwin_memo.backends.sqlvectors import encode_vector, text_hash
    from darwin_memo.semantic import MODEL_ID

    conn = sqlite3.connect(path)
    try:
        with conn:
            conn.executemany(
                "INSERT OR REPLACE INTO vectors VALUES (?, ?, ?, ?, ?)",
                [
                    (e.id, MODEL_ID, len(v), text_hash(e.text), encode_vector(array("d", v)))
                    for e, v in zip(entries, vectors, strict=True)
                ],
            )
    finally:
        conn.close()


def _cli_decide(path: Path, question: str) -> float:
    """Seconds one ``darwin-memo ledger PATH decide QUESTION`` process takes."""
    import subprocess

    env = dict(os.environ, PYTHONPATH=str(HERE.parents[1] / "src"))
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "darwin_memo", "ledger", str(path), "decide", question],
        check=True,
        capture_output=True,
        env=env,
    )
    return time.perf_counter() - started


def hybrid_store(
    path: Path, size: int, turns: list[locomo.Turn], vectors: list[list[float]]
) -> Path:
    """A SQLite store of ``size`` entries (the turns, then numbered copies) that recorded
    ``hybrid`` and keeps each entry's vector (the turn's, nudged by seeded noise), as
    a store whose entries were embedded once holds them. Made once: an existing file
    at ``path`` is used as it is."""
    import numpy as np

    if path.exists():
        return path
    rng = np.random.default_rng(size)
    base = np.asarray(vectors, dtype=np.float64)
    entries: list[MemoryEntry] = []
    nudged: list[list[float]] = []
    for i in range(size):
        turn = turns[i % len(turns)]
        entry = locomo.entry_for(turn, captions=False)
        if i >= len(turns):
            suffix = f" (copy {i // len(turns)})"
            entry = MemoryEntry(entry.question + suffix, entry.answer, sources=entry.sources)
        entries.append(entry)
        v = base[i % len(turns)] + rng.normal(0.0, 0.02, base.shape[1])
        nudged.append((v / np.linalg.norm(v)).tolist())
    path.parent.mkdir(parents=True, exist_ok=True)
    # Written in bulk (a JSON store copied: ``copy_store``), not one add at a time,
    # which takes tens of minutes at 100k; then the choice of retriever recorded.
    from darwin_memo.transfer import copy_store

    memory = MemoryStore()
    for entry in entries:
        memory.add(entry)
    staged = path.with_suffix(".json")
    Ledger(memory).save(staged)
    del memory
    copy_store(staged, path)
    for leftover in (staged, Path(f"{staged}.lock")):
        leftover.unlink(missing_ok=True)
    with Ledger.open(path, retriever="hybrid"):
        pass
    _write_vectors(path, entries, nudged)
    return path


def serve_latency(path: Path, size: int, questions: list[str]) -> dict[str, Any]:
    """Decides in one long-lived process holding the store open, as ``serve`` and the
    MCP server do: ``Ledger.open(path)`` (the recorded ``hybrid``), decide after
    decide; the first (model load, the vectors read) reported apart."""
    load_before = os.getloadavg()
    with Ledger.open(path, create=False) as ledger:
        started = time.perf_counter()
        first = ledger.decide(questions[0])
        first_ms = (time.perf_counter() - started) * 1e3
        if first.deciding_entry:
            ledger.abandon(first.id)
        wall = locomo.timed_decides(ledger, questions[1:])
    return {
        "entries": size,
        "decides": len(wall),
        "first_decide_ms": round(first_ms, 1),
        "decide_ms_p50": round(statistics.median(wall), 1),
        "decide_ms_p95": round(_p(wall, 0.95), 1),
        "load_average": [round(x, 1) for x in (*load_before, *os.getloadavg())],
    }


def oneshot(
    size: int,
    turns: list[locomo.Turn],
    vectors: list[list[float]],
    questions: list[str],
    before: int,
    stores: Path | None = None,
) -> dict[str, Any]:
    """One-shot decides on a SQLite store of ``size`` entries (see the module docstring)."""
    import shutil
    import sqlite3
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = hybrid_store((stores or Path(tmp)) / f"hybrid-{size}.db", size, turns, vectors)
        # The model's optimized graph is cached (retrieval/graphcache.py): here in a new
        # directory, so the first call builds it (timed apart) and the others read it.
        os.environ["DARWIN_MEMO_CACHE_DIR"] = str(Path(tmp) / "model-cache")
        first = _cli_decide(path, questions[0])
        env = dict(os.environ, PYTHONPATH=str(HERE.parents[1] / "src"))
        python = []
        for _ in range(3):
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], check=True, env=env)
            python.append(time.perf_counter() - started)
        wall = [_cli_decide(path, q) for q in questions]
        phases, alone = (
            [
                json.loads(
                    subprocess.run(
                        [sys.executable, "-c", _PHASES, str(path), q, mode],
                        check=True,
                        capture_output=True,
                        text=True,
                        env=env,
                    ).stdout
                )
                for q in questions[:5]
            ]
            for mode in ("overlap", "one_after_another")
        )
        report: dict[str, Any] = {
            "entries": size,
            "decides": len(wall),
            "oneshot_ms_p50": round(statistics.median(wall) * 1e3),
            "oneshot_ms_max": round(max(wall) * 1e3),
            "first_call_ms": round(first * 1e3),
            "python_start_ms": round(statistics.median(python) * 1e3),
            "phases_ms_p50": {
                name: round(statistics.median(p[name] for p in phases) * 1e3, 1)
                for name in phases[0]
            },
            "phases_one_after_another_ms_p50": {
                name: round(statistics.median(p[name] for p in alone) * 1e3, 1) for name in alone[0]
            },
            "store_mb": round(path.stat().st_size / 2**20, 1),
        }
        if before:
            bare = Path(tmp) / "bare.db"
            took = []
            for q in questions[:before]:
                with sqlite3.connect(path) as conn:  # (the WAL folded in before the copy)
                    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                conn.close()
                shutil.copyfile(path, bare)
                conn = sqlite3.connect(bare)
                try:
                    with conn:
                        conn.execute("DELETE FROM vectors")
                finally:
                    conn.close()
                took.append(_cli_decide(bare, q))
            report["without_vectors_ms"] = [round(t * 1e3) for t in took]
    return report


def main(argv: Sequence[str] | None = None) -> int:
    from darwin_memo.retrieval.embedding import HybridRetriever, SentenceEmbedder

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=locomo.DEFAULT_DATA)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--embed-sample", type=int, default=500)
    parser.add_argument("--oneshot", action="store_true", help="one-shot CLI decides")
    parser.add_argument("--before", type=int, default=0, help="(--oneshot) calls without vectors")
    parser.add_argument(
        "--serve", action="store_true", help="decides in one process holding a SQLite store"
    )
    parser.add_argument(
        "--stores", type=Path, help="(--oneshot, --serve) keep the built stores here, reuse them"
    )
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
    if args.serve:
        import tempfile

        vectors = embedder.batch(texts)
        with tempfile.TemporaryDirectory() as tmp:
            where = args.stores or Path(tmp)
            report = {
                "data_sha256": digest,
                "retriever": "hybrid (recorded by the store), SQLite, vectors kept",
                "serve": [
                    serve_latency(
                        hybrid_store(where / f"hybrid-{n}.db", int(n), turns, vectors),
                        int(n),
                        questions,
                    )
                    for n in args.sizes.split(",")
                ],
            }
        text = json.dumps(report, indent=2)
        if args.out:
            args.out.write_text(text + "\n", encoding="utf-8")
        print(text)
        return 0
    if args.oneshot:
        size = int(args.sizes.split(",")[0])
        found = oneshot(size, turns, embedder.batch(texts), questions, args.before, args.stores)
        found["data_sha256"] = digest
        found["load_average"] = [round(x, 1) for x in os.getloadavg()]
        text = json.dumps(found, indent=2)
        if args.out:
            args.out.write_text(text + "\n", encoding="utf-8")
        print(text)
        return 0
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
