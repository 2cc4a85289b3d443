"""Compatibility path: this module moved to ``darwin_memo.retrieval.embedding``.

``darwin_memo.semantic`` is a published module path, so it stays importable; code inside
the package imports from the new home.
"""

from .retrieval.embedding import (
    DEFAULT_HYBRID_ALPHA,
    MODEL_ID,
    EmbeddingsUnavailable,
    HybridRetriever,
    SentenceEmbedder,
    embeddings_available,
    top_k_pool,
)

__all__ = [
    "DEFAULT_HYBRID_ALPHA",
    "MODEL_ID",
    "EmbeddingsUnavailable",
    "HybridRetriever",
    "SentenceEmbedder",
    "embeddings_available",
    "top_k_pool",
]
