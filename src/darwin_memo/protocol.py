"""Compatibility path: this module moved to ``darwin_memo.answer.protocol``.

``darwin_memo.protocol`` is a published module path, so it stays importable; code inside
the package imports from the new home.
"""

from .answer.protocol import (
    ProtocolAnswer,
    QueryProtocol,
)

__all__ = [
    "ProtocolAnswer",
    "QueryProtocol",
]
