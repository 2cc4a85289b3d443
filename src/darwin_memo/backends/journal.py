"""The event journal: one JSON object per ledger event, append-only.

Every decide, settle, abandon, add, import, forget, pin, tick, merge and death
is an event with its tick and timestamp. Events carry what it takes to rebuild
every balance (``replay.verify``): stakes, credits as applied, the upkeep rate
of each tick, burials and merges.

For JSON-file stores the journal is the published ``NAME.events.jsonl`` file,
rotated logrotate-style at 10 MiB (``NAME.events.jsonl.1`` is the newest
rotation). SQLite stores keep it in a table instead (see ``sqlite``).

Journal files are opened without following symbolic links, and only if they are
regular files (``files.open_beside``): a journal planted as a link to some
other file is refused with one line naming it, never appended to nor read.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Iterator

from .files import check_beside, open_beside
from .jsonfile import loads

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

__all__ = [
    "EVENT_LOG_KEEP",
    "EVENT_LOG_MAX_BYTES",
    "PACKED_MIN_ENTRIES",
    "EventLog",
    "event_log_path",
    "event_log_paths",
    "pack_record",
    "unpack_record",
]

EVENT_LOG_MAX_BYTES = 10 * 1024 * 1024
EVENT_LOG_KEEP = 3

#: A snapshot of at least this many entries is held deflated in an SQL store's
#: ``events`` table (``pack_record``); smaller ones stay plain JSON.
PACKED_MIN_ENTRIES = 256
_PACKING = "zlib+base64"


def pack_record(record: dict[str, Any]) -> dict[str, Any]:
    """A journal record as an SQL store holds it.

    A ``snapshot`` lists every entry (``[id, energy, alive, pinned]``): the one a
    migration from a JSON file writes is about 32 bytes per entry, 5% of the store.
    With ``PACKED_MIN_ENTRIES`` or more, its ``entries`` are held as their compact JSON
    deflated, in base64 text (about 3.5 bytes per entry), marked by a last key,
    ``"entries_encoding": "zlib+base64"``; ``unpack_record`` gives the record back as
    it was, key for key. Every other record is held as it is.
    """
    entries = record.get("entries")
    if (
        record.get("event") != "snapshot"
        or not isinstance(entries, list)
        or len(entries) < PACKED_MIN_ENTRIES
    ):
        return record
    import base64
    import zlib

    text = json.dumps(entries, separators=(",", ":"), ensure_ascii=False)
    packed = dict(record)
    packed["entries"] = base64.b64encode(zlib.compress(text.encode("utf-8"), 6)).decode("ascii")
    packed["entries_encoding"] = _PACKING
    return packed


def unpack_record(record: Any) -> Any:
    """``pack_record``'s inverse (any other record comes back as it is). A packed list
    that does not decode is left as held, under its marker, for ``verify`` to report."""
    if type(record) is not dict or record.get("entries_encoding") != _PACKING:
        return record
    import base64
    import binascii
    import zlib

    try:
        raw = zlib.decompress(base64.b64decode(record["entries"], validate=True))
        entries = loads(raw.decode("utf-8"))
    except (KeyError, TypeError, ValueError, binascii.Error, zlib.error, RecursionError):
        return record
    out = {k: v for k, v in record.items() if k != "entries_encoding"}
    out["entries"] = entries
    return out


def event_log_path(store_path: str | Path) -> Path:
    """``lessons.json`` -> ``lessons.events.jsonl`` (the published convention)."""
    from pathlib import Path

    p = Path(store_path)
    return p.with_name(p.stem + ".events.jsonl")


def event_log_paths(path: str | Path, keep: int = EVENT_LOG_KEEP) -> list[Path]:
    """Existing journal files, oldest first: rotations (highest number first), then live."""
    from pathlib import Path

    p = Path(path)
    rotated: list[tuple[int, Path]] = []
    if p.parent.is_dir():
        prefix = p.name + "."
        for child in p.parent.iterdir():
            suffix = child.name[len(prefix) :] if child.name.startswith(prefix) else ""
            if suffix.isdigit():
                rotated.append((int(suffix), child))
    ordered = [c for _, c in sorted(rotated, reverse=True)]
    if os.path.lexists(p):  # (a dangling link too: reading it is refused by name)
        ordered.append(p)
    return ordered


class EventLog:
    """An append-only JSONL journal with size-based rotation."""

    def __init__(
        self,
        path: str | Path,
        max_bytes: int = EVENT_LOG_MAX_BYTES,
        keep: int = EVENT_LOG_KEEP,
    ) -> None:
        from pathlib import Path

        self.path = Path(path)
        self.max_bytes = max_bytes
        self.keep = keep

    def _rotate(self) -> None:
        if self.max_bytes <= 0 or self.keep <= 0:
            return
        try:
            size = os.lstat(self.path).st_size  # (``append`` refused a link before this)
        except FileNotFoundError:
            return
        if size < self.max_bytes:
            return
        oldest = self.path.with_name(f"{self.path.name}.{self.keep}")
        with contextlib.suppress(FileNotFoundError):
            oldest.unlink()
        for k in range(self.keep - 1, 0, -1):
            src = self.path.with_name(f"{self.path.name}.{k}")
            if os.path.lexists(src):  # a rename moves a link, never its target
                os.replace(src, self.path.with_name(f"{self.path.name}.{k + 1}"))
        os.replace(self.path, self.path.with_name(f"{self.path.name}.1"))

    def check_writable(self) -> None:
        """Refuse (``StoreError``) a journal that is a link or not a regular file, so a
        writer can stop before it changes the store."""
        check_beside(self.path)

    def append(self, events: Iterable[dict[str, Any]]) -> None:
        """Append events (one write, fsynced). Non-finite numbers are refused, and so is
        a journal that is a symbolic link or not a regular file (``StoreError``)."""
        lines = [json.dumps(e, ensure_ascii=False, allow_nan=False) for e in events]
        if not lines:
            return
        check_beside(self.path)  # before a rotation renames anything
        self._rotate()
        data = ("\n".join(lines) + "\n").encode("utf-8")
        fd = open_beside(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)

    def read(self) -> Iterator[dict[str, Any]]:
        """Every readable event, oldest first; unparseable lines are skipped. A journal
        file that is a link or not a regular file is refused (``StoreError``)."""
        for path in event_log_paths(self.path, self.keep):
            try:
                fh = os.fdopen(open_beside(path, os.O_RDONLY), "rb")
            except OSError:  # rotated away meanwhile, unreadable: as before, passed by
                continue
            with fh:
                for raw in fh:
                    try:
                        record = loads(raw)
                    except (ValueError, UnicodeDecodeError):
                        continue
                    if isinstance(record, dict):
                        yield record

    def tail_contains(self, txn: str, window: int = 1 << 20) -> bool:
        """Whether a transaction id appears near the end of the live file."""
        try:
            with os.fdopen(open_beside(self.path, os.O_RDONLY), "rb") as fh:
                fh.seek(0, os.SEEK_END)
                size = fh.tell()
                fh.seek(max(0, size - window))
                tail = fh.read()
        except FileNotFoundError:
            return False
        return f'"txn": "{txn}"'.encode() in tail
