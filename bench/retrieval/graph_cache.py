"""Does the cached optimized graph (retrieval/graphcache.py) pay, and is it exact?

    python bench/retrieval/graph_cache.py --out bench/retrieval/results/graph_cache.json

1. Identity: 300 LoCoMo turns (read at run time, a seeded sample) plus non-ASCII,
   empty-ish and over-long texts, embedded by ``SentenceEmbedder(cache=False)`` (the
   session built as before: onnxruntime's default optimizations) and by a
   ``SentenceEmbedder()`` that loaded the cached graph, for each thread setting;
   the vectors must be equal to the bit (``identical`` = rows equal, ``max_abs_diff``).
2. Load time: ``SentenceEmbedder._load()`` in fresh processes (onnxruntime, tokenizers
   and numpy imported first, outside the timing), without and with the cache, in
   turn; and the first process, which builds the cache. The 1-minute load average
   before and after says how busy the shared machine was.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "src"))
sys.path.insert(0, str(HERE))

import locomo  # noqa: E402

from darwin_memo.retrieval.embedding import SentenceEmbedder  # noqa: E402

EDGE_CASES = [
    "",
    " ",
    "?",
    "a",
    "\n\t",
    "Ünïcödé straße, café, naïve façade",
    "日本語のテキストです。東京で会いましょう。",
    "Привет, как дела?",
    "مرحبا بالعالم",
    "emoji 😀🎉👍 party",
    "/usr/lib/python3.11/site-packages/foo.py:123 E1101",
    "word " * 600,
    "x" * 5000,
]

_TIMED = """
import sys, time
import numpy, onnxruntime, tokenizers
from darwin_memo.retrieval.embedding import SentenceEmbedder
embedder = SentenceEmbedder(cache=sys.argv[1] == "cache")
started = time.perf_counter()
embedder._load()
print(time.perf_counter() - started)
"""


def identity(texts: list[str], threads: int | None) -> dict[str, Any]:
    """The cached session's vectors against the uncached one's, for ``threads``."""
    import numpy as np

    reference = SentenceEmbedder(threads=threads, cache=False).batch(texts)
    import onnxruntime  # (after darwin-memo's first import of it, telemetry off)

    SentenceEmbedder(threads=threads)._load()  # builds the cache
    loaded = SentenceEmbedder(threads=threads)
    found = loaded.batch(texts)
    level = loaded._session.get_session_options().graph_optimization_level
    singles = texts[::10]
    return {
        "threads": threads,
        "from_cache": bool(level == onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL),
        "texts": len(texts),
        "identical": sum(a == b for a, b in zip(reference, found, strict=True)),
        "max_abs_diff": float(np.abs(np.asarray(reference) - np.asarray(found)).max()),
        "single_calls_identical": sum(
            loaded(t) == v for t, v in zip(singles, reference[::10], strict=True)
        ),
        "single_calls": len(singles),
    }


def load_ms(mode: str, env: dict[str, str]) -> float:
    out = subprocess.run(
        [sys.executable, "-c", _TIMED, mode], check=True, capture_output=True, text=True, env=env
    ).stdout
    return float(out) * 1e3


def summary(values: list[float]) -> dict[str, float]:
    return {
        "p50": round(statistics.median(values), 1),
        "min": round(min(values), 1),
        "max": round(max(values), 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=locomo.DEFAULT_DATA)
    parser.add_argument("--sample", type=int, default=300)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    convs, digest = locomo.load(args.data)
    turns = [t.text for c in convs for t in c.turns]
    texts = random.Random(0).sample(turns, args.sample) + EDGE_CASES
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["DARWIN_MEMO_CACHE_DIR"] = str(Path(tmp) / "identity")
        same = [identity(texts, threads) for threads in (None, 1, 2)]
        env = dict(
            os.environ,
            DARWIN_MEMO_CACHE_DIR=str(Path(tmp) / "timing"),
            PYTHONPATH=str(HERE.parents[1] / "src"),
        )
        load_before = os.getloadavg()
        first = load_ms("cache", env)
        plain: list[float] = []
        cached: list[float] = []
        for _ in range(args.runs):
            plain.append(load_ms("plain", env))
            cached.append(load_ms("cache", env))
        load_after = os.getloadavg()
    report = {
        "data_sha256": digest,
        "identity": same,
        "load_ms": {
            "without_cache": summary(plain),
            "from_cache": summary(cached),
            "first_process_builds_cache": round(first, 1),
            "runs": args.runs,
        },
        "speedup_p50": round(statistics.median(plain) / statistics.median(cached), 2),
        "load_average": [round(x, 1) for x in (*load_before, *load_after)],
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    text = json.dumps(report, indent=2)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
