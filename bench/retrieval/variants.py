"""Retriever variants measured on LoCoMo and not shipped (docs/retrieval.md says why).

``RRFHybrid``: ``HybridRetriever`` with reciprocal-rank fusion (Cormack, Clarke and
Buettcher, SIGIR 2009) in place of the weighted blend: the sum over the lexical
and the dense ranking of ``1 / (rrf_k + rank)``, divided by its largest possible
value so that an entry first in both scores 1.0. Scale-free (only each
retriever's order counts), and on LoCoMo's dev half no better than the blend.

The rest of the module is **the sweep**: every other scoring variant of
docs/retrieval.md "What we tried", measured over vectors embedded once and kept in
a file under /tmp, so each variant costs a second instead of a benchmark run.
``hybrid_scores`` is ``HybridRetriever``'s scoring written over numpy matrices (the
published IDF overlap, the two floors, the 0.7/0.3 blend, ``context``); it gives
the committed benchmark's figures for ``hybrid`` and ``hybrid-context`` to the
digit, and tests/docs/test_locomo_bench.py checks it against ``HybridRetriever``
itself. Each variant changes one thing in it::

    python bench/retrieval/variants.py                     # every variant, a table
    python bench/retrieval/variants.py --captions --only base,context,sentences+window2
    python bench/retrieval/variants.py --cache /tmp/locomo-vectors.pkl --data PATH

The first run embeds about 20,000 texts with MiniLM (a few minutes on two cores);
later runs read them from ``--cache``.
"""

from __future__ import annotations

import argparse
import json
import math
import pickle
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from darwin_memo.records.entry import MemoryEntry
from darwin_memo.retrieval.embedding import DEFAULT_HYBRID_ALPHA, HybridRetriever
from darwin_memo.retrieval.lexical import tokenize

__all__ = [
    "RRF_K",
    "Corpus",
    "RRFHybrid",
    "VectorCache",
    "hybrid_scores",
    "lend",
    "main",
    "measure",
    "prepare",
    "top",
    "variants",
]

#: The rank offset the paper proposed, not tuned here.
RRF_K = 60


class RRFHybrid(HybridRetriever):
    """``HybridRetriever`` fused by reciprocal rank (see the module docstring)."""

    def __init__(self, embed: Any | None = None, *, rrf_k: int = RRF_K, **kwargs: Any) -> None:
        if isinstance(rrf_k, bool) or not isinstance(rrf_k, int) or rrf_k < 1:
            raise ValueError(f"rrf_k must be a positive integer, got {rrf_k!r}")
        super().__init__(embed, **kwargs)
        self.rrf_k = rrf_k

    def _blend(
        self, lexical: Iterable[tuple[str, float]], dense: Iterable[tuple[str, float]]
    ) -> dict[str, float]:
        lex, den = dict(lexical), dict(dense)
        fused = dict.fromkeys([*den, *lex], 0.0)
        top = 2.0 / (self.rrf_k + 1)
        for scores in (lex, den):
            ranked = sorted(scores, key=lambda entry_id: -scores[entry_id])  # ties: as given
            for rank, entry_id in enumerate(ranked, 1):
                fused[entry_id] += 1.0 / (self.rrf_k + rank) / top
        return fused


# -- the sweep: scoring variants over cached vectors ----------------------------------
#
# Everything below is measurement code (docs/retrieval.md "What we tried"); nothing
# in it ships. numpy is imported where it is used, so that importing RRFHybrid
# (bench/retrieval/locomo.py does) needs nothing more than the package.

#: Where the sweep keeps the vectors it embedded (text -> vector), between runs.
DEFAULT_CACHE = Path("/tmp/darwin-memo-locomo-vectors.pkl")
MIN_SIMILARITY = 0.30
MIN_COVERAGE = 0.25

Embed = Callable[[Sequence[str]], Any]  # texts -> a (len(texts), dims) float64 array


