"""A session store for the OpenAI Agents SDK, with an opt-in lesson store.

``DarwinMemoSession`` implements the SDK's ``Session`` protocol (``session_id``,
``session_settings`` and the async ``get_items`` / ``add_items`` / ``pop_item`` /
``clear_session``) by duck typing, so this module imports nothing from the SDK:
pass an instance as ``Runner.run(agent, input, session=...)``.

* **Transcript.** One JSONL file per session under ``transcript_dir`` (one item
  per line, oldest first), named by ``transcript_filename(session_id)``. Items are
  stored exactly as the SDK hands them over; nothing in the transcript is charged,
  paid or scored.
* **Lessons (opt-in).** Give a ``Ledger`` or a ``lesson_path`` and the session can
  ``consult`` the lesson store before a run (one ticket per answer) and ``settle``
  or ``abandon`` that ticket once the outcome is measured. With ``lesson_path`` the
  store is opened with ``Ledger.open``, so every call is one transaction on disk
  (no event log is attached). Recalled lessons come back between two marker lines
  with a random tag: data written by earlier runs, not instructions.

The transcript and the lessons are separate on purpose: a conversation is not a
lesson until something measured says it paid.

Transcript files are opened as files beside a store are (``darwin_memo.backends.files``):
never through a symbolic link, regular files only, created owner-only (0600). A
``transcript_dir`` is often shared or checked out from elsewhere, and a
``SESSION.jsonl`` (or a temporary name) planted there as a link to ``~/.bashrc``
would otherwise have the next append or rewrite land in the link's target. Such a
file is refused with one line naming it (``StoreError``); nothing is written.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import secrets
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..answer.fencing import fence
from ..backends.files import check_beside, open_beside
from ..ledger import Ledger

__all__ = ["Consultation", "DarwinMemoSession", "transcript_filename"]

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
_MAX_STEM = 100


def transcript_filename(session_id: str) -> str:
    """The transcript file name for a session id: ``<id>.jsonl`` when the id is safe.

    Characters outside ``[A-Za-z0-9_.-]`` become ``_``; a leading dot (a hidden
    file, or ``..``) does too, and over-long ids are cut. Whenever the id had to
    change, ``-`` plus the first 8 hex digits of its SHA-256 follow, so two ids
    that sanitise alike still get two files.
    """
    if not isinstance(session_id, str):
        raise TypeError(f"session_id must be text, got {type(session_id).__name__}")
    stem = _UNSAFE.sub("_", session_id)
    if stem.startswith("."):
        stem = "_" + stem[1:]
    stem = stem[:_MAX_STEM]
    if stem != session_id or not stem:
        digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:8]
        stem = f"{stem}-{digest}" if stem else digest
    return f"{stem}.jsonl"


@dataclass(frozen=True)
class Consultation:
    """What the lesson store said: fenced lessons and the ticket to settle (None if silent)."""

    ticket_id: str | None
    lessons: str

    @property
    def silent(self) -> bool:
        return self.ticket_id is None


class DarwinMemoSession:
    """An OpenAI Agents SDK session: a JSONL transcript, plus opt-in consult/settle.

    ``ledger`` (an open ``Ledger``) and ``lesson_path`` (a store path, opened with
    ``Ledger.open(..., create=True)``) are alternatives; give neither for a plain
    transcript session. ``resource_scale`` applies only when this session opens
    ``lesson_path``.
    """

    session_settings: Any = None

    def __init__(
        self,
        session_id: str,
        transcript_dir: str | os.PathLike[str],
        ledger: Ledger | None = None,
        lesson_path: str | os.PathLike[str] | None = None,
        resource_scale: float | None = None,
    ) -> None:
        if not isinstance(session_id, str) or not session_id:
            raise ValueError("session_id must be non-empty text")
        if ledger is not None and lesson_path is not None:
            raise ValueError("give either ledger or lesson_path, not both")
        self.session_id = session_id
        self.session_settings = None
        self.transcript_dir = Path(transcript_dir).expanduser()
        self.path = self.transcript_dir / transcript_filename(session_id)
        self.lesson_path = Path(lesson_path).expanduser() if lesson_path is not None else None
        self._ledger = ledger
        self._owns_ledger = False
        self._resource_scale = resource_scale
        # One lock for this object's file work (the SDK may call from several tasks);
        # a threading lock because the work runs on worker threads.
        self._lock = threading.Lock()

    # -- the Session protocol ------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The transcript, oldest first; with ``limit``, only the latest ``limit`` items."""
        if limit is not None and limit <= 0:
            return []
        items = await asyncio.to_thread(self._read_locked)
        return items if limit is None else items[-limit:]

    async def add_items(self, items: list[Any]) -> None:
        """Append items to the transcript (one JSON line each, written in one call)."""
        if not items:
            return
        lines = "".join(json.dumps(item, ensure_ascii=False) + "\n" for item in items)
        await asyncio.to_thread(self._append_locked, lines)

    async def pop_item(self) -> Any | None:
        """Remove and return the newest item; None when the transcript is empty."""
        return await asyncio.to_thread(self._pop_locked)

    async def clear_session(self) -> None:
        """Delete this session's transcript file."""
        await asyncio.to_thread(self._clear_locked)

    # -- transcript file work (worker threads) -------------------------------------

    def _lines(self) -> list[str]:
        """Complete lines of the file; a torn last line (no newline) is left out."""
        try:
            fd = open_beside(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return []
        with open(fd, encoding="utf-8") as fh:
            data = fh.read()
        lines = data.split("\n")
        lines.pop()  # text after the last newline: empty, or a write cut short
        return [line for line in lines if line.strip()]

    def _read(self) -> list[Any]:
        items = []
        for n, line in enumerate(self._lines(), 1):
            try:
                items.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{self.path}: line {n} is not JSON ({exc.msg})") from None
        return items

    def _read_locked(self) -> list[Any]:
        with self._lock:
            return self._read()

    def _rewrite(self, lines: list[str]) -> None:
        """Replace the transcript atomically: a new temporary file, then a rename.

        The temporary file is created exclusively (``O_EXCL``), so a link planted
        under its name is refused, never followed; the rename replaces the
        transcript's name, never a file a link there points to.
        """
        check_beside(self.path)
        tmp = self.path.with_name(f".{self.path.name}.{secrets.token_hex(4)}.tmp")
        fd = open_beside(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        try:
            with open(fd, "w", encoding="utf-8") as fh:
                fh.write("".join(line + "\n" for line in lines))
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        finally:
            tmp.unlink(missing_ok=True)  # ours: created above (gone after the rename)

    def _ends_torn(self) -> bool:
        """Whether the file ends in a partial line (a write cut short)."""
        try:
            fd = open_beside(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return False
        with open(fd, "rb") as fh:
            if fh.seek(0, os.SEEK_END) == 0:
                return False
            fh.seek(-1, os.SEEK_END)
            return fh.read(1) != b"\n"

    def _append_locked(self, text: str) -> None:
        with self._lock:
            self.transcript_dir.mkdir(parents=True, exist_ok=True)
            if self._ends_torn():  # drop a line an earlier crash left unfinished
                self._rewrite(self._lines())
            fd = open_beside(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            with open(fd, "a", encoding="utf-8") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())

    def _pop_locked(self) -> Any | None:
        with self._lock:
            lines = self._lines()
            if not lines:
                return None
            last = lines.pop()
            try:
                item = json.loads(last)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{self.path}: last line is not JSON ({exc.msg})") from None
            self._rewrite(lines)
            return item

    def _clear_locked(self) -> None:
        with self._lock:
            self.path.unlink(missing_ok=True)

    # -- the lesson store (opt-in) --------------------------------------------------

    @property
    def ledger(self) -> Ledger:
        """The lesson store; ``RuntimeError`` when the session was made without one."""
        if self._ledger is None:
            if self.lesson_path is None:
                raise RuntimeError(
                    "this session has no lesson store: pass ledger= or lesson_path= "
                    "to DarwinMemoSession to use consult/settle/abandon"
                )
            self._ledger = Ledger.open(
                self.lesson_path, resource_scale=self._resource_scale, create=True
            )
            self._owns_ledger = True
        return self._ledger

    def consult(self, question: str, k: int = 3) -> Consultation:
        """Ask the lesson store; a ticket is opened only when a lesson answered.

        Put ``lessons`` in the agent's instructions or input, run, measure the
        outcome, then ``settle(ticket_id, delta)`` (or ``abandon`` it if you did not
        act on it). Silent: ``Consultation(None, "")``.
        """
        ticket = self.ledger.decide(question, k)
        if not ticket.provenance or not ticket.answer:
            return Consultation(None, "")
        return Consultation(ticket.id, fence(ticket.answer))

    def settle(self, ticket_id: str, delta: float, detail: str = "") -> bool:
        """Pay a measured outcome to the lessons behind a ticket; False if it did not land."""
        return self.ledger.settle(ticket_id, delta, detail=detail)

    def abandon(self, ticket_id: str) -> bool:
        """Release a ticket whose answer was not acted on; False if it was not pending."""
        return self.ledger.abandon(ticket_id)

    def add_lesson(self, question: str, answer: str, source: str = "openai-agents") -> str:
        """Write a lesson (an ``experience`` entry that must earn its keep); its id."""
        return self.ledger.add(question, answer, source=source).id

    def close(self) -> None:
        """Close the lesson store if this session opened it (``lesson_path``)."""
        if self._owns_ledger and self._ledger is not None:
            self._ledger.close()
            self._ledger = None
            self._owns_ledger = False

    def __repr__(self) -> str:
        return f"DarwinMemoSession(session_id={self.session_id!r}, path={str(self.path)!r})"
