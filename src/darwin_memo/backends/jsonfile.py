"""Reading and writing JSON store files safely.

Writes are atomic: a sibling temporary file is written, flushed and fsynced,
then renamed over the target, and the directory is fsynced, so a crash leaves
either the old file or the new one, never half of each. New files are created
private (0600); an existing file keeps its permissions. Non-finite numbers are
refused (JSON has none, and JavaScript hosts cannot parse ``Infinity``).

``store_lock`` serializes processes on a ``NAME.lock`` sidecar. Unlike the
published package, a contended lock is waited for (up to ``timeout`` seconds)
instead of failing at once, and only then raises ``StoreLockedError``.

Nothing here writes through a link planted beside a store: the lock is opened
without following one (``files.open_beside``), and a temporary file is
created exclusively (``mkstemp``) and given its mode through its descriptor.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import sys
import time
from _thread import allocate_lock
from collections.abc import Iterator

from ..errors import StoreError, StoreFormatError, StoreLockedError, StoreNotFound

try:  # POSIX only; elsewhere the lock is a no-op, as documented
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

__all__ = [
    "DEFAULT_LOCK_TIMEOUT",
    "StoreLockedError",
    "read_json",
    "store_lock",
    "write_json_atomic",
]

#: Seconds a writer waits for another process to release the store. A JSON store is
#: rewritten whole on every write, so with many writers the queue can be long.
DEFAULT_LOCK_TIMEOUT = 60.0


def lock_path(path: str | Path) -> Path:
    from pathlib import Path

    p = Path(path)
    return p.with_name(p.name + ".lock")


class _LockTimeout(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _LockTimeout


def _can_use_alarm() -> bool:
    """True when this thread may use SIGALRM to bound a blocking ``flock``."""
    import signal  # here, not at the top: a one-shot SQLite command never waits on a file
    import threading

    if not hasattr(signal, "SIGALRM") or threading.current_thread() is not threading.main_thread():
        return False
    if signal.getsignal(signal.SIGALRM) is not signal.SIG_DFL:
        return False  # the application uses SIGALRM itself
    return signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def _acquire_blocking(fd: int, timeout: float) -> bool:
    """Wait in the kernel's queue for the lock; False if ``timeout`` passed."""
    import signal

    signal.signal(signal.SIGALRM, _alarm)
    try:
        signal.setitimer(signal.ITIMER_REAL, max(timeout, 0.001))
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            return True
        except _LockTimeout:
            return False
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    finally:
        signal.signal(signal.SIGALRM, signal.SIG_DFL)


