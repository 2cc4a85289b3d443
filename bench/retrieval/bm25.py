"""Okapi BM25 over the same tokens as the published scorer, with the same kind of floor.

An experiment, kept beside the benchmark that measured it and not shipped in the
package: on LoCoMo it ranks worse than the published smoothed-IDF overlap (see
docs/retrieval.md), so ``LexicalRetriever`` stays the lexical scorer.

``LexicalRetriever`` (the published scorer) counts each query token once per entry
and ignores how long an entry is: a long entry that mentions a word in passing
scores as high as a short one about it. BM25 weighs a token by how often the entry
holds it (saturating, ``k1``) against the entry's length relative to the average
(``b``), with the Robertson-Sparck Jones IDF ``log(1 + (N - df + 0.5)/(df + 0.5))``.

Silence works as in the published scorer: an entry qualifies only when the query
tokens it contains hold at least ``min_coverage`` of the query's IDF mass (tokens
no entry holds count in the mass with the highest IDF), so a query about
something the store never heard of finds nothing.

``BM25Retriever`` keeps an inverted index (per token, the ordinals of the entries
that hold it and how often), so a search reads only the postings of the query's
tokens; with numpy installed they are summed as arrays, otherwise in Python, with
identical results (the same double-precision operations in the same order).
"""

from __future__ import annotations

import math
from array import array
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from darwin_memo.records.entry import MemoryEntry
from darwin_memo.retrieval.lexical import tokenize

__all__ = ["BM25Retriever"]


def _idf(n: int, df: int) -> float:
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


