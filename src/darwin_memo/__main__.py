"""``python -m darwin_memo``: the ``darwin-memo`` command.

Importing this module runs nothing; ``main`` (``argv`` in, exit code out) is here for
callers that want it. Run as a program, it goes through ``run``, which exits with
``main``'s code.
"""

from .cli import main, run

__all__ = ["main"]

if __name__ == "__main__":
    run()
