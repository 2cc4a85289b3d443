"""Retrievers by name, and the choice a store records (issue 36, docs/retrieval.md).

Every host process of a store (the CLI, ``serve``, the MCP server, a library
caller) must rank the same way, so a store remembers which retriever it is searched
with: ``Ledger.open(path, retriever="hybrid")`` records the name on first use, and a
later ``Ledger.open(path)`` builds that retriever again. Three names exist:

- ``lexical``: ``LexicalRetriever()``, the published scorer (the default; a store
  that recorded nothing is searched with it);
- ``hybrid``: ``HybridRetriever()``, the recommended offline retriever;
- ``semantic``: ``EmbeddingRetriever(SentenceEmbedder())``, the dense model alone.

``hybrid`` and ``semantic`` need the ``[embeddings]`` extra. Asking a store for a
name other than the one it recorded is a ``RetrieverMismatch``; ``darwin-memo ledger
STORE set-retriever NAME`` changes the record.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from ..errors import StoreError
from .protocols import Retriever

__all__ = [
    "RETRIEVER_NAMES",
    "RetrieverMismatch",
    "make_retriever",
    "mismatch",
    "resolve_retriever",
    "retriever_name",
]


class RetrieverMismatch(StoreError, ValueError):
    """A store recorded one retriever and was asked to open with another."""


def _lexical() -> Retriever:
    from .lexical import LexicalRetriever

    return LexicalRetriever()


def _needs_embeddings(name: str) -> None:
    from .embedding import INSTALL_HINT, EmbeddingsUnavailable, embeddings_available

    if not embeddings_available():
        raise EmbeddingsUnavailable(
            f"the {name} retriever needs the embeddings extra: {INSTALL_HINT}"
        )


def _hybrid() -> Retriever:
    _needs_embeddings("hybrid")
    from .embedding import HybridRetriever

    return HybridRetriever()


def _semantic() -> Retriever:
    _needs_embeddings("semantic")
    from .embedding import SentenceEmbedder
    from .lexical import EmbeddingRetriever

    return EmbeddingRetriever(SentenceEmbedder())


_MAKERS: dict[str, Callable[[], Retriever]] = {
    "lexical": _lexical,
    "hybrid": _hybrid,
    "semantic": _semantic,
}

#: The names a store can record, in the order the docs list them.
RETRIEVER_NAMES: tuple[str, ...] = tuple(_MAKERS)


def _check_name(name: str) -> str:
    if name not in _MAKERS:
        raise ValueError(
            f"unknown retriever {name!r} (choose {', '.join(RETRIEVER_NAMES[:-1])} "
            f"or {RETRIEVER_NAMES[-1]})"
        )
    return name


def make_retriever(name: str) -> Retriever:
    """A new retriever of the named kind (``EmbeddingsUnavailable`` without the extra)."""
    return _MAKERS[_check_name(name)]()


def retriever_name(retriever: Any) -> str | None:
    """The name a retriever object is recorded under, or None for one of another kind.

    The name goes by class and model: a ``HybridRetriever(context=0.5)`` is ``hybrid``
    (its options are the caller's to pass again), an ``EmbeddingRetriever`` over the
    shipped ``SentenceEmbedder`` is ``semantic``; one over another embedder has no name
    (it is neither recorded nor checked).
    """
    from .lexical import EmbeddingRetriever, LexicalRetriever

    if isinstance(retriever, LexicalRetriever):
        return "lexical"
    semantic = sys.modules.get(__package__ + ".embedding")  # loaded if either exists
    if semantic is None:
        return None
    if isinstance(retriever, EmbeddingRetriever):
        return "semantic" if isinstance(retriever.embed, semantic.SentenceEmbedder) else None
    if isinstance(retriever, semantic.HybridRetriever):
        return "hybrid" if isinstance(retriever.dense.embed, semantic.SentenceEmbedder) else None
    return None


def resolve_retriever(choice: str | Retriever | None) -> tuple[str | None, Retriever | None]:
    """``(name, retriever)`` for what a caller passed: a name builds one, an object is
    named if it can be; ``None`` gives ``(None, None)`` (the store's record decides)."""
    if choice is None:
        return None, None
    if isinstance(choice, str):
        return choice, make_retriever(choice)
    return retriever_name(choice), choice


def mismatch(store: str, recorded: str, asked: str) -> RetrieverMismatch:
    """The one-line error for a store asked to open with another retriever."""
    return RetrieverMismatch(
        f"{store} is searched with the {recorded} retriever, not {asked}; open it "
        f"without a retriever, or change it with `darwin-memo ledger {store} "
        f"set-retriever {asked}`"
    )
