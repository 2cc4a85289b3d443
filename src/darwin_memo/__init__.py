"""darwin-memo: memory for LLM agents that dies unless it earns its keep.

Every entry is a self-contained question/answer lesson that pays energy upkeep
each tick and earns energy only from measured outcomes of the actions it
decided. Poisoned advice is executed by the environment it damaged, trivia
starves, near-duplicates merge.
"""

# `consolidate` is both a submodule and a function; import the function eagerly so the
# submodule (imported later by the ledger) can never shadow it.
from .consolidate import consolidate

__version__ = "0.8.0.dev0"

# Names are imported on first use, so `darwin-memo ledger FILE decide` pays only for
# what it runs. Type checkers see ordinary imports.
_LAZY = {
    "Books": "economy",
    "CONFLICT_HEADER": "temporal",
    "CycleStats": "types",
    "DEFAULT_BASE_RPC": "evm",
    "DEFAULT_MERGE_THRESHOLD": "consolidate",
    "DarwinMemoError": "errors",
    "Document": "encode",
    "EMBEDDING_MERGE_THRESHOLD": "retrieval",
    "EmbeddingFn": "retrieval",
    "EmbeddingRetriever": "retrieval",
    "EntryKind": "types",
    "EntryNotFound": "errors",
    "Environment": "environments",
    "EvmRpc": "evm",
    "EvmRpcError": "evm",
    "EvmSettler": "evm",
    "HashingEmbedder": "retrieval",
    "Ledger": "ledger",
    "LexicalRetriever": "retrieval",
    "LocalEncoder": "encode",
    "MemoryEntry": "types",
    "MemoryStore": "store",
    "OllamaClient": "llm",
    "OllamaEmbedder": "llm",
    "OllamaError": "llm",
    "Outcome": "types",
    "ProtocolAnswer": "protocol",
    "QueryProtocol": "protocol",
    "RENT_TIERS": "environments",
    "ReflectionEncoder": "reflection",
    "RentedStorageEnv": "environments",
    "RentedTestSuiteEnv": "testsuite_env",
    "Retriever": "retrieval",
    "StorageEnv": "environments",
    "StoreError": "errors",
    "StoreFormatError": "errors",
    "StoreLockedError": "errors",
    "StoreNotFound": "errors",
    "SurvivalConfig": "survival",
    "SurvivalLoop": "survival",
    "SurvivalReport": "survival",
    "Task": "types",
    "TestSuiteEnv": "testsuite_env",
    "Ticket": "ledger",
    "Trajectory": "types",
    "VerifiableQAEnv": "environments",
    "advance_lifecycle": "survival",
    "age_annotation": "temporal",
    "assign_credit": "survival",
    "conflict_clusters": "temporal",
    "death_cause": "survival",
    "decision_polarity": "environments",
    "demo_corpus": "encode",
    "is_silent": "survival",
    "newest_first": "temporal",
    "ollama_available": "llm",
    "recency_weight": "temporal",
    "rent_multipliers": "environments",
}

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .consolidate import DEFAULT_MERGE_THRESHOLD
    from .economy import Books
    from .encode import Document, LocalEncoder, demo_corpus
    from .environments import (
        RENT_TIERS,
        Environment,
        RentedStorageEnv,
        StorageEnv,
        VerifiableQAEnv,
        decision_polarity,
        rent_multipliers,
    )
    from .errors import (
        DarwinMemoError,
        EntryNotFound,
        StoreError,
        StoreFormatError,
        StoreLockedError,
        StoreNotFound,
    )
    from .evm import DEFAULT_BASE_RPC, EvmRpc, EvmRpcError, EvmSettler
    from .ledger import Ledger, Ticket
    from .llm import OllamaClient, OllamaEmbedder, OllamaError, ollama_available
    from .protocol import ProtocolAnswer, QueryProtocol
    from .reflection import ReflectionEncoder
    from .retrieval import (
        EMBEDDING_MERGE_THRESHOLD,
        EmbeddingFn,
        EmbeddingRetriever,
        HashingEmbedder,
        LexicalRetriever,
        Retriever,
    )
    from .store import MemoryStore
    from .survival import (
        SurvivalConfig,
        SurvivalLoop,
        SurvivalReport,
        advance_lifecycle,
        assign_credit,
        death_cause,
        is_silent,
    )
    from .temporal import (
        CONFLICT_HEADER,
        age_annotation,
        conflict_clusters,
        newest_first,
        recency_weight,
    )
    from .testsuite_env import RentedTestSuiteEnv, TestSuiteEnv
    from .types import CycleStats, EntryKind, MemoryEntry, Outcome, Task, Trajectory

del TYPE_CHECKING  # not a public name


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'darwin_memo' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "CONFLICT_HEADER",
    "DEFAULT_BASE_RPC",
    "DEFAULT_MERGE_THRESHOLD",
    "EMBEDDING_MERGE_THRESHOLD",
    "RENT_TIERS",
    "Books",
    "CycleStats",
    "DarwinMemoError",
    "Document",
    "EmbeddingFn",
    "EmbeddingRetriever",
    "EntryKind",
    "EntryNotFound",
    "Environment",
    "EvmRpc",
    "EvmRpcError",
    "EvmSettler",
    "HashingEmbedder",
    "Ledger",
    "LexicalRetriever",
    "LocalEncoder",
    "MemoryEntry",
    "MemoryStore",
    "OllamaClient",
    "OllamaEmbedder",
    "OllamaError",
    "Outcome",
    "ProtocolAnswer",
    "QueryProtocol",
    "ReflectionEncoder",
    "RentedStorageEnv",
    "RentedTestSuiteEnv",
    "Retriever",
    "StorageEnv",
    "StoreError",
    "StoreFormatError",
    "StoreLockedError",
    "StoreNotFound",
    "SurvivalConfig",
    "SurvivalLoop",
    "SurvivalReport",
    "Task",
    "TestSuiteEnv",
    "Ticket",
    "Trajectory",
    "VerifiableQAEnv",
    "__version__",
    "advance_lifecycle",
    "age_annotation",
    "assign_credit",
    "conflict_clusters",
    "consolidate",
    "death_cause",
    "decision_polarity",
    "demo_corpus",
    "is_silent",
    "newest_first",
    "ollama_available",
    "recency_weight",
    "rent_multipliers",
]