class VectorCache:
    """Vectors of texts, embedded once by ``batch`` and kept in a pickle at ``path``.

    ``path=None`` keeps them in memory only (the tests). The values are the float64
    copies of what ``batch`` returned, as ``EmbeddingRetriever`` caches them.
    """

    def __init__(self, batch: Callable[[Sequence[str]], list[list[float]]], path: Path | None):
        self.batch = batch
        self.path = path
        self.memo: dict[str, Any] = {}
        if path is not None and path.exists():
            self.memo = pickle.loads(path.read_bytes())

    def __call__(self, texts: Sequence[str]) -> Any:
        import numpy as np

        todo = list(dict.fromkeys(t for t in texts if t not in self.memo))
        for start in range(0, len(todo), 512):
            chunk = todo[start : start + 512]
            self.memo.update(
                zip(chunk, np.asarray(self.batch(chunk), dtype=np.float64), strict=True)
            )
            print(f"embedded {start + len(chunk)}/{len(todo)}", file=sys.stderr, flush=True)
        if todo and self.path is not None:
            self.path.write_bytes(pickle.dumps(self.memo))
        if not texts:
            return np.zeros((0, 0))
        return np.stack([self.memo[t] for t in texts])


class Corpus:
    """One store's entries as matrices, in the order they were added.

    ``vectors`` holds each entry's unit vector (one row per entry); ``lexical``
    scores queries by the published smoothed-IDF overlap over the same entries
    (``log(1 + N / (1 + df))`` summed over the query tokens an entry holds).
    """

    def __init__(
        self,
        entries: Sequence[MemoryEntry],
        vectors: Any,
        tokenizer: Callable[[str], list[str]] = tokenize,
    ) -> None:
        import numpy as np

        self.entries = list(entries)
        self.vectors = vectors
        self.tokenizer = tokenizer
        self.tokens = [set(tokenizer(e.text)) for e in self.entries]
        self.vocab: dict[str, int] = {}
        for toks in self.tokens:
            for t in toks:
                self.vocab.setdefault(t, len(self.vocab))
        self.incidence = np.zeros((len(self.vocab), len(self.entries)))
        for i, toks in enumerate(self.tokens):
            for t in toks:
                self.incidence[self.vocab[t], i] = 1.0
        self.df = self.incidence.sum(axis=1)
        self._retokenized: dict[Callable[[str], list[str]], Corpus] = {}

    def __len__(self) -> int:
        return len(self.entries)

    def idf(self, token: str) -> float:
        row = self.vocab.get(token)
        return math.log(1.0 + len(self) / (1.0 + (self.df[row] if row is not None else 0.0)))

    def lexical(self, queries: Sequence[str]) -> tuple[Any, Any]:
        """Each query's IDF-overlap score of every entry, and each query's IDF mass."""
        import numpy as np

        weights = np.zeros((len(queries), len(self.vocab)))
        mass = np.zeros(len(queries))
        for j, query in enumerate(queries):
            for t in dict.fromkeys(self.tokenizer(query)):
                mass[j] += self.idf(t)
                if t in self.vocab:
                    weights[j, self.vocab[t]] = self.idf(t)
        return weights @ self.incidence, mass

    def retokenized(self, tokenizer: Callable[[str], list[str]]) -> Corpus:
        """The same entries and vectors, indexed with another tokenizer (kept)."""
        if tokenizer not in self._retokenized:
            self._retokenized[tokenizer] = Corpus(self.entries, self.vectors, tokenizer)
        return self._retokenized[tokenizer]


def lend(scores: Any, qualifies: Any, context: float, window: int = 1, decay: float = 1.0) -> Any:
    """``HybridRetriever``'s ``context`` over a wider window.

    Each qualifying entry gains ``context`` times the largest blended score among the
    entries up to ``window`` places before or after it (the one ``d`` places away
    counts ``decay ** (d - 1)`` times its score). ``window=1`` is ``HybridRetriever``.
    """
    import numpy as np

    lent = np.zeros_like(scores)
    for d in range(1, window + 1):
        before, after = np.zeros_like(scores), np.zeros_like(scores)
        before[:, d:] = scores[:, :-d]
        after[:, :-d] = scores[:, d:]
        lent = np.maximum(lent, decay ** (d - 1) * np.maximum(before, after))
    return np.where(qualifies, scores + context * lent, 0.0)


