"""darwin-memo: memory for LLM agents that dies unless it earns its keep.

Every entry is a self-contained question/answer lesson that pays energy upkeep
each tick and earns energy only from measured outcomes of the actions it
decided. Poisoned advice is executed by the environment it damaged, trivia
starves, near-duplicates merge.
"""

from .consolidate import DEFAULT_MERGE_THRESHOLD, consolidate
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
from .protocol import ProtocolAnswer, QueryProtocol
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

__version__ = "0.8.0.dev0"

__all__ = [
    "CONFLICT_HEADER",
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
    "HashingEmbedder",
    "LexicalRetriever",
    "LocalEncoder",
    "MemoryEntry",
    "MemoryStore",
    "Outcome",
    "ProtocolAnswer",
    "QueryProtocol",
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
    "recency_weight",
    "rent_multipliers",
]
