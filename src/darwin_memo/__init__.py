"""darwin-memo: memory for LLM agents that dies unless it earns its keep.

Every entry is a self-contained question/answer lesson that pays energy upkeep
each tick and earns energy only from measured outcomes of the actions it
decided. Poisoned advice is executed by the environment it damaged, trivia
starves, near-duplicates merge.
"""

# `consolidate` is both a submodule (the published path, see consolidate.py) and a
# function; import the function eagerly so the submodule, imported later, can never
# shadow it.
from .consolidate import consolidate

__version__ = "0.8.0.dev0"

# Names are imported on first use, so `darwin-memo ledger FILE decide` pays only for
# what it runs. Type checkers see ordinary imports.
_LAZY = {
    "Books": "economy.rules",
    "CONFLICT_HEADER": "retrieval.temporal",
    "CycleStats": "records.entry",
    "DEFAULT_BASE_RPC": "integrations.evm",
    "DEFAULT_MERGE_THRESHOLD": "economy.merge",
    "DarwinMemoError": "errors",
    "Document": "sim.encode",
    "EMBEDDING_MERGE_THRESHOLD": "retrieval.lexical",
    "EmbeddingFn": "retrieval.protocols",
    "EmbeddingRetriever": "retrieval.lexical",
    "EntryKind": "records.entry",
    "EntryNotFound": "errors",
    "Environment": "sim.environments",
    "EvmRpc": "integrations.evm",
    "EvmRpcError": "integrations.evm",
    "EvmSettler": "integrations.evm",
    "HashingEmbedder": "retrieval.lexical",
    "Ledger": "ledger",
    "LexicalRetriever": "retrieval.lexical",
    "LocalEncoder": "sim.encode",
    "MemoryEntry": "records.entry",
    "MemoryStore": "store",
    "OllamaClient": "answer.clients",
    "OllamaEmbedder": "answer.clients",
    "OllamaError": "answer.clients",
    "Outcome": "records.entry",
    "ProtocolAnswer": "answer.protocol",
    "QueryProtocol": "answer.protocol",
    "RENT_TIERS": "sim.environments",
    "ReflectionEncoder": "sim.reflection",
    "RentedStorageEnv": "sim.environments",
    "RentedTestSuiteEnv": "sim.testsuite_env",
    "Retriever": "retrieval.protocols",
    "StorageEnv": "sim.environments",
    "StoreError": "errors",
    "StoreFormatError": "errors",
    "StoreLockedError": "errors",
    "StoreNotFound": "errors",
    "SurvivalConfig": "economy.config",
    "SurvivalLoop": "sim.survival",
    "SurvivalReport": "sim.survival",
    "Task": "records.entry",
    "TestSuiteEnv": "sim.testsuite_env",
    "Ticket": "ledger",
    "Trajectory": "records.entry",
    "VerifiableQAEnv": "sim.environments",
    "advance_lifecycle": "economy.lifecycle",
    "age_annotation": "retrieval.temporal",
    "assign_credit": "economy.lifecycle",
    "conflict_clusters": "retrieval.temporal",
    "death_cause": "economy.lifecycle",
    "decision_polarity": "sim.environments",
    "demo_corpus": "sim.encode",
    "is_silent": "economy.lifecycle",
    "newest_first": "retrieval.temporal",
    "ollama_available": "answer.clients",
    "recency_weight": "retrieval.temporal",
    "rent_multipliers": "sim.environments",
}

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .answer.clients import OllamaClient, OllamaEmbedder, OllamaError, ollama_available
    from .answer.protocol import ProtocolAnswer, QueryProtocol
    from .economy.config import SurvivalConfig
    from .economy.lifecycle import advance_lifecycle, assign_credit, death_cause, is_silent
    from .economy.merge import DEFAULT_MERGE_THRESHOLD
    from .economy.rules import Books
    from .errors import (
        DarwinMemoError,
        EntryNotFound,
        StoreError,
        StoreFormatError,
        StoreLockedError,
        StoreNotFound,
    )
    from .integrations.evm import DEFAULT_BASE_RPC, EvmRpc, EvmRpcError, EvmSettler
    from .ledger import Ledger, Ticket
    from .records.entry import CycleStats, EntryKind, MemoryEntry, Outcome, Task, Trajectory
    from .retrieval.lexical import (
        EMBEDDING_MERGE_THRESHOLD,
        EmbeddingRetriever,
        HashingEmbedder,
        LexicalRetriever,
    )
    from .retrieval.protocols import EmbeddingFn, Retriever
    from .retrieval.temporal import (
        CONFLICT_HEADER,
        age_annotation,
        conflict_clusters,
        newest_first,
        recency_weight,
    )
    from .sim.encode import Document, LocalEncoder, demo_corpus
    from .sim.environments import (
        RENT_TIERS,
        Environment,
        RentedStorageEnv,
        StorageEnv,
        VerifiableQAEnv,
        decision_polarity,
        rent_multipliers,
    )
    from .sim.reflection import ReflectionEncoder
    from .sim.survival import SurvivalLoop, SurvivalReport
    from .sim.testsuite_env import RentedTestSuiteEnv, TestSuiteEnv
    from .store import MemoryStore

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
