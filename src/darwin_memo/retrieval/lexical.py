"""Retrieval: which entries are relevant to a query, and how relevant.

A retriever scores relevance only. It never reads an entry's energy: selection
pressure must come from measured outcomes, not from retrieval preferring the
incumbents. The store breaks exact score ties by energy, and that is all.

Three retrievers ship:

* ``LexicalRetriever`` (the default): smoothed-IDF overlap between the query's
  tokens and an entry's tokens, with a coverage floor. An entry must hold at
  least ``min_coverage`` of the query's IDF mass or memory stays silent.
* ``EmbeddingRetriever``: cosine similarity over vectors from any
  ``text -> list[float]`` callable, with a similarity floor. Vectors are cached
  by entry id and persisted with the store, so paid embeddings are computed once.
* ``HashingEmbedder``: a dependency-free embedding (hashed character n-grams)
  for typo and morphology robustness.

Tokenization keeps the published behaviour for ASCII text exactly and extends it
to every script: runs of letters outside ASCII are tokens too, and scripts
written without spaces (Chinese, Japanese, Thai, ...) are split into character
bigrams, so an entry asked back in its own words is always found.
"""

from __future__ import annotations

import math
import operator
import re
import unicodedata
from array import array
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from itertools import repeat
from sys import intern

from .. import collector
from ..records.entry import MemoryEntry
from .index import top_candidates

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .ann import IvfIndex
    from .protocols import EmbeddingFn, Retriever

__all__ = [
    "EMBEDDING_MERGE_THRESHOLD",
    "STOPWORDS",
    "EmbeddingFn",
    "EmbeddingRetriever",
    "HashingEmbedder",
    "LexicalRetriever",
    "Retriever",
    "tokenize",
]

#: Recommended merge/conflict floor for cosine retrievers (Jaccard uses 0.55).
EMBEDDING_MERGE_THRESHOLD = 0.85

STOPWORDS = frozenset(
    (
        "a an and are as at be by for from has have in is it of on or that the this these "
        "those to was were will with what which who how when where why does do under over "
        "after before during between within against but if then than so may might must "
        "should could would"
    ).split()
)

# ASCII part identical to the published tokenizer ([a-z0-9.*]+); any other letter
# or digit (category L*, M*, N*) extends a run.
# One character class, not an alternation of two (the same runs, found twice as fast),
# written as "anything but the other ASCII characters": the same class as
# ``[a-z0-9.*\u0080-\U0010ffff]`` (tested over every code point), which ``re`` takes
# 2.6 ms to compile in every process against 0.1 ms for this one.
_RUN = re.compile(r"[^\x00-\x29\x2b-\x2d\x2f\x3a-\x60\x7b-\x7f]+")


def _unspaced(ch: str) -> bool:
    """Characters of scripts written without spaces between words."""
    cp = ord(ch)
    return (
        0x2E80 <= cp <= 0x9FFF  # CJK radicals, kana, CJK unified ideographs
        or 0xAC00 <= cp <= 0xD7AF  # Hangul syllables
        or 0xF900 <= cp <= 0xFAFF  # CJK compatibility ideographs
        or 0x20000 <= cp <= 0x2FA1F  # CJK extensions
        or 0x0E00 <= cp <= 0x0EFF  # Thai, Lao
        or 0x1000 <= cp <= 0x109F  # Myanmar
        or 0x1780 <= cp <= 0x17FF  # Khmer
    )


def _word_char(ch: str) -> bool:
    if ch < "\x80":
        return True  # the regex already limited ASCII to [a-z0-9.*]
    cat = unicodedata.category(ch)
    return cat[0] in "LMN"