def _acquire_polling(fd: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    delay = 0.001
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(delay)
            delay = min(delay * 2, 0.01)


@contextlib.contextmanager
def store_lock(path: str | Path, timeout: float = DEFAULT_LOCK_TIMEOUT) -> Iterator[None]:
    """Hold the store's sidecar lock, waiting up to ``timeout`` seconds for it.

    From the main thread the wait is a blocking ``flock`` bounded by a one-shot
    ``SIGALRM`` timer: the waiter sleeps in the kernel and is woken the moment the
    holder releases, so it competes on equal terms with every other waiter (a
    sleeping poller, by contrast, almost never wins a lock that is released and
    re-taken many times a second). Other threads, and programs that use SIGALRM
    themselves, poll at least every 10 ms.
    """
    from pathlib import Path

    if fcntl is None:  # pragma: no cover
        yield
        return
    lp = lock_path(path)
    if not lp.parent.is_dir():
        raise StoreNotFound(f"{Path(path)}: the directory {lp.parent} does not exist")
    from .files import open_beside

    try:  # a lock planted as a link would create (or lock) the link's target
        fd = open_beside(lp, os.O_RDWR | os.O_CREAT, 0o600)
    except PermissionError:
        raise StoreError(f"cannot lock {Path(path)}: permission denied creating {lp}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            got = True
        except BlockingIOError:
            if _can_use_alarm():
                got = _acquire_blocking(fd, timeout)
            else:
                got = _acquire_polling(fd, timeout)
        if not got:
            raise StoreLockedError(
                f"{path} is still locked by another darwin-memo process after "
                f"{timeout:g} s ({lp}); retry when it has finished"
            )
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-finite number {name} is not valid JSON")


#: The recursion limit in force while decoding. The C decoder guards each nesting
#: level with the interpreter's recursion limit, so a program that raised it (some
#: libraries set 100,000 on import) would let a hostile, deeply nested document
#: overflow the C stack and kill the process instead of raising RecursionError.
DECODE_RECURSION_LIMIT = 1000
_decoding = 0
_decoding_lock = allocate_lock()
_saved_limit = 0


def loads(text: str | bytes) -> Any:
    """``json.loads`` that fails cleanly (RecursionError) on any nesting depth."""
    if len(text) < DECODE_RECURSION_LIMIT:
        # Too short to nest deeper than the limit (a level takes a character at least):
        # decoded as is, without the lock (most store rows and journal lines).
        return json.loads(text)
    with decoding_depth():
        return json.loads(text)


@contextlib.contextmanager
def decoding_depth() -> Iterator[None]:
    """Hold the recursion limit at ``DECODE_RECURSION_LIMIT`` (at most) while decoding."""
    global _decoding, _saved_limit
    with _decoding_lock:
        if _decoding == 0:
            _saved_limit = sys.getrecursionlimit()
            if _saved_limit > DECODE_RECURSION_LIMIT:
                # (RecursionError: already deeper than that; keep the limit)
                with contextlib.suppress(RecursionError):
                    sys.setrecursionlimit(DECODE_RECURSION_LIMIT)
        _decoding += 1
    try:
        yield
    finally:
        with _decoding_lock:
            _decoding -= 1
            if _decoding == 0 and sys.getrecursionlimit() != _saved_limit:
                sys.setrecursionlimit(_saved_limit)


def read_json(path: str | Path) -> Any:
    """Decode a JSON file, with one-line errors that name the file."""
    p = os.fspath(path)  # not pathlib: a one-shot reader need not import it
    try:
        with open(p, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        raise StoreNotFound(f"{p}: no such store file") from None
    except IsADirectoryError:
        raise StoreFormatError(f"{p} is a directory, not a store file") from None
    except PermissionError:
        raise StoreFormatError(f"{p}: permission denied reading the store") from None
    if not raw or raw.isspace():  # (not a strip: that copies the whole file)
        raise StoreFormatError(f"{p} is not a valid darwin-memo store: the file is empty")
    text = None  # an ASCII file is UTF-8 already: decoded only where needed
    if not raw.isascii():
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise StoreFormatError(
                f"{p} is not a valid darwin-memo store: not UTF-8 text (byte {exc.start})"
            ) from None
    if text is None:
        text = raw.decode("ascii")
    try:
        # Infinity/NaN are accepted on read (old files may hold them) and refused per entry.
        return loads(text)
    except json.JSONDecodeError as exc:
        raise StoreFormatError(
            f"{p} is not a valid darwin-memo store: {exc.msg} (line {exc.lineno}, "
            f"column {exc.colno})"
        ) from None
    except RecursionError:
        raise StoreFormatError(
            f"{p} is not a valid darwin-memo store: JSON nested too deeply"
        ) from None


class _Unusual(Exception):
    """A value ``dumps_indented`` leaves to the standard encoder."""


_LITERALS = {True: "true", False: "false"}


def dumps_indented(payload: Any, indent: int = 2) -> str:
    """``json.dumps(payload, indent=indent, ensure_ascii=False, allow_nan=False)``,
    the same text, in about two thirds of the time on store files.

    The standard library's C encoder does not indent, so ``indent`` sends the whole
    payload through its pure-Python encoder. Here containers are laid out in Python
    and every leaf goes through the C string encoder or ``repr``, with the lists of
    strings an entry holds joined in one C loop. Anything unusual (keys that are not
    strings, types JSON has no form for, subclasses with their own ``repr``) falls
    back to ``json.dumps``, which words the error.
    """
    try:
        return _Indenter(indent).value(payload, "\n")
    except (_Unusual, RecursionError):
        return json.dumps(payload, indent=indent, ensure_ascii=False, allow_nan=False)


class _Indenter:
    __slots__ = ("keys", "step", "string")

    def __init__(self, indent: int) -> None:
        from json.encoder import encode_basestring  # C when the accelerator is there

        self.step = " " * indent
        self.string = encode_basestring
        self.keys: dict[Any, str] = {}  # a key's text and the colon after it

    def value(self, v: Any, outer: str) -> str:
        t = type(v)
        if t is str:
            return self.string(v)  # type: ignore[no-any-return,unused-ignore]
        if t is float:
            if v != v or v in (_INF, -_INF):
                raise ValueError(f"Out of range float values are not JSON compliant: {v!r}")
            return float.__repr__(v)
        if t is int:
            return int.__repr__(v)
        if t is bool:
            return _LITERALS[v]
        if v is None:
            return "null"
        inner = outer + self.step
        if t is dict:
            if not v:
                return "{}"
            string, keys, value = self.string, self.keys, self.value
            parts = []
            for key, item in v.items():
                head = keys.get(key)
                if head is None:
                    if type(key) is not str:
                        raise _Unusual
                    head = keys[key] = string(key) + ": "
                kind = type(item)  # the common leaves inline, the rest by ``value``
                if kind is str:
                    parts.append(head + string(item))
                elif kind is float and item - item == 0.0:  # finite
                    parts.append(head + float.__repr__(item))
                elif kind is int:
                    parts.append(head + int.__repr__(item))
                elif kind is list and not item:
                    parts.append(head + "[]")
                else:
                    parts.append(head + value(item, inner))
            return "{" + inner + ("," + inner).join(parts) + outer + "}"
        if t is list or t is tuple:
            if not v:
                return "[]"
            sep = "," + inner
            if all(type(x) is str for x in v):
                body = sep.join(map(self.string, v))
            else:
                body = sep.join([self.value(x, inner) for x in v])
            return "[" + inner + body + outer + "]"
        raise _Unusual


_INF = float("inf")


def write_json_atomic(path: str | Path, payload: Any) -> None:
    """Write ``payload`` as indented JSON, atomically; never writes NaN or Infinity."""
    from pathlib import Path

    p = Path(path)
    try:
        data = dumps_indented(payload)
    except ValueError as exc:
        raise StoreFormatError(f"refusing to write {p}: {exc}") from None
    mode = 0o600
    with contextlib.suppress(FileNotFoundError):
        st = os.stat(p)
        if not stat.S_ISREG(st.st_mode):
            raise StoreError(f"refusing to write {p}: it exists and is not a regular file")
        mode = st.st_mode & 0o777
    try:
        replace_file(p, (data + "\n").encode("utf-8"), mode)
    except FileNotFoundError:
        raise StoreNotFound(f"cannot write {p}: the directory {p.parent} does not exist") from None
    except PermissionError:
        raise StoreError(f"cannot write {p}: permission denied in {p.parent}") from None
    except OSError as exc:
        raise StoreError(f"cannot write {p}: {exc.strerror or exc}") from None


def replace_file(path: Path, data: bytes, mode: int) -> None:
    """Replace ``path`` with ``data`` atomically: a fsynced sibling temporary file is
    renamed over it, then the directory is fsynced. The temporary file never outlives
    a failure; ``OSError`` reaches the caller, who words it."""
    import tempfile  # only writers of whole files need it

    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            if hasattr(os, "fchmod"):  # the file we made, not whatever has its name now
                os.fchmod(fh.fileno(), mode)
            os.fsync(fh.fileno())
        if not hasattr(os, "fchmod"):  # pragma: no cover - Windows before 3.13
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def save_payload(path: str | Path, payload: Any) -> None:
    """Write a whole store file under its lock (stale temporary files cleared first)."""
    with store_lock(path):
        remove_stale_temps(path)
        write_json_atomic(path, payload)


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def remove_stale_temps(path: str | Path) -> int:
    """Delete temporary files a killed writer left next to ``path``.

    Call only while holding the store's lock: no live writer can own one then.
    """
    from pathlib import Path

    p = Path(path)
    removed = 0
    with contextlib.suppress(OSError):
        for child in p.parent.iterdir():
            if child.name.startswith(p.name + ".") and child.name.endswith(".tmp"):
                with contextlib.suppress(OSError):
                    child.unlink()
                    removed += 1
    return removed