def hybrid_scores(
    corpus: Corpus,
    queries: Sequence[str],
    qvecs: Any,
    *,
    alpha: float = DEFAULT_HYBRID_ALPHA,
    min_similarity: float = MIN_SIMILARITY,
    min_coverage: float = MIN_COVERAGE,
    context: float = 0.0,
    window: int = 1,
    decay: float = 1.0,
    rank_cosines: Any = None,
    rank_lexical: Any = None,
    dense_below_floor: bool = False,
    lexical_below_floor: bool = False,
    zscore: bool = False,
    fusion: str = "sum",
) -> tuple[Any, Any]:
    """``HybridRetriever``'s scores of every entry for each query, and which qualify.

    With the defaults this is ``HybridRetriever(alpha=alpha, context=context)``. An
    entry qualifies on its own vector and text (either floor); the variants change
    only how qualifying entries are ranked, so silence is the default's:
    ``rank_cosines`` / ``rank_lexical`` replace the dense / lexical score used for
    ranking; ``*_below_floor`` rank by a side's score even where it is under that
    side's floor; ``zscore`` blends the two sides' z-scores instead of cosine and
    lexical / best lexical; ``fusion="max"`` takes the larger weighted side.
    """
    import numpy as np

    cosines = qvecs @ corpus.vectors.T
    raw, mass = corpus.lexical(queries)
    coverage = np.divide(raw, mass[:, None], out=np.zeros_like(raw), where=mass[:, None] > 0)
    lexical_ok = (raw > 0) & (coverage >= min_coverage)
    qualifies = lexical_ok | (cosines >= min_similarity)
    dense = cosines if rank_cosines is None else rank_cosines
    lexical = raw if rank_lexical is None else rank_lexical
    if zscore:

        def z(m: Any) -> Any:
            return (m - m.mean(axis=1, keepdims=True)) / np.maximum(
                m.std(axis=1, keepdims=True), 1e-12
            )

        fused = alpha * z(dense) + (1 - alpha) * z(lexical)
        fused = fused - fused.min(axis=1, keepdims=True) + 1e-3
    else:
        if not dense_below_floor:
            dense = np.where(dense >= min_similarity, dense, 0.0)
        if not lexical_below_floor:
            lexical = np.where(lexical_ok, lexical, 0.0)
        best = lexical.max(axis=1, keepdims=True)
        lexical = np.divide(lexical, best, out=np.zeros_like(lexical), where=best > 0)
        if fusion == "max":
            fused = np.maximum(alpha * dense, (1 - alpha) * lexical)
        else:
            fused = alpha * dense + (1 - alpha) * lexical
    fused = np.where(qualifies, fused, 0.0)
    if context:
        fused = lend(fused, qualifies, context, window, decay)
    return fused, qualifies


def top(scores: Any, qualifies: Any, k: int) -> list[list[int]]:
    """Each query's ``k`` best qualifying entries (ties in the order they were added)."""
    import numpy as np

    out = []
    for row, ok in zip(scores, qualifies, strict=True):
        found = np.nonzero(ok)[0]
        out.append(found[np.argsort(-row[found], kind="stable")][:k].tolist())
    return out


# -- the variants ---------------------------------------------------------------------
#
# Each takes (corpus, queries, their vectors, the vector cache) and returns
# (scores, qualifies) as hybrid_scores does.

Variant = Callable[[Corpus, Sequence[str], Any, Embed], tuple[Any, Any]]


def _unit(m: Any) -> Any:
    import numpy as np

    return m / np.maximum(np.linalg.norm(m, axis=-1, keepdims=True), 1e-12)


