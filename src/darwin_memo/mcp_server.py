"""Compatibility path: this module moved to ``darwin_memo.mcp.server``.

``darwin_memo.mcp_server`` is a published module path, so it stays importable; code inside
the package imports from the new home.
"""

from .mcp.server import (
    DEFAULT_MEMORY,
    INSTALL_HINT,
    build_parser,
    build_server,
    default_memory_path,
    main,
    save_with_retry,
    serve,
)

__all__ = [
    "DEFAULT_MEMORY",
    "INSTALL_HINT",
    "build_parser",
    "build_server",
    "default_memory_path",
    "main",
    "save_with_retry",
    "serve",
]

if __name__ == "__main__":  # python -m darwin_memo.mcp_server, as published
    import sys

    sys.exit(main())