def _split_run(run: str) -> Iterable[str]:
    """Split a non-ASCII run into word tokens and bigrams of unspaced scripts."""
    piece: list[str] = []
    unspaced: list[str] = []

    def flush_unspaced() -> Iterable[str]:
        if len(unspaced) == 1:
            yield unspaced[0]
        for i in range(len(unspaced) - 1):
            yield unspaced[i] + unspaced[i + 1]
        unspaced.clear()

    for ch in run:
        if not _word_char(ch):
            if piece:
                yield "".join(piece)
                piece.clear()
            yield from flush_unspaced()
        elif _unspaced(ch):
            if piece:
                yield "".join(piece)
                piece.clear()
            unspaced.append(ch)
        else:
            yield from flush_unspaced()
            piece.append(ch)
    if piece:
        yield "".join(piece)
    yield from flush_unspaced()


def _stem(token: str) -> str:
    if len(token) > 3 and token.endswith("s") and not token.endswith("ss"):
        return token[:-1]
    return token


def _ascii_tokens(lowered: str) -> list[str]:
    """``tokenize`` of a lowercased ASCII text.

    Every run is one token (the common case, in one comprehension: ``_stem`` inline).
    """
    return [
        t[:-1] if len(t) > 3 and t[-1] == "s" and t[-2] != "s" else t
        for t in _RUN.findall(lowered)
        if t and t not in STOPWORDS
    ]


def tokenize(text: str) -> list[str]:
    """Lowercased content tokens of ``text``, stopwords dropped, plurals lightly stemmed."""
    lowered = text.lower()
    if lowered.isascii():
        return _ascii_tokens(lowered)
    lowered = unicodedata.normalize("NFKC", lowered).lower()
    out: list[str] = []
    for run in _RUN.findall(lowered):
        pieces: Iterable[str] = (run,) if run.isascii() else _split_run(run)
        for token in pieces:
            if token and token not in STOPWORDS:
                out.append(_stem(token))
    return out