def plain(**options: Any) -> Variant:
    """``hybrid_scores`` with ``options`` (the blend, its floors, ``context``, ...)."""
    return lambda c, queries, qv, embed: hybrid_scores(c, queries, qv, **options)


def rocchio(beta: float, m: int, **options: Any) -> Variant:
    """Dense pseudo-relevance feedback: the query vector plus ``beta`` times the mean
    vector of the first pass's top ``m`` entries, ranked again (Rocchio, 1971)."""

    def variant(c: Corpus, queries: Sequence[str], qv: Any, embed: Embed) -> tuple[Any, Any]:
        import numpy as np

        scores, qualifies = hybrid_scores(c, queries, qv, **options)
        firsts = top(scores, qualifies, m)
        moved = np.array(
            [
                _unit(v + beta * c.vectors[f].mean(axis=0)) if f else v
                for v, f in zip(qv, firsts, strict=True)
            ]
        )
        return hybrid_scores(c, queries, qv, rank_cosines=moved @ c.vectors.T, **options)

    return variant


def rm3(weight: float, m: int = 5, terms: int = 5, **options: Any) -> Variant:
    """Lexical pseudo-relevance feedback (RM3-like): the ``terms`` tokens of the first
    pass's top ``m`` entries with the most IDF mass, not in the query, add ``weight``
    times their IDF overlap to each entry's lexical score."""

    def variant(c: Corpus, queries: Sequence[str], qv: Any, embed: Embed) -> tuple[Any, Any]:
        import numpy as np

        scores, qualifies = hybrid_scores(c, queries, qv, **options)
        expansions = []
        for query, found in zip(queries, top(scores, qualifies, m), strict=True):
            asked = set(c.tokenizer(query))
            mass: dict[str, float] = {}
            for i in found:
                for t in c.tokens[i] - asked:
                    mass[t] = mass.get(t, 0.0) + c.idf(t)
            expansions.append(" ".join(sorted(mass, key=lambda t: -mass[t])[:terms]))
        raw, total = c.lexical(queries)
        coverage = np.divide(raw, total[:, None], out=np.zeros_like(raw), where=total[:, None] > 0)
        own = np.where((raw > 0) & (coverage >= MIN_COVERAGE), raw, 0.0)
        extra, _ = c.lexical(expansions)
        return hybrid_scores(
            c,
            queries,
            qv,
            rank_lexical=np.where(qualifies, own + weight * extra, 0.0),
            lexical_below_floor=True,
            **options,
        )

    return variant


def neighbour_vectors(gamma: float, before_only: bool = False, **options: Any) -> Variant:
    """Document expansion at embedding level: each entry ranked by its own vector plus
    ``gamma`` times its neighbours' (the one added before it, and the one after unless
    ``before_only``), normalized; the score-level counterpart is ``context``."""

    def variant(c: Corpus, queries: Sequence[str], qv: Any, embed: Embed) -> tuple[Any, Any]:
        import numpy as np

        before, after = np.zeros_like(c.vectors), np.zeros_like(c.vectors)
        before[1:], after[:-1] = c.vectors[:-1], c.vectors[1:]
        blended = _unit(c.vectors + gamma * (before if before_only else before + after))
        return hybrid_scores(c, queries, qv, rank_cosines=qv @ blended.T, **options)

    return variant


def _max_with_pieces(cosines: Any, rows: list[int], piece_cosines: Any) -> Any:
    """Each entry's cosine raised to the best cosine of its pieces (``rows[p]`` owns p)."""
    best = cosines.copy()
    for p, row in enumerate(rows):
        best[:, row] = best[:, row].clip(min=piece_cosines[:, p])
    return best


def with_predecessor(**options: Any) -> Variant:
    """A second vector per entry, of the previous entry's question and its own text
    (a turn with the turn it answers); the entry ranks by the better of its two."""

    def variant(c: Corpus, queries: Sequence[str], qv: Any, embed: Embed) -> tuple[Any, Any]:
        texts = [
            (c.entries[i - 1].question + " " if i else "") + e.text for i, e in enumerate(c.entries)
        ]
        cosines = _max_with_pieces(qv @ c.vectors.T, list(range(len(c))), qv @ embed(texts).T)
        return hybrid_scores(c, queries, qv, rank_cosines=cosines, **options)

    return variant


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")


