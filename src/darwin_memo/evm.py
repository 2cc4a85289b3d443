"""Compatibility path: this module moved to ``darwin_memo.integrations.evm``.

``darwin_memo.evm`` is a published module path, so it stays importable; code inside
the package imports from the new home.
"""

from .integrations.evm import (
    BALANCE_OF_SELECTOR,
    DECIMALS_SELECTOR,
    DEFAULT_BASE_RPC,
    MAX_REPLY_BYTES,
    USER_AGENT,
    EvmRpc,
    EvmRpcError,
    EvmSettler,
)

__all__ = [
    "BALANCE_OF_SELECTOR",
    "DECIMALS_SELECTOR",
    "DEFAULT_BASE_RPC",
    "MAX_REPLY_BYTES",
    "USER_AGENT",
    "EvmRpc",
    "EvmRpcError",
    "EvmSettler",
]
