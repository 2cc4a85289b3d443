"""Retrieval recall on real conversations: LoCoMo, one store per conversation.

Each dialogue turn becomes one entry (question = the turn's text, answer = the
speaker and the session's date, sources = [the turn's dia_id]); each LoCoMo
question of categories 1-4 (multi-hop, temporal, open-domain, single-hop) is asked
with ``MemoryStore.retrieve`` and is a hit at k when any of its evidence turns is
among the top k. Every retriever keeps its default relevance floor (silence is a
miss). Category 5 (adversarial: questions the conversation does not answer) is
reported as the share of questions on which memory stays silent.

Also measured per retriever: ingest (adding every turn to the store and embedding
it, entries/s) and in-process ``Ledger.decide`` latency (p50 / p95).

The data is read at run time and never copied (see ../shared/data/README.md)::

    python bench/retrieval/locomo.py                       # every retriever, a table
    python bench/retrieval/locomo.py --retrievers lexical,bm25 --json
    python bench/retrieval/locomo.py --out bench/retrieval/results/locomo-dev.json

``--data`` takes the zip, a folder of conversation JSON files, or one such file.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import statistics
import sys
import time
import zipfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(HERE))

from darwin_memo.ledger import Ledger  # noqa: E402
from darwin_memo.records.entry import EntryKind, MemoryEntry  # noqa: E402
from darwin_memo.retrieval.lexical import (  # noqa: E402
    EmbeddingRetriever,
    HashingEmbedder,
    LexicalRetriever,
)
from darwin_memo.store import MemoryStore  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo-dev.zip"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
ADVERSARIAL = 5
KS = (5, 10)
_SESSION = re.compile(r"session_(\d+)$")


@dataclass
class Turn:
    dia_id: str
    speaker: str
    text: str
    date: str
    caption: str = ""


@dataclass
class Question:
    text: str
    category: int
    evidence: list[str]


@dataclass
class Conversation:
    name: str
    turns: list[Turn] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)


def _norm_id(dia_id: str) -> str:
    """``D1:3`` as written; LoCoMo has a few ids with stray spaces (``D 1:3``)."""
    return dia_id.replace(" ", "")


def parse_conversation(name: str, doc: dict[str, Any]) -> Conversation:
    """One LoCoMo conversation object (``conversation`` may wrap the sessions)."""
    sessions = doc.get("conversation", doc)
    conv = Conversation(name)
    numbers = sorted(
        int(m.group(1))
        for key, value in sessions.items()
        if (m := _SESSION.match(key)) and isinstance(value, list)
    )
    for n in numbers:
        date = str(sessions.get(f"session_{n}_date_time", ""))
        for turn in sessions[f"session_{n}"]:
            conv.turns.append(
                Turn(
                    dia_id=_norm_id(str(turn["dia_id"])),
                    speaker=str(turn["speaker"]),
                    text=str(turn["text"]),
                    date=date,
                    caption=str(turn.get("blip_caption") or ""),
                )
            )
    for qa in doc.get("qa", []):
        conv.questions.append(
            Question(
                text=str(qa["question"]),
                category=int(qa["category"]),
                evidence=[_norm_id(str(e)) for e in qa.get("evidence", [])],
            )
        )
    return conv


def load(path: Path) -> tuple[list[Conversation], str]:
    """The conversations at ``path`` (zip, folder or file), and the data's sha256."""
    if not path.exists():
        raise SystemExit(
            f"error: {path} not found; pass --data (the LoCoMo zip, a folder or a JSON file)"
        )
    digest = hashlib.sha256()
    docs: list[tuple[str, Any]] = []
    if path.is_dir():
        files = sorted(path.glob("*.json"))
        for f in files:
            raw = f.read_bytes()
            digest.update(raw)
            docs.append((f.stem, json.loads(raw)))
    elif zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            for member in sorted(n for n in z.namelist() if n.endswith(".json")):
                raw = z.read(member)
                digest.update(raw)
                docs.append((Path(member).stem, json.loads(raw)))
    else:
        raw = path.read_bytes()
        digest.update(raw)
        loaded = json.loads(raw)
        items = loaded if isinstance(loaded, list) else [loaded]
        docs = [(str(d.get("sample_id", i)), d) for i, d in enumerate(items)]
    convs: list[Conversation] = []
    for name, doc in docs:
        for i, one in enumerate(doc if isinstance(doc, list) else [doc]):
            convs.append(parse_conversation(name if not isinstance(doc, list) else f"{i}", one))
    if not convs:
        raise SystemExit(f"error: {path} holds no conversation")
    return convs, digest.hexdigest()