def sentences(text: str) -> list[str]:
    """``text`` split after ``.``, ``!`` or ``?`` followed by white space."""
    return [s for s in _SENTENCE_END.split(text.strip()) if s.strip()]


def sentence_pieces(entries: Sequence[MemoryEntry]) -> tuple[list[int], list[str]]:
    """For each entry whose question has two sentences or more, each sentence with the
    entry's answer appended (the speaker and date here): the pieces and their owners."""
    rows, texts = [], []
    for i, e in enumerate(entries):
        parts = sentences(e.question)
        if len(parts) >= 2:
            rows += [i] * len(parts)
            texts += [f"{p} {e.answer}" for p in parts]
    return rows, texts


def by_sentence(**options: Any) -> Variant:
    """Multi-vector entries: besides the whole text's vector, one per sentence; an
    entry ranks by its best (mean pooling over a long turn dilutes the one sentence
    that answers)."""

    def variant(c: Corpus, queries: Sequence[str], qv: Any, embed: Embed) -> tuple[Any, Any]:
        rows, texts = sentence_pieces(c.entries)
        cosines = qv @ c.vectors.T
        if rows:
            cosines = _max_with_pieces(cosines, rows, qv @ embed(texts).T)
        return hybrid_scores(c, queries, qv, rank_cosines=cosines, **options)

    return variant


_SCAFFOLD = re.compile(
    r"^(?:(?:when|what|how|why|where|who|whom|which|whose|did|does|do|is|are|was|were|has|"
    r"have|had|would|could|can|will|should|might|many|much|long|often|kind of|type of|"
    r"sort of)\b[\s,]*)+",
    re.IGNORECASE,
)


def strip_scaffolding(question: str) -> str:
    """``When did Melanie paint a sunrise?`` -> ``Melanie paint a sunrise``."""
    return _SCAFFOLD.sub("", question).rstrip("?").strip() or question


def rewritten(**options: Any) -> Variant:
    """The query embedded without its question scaffolding (lexical side unchanged)."""

    def variant(c: Corpus, queries: Sequence[str], qv: Any, embed: Embed) -> tuple[Any, Any]:
        moved = embed([strip_scaffolding(q) for q in queries])
        return hybrid_scores(c, queries, qv, rank_cosines=moved @ c.vectors.T, **options)

    return variant


def adaptive_alpha(high: float, low: float, **options: Any) -> Variant:
    """Per-query blend: ``alpha`` falls from ``high`` to ``low`` as the best lexical
    coverage of the query rises (its rare words are in the store: trust them more)."""

    def variant(c: Corpus, queries: Sequence[str], qv: Any, embed: Embed) -> tuple[Any, Any]:
        import numpy as np

        raw, mass = c.lexical(queries)
        best = (raw / np.maximum(mass[:, None], 1e-12)).max(axis=1)
        rows = [
            hybrid_scores(c, [q], qv[j : j + 1], alpha=high - (high - low) * best[j], **options)
            for j, q in enumerate(queries)
        ]
        return np.vstack([r[0] for r in rows]), np.vstack([r[1] for r in rows])

    return variant


_MONTHS = tuple(
    "january february march april may june july august september october november december".split()
)


def dates_matched(boost: float, **options: Any) -> Variant:
    """Temporal questions: when the query names months or years, a qualifying entry
    whose text names them all gains ``boost`` (the session date is in the entry)."""

    def variant(c: Corpus, queries: Sequence[str], qv: Any, embed: Embed) -> tuple[Any, Any]:
        scores, qualifies = hybrid_scores(c, queries, qv, **options)
        texts = [e.text.lower() for e in c.entries]
        for j, query in enumerate(queries):
            low = query.lower()
            named = [m for m in _MONTHS if re.search(rf"\b{m}\b", low)]
            named += re.findall(r"\b(?:19|20)\d\d\b", low)
            if named:
                for i, text in enumerate(texts):
                    if qualifies[j, i] and all(n in text for n in named):
                        scores[j, i] += boost
        return scores, qualifies

    return variant