class BM25Retriever:
    """Okapi BM25 relevance with a coverage floor (see the module docstring).

    ``k1`` saturates term frequency, ``b`` normalizes by length (0: none, 1: full),
    ``min_coverage`` is the share of the query's IDF mass an entry must hold.
    """

    def __init__(self, k1: float = 1.2, b: float = 0.75, min_coverage: float = 0.25) -> None:
        if not (math.isfinite(k1) and k1 >= 0):
            raise ValueError(f"k1 must be a finite number >= 0, got {k1!r}")
        if not 0.0 <= b <= 1.0:
            raise ValueError(f"b must be within [0, 1], got {b!r}")
        if not 0.0 <= min_coverage <= 1.0:
            raise ValueError(f"min_coverage must be within [0, 1], got {min_coverage!r}")
        self.k1 = k1
        self.b = b
        self.min_coverage = min_coverage
        self._ordinal: dict[str, int] = {}
        self._ids: list[str | None] = []
        self._counts: dict[int, Counter[str]] = {}  # each listed entry's token counts
        self._length = array("d")  # tokens per ordinal (0 once removed)
        self._total = 0
        self._postings: dict[str, tuple[array[int], array[float]]] = {}
        self._df: dict[str, int] = {}
        self._dead_in: Counter[str] = Counter()
        self._tokens: dict[str, tuple[str, str, Counter[str]]] = {}

    def __repr__(self) -> str:
        return f"BM25Retriever(k1={self.k1}, b={self.b}, min_coverage={self.min_coverage})"

    # -- the index --------------------------------------------------------------

    @property
    def indexed(self) -> int:
        return len(self._ordinal)

    def counts(self, entry: MemoryEntry) -> Counter[str]:
        """The entry's token counts (``tokenize`` of its text), cached by id."""
        cached = self._tokens.get(entry.id)
        if cached is not None and cached[0] == entry.question and cached[1] == entry.answer:
            return cached[2]
        counts = Counter(tokenize(entry.text))
        self._tokens[entry.id] = (entry.question, entry.answer, counts)
        return counts

    def index(self, entry: MemoryEntry) -> None:
        """Add (or refresh) an entry in the inverted index."""
        self._unindex(entry.id)
        counts = self.counts(entry)
        ordinal = len(self._ids)
        self._ids.append(entry.id)
        self._ordinal[entry.id] = ordinal
        self._counts[ordinal] = counts
        length = sum(counts.values())
        self._length.append(float(length))
        self._total += length
        for token, tf in counts.items():
            plist = self._postings.get(token)
            if plist is None:
                plist = self._postings[token] = (array("q"), array("d"))
            plist[0].append(ordinal)
            plist[1].append(float(tf))
            self._df[token] = self._df.get(token, 0) + 1

    def index_many(self, entries: Iterable[MemoryEntry]) -> None:
        for entry in entries:
            self.index(entry)

    def _unindex(self, entry_id: str) -> None:
        ordinal = self._ordinal.pop(entry_id, None)
        if ordinal is None:
            return
        self._ids[ordinal] = None
        counts = self._counts.pop(ordinal)
        self._total -= int(self._length[ordinal])
        self._length[ordinal] = 0.0
        for token in counts:
            self._df[token] -= 1
            if self._df[token] == 0:
                del self._df[token], self._postings[token]
                self._dead_in.pop(token, None)
                continue
            self._dead_in[token] += 1
            ords, tfs = self._postings[token]
            if self._dead_in[token] * 2 > len(ords):
                keep = [i for i, o in enumerate(ords) if self._ids[o] is not None]
                self._postings[token] = (
                    array("q", (ords[i] for i in keep)),
                    array("d", (tfs[i] for i in keep)),
                )
                del self._dead_in[token]

    def forget(self, entry_id: str) -> None:
        self._unindex(entry_id)
        self._tokens.pop(entry_id, None)

    # -- scoring ------------------------------------------------------------------

    def _weights(self, qtokens: Sequence[str], n: int, df: Any) -> tuple[dict[str, float], float]:
        idf = {t: _idf(n, df(t)) for t in qtokens}
        return idf, sum(idf.values())

    def search(self, query: str, k: int | None) -> list[tuple[str, float]]:
        """Ids in the top ``k`` (ties with the k-th included), best first."""
        qtokens = list(dict.fromkeys(tokenize(query)))
        n = len(self._ordinal)
        if not qtokens or n == 0:
            return []
        idf, mass = self._weights(qtokens, n, lambda t: self._df.get(t, 0))
        avgdl = self._total / n if self._total else 1.0
        present = [t for t in qtokens if t in self._postings]
        try:
            import numpy as np
        except ImportError:
            scored = self._sum_python(present, idf, avgdl)
        else:
            scored = self._sum_numpy(np, present, idf, avgdl)
        floor = self.min_coverage * mass
        found = [(o, s) for o, s, m in scored if s > 0 and m >= floor]
        return [(str(self._ids[o]), s) for o, s in _top(found, k)]

    def _term(self, tf: float, dl: float, avgdl: float) -> float:
        k1 = self.k1
        return tf * (k1 + 1.0) / (tf + k1 * (1.0 - self.b + self.b * dl / avgdl))

    def _sum_python(
        self, tokens: Sequence[str], idf: dict[str, float], avgdl: float
    ) -> list[tuple[int, float, float]]:
        score: dict[int, float] = {}
        matched: dict[int, float] = {}
        ids, length = self._ids, self._length
        for t in tokens:
            w = idf[t]
            ords, tfs = self._postings[t]
            for o, tf in zip(ords, tfs, strict=True):
                if ids[o] is None:
                    continue
                score[o] = score.get(o, 0.0) + w * self._term(tf, length[o], avgdl)
                matched[o] = matched.get(o, 0.0) + w
        return [(o, s, matched[o]) for o, s in score.items()]

    def _sum_numpy(
        self, np: Any, tokens: Sequence[str], idf: dict[str, float], avgdl: float
    ) -> list[tuple[int, float, float]]:
        size = len(self._ids)
        score = np.zeros(size)
        matched = np.zeros(size)
        touched = np.zeros(size, dtype=bool)
        length = np.frombuffer(self._length, dtype=np.float64)
        k1, b = self.k1, self.b
        for t in tokens:
            w = idf[t]
            ords = np.frombuffer(self._postings[t][0], dtype=np.int64)
            tfs = np.frombuffer(self._postings[t][1], dtype=np.float64)
            # The same operations as ``_term``, in the same order, elementwise.
            term = tfs * (k1 + 1.0) / (tfs + k1 * (1.0 - b + b * length[ords] / avgdl))
            score[ords] += w * term
            matched[ords] += w
            touched[ords] = True
        # A removed entry's length is 0; a live entry that holds a token has length >= 1.
        rows = np.nonzero(touched & (length > 0))[0]
        return list(zip(rows.tolist(), score[rows].tolist(), matched[rows].tolist(), strict=True))

    def rank(self, query: str, entries: Sequence[MemoryEntry]) -> list[tuple[MemoryEntry, float]]:
        """BM25 over ``entries`` alone (IDF and average length from them), best first."""
        qtokens = list(dict.fromkeys(tokenize(query)))
        if not qtokens or not entries:
            return []
        counts = [self.counts(e) for e in entries]
        n = len(entries)
        idf, mass = self._weights(qtokens, n, lambda t: sum(1 for c in counts if t in c))
        total = sum(sum(c.values()) for c in counts)
        avgdl = total / n if total else 1.0
        floor = self.min_coverage * mass
        found: list[tuple[int, float]] = []
        for i, c in enumerate(counts):
            dl = float(sum(c.values()))
            score = matched = 0.0
            for t in qtokens:
                tf = c.get(t)
                if tf:
                    score += idf[t] * self._term(float(tf), dl, avgdl)
                    matched += idf[t]
            if score > 0 and matched >= floor:
                found.append((i, score))
        return [(entries[i], s) for i, s in _top(found, None)]

    def similarity(self, a: MemoryEntry, b: MemoryEntry) -> float:
        """Jaccard overlap of the two token sets (as ``LexicalRetriever``)."""
        ta, tb = set(self.counts(a)), set(self.counts(b))
        union = ta | tb
        return len(ta & tb) / len(union) if union else 0.0

    def dump_state(self) -> dict[str, Any]:
        return {}

    def load_state(self, state: dict[str, Any]) -> None:
        return None


def _top(found: list[tuple[int, float]], k: int | None) -> list[tuple[int, float]]:
    """Best first, ties in insertion order; ``k``: the top k and every tie of the k-th."""
    found.sort(key=lambda pair: (-pair[1], pair[0]))
    if k is None or len(found) <= k:
        return found
    kth = found[k - 1][1]
    end = k
    while end < len(found) and found[end][1] == kth:
        end += 1
    return found[:end]
