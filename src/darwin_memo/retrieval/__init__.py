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
from this package.
"""

from .lexical import (
    EMBEDDING_MERGE_THRESHOLD,
    STOPWORDS,
    EmbeddingRetriever,
    HashingEmbedder,
    LexicalRetriever,
    tokenize,
)
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