def __getattr__(name: str) -> object:
    # The protocols live in darwin_memo.retrieval.protocols: defining them needs typing, which a
    # one-shot CLI call would otherwise import for nothing.
    if name in ("Retriever", "EmbeddingFn"):
        from . import protocols as interfaces

        return getattr(interfaces, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _listed_tokens(cached: tuple[str, str, frozenset[str] | None]) -> list[str]:
    """The tokens of the question and answer an index entry was listed with."""
    return tokenize(cached[0] + " " + cached[1])


class LexicalRetriever:
    """Smoothed-IDF token overlap with a coverage floor (the default retriever).

    IDF of a query token is ``log(1 + N / (1 + df))`` over the candidate set; an
    entry scores the IDF mass of the query tokens it contains and qualifies only
    when that covers at least ``min_coverage`` of the query's total mass.
    """

    def __init__(self, min_coverage: float = 0.25) -> None:
        if not 0.0 <= min_coverage <= 1.0 or math.isnan(min_coverage):
            raise ValueError(f"min_coverage must be within [0, 1], got {min_coverage!r}")
        self.min_coverage = min_coverage
        # Each listed entry's question and answer as listed (to notice an edit, and to
        # know which lists to leave), and its token set once something asked for it
        # (None until then: a million sets cost gigabytes). The sets' tokens are
        # interned: the entries share one string per distinct token.
        self._tokens: dict[str, tuple[str, str, frozenset[str] | None]] = {}
        # The inverted index over the entries a store asked us to index: postings are
        # compact arrays of ordinals (appended in order; removals are tombstoned and
        # compacted lazily), so a million entries cost tens of MB, not gigabytes.
        self._ordinal: dict[str, int] = {}
        self._ids: list[str | None] = []
        self._postings: dict[str, array[int]] = {}
        self._df: dict[str, int] = {}
        self._dead_in: dict[str, int] = {}
        # Entries given to ``index`` and not yet in the lists, in order: the lists are
        # made when a search needs them (in one pass when the index is empty), so
        # adding entries costs no tokenizing until something is looked up.
        self._pending: dict[str, MemoryEntry] = {}

    # -- the index ------------------------------------------------------------

    @property
    def indexed(self) -> int:
        """How many entries the index holds (those still to be listed included)."""
        return len(self._ordinal) + len(self._pending)

    def index(self, entry: MemoryEntry) -> None:
        """Add (or refresh) an entry in the inverted index (listed by the next search)."""
        entry_id, pending = entry.id, self._pending
        if entry_id in self._ordinal:
            self._unindex(entry_id)
        elif entry_id in pending:
            del pending[entry_id]  # refreshed: it goes after the others
        pending[entry_id] = entry

    def _list_pending(self) -> None:
        """Put the pending entries in the lists, in the order they were given."""
        pending = self._pending
        if not pending:
            return
        self._pending = {}
        if self._ordinal or type(self)._list is not LexicalRetriever._list:
            for entry in pending.values():
                self._list(entry)
            return
        # Into an empty index (a store being read or built): one pass that counts each
        # token's entries once at the end instead of per entry, with the collector
        # paused (a token set and a few containers per entry, the store in memory).
        ids, ordinals, postings, cache = self._ids, self._ordinal, self._postings, self._tokens
        get = postings.get
        with collector.paused():
            for entry in pending.values():
                ordinal = len(ids)
                ids.append(entry.id)
                ordinals[entry.id] = ordinal
                question, answer = entry.question, entry.answer
                cached = cache.get(entry.id)
                if (
                    cached is not None
                    and cached[2] is not None
                    and cached[0] == question
                    and cached[1] == answer
                ):
                    toks: Iterable[str] = cached[2]
                else:
                    toks = set(tokenize(entry.text))
                    cache[entry.id] = (question, answer, None)
                for t in toks:
                    plist = get(t)
                    if plist is None:
                        postings[t] = array("l", (ordinal,))
                    else:
                        plist.append(ordinal)
            self._df = {t: len(plist) for t, plist in postings.items()}  # nobody is dead yet

    def _list(self, entry: MemoryEntry) -> None:
        """Put one entry (not listed) in the lists."""
        toks = self.tokens(entry)
        ordinal = len(self._ids)
        self._ids.append(entry.id)
        self._ordinal[entry.id] = ordinal
        for t in toks:
            plist = self._postings.get(t)
            if plist is None:
                plist = self._postings[t] = array("l")
            plist.append(ordinal)
            self._df[t] = self._df.get(t, 0) + 1

    def index_many(self, entries: Iterable[MemoryEntry]) -> None:
        """``index`` each entry in turn."""
        if not self._ordinal and not self._pending and type(self).index is LexicalRetriever.index:
            # Into an empty index (a store being read): queued in one comprehension.
            entries = list(entries)
            self._pending = {entry.id: entry for entry in entries}
            if len(self._pending) == len(entries):
                return
            self._pending = {}  # an id given twice: in turn, as ``index`` orders them
        index = self.index
        for entry in entries:
            index(entry)

    def _unindex(self, entry_id: str) -> None:
        if self._pending.pop(entry_id, None) is not None:
            return  # never listed
        ordinal = self._ordinal.pop(entry_id, None)
        if ordinal is None:
            return
        self._ids[ordinal] = None
        cached = self._tokens.get(entry_id)
        toks: Iterable[str] = ()
        if cached is not None:  # the tokens it was listed with
            toks = cached[2] if cached[2] is not None else set(_listed_tokens(cached))
        for t in toks:
            self._df[t] -= 1
            dead = self._dead_in.get(t, 0) + 1
            plist = self._postings[t]
            if self._df[t] == 0:
                del self._df[t], self._postings[t]
                self._dead_in.pop(t, None)
            elif dead * 2 > len(plist):
                ids = self._ids
                self._postings[t] = array("l", (o for o in plist if ids[o] is not None))
                self._dead_in.pop(t, None)
            else:
                self._dead_in[t] = dead

    def search(self, query: str, k: int | None) -> list[tuple[str, float]]:
        """Ids in the published top ``k`` (ties with the k-th included) over the index."""
        self._list_pending()
        qtokens = list(dict.fromkeys(tokenize(query)))
        ids = self._ids
        tokens = self._tokens

        def postings(t: str) -> Collection[int]:
            plist = self._postings.get(t)
            if plist is None:
                return ()
            if not self._dead_in.get(t):
                return plist
            return [o for o in plist if ids[o] is not None]

        def contains(t: str, keys: Collection[int]) -> list[int]:
            out = []
            for o in keys:
                entry_id = ids[o]
                if entry_id is None:
                    continue
                toks = tokens[entry_id][2]
                if toks is None:
                    toks = self._token_set(entry_id)
                if t in toks:
                    out.append(o)
            return out

        found = top_candidates(
            qtokens,
            len(self._ordinal),
            lambda t: self._df.get(t, 0),
            postings,
            contains,
            self.min_coverage,
            k,
        )
        found.sort(key=lambda pair: pair[0])  # insertion order: ties rank as a scan ranks them
        return [(str(ids[o]), score) for o, score in found]

    def tokens(self, entry: MemoryEntry) -> frozenset[str]:
        """The entry's token set, cached by id (and refreshed if its text changed)."""
        question, answer = entry.question, entry.answer
        cached = self._tokens.get(entry.id)
        if (
            cached is not None
            and cached[2] is not None
            and cached[0] == question
            and cached[1] == answer
        ):
            return cached[2]
        toks = frozenset(map(intern, tokenize(entry.text)))
        self._tokens[entry.id] = (question, answer, toks)
        return toks

    def _token_set(self, entry_id: str) -> frozenset[str]:
        """A listed entry's token set, made from the text it was listed with, and kept."""
        question, answer, _ = cached = self._tokens[entry_id]
        toks = frozenset(map(intern, _listed_tokens(cached)))
        self._tokens[entry_id] = (question, answer, toks)
        return toks

    def remember_tokens(self, entry: MemoryEntry, tokens: Iterable[str]) -> None:
        """Cache ``entry``'s token set as a store indexed it (``tokenize`` of its text),
        so that ``tokens`` and ``similarity`` need not tokenize it again."""
        self._tokens[entry.id] = (entry.question, entry.answer, frozenset(tokens))

    def rank(self, query: str, entries: Sequence[MemoryEntry]) -> list[tuple[MemoryEntry, float]]:
        qtokens = list(dict.fromkeys(tokenize(query)))
        if not qtokens or not entries:
            return []
        token_sets = [self.tokens(e) for e in entries]
        n = len(entries)
        idf: dict[str, float] = {}
        for tok in qtokens:
            df = sum(1 for ts in token_sets if tok in ts)
            idf[tok] = math.log(1.0 + n / (1.0 + df))
        mass = sum(idf.values())
        if mass <= 0:
            return []
        scored: list[tuple[MemoryEntry, float]] = []
        for entry, ts in zip(entries, token_sets, strict=True):
            score = sum(w for tok, w in idf.items() if tok in ts)
            if score > 0 and score / mass >= self.min_coverage:
                scored.append((entry, score))
        scored.sort(key=lambda pair: pair[1], reverse=True)
        return scored

    def similarity(self, a: MemoryEntry, b: MemoryEntry) -> float:
        ta, tb = self.tokens(a), self.tokens(b)
        union = ta | tb
        if not union:
            return 0.0
        return len(ta & tb) / len(union)

    def forget(self, entry_id: str) -> None:
        self._unindex(entry_id)
        self._tokens.pop(entry_id, None)

    def dump_state(self) -> dict[str, Any]:
        return {}

    def load_state(self, state: dict[str, Any]) -> None:
        return None


class HashingEmbedder:
    """Hashed character n-grams: a deterministic, dependency-free embedding.

    Buys robustness to typos and word forms ("databse" still lands near
    "database"), not synonyms.
    """

    def __init__(self, dims: int = 256, ngram_range: tuple[int, int] = (3, 5)) -> None:
        if dims < 1:
            raise ValueError(f"dims must be positive, got {dims}")
        lo, hi = ngram_range
        if lo < 1 or hi < lo:
            raise ValueError(f"ngram_range must be (lo, hi) with 1 <= lo <= hi, got {ngram_range}")
        self.dims = dims
        self.ngram_range = (lo, hi)

    def __call__(self, text: str) -> list[float]:
        joined = " ".join(tokenize(text))
        dims = self.dims
        lo, hi = self.ngram_range
        return _unit(self._grams(joined, dims, lo, hi))

    @staticmethod
    def _grams(joined: str, dims: int, lo: int, hi: int) -> list[float]:
        """The n-gram sums: each n-gram's CRC-32 picks a dimension and a sign."""
        from zlib import crc32  # here: the lexical path and the CLI never hash n-grams

        vec = [0.0] * dims
        # n-grams over characters (not bytes), so every script hashes the same way. An
        # ASCII text's characters are its bytes: its grams are sliced from the bytes,
        # without encoding each one (most lessons are ASCII).
        if joined.isascii():
            data = joined.encode("ascii")
            for n in range(lo, hi + 1):
                for i in range(len(data) - n + 1):
                    h = crc32(data[i : i + n])
                    vec[h % dims] += -1.0 if h & 0x80000000 else 1.0
        else:
            for n in range(lo, hi + 1):
                for i in range(len(joined) - n + 1):
                    h = crc32(joined[i : i + n].encode("utf-8"))
                    vec[h % dims] += -1.0 if h & 0x80000000 else 1.0
        return vec


def _unit(vec: list[float]) -> list[float]:
    norm = math.sqrt(sum(map(operator.mul, vec, vec)))
    return list(map(operator.truediv, vec, repeat(norm))) if norm > 0 else vec


def _usable(values: Sequence[float] | None, source: str) -> list[float]:
    """``values`` as a list of floats; ``ValueError`` when missing, empty or not finite.

    Such a vector cannot be compared with anything: its entry is dissimilar to every
    other (similarity 0.0) and skipped in ranking, and it is never cached.
    """
    if values is None:  # a model that gave nothing back for this text
        raise ValueError(f"{source} returned no vector")
    vec = list(map(float, values))
    if not vec:
        raise ValueError(f"{source} returned an empty vector")
    if not all(map(math.isfinite, vec)):
        raise ValueError(f"{source} returned a non-finite component")
    return vec


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    return _cosine_normed(a, _norm(a), b, _norm(b))


def _norm(a: Sequence[float]) -> float:
    # The same products summed in the same order as a generator would, in C loops.
    return math.sqrt(sum(map(operator.mul, a, a)))


def _cosine_normed(a: Sequence[float], na: float, b: Sequence[float], nb: float) -> float:
    """``_cosine(a, b)`` given both norms (``_norm``), to the last bit."""
    if len(a) != len(b):
        raise ValueError(f"vector sizes differ ({len(a)} vs {len(b)})")
    dot: float = sum(map(operator.mul, a, b))
    if na == 0 or nb == 0:
        return 0.0
    return dot / (na * nb)


#: How far a float32 cosine of unit rows may stray from the exact double-precision one
#: (a few ulps of float32 summed over a few hundred dimensions: far below this).
APPROX_SLACK = 1e-4


def _exact_cosines(
    np: Any,
    q: Sequence[float],
    q_norm: float,
    vectors: Sequence[array[float]],
    norms: Sequence[float],
) -> list[float]:
    """``_cosine_normed(q, q_norm, v, norm)`` for every vector and its norm, to the last bit.

    The dot products are summed one component at a time, left to right (a running
    sum along each row): the same double-precision products and additions, in the
    same order, as ``_cosine_normed``'s ``sum(map(mul, ...))``, for every row at once
    instead of a Python loop per component per row (a few thousand rows per query at
    100k entries).
    """
    if not vectors:
        return []
    rows = np.frombuffer(b"".join(vectors), dtype=np.float64).reshape(len(vectors), len(q))
    products = rows * np.asarray(q, dtype=np.float64)
    dots = np.cumsum(products, axis=1)[:, -1]
    row_norms = np.asarray(norms, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        sims = dots / (q_norm * row_norms)
    if q_norm == 0:
        return [0.0] * len(vectors)
    return [
        0.0 if n == 0 else float(x) for x, n in zip(sims.tolist(), row_norms.tolist(), strict=True)
    ]


class EmbeddingRetriever:
    """Cosine similarity over cached entry vectors, with a similarity floor."""

    def __init__(
        self,
        embed: Callable[[str], Sequence[float]],
        min_similarity: float = 0.30,
        *,
        ann: IvfIndex | None = None,
    ) -> None:
        self.embed = embed
        self.min_similarity = min_similarity
        #: An approximate index (``darwin_memo.retrieval.ann.IvfIndex``) for large stores; None:
        #: every search is exact.
        self.ann = ann
        # Cached vectors as arrays of doubles: the same values as lists of floats, in a
        # quarter of the memory (2 KB against 8 KB at 256 dimensions), and nothing the
        # cyclic collector has to walk.
        self._vectors: dict[str, array[float]] = {}
        self._norms: dict[str, float] = {}  # each cached vector's norm
        # The dense index: one float32 row per indexed entry (numpy, imported lazily),
        # rows filled with unit vectors on first search; removed rows are zeroed.
        self._row_of: dict[str, int] = {}
        self._row_ids: list[str | None] = []
        self._members: dict[str, MemoryEntry] = {}
        self._unfilled: list[int] = []
        self._matrix: Any = None

    # -- the dense index --------------------------------------------------------

    @property
    def indexed(self) -> int:
        return len(self._row_of)

    @property
    def row_ids(self) -> Sequence[str | None]:
        """The dense index's entry id of each row, in the order the entries were
        indexed (None: a removed row). Read only: the index's own list."""
        return self._row_ids

    @property
    def row_index(self) -> Mapping[str, int]:
        """Each indexed entry's row (``row_ids`` read backwards). Read only."""
        return self._row_of

    def index(self, entry: MemoryEntry) -> None:
        self._unindex(entry.id)
        row = len(self._row_ids)
        self._row_ids.append(entry.id)
        self._row_of[entry.id] = row
        self._members[entry.id] = entry
        self._unfilled.append(row)

    def _unindex(self, entry_id: str) -> None:
        row = self._row_of.pop(entry_id, None)
        if row is None:
            return
        self._row_ids[row] = None
        self._members.pop(entry_id, None)
        if self._matrix is not None and row < self._matrix.shape[0]:
            self._matrix[row] = 0.0
        if self.ann is not None:
            self.ann.forget(row)

    def _fill(self, np: Any) -> None:
        rows = [r for r in self._unfilled if self._row_ids[r] is not None]
        self._unfilled = []
        if not rows:
            return
        need = len(self._row_ids)
        for row in rows:
            entry = self._members[str(self._row_ids[row])]
            try:
                vec = self._vector(entry)
            except ValueError:
                continue  # skipped, as rank() skips it
            if self._matrix is None:
                self._matrix = np.zeros((max(need, 1024), len(vec)), dtype=np.float32)
            if self._matrix.shape[0] < need:
                grown = np.zeros(
                    (max(need, 2 * self._matrix.shape[0]), self._matrix.shape[1]), dtype=np.float32
                )
                grown[: self._matrix.shape[0]] = self._matrix
                self._matrix = grown
            if len(vec) != self._matrix.shape[1]:
                continue  # a vector of another model: only the exact path can score it
            v = np.asarray(vec, dtype=np.float32)
            norm = float(np.linalg.norm(v))
            if norm > 0:
                self._matrix[row] = v / norm

    def search(self, query: str, k: int | None) -> list[tuple[str, float]]:
        """Ids in the top ``k`` (ties with the k-th included), via a float32 matrix product.

        Candidates come from the matrix; their scores are then recomputed exactly in
        double precision, so results equal ``rank``'s.
        """
        approx = self.approximate(query)
        if approx is None:
            return []
        if isinstance(approx, list):  # no matrix to search: the exact scan's result
            return approx
        np, q, sims = approx
        slack = APPROX_SLACK
        if self.ann is not None and len(self._row_ids) >= self.ann.min_rows:
            # Approximate: only the rows of the nearest inverted lists are scored.
            unit = np.asarray(q, dtype=np.float32)
            unit /= np.linalg.norm(unit)
            found, sims = self.ann.scores(np, self._matrix, len(self._row_ids), unit)
            keep = np.nonzero(sims >= self.min_similarity - slack)[0]
            rows, sims = found[keep], sims[keep]
            if k is not None and len(rows) > k:
                kth = np.partition(sims, len(rows) - k)[len(rows) - k]
                rows = rows[sims >= kth - slack]
        else:
            rows = np.nonzero(sims >= self.min_similarity - slack)[0]
            if k is not None and len(rows) > k:
                kth = np.partition(sims[rows], len(rows) - k)[len(rows) - k]
                rows = rows[sims[rows] >= kth - slack]
        return self.exact(np, q, rows.tolist())

    def approximate(self, query: str) -> Any:
        """The query against every row: ``(numpy, query vector, float32 cosines by row)``,
        each cosine within ``APPROX_SLACK`` of the exact one (a removed or unusable row
        scores 0). None when the query has no usable vector (memory is silent); the
        exact scan's ``[(id, score), ...]`` when there is no matrix to search (no numpy,
        or vectors of another size than the query's)."""
        try:
            import numpy as np
        except ImportError:  # no numpy: the exact scan
            return [(e.id, s) for e, s in self.rank(query, list(self._members.values()))]
        self._fill(np)
        q = self._query_vector(query)
        if q is None:
            return None
        if self._matrix is None or len(q) != self._matrix.shape[1]:
            return [(e.id, s) for e, s in self.rank(query, list(self._members.values()))]
        qv = np.asarray(q, dtype=np.float32)
        qn = float(np.linalg.norm(qv))
        if qn == 0:
            return None
        return np, q, self._matrix[: len(self._row_ids)] @ (qv / qn)

    def exact(self, np: Any, q: Sequence[float], rows: Iterable[int]) -> list[tuple[str, float]]:
        """The exact cosine (``rank``'s, to the last bit) of each given row's entry that
        clears the floor, in row order (so ties rank as a scan ranks them)."""
        scored: list[tuple[int, str]] = []
        for row in sorted(rows):
            entry_id = self._row_ids[row]
            vec = self._vectors.get(entry_id) if entry_id is not None else None
            if entry_id is None or vec is None or len(vec) != len(q):
                continue  # as ``_cosine_normed`` refuses it: skipped
            scored.append((row, entry_id))
        sims = _exact_cosines(
            np,
            q,
            _norm(q),
            [self._vectors[i] for _, i in scored],
            [self._norms[i] for _, i in scored],
        )
        return [
            (entry_id, sim)
            for (_, entry_id), sim in zip(scored, sims, strict=True)
            if sim >= self.min_similarity
        ]

    def exact_cosines(self, q: Sequence[float], vectors: Sequence[array[float]]) -> list[float]:
        """``rank``'s cosine of the query vector ``q`` with each of ``vectors`` (each
        as long as ``q``), to the last bit, whether or not they are cached: how a store
        that holds its entries' vectors itself rescores its candidates exactly."""
        try:
            import numpy as np
        except ImportError:
            q_norm = _norm(q)
            return [_cosine_normed(q, q_norm, v, _norm(v)) for v in vectors]
        return _exact_cosines(np, q, _norm(q), vectors, [_norm(v) for v in vectors])

    def query_vector(self, query: str) -> list[float] | None:
        """The query's vector as ``rank`` embeds it, or None when it has none (a dense
        ranking of it is empty then)."""
        return self._query_vector(query)

    def _embed(self, text: str) -> list[float]:
        return _usable(self.embed(text), "the embedding function")

    def _query_vector(self, query: str) -> list[float] | None:
        """The query's vector, or None when it has no usable one: memory is silent then
        (as published), since nothing can be similar to it."""
        try:
            return self._embed(query)
        except ValueError:
            return None

    def vector(self, entry: MemoryEntry) -> list[float]:
        """The entry's vector (embedded on first use, then cached)."""
        return list(self._vector(entry))

    def _vector(self, entry: MemoryEntry) -> array[float]:
        vec = self._vectors.get(entry.id)
        if vec is None:
            vec = self._keep(entry.id, self._embed(entry.text))
        return vec

    def _keep(self, entry_id: str, values: list[float]) -> array[float]:
        vec = self._vectors[entry_id] = array("d", values)
        self._norms[entry_id] = _norm(vec)
        return vec

    def cached_vector(self, entry_id: str) -> array[float] | None:
        """The entry's cached vector (not a copy: do not change it), or None."""
        return self._vectors.get(entry_id)

    def adopt(self, entry_id: str, vector: array[float]) -> None:
        """Cache a vector kept elsewhere (a store's ``vectors`` table) as the entry's.

        The caller vouches that it is this embedder's vector of the entry's text,
        non-empty and finite: a store checks the text's hash and the values first.
        """
        self._vectors[entry_id] = vector
        self._norms[entry_id] = _norm(vector)

    def warm(
        self,
        entries: Iterable[MemoryEntry],
        batch_embed: Callable[[list[str]], Sequence[Sequence[float]]] | None = None,
    ) -> int:
        """Embed every uncached entry now; returns how many were embedded.

        An entry whose vector is unusable (empty, or with a non-finite component) is
        passed over and not cached, as ``rank`` passes it over: one such entry must not
        stop the others being embedded (nor a consolidation that warms first). It is
        asked for again next time, in case the embedding service recovers.
        """
        todo = [e for e in entries if e.id not in self._vectors]
        if not todo:
            return 0
        embedded = 0
        if batch_embed is None:
            for e in todo:
                try:
                    self._vector(e)
                except ValueError:
                    continue
                embedded += 1
            return embedded
        vectors = batch_embed([e.text for e in todo])
        if len(vectors) != len(todo):
            raise ValueError(f"batch_embed returned {len(vectors)} vectors for {len(todo)} texts")
        for e, v in zip(todo, vectors, strict=True):
            try:
                vec = _usable(v, "batch_embed")
            except ValueError:
                continue
            self._keep(e.id, vec)
            embedded += 1
        return embedded

    def rank(self, query: str, entries: Sequence[MemoryEntry]) -> list[tuple[MemoryEntry, float]]:
        q = self._query_vector(query) if entries else None
        if q is None:
            return []
        q_norm = _norm(q)
        scored: list[tuple[MemoryEntry, float]] = []
        for entry in entries:
            try:
                v = self._vector(entry)
                sim = _cosine_normed(q, q_norm, v, self._norms[entry.id])
            except ValueError:
                continue
            if sim >= self.min_similarity:
                scored.append((entry, sim))
        scored.sort(key=lambda pair: pair[1], reverse=True)
        return scored

    def similarity(self, a: MemoryEntry, b: MemoryEntry) -> float:
        try:
            va, vb = self._vector(a), self._vector(b)
            sim = _cosine_normed(va, self._norms[a.id], vb, self._norms[b.id])
            return max(0.0, min(1.0, sim))
        except ValueError:
            return 0.0

    def forget(self, entry_id: str) -> None:
        self._unindex(entry_id)
        self._vectors.pop(entry_id, None)
        self._norms.pop(entry_id, None)

    def dump_state(self) -> dict[str, Any]:
        if not self._vectors:
            return {}
        state: dict[str, Any] = {"vectors": {k: list(v) for k, v in self._vectors.items()}}
        model = getattr(self.embed, "model_id", None)
        if isinstance(model, str):
            state["model"] = model  # so another model's vectors are never mixed in
        return state

    def load_state(self, state: dict[str, Any]) -> None:
        vectors = state.get("vectors", {}) if isinstance(state, dict) else {}
        if not isinstance(vectors, dict):
            return
        model = getattr(self.embed, "model_id", None)
        if isinstance(model, str) and state.get("model") != model:
            return  # vectors of another (or an unnamed) model: embed afresh
        for k, v in vectors.items():
            if (
                isinstance(k, str)
                and isinstance(v, list)
                and v
                and all(
                    isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
                    for x in v
                )
            ):
                self._keep(k, [float(x) for x in v])