def entry_for(turn: Turn, captions: bool) -> MemoryEntry:
    """The entry a turn becomes: the turn's text; the speaker and session date."""
    text = turn.text
    if captions and turn.caption:
        text = f"{text} [shares {turn.caption}]"
    return MemoryEntry(
        question=text,
        answer=f"{turn.speaker} on {turn.date}",
        kind=EntryKind.EXPLICIT,
        sources=[turn.dia_id],
    )


# -- the retrievers -----------------------------------------------------------


class MemoEmbedder:
    """A sentence embedder whose entry vectors (``batch``) are kept across retrievers.

    Every retriever embeds the same turns; embedding them once per run keeps the
    run short. ``spent``/``embedded`` count the real model work, so ingest figures
    can charge each retriever the model's measured cost per text. Queries
    (``__call__``) always run the model, so decide latency includes them.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.memo: dict[str, list[float]] = {}
        self.spent = 0.0
        self.embedded = 0

    def __call__(self, text: str) -> list[float]:
        return self.inner(text)  # type: ignore[no-any-return]

    def batch(self, texts: Sequence[str]) -> list[list[float]]:
        todo = list(dict.fromkeys(t for t in texts if t not in self.memo))
        if todo:
            started = time.perf_counter()
            self.memo.update(zip(todo, self.inner.batch(todo), strict=True))
            self.spent += time.perf_counter() - started
            self.embedded += len(todo)
        return [self.memo[t] for t in texts]

    @property
    def seconds_per_text(self) -> float:
        return self.spent / self.embedded if self.embedded else 0.0


def retrievers() -> dict[str, Callable[[], Any]]:
    """Every retriever measured, by name; the sentence model is loaded once and shared."""
    from bm25 import BM25Retriever  # bench/retrieval/: measured, not shipped
    from variants import RRFHybrid

    shared: dict[str, Any] = {}

    def sentence() -> Any:
        from darwin_memo.retrieval.embedding import SentenceEmbedder

        if "st" not in shared:
            shared["st"] = MemoEmbedder(SentenceEmbedder())
        return shared["st"]

    def hybrid(rrf: bool = False, **kwargs: Any) -> Callable[[], Any]:
        def make() -> Any:
            from darwin_memo.retrieval.embedding import HybridRetriever

            return (RRFHybrid if rrf else HybridRetriever)(sentence(), **kwargs)

        return make

    return {
        "lexical": lambda: LexicalRetriever(),
        "lexical-nofloor": lambda: LexicalRetriever(min_coverage=0.0),
        "bm25": lambda: BM25Retriever(),
        "hashing": lambda: EmbeddingRetriever(HashingEmbedder()),
        "minilm": lambda: EmbeddingRetriever(sentence()),
        "hybrid": hybrid(),
        "hybrid-rrf": hybrid(rrf=True),
        "hybrid-context": hybrid(context=0.5),
        "hybrid-rrf-context": hybrid(rrf=True, context=0.5),
    }


def _embedder(retriever: Any) -> MemoEmbedder | None:
    dense = getattr(retriever, "dense", retriever)
    embed = getattr(dense, "embed", None)
    return embed if isinstance(embed, MemoEmbedder) else None


def _warm(retriever: Any, entries: list[MemoryEntry]) -> None:
    warm = getattr(retriever, "warm", None)
    if warm is None:
        return
    if isinstance(retriever, EmbeddingRetriever):
        warm(entries, getattr(retriever.embed, "batch", None))
    else:
        warm(entries)


# -- measuring ------------------------------------------------------------------


def _rank_of(found: Sequence[MemoryEntry], evidence: Iterable[str]) -> int | None:
    wanted = set(evidence)
    for rank, entry in enumerate(found, 1):
        if wanted.intersection(entry.sources):
            return rank
    return None


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] if ordered else 0.0


def timed_decides(ledger: Ledger, questions: Sequence[str]) -> list[float]:
    """Wall milliseconds of one decide per question; each answered ticket abandoned
    outside the timing."""
    wall: list[float] = []
    for q in questions:
        t = time.perf_counter()
        ticket = ledger.decide(q)
        wall.append((time.perf_counter() - t) * 1e3)
        if ticket.deciding_entry:
            ledger.abandon(ticket.id)
    return wall


def measure(
    make: Callable[[], Any],
    convs: Sequence[Conversation],
    *,
    captions: bool = False,
    decide_sample: int | None = 200,
) -> dict[str, Any]:
    """Recall, MRR, silence, ingest and decide figures of one retriever over ``convs``."""
    ranks: dict[int, list[int | None]] = {c: [] for c in CATEGORIES}
    silent_adversarial: list[bool] = []
    ingest_seconds = 0.0
    ingested = 0
    decide_ms: list[float] = []
    for conv in convs:
        retriever = make()
        store = MemoryStore(retriever=retriever)
        entries = [entry_for(t, captions) for t in conv.turns]
        memo = _embedder(retriever)
        spent_before = memo.spent if memo is not None else 0.0
        started = time.perf_counter()
        for entry in entries:
            store.add(entry)
        _warm(retriever, entries)
        store.retrieve("warm up the index", 1)  # lists what was added, as a first query would
        ingest_seconds += time.perf_counter() - started
        if memo is not None:  # the model's cost per text, whether or not the memo had it
            ingest_seconds += len(entries) * memo.seconds_per_text - (memo.spent - spent_before)
        ingested += len(entries)
        for q in conv.questions:
            found = [e for e, _ in store.retrieve(q.text, max(KS))]
            if q.category in ranks:
                ranks[q.category].append(_rank_of(found, q.evidence))
            elif q.category == ADVERSARIAL:
                silent_adversarial.append(not found)
        ledger = Ledger(store)
        asked = [q.text for q in conv.questions if q.category in CATEGORIES]
        if decide_sample is not None:
            asked = asked[:decide_sample]
        decide_ms += timed_decides(ledger, asked)

    def summary(found: list[int | None]) -> dict[str, Any]:
        n = len(found)
        out: dict[str, Any] = {"questions": n}
        for k in KS:
            out[f"recall@{k}"] = round(sum(1 for r in found if r and r <= k) / n, 3) if n else None
        out["mrr@10"] = round(sum(1 / r for r in found if r and r <= 10) / n, 3) if n else None
        return out

    everything = [r for c in CATEGORIES for r in ranks[c]]
    return {
        "overall": summary(everything),
        "by_category": {str(c): summary(ranks[c]) for c in CATEGORIES},
        "silence_adversarial": (
            round(sum(silent_adversarial) / len(silent_adversarial), 3)
            if silent_adversarial
            else None
        ),
        "adversarial_questions": len(silent_adversarial),
        "ingest_entries_per_s": round(ingested / ingest_seconds, 1) if ingest_seconds else None,
        "decide_ms_p50": round(statistics.median(decide_ms), 2) if decide_ms else None,
        "decide_ms_p95": round(_percentile(decide_ms, 0.95), 2) if decide_ms else None,
    }


PROBES = ROOT / "bench" / "paraphrase"


def probe_figures(make: Callable[[], Any], convs: Sequence[Conversation]) -> dict[str, Any]:
    """Silence where it is right and where it is wrong, on the 40 lessons of bench/paraphrase.

    ``probe_recall@3`` / ``probe_silence``: the paraphrased probes, which the lessons
    answer (silence is a miss). ``foreign_silence``: LoCoMo's questions asked of those
    lessons, which cannot answer them (silence is right).
    """
    corpus = json.loads((PROBES / "corpus.json").read_text(encoding="utf-8"))
    probes = json.loads((PROBES / "probes.json").read_text(encoding="utf-8"))
    retriever = make()
    store = MemoryStore(retriever=retriever)
    entries = [
        store.add(MemoryEntry(c["question"], c["answer"], EntryKind.EXPLICIT, [c["id"]]))
        for c in corpus
    ]
    _warm(retriever, entries)
    found = [[e.sources[0] for e, _ in store.retrieve(p["query"], 3)] for p in probes]
    foreign = [q.text for c in convs for q in c.questions if q.category in CATEGORIES]
    return {
        "probe_recall@3": round(
            sum(p["target"] in f for p, f in zip(probes, found, strict=True)) / len(probes), 3
        ),
        "probe_silence": round(sum(not f for f in found) / len(probes), 3),
        "foreign_silence": round(sum(not store.retrieve(q, 3) for q in foreign) / len(foreign), 3),
    }


def run(
    data: Path,
    names: Sequence[str] | None = None,
    *,
    captions: bool = False,
    decide_sample: int | None = 200,
) -> dict[str, Any]:
    convs, digest = load(data)
    available = retrievers()
    chosen = list(names) if names else list(available)
    unknown = [n for n in chosen if n not in available]
    if unknown:
        known = ", ".join(available)
        raise SystemExit(f"error: unknown retriever {unknown[0]!r} (known: {known})")
    missing = sum(
        1
        for conv in convs
        for q in conv.questions
        if q.category in CATEGORIES and not set(q.evidence) & {t.dia_id for t in conv.turns}
    )
    load_before = os.getloadavg()
    results: dict[str, Any] = {}
    for name in chosen:
        started = time.perf_counter()
        results[name] = measure(
            available[name], convs, captions=captions, decide_sample=decide_sample
        )
        results[name].update(probe_figures(available[name], convs))
        results[name]["seconds"] = round(time.perf_counter() - started, 1)
    return {
        "data": data.name,
        "data_sha256": digest,
        "conversations": [c.name for c in convs],
        "turns": sum(len(c.turns) for c in convs),
        "questions": sum(1 for c in convs for q in c.questions if q.category in CATEGORIES),
        "questions_without_evidence_in_store": missing,
        "captions": captions,
        # Timings are wall clock on a shared machine: its load average says how busy it was.
        "load_average": [round(x, 1) for x in (*load_before, *os.getloadavg())],
        "retrievers": results,
    }


def table(report: dict[str, Any]) -> str:
    lines = [
        f"{report['questions']} questions over {report['turns']} turns "
        f"({len(report['conversations'])} conversations)",
        "",
        "| retriever | recall@5 | recall@10 | MRR@10 | "
        + " | ".join(f"R@10 {CATEGORIES[c]}" for c in CATEGORIES)
        + " | silent: cat. 5 | silent: probes | silent: foreign | ingest /s | decide p50 ms |",
        "|---" * (10 + len(CATEGORIES) - 1) + "|",
    ]
    for name, r in report["retrievers"].items():
        o = r["overall"]
        cats = " | ".join(f"{r['by_category'][str(c)]['recall@10']}" for c in CATEGORIES)
        lines.append(
            f"| {name} | {o['recall@5']} | {o['recall@10']} | {o['mrr@10']} | {cats} | "
            f"{r['silence_adversarial']} | {r['probe_silence']} | {r['foreign_silence']} | "
            f"{r['ingest_entries_per_s']} | {r['decide_ms_p50']} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--retrievers", help="comma-separated names (default: all)")
    parser.add_argument(
        "--captions", action="store_true", help="append a shared image's caption to its turn"
    )
    parser.add_argument("--decide-sample", type=int, default=200, help="decides timed per store")
    parser.add_argument("--json", action="store_true", help="print the JSON report")
    parser.add_argument("--out", type=Path, help="also write the JSON report here")
    args = parser.parse_args(argv)
    names = (
        [n.strip() for n in args.retrievers.split(",") if n.strip()] if args.retrievers else None
    )
    report = run(args.data, names, captions=args.captions, decide_sample=args.decide_sample)
    text = json.dumps(report, indent=2)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")
    print(text if args.json else table(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