def suffix_stem(token: str) -> str:
    """A crude English suffix stripper (``researching`` and ``research`` meet)."""
    for suffix, put in (("ies", "y"), ("ing", ""), ("ed", ""), ("ly", ""), ("es", ""), ("s", "")):
        if token.endswith(suffix) and len(token) - len(suffix) >= 3:
            stem = token[: -len(suffix)] + put
            if len(stem) >= 4 and stem[-1] == stem[-2] and stem[-1] not in "ls":
                stem = stem[:-1]  # running -> run
            return stem.rstrip("e") if len(stem) > 4 else stem
    return token.rstrip("e") if len(token) > 4 else token


def stemmed_tokens(text: str) -> list[str]:
    """The published tokens, each through ``suffix_stem``."""
    return [suffix_stem(t) for t in tokenize(text)]


def stemmed(inner: Variant) -> Variant:
    """``inner`` with the hybrid's lexical side tokenized by ``stemmed_tokens``."""
    return lambda c, queries, qv, embed: inner(c.retokenized(stemmed_tokens), queries, qv, embed)


def sessions_lend(lam: float, sessions: dict[int, list[int]], **options: Any) -> Variant:
    """Each entry gains ``lam`` times the best score in its LoCoMo session (which a
    store does not know: an upper bound for grouping by time, not a retriever)."""

    def variant(c: Corpus, queries: Sequence[str], qv: Any, embed: Embed) -> tuple[Any, Any]:
        import numpy as np

        scores, qualifies = hybrid_scores(c, queries, qv, **options)
        groups = sessions.get(id(c))
        if groups is None:
            return scores, qualifies
        best = np.zeros_like(scores)
        for g in set(groups):
            members = np.array([i for i, x in enumerate(groups) if x == g])
            best[:, members] = scores[:, members].max(axis=1, keepdims=True)
        return np.where(qualifies, scores + lam * best, 0.0), qualifies

    return variant


def combined(*, context: float = 0.5, window: int = 2, stem: bool = False) -> Variant:
    """``by_sentence`` ranked with a ``window``-wide ``context`` (optionally stemmed)."""
    inner = by_sentence(context=context, window=window)
    return stemmed(inner) if stem else inner


# -- measuring ------------------------------------------------------------------------


@dataclass
class Sweep:
    """The measured stores: per conversation a corpus, its questions of categories 1-4
    (text, category, evidence rows) and of category 5; and the 40 lessons with probes."""

    conversations: list[tuple[Corpus, list[tuple[str, int, set[int]]], list[str]]]
    lessons: Corpus
    lesson_ids: list[str]
    probes: list[tuple[str, str]]  # (query, target lesson id)
    embed: Embed
    sessions: dict[int, list[int]]


def prepare(data: Path, embed: Embed, *, captions: bool = False) -> Sweep:
    """Read LoCoMo at ``data`` and the paraphrase lessons; embed what is not cached."""
    import locomo

    convs, _ = locomo.load(data)
    conversations = []
    sessions: dict[int, list[int]] = {}
    for conv in convs:
        entries = [locomo.entry_for(t, captions) for t in conv.turns]
        corpus = Corpus(entries, embed([e.text for e in entries]))
        row = {t.dia_id: i for i, t in enumerate(conv.turns)}
        asked = [
            (q.text, q.category, {row[e] for e in q.evidence if e in row})
            for q in conv.questions
            if q.category in locomo.CATEGORIES
        ]
        adversarial = [q.text for q in conv.questions if q.category == locomo.ADVERSARIAL]
        conversations.append((corpus, asked, adversarial))
        sessions[id(corpus)] = [int(t.dia_id.split(":")[0].lstrip("D") or 0) for t in conv.turns]
    corpus_rows = json.loads((locomo.PROBES / "corpus.json").read_text(encoding="utf-8"))
    probe_rows = json.loads((locomo.PROBES / "probes.json").read_text(encoding="utf-8"))
    lessons = [MemoryEntry(r["question"], r["answer"]) for r in corpus_rows]
    return Sweep(
        conversations,
        Corpus(lessons, embed([e.text for e in lessons])),
        [r["id"] for r in corpus_rows],
        [(p["query"], p["target"]) for p in probe_rows],
        embed,
        sessions,
    )


