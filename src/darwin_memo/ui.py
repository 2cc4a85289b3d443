"""Compatibility path: this module moved to ``darwin_memo.dashboard.server``.

``darwin_memo.ui`` is a published module path, so it stays importable; code inside
the package imports from the new home.
"""

from .dashboard.server import (
    CSP,
    DEFAULT_PORT,
    LOOPBACK,
    TOKEN_HEADER,
    DashboardServer,
    UiError,
    make_server,
    serve,
    serve_until_stopped,
    state,
)

__all__ = [
    "CSP",
    "DEFAULT_PORT",
    "LOOPBACK",
    "TOKEN_HEADER",
    "DashboardServer",
    "UiError",
    "make_server",
    "serve",
    "serve_until_stopped",
    "state",
]
