"""Layer 3, retrieval: which entries are relevant to a query, and how fast it is found.

* ``lexical``: tokenization, ``LexicalRetriever`` (IDF overlap with a coverage floor),
  ``EmbeddingRetriever`` and ``HashingEmbedder``;
* ``embedding``: the offline sentence model and the hybrid retriever (``[embeddings]``);
* ``index``: the postings that make lexical retrieval fast; ``ann``: an optional
  approximate nearest-neighbour index for embeddings;
* ``simjoin``: the similarity join that finds near-duplicates for consolidation;
* ``temporal``: recency and conflict groups; ``named``: retrievers chosen by name;
* ``protocols``: the ``Retriever`` and ``EmbeddingFn`` protocols.

Scores never read energy. ``darwin_memo.retrieval`` is a published module path: the
names it exported as a module (``LexicalRetriever``, ``tokenize``, ...) are importable
from this package, loaded on first use so that a one-shot CLI call pays only for what
it runs.
"""

_LAZY = {
    "EMBEDDING_MERGE_THRESHOLD": "lexical",
    "STOPWORDS": "lexical",
    "EmbeddingFn": "protocols",
    "EmbeddingRetriever": "lexical",
    "HashingEmbedder": "lexical",
    "LexicalRetriever": "lexical",
    "Retriever": "protocols",
    "tokenize": "lexical",
}

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .lexical import (
        EMBEDDING_MERGE_THRESHOLD,
        STOPWORDS,
        EmbeddingRetriever,
        HashingEmbedder,
        LexicalRetriever,
        tokenize,
    )
    from .protocols import EmbeddingFn, Retriever

del TYPE_CHECKING  # not a public name


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


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