def measure(variant: Variant, sweep: Sweep) -> dict[str, float]:
    """Recall@5/@10, MRR@10 and recall@10 by category; silence on category 5, on the
    probes (wrong) and on LoCoMo's questions asked of the lessons (right); the
    probes' recall@1 and @3."""
    import locomo

    def ask(c: Corpus, queries: list[str], k: int) -> list[list[int]]:
        if not queries:
            return []
        return top(*variant(c, queries, sweep.embed(queries), sweep.embed), k)

    ranks: dict[int, list[int | None]] = {c: [] for c in locomo.CATEGORIES}
    silent5: list[bool] = []
    foreign: list[str] = []
    for corpus, asked, adversarial in sweep.conversations:
        found = ask(corpus, [q for q, _, _ in asked], 10)
        for (_, category, evidence), rows in zip(asked, found, strict=True):
            hit = [r for r, row in enumerate(rows, 1) if row in evidence]
            ranks[category].append(hit[0] if hit else None)
        silent5 += [not rows for rows in ask(corpus, adversarial, 10)]
        foreign += [q for q, _, _ in asked]
    every = [r for c in ranks for r in ranks[c]]

    def recall(found: list[int | None], k: int) -> float:
        return sum(1 for r in found if r is not None and r <= k) / max(1, len(found))

    probes = ask(sweep.lessons, [q for q, _ in sweep.probes], 3)
    targets = [t for _, t in sweep.probes]
    return {
        "recall@5": recall(every, 5),
        "recall@10": recall(every, 10),
        "mrr@10": sum(1 / r for r in every if r) / max(1, len(every)),
        **{f"recall@10 {name}": recall(ranks[c], 10) for c, name in locomo.CATEGORIES.items()},
        "silent: cat. 5": sum(silent5) / max(1, len(silent5)),
        "probes recall@1": sum(
            bool(rows) and sweep.lesson_ids[rows[0]] == t
            for rows, t in zip(probes, targets, strict=True)
        )
        / len(targets),
        "probes recall@3": sum(
            t in [sweep.lesson_ids[r] for r in rows]
            for rows, t in zip(probes, targets, strict=True)
        )
        / len(targets),
        "silent: probes": sum(not rows for rows in probes) / len(targets),
        "silent: foreign": sum(not rows for rows in ask(sweep.lessons, foreign, 3))
        / max(1, len(foreign)),
    }


