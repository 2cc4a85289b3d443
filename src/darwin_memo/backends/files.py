"""Files beside a store, opened so that nobody else's link can redirect a write.

A store is often a file from elsewhere (a cloned repository, a shared folder, a
teammate's export), and so is everything next to it. A ``NAME.events.jsonl`` or
``NAME.json.lock`` planted there as a symbolic link to ``~/.bashrc`` would make
an append to the journal, or the creation of the lock, land in the link's target.
So every file darwin-memo writes beside a store is opened here: without following
a symbolic link in its last component (``O_NOFOLLOW``), without blocking on a FIFO
(``O_NONBLOCK``), and only if what was opened is a regular file. Anything else is
refused with one line naming the path; nothing is written through it.

Two notices are printed on stderr at most once per process each (a long-lived
dashboard refreshes its store many times):

* a store file writable by every user, or owned by another user (not root): its
  balances and text are theirs to change, so the store is used, with a warning;
* a JSON store whose last transaction is not in its journal yet (a writer stopped
  between writing the store and appending the journal): readers show it from the
  store without writing anything; the next write appends it.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys

from ..errors import StoreError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

__all__ = [
    "check_beside",
    "notice_once",
    "open_beside",
    "warn_if_exposed",
]

#: ``O_NOFOLLOW`` and ``O_NONBLOCK`` where the platform has them (0 elsewhere).
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)

_noticed: set[str] = set()


def notice_once(key: str, message: str) -> None:
    """Print ``darwin-memo: warning: MESSAGE`` on stderr, once per process per ``key``."""
    if key in _noticed:
        return
    _noticed.add(key)
    with contextlib.suppress(OSError, ValueError, AttributeError):  # no stderr: nobody to tell
        print(f"darwin-memo: warning: {message}", file=sys.stderr)


def _refusal(path: str | Path, what: str) -> StoreError:
    return StoreError(
        f"{os.fspath(path)} {what}: beside a store, darwin-memo uses regular files only "
        "and never follows a link (remove it and retry)"
    )


def check_beside(path: str | Path) -> None:
    """Refuse ``path`` unless it is missing or a regular file (never a symbolic link).

    For a check before the first write of an operation, so a refused sidecar stops
    the operation before the store itself is changed.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise StoreError(f"cannot check {os.fspath(path)}: {exc.strerror or exc}") from None
    _check_mode(path, st.st_mode)


def _check_mode(path: str | Path, mode: int) -> None:
    if stat.S_ISLNK(mode):
        raise _refusal(path, "is a symbolic link")
    if not stat.S_ISREG(mode):
        raise _refusal(path, "is not a regular file")


def open_beside(path: str | Path, flags: int, mode: int = 0o600) -> int:
    """``os.open(path, flags, mode)`` that refuses a symbolic link or anything but a
    regular file (``StoreError`` naming ``path``); returns the descriptor.

    ``FileNotFoundError`` (no such file and no ``O_CREAT``, or a missing directory)
    reaches the caller, who knows what a missing file means there.
    """
    try:
        fd = os.open(path, flags | _NOFOLLOW | _NONBLOCK, mode)
    except FileNotFoundError:
        raise
    except OSError:
        # A link fails with ELOOP (Linux; EMLINK or EFTYPE elsewhere), a directory with
        # EISDIR, a FIFO nobody reads with ENXIO: each is named as what it is.
        try:
            st = os.lstat(path)
        except OSError:
            st = None
        if st is not None:
            _check_mode(path, st.st_mode)
        raise
    try:
        _check_mode(path, os.fstat(fd).st_mode)
        if _NONBLOCK:  # only there against FIFOs; a regular file's reads never block
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def warn_if_exposed(path: str | Path, st: os.stat_result | None = None) -> None:
    """Warn (once per process and path) when a store file can be changed by others:
    writable by every user, or owned by another user than this one and root."""
    if os.name != "posix":  # pragma: no cover - no such modes elsewhere
        return
    if st is None:
        try:
            st = os.stat(path)
        except OSError:
            return
    shown = os.fspath(path)
    if st.st_mode & stat.S_IWOTH and not stat.S_ISCHR(st.st_mode):
        notice_once(
            "exposed:" + shown,
            f"{shown} is writable by every user on this machine: anyone can change its "
            f"balances and text (chmod o-w {shown})",
        )
    elif st.st_uid not in (os.geteuid(), 0):
        notice_once(
            "exposed:" + shown,
            f"{shown} is owned by another user (uid {st.st_uid}): its balances and text "
            "are theirs to change; use it only if you trust them",
        )
