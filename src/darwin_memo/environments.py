"""Compatibility path: this module moved to ``darwin_memo.sim.environments``.

``darwin_memo.environments`` is a published module path, so it stays importable; code inside
the package imports from the new home.
"""

from .sim.environments import (
    NEGATIVE_MARKERS,
    POSITIVE_MARKERS,
    RENT_TIERS,
    Environment,
    RentedStorageEnv,
    StorageEnv,
    VerifiableQAEnv,
    cycle_rng,
    decision_polarity,
    rent_multipliers,
)

__all__ = [
    "NEGATIVE_MARKERS",
    "POSITIVE_MARKERS",
    "RENT_TIERS",
    "Environment",
    "RentedStorageEnv",
    "StorageEnv",
    "VerifiableQAEnv",
    "cycle_rng",
    "decision_polarity",
    "rent_multipliers",
]