def variants(sweep: Sweep) -> dict[str, Variant]:
    """Every variant measured, by the name docs/retrieval.md uses."""
    out: dict[str, Variant] = {
        "base": plain(),
        "context": plain(context=0.5),
    }
    for alpha in (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 0.9, 1.0):
        out[f"alpha={alpha}"] = plain(alpha=alpha)
    for alpha in (0.3, 0.5):
        out[f"alpha={alpha}+context"] = plain(alpha=alpha, context=0.5)
    out["fusion=max"] = plain(fusion="max")
    for alpha in (0.3, 0.5, 0.7):
        out[f"zscore alpha={alpha}"] = plain(zscore=True, alpha=alpha)
    out["zscore alpha=0.5+context"] = plain(zscore=True, alpha=0.5, context=0.5)
    out["lexical below floor"] = plain(lexical_below_floor=True)
    out["lexical below floor+context"] = plain(lexical_below_floor=True, context=0.5)
    out["dense below floor"] = plain(dense_below_floor=True)
    out["dense below floor+context"] = plain(dense_below_floor=True, context=0.5)
    for context in (0.25, 0.75, 1.0):
        out[f"context={context}"] = plain(context=context)
    for window in (2, 3, 5):
        for decay in (0.5, 1.0):
            out[f"window={window} decay={decay}"] = plain(context=0.5, window=window, decay=decay)
    for beta in (0.3, 0.5, 1.0):
        for m in (3, 5, 10):
            out[f"rocchio beta={beta} m={m}"] = rocchio(beta, m)
    out["rocchio beta=0.5 m=5+context"] = rocchio(0.5, 5, context=0.5)
    for weight in (0.3, 0.5, 1.0):
        out[f"rm3 weight={weight}"] = rm3(weight)
    out["rm3 weight=0.5+context"] = rm3(0.5, context=0.5)
    for gamma in (0.25, 0.5, 1.0):
        out[f"neighbour vectors gamma={gamma}"] = neighbour_vectors(gamma)
        out[f"predecessor vector gamma={gamma}"] = neighbour_vectors(gamma, before_only=True)
    out["neighbour vectors gamma=0.5+context"] = neighbour_vectors(0.5, context=0.5)
    out["with predecessor"] = with_predecessor()
    out["with predecessor+context"] = with_predecessor(context=0.5)
    out["sentences"] = by_sentence()
    out["sentences+context"] = by_sentence(context=0.5)
    out["sentences+window=2"] = combined()
    out["rewrite"] = rewritten()
    out["rewrite+context"] = rewritten(context=0.5)
    for high, low in ((0.85, 0.5), (0.9, 0.6), (0.7, 0.4)):
        out[f"adaptive alpha {high}-{low}"] = adaptive_alpha(high, low)
    for boost in (0.05, 0.1, 0.2):
        out[f"dates boost={boost}"] = dates_matched(boost)
    out["stem"] = stemmed(plain())
    out["stem+context"] = stemmed(plain(context=0.5))
    out["stem+sentences"] = stemmed(by_sentence())
    out["stem+sentences+window=2"] = combined(stem=True)
    for lam in (0.1, 0.3, 0.5):
        out[f"session lam={lam}"] = sessions_lend(lam, sweep.sessions)
    out["session lam=0.3+context"] = sessions_lend(0.3, sweep.sessions, context=0.5)
    return out


COLUMNS = (
    "recall@5",
    "recall@10",
    "mrr@10",
    "recall@10 multi-hop",
    "recall@10 temporal",
    "recall@10 open-domain",
    "recall@10 single-hop",
    "silent: cat. 5",
    "probes recall@1",
    "probes recall@3",
    "silent: probes",
    "silent: foreign",
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Scoring variants of HybridRetriever on LoCoMo")
    parser.add_argument("--data", type=Path, default=None, help="default: locomo.py's")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="vector cache file")
    parser.add_argument("--captions", action="store_true")
    parser.add_argument("--only", help="comma-separated variant names (default: all)")
    args = parser.parse_args(argv)
    here = str(Path(__file__).resolve().parent)
    if here not in sys.path:
        sys.path.insert(0, here)
    import locomo

    from darwin_memo.retrieval.embedding import SentenceEmbedder

    embed = VectorCache(SentenceEmbedder().batch, args.cache)
    sweep = prepare(args.data or locomo.DEFAULT_DATA, embed, captions=args.captions)
    every = variants(sweep)
    chosen = [n.strip() for n in args.only.split(",")] if args.only else list(every)
    unknown = [n for n in chosen if n not in every]
    if unknown:
        raise SystemExit(f"error: unknown variant {unknown[0]!r} (known: {', '.join(every)})")
    print("| variant | " + " | ".join(COLUMNS) + " |")
    print("|---" * (len(COLUMNS) + 1) + "|")
    for name in chosen:
        figures = measure(every[name], sweep)
        print(f"| {name} | " + " | ".join(f"{figures[c]:.3f}" for c in COLUMNS) + " |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
