"""The published single-file JSON store, made safe for several processes.

Each operation holds the ``NAME.lock`` sidecar for its whole read-modify-write
(the published package locked the read and the write but not the span between
them, so concurrent writers lost each other's settlements). Inside the lock the
file is re-read if another process changed it, the operation runs, and the file
is replaced atomically.

The journal is the published ``NAME.events.jsonl``. To survive a crash between
writing the store and appending the journal, the store file carries the last
transaction's events (``ledger.journal_txn``); the next write appends them, under
the lock, if the journal does not already hold them.

Reading writes nothing but the lock (taken for each load, as the published
package does, and opened without following a link): a transaction the journal
lacks is not appended by a reader but shown by ``events`` from the store file,
with a one-line notice on stderr. The file and its ``journal_txn`` may be
anyone's (a cloned repository): a read-looking command must never append them to
whatever the journal's name leads to. Every write first checks that the journal
is a regular file, not a link (``storefiles``), so a refused write leaves the
store as it was.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import collector
from ..errors import StoreFormatError, StoreNotFound
from ..store import MemoryStore
from .files import notice_once, warn_if_exposed
from .interface import Loaded, PickRetriever, View
from .journal import EventLog, event_log_path
from .jsonfile import (
    DEFAULT_LOCK_TIMEOUT,
    read_json,
    remove_stale_temps,
    store_lock,
    write_json_atomic,
)

if TYPE_CHECKING:
    from ..records.ticket import Changes

__all__ = ["JOURNAL_MARK", "JsonBackend"]

#: Written into the ledger block once our journal covers the store from its start.
JOURNAL_MARK = "darwin-memo/1"


def _recorded_name(payload: Any) -> str | None:
    block = payload.get("retriever") if isinstance(payload, dict) else None
    name = block.get("name") if isinstance(block, dict) else None
    return name if isinstance(name, str) else None


def _name_retriever(payload: dict[str, Any], name: str) -> None:
    block = payload.get("retriever")
    payload["retriever"] = {**(block if isinstance(block, dict) else {}), "name": name}


class JsonBackend:
    kind = "json"
    history_in_memory = True
    #: The retriever name the store recorded (the ``retriever`` block's ``name``).
    recorded_retriever: str | None = None

    def __init__(
        self, path: str | Path, *, create: bool = True, lock_timeout: float | None = None
    ) -> None:
        self.path = Path(path)
        self.lock_timeout = DEFAULT_LOCK_TIMEOUT if lock_timeout is None else lock_timeout
        self.journal = EventLog(event_log_path(self.path))
        self.created = False
        if not self.path.exists():
            if not create:
                raise StoreNotFound(f"{self.path}: no such store")
            if not self.path.parent.is_dir():
                self.path.parent.mkdir(parents=True, exist_ok=True)
        self._signature: tuple[int, int, int] | None = None
        self._pending_txn: Any = None  # the store file's ``journal_txn``, as last read
        #: The population as last read (the organic block lives in its payload).
        self.store = MemoryStore()

    def _stat(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        warn_if_exposed(self.path, st)
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    def _read(self, pick: PickRetriever) -> Loaded:
        """The file's content as a whole view (call under the lock)."""
        signature = self._stat()
        block: Any = {}
        payload: Any = None
        if signature is not None:
            payload = read_json(self.path)
            self.recorded_retriever = _recorded_name(payload)
        retriever = pick(self.recorded_retriever)
        store = MemoryStore(retriever=retriever)
        if payload is not None:
            try:
                store = MemoryStore.from_payload(payload, retriever=retriever)
            except StoreFormatError as exc:
                raise StoreFormatError(
                    f"{self.path} is not a valid darwin-memo store: {exc}"
                ) from None
            block = store.payload_extra.pop("ledger", {})
        marked = isinstance(block, dict) and block.get("journal") == JOURNAL_MARK
        self._pending_txn = block.get("journal_txn") if isinstance(block, dict) else None
        self._signature = signature
        self.store = store
        return Loaded.from_block(
            store,
            block,
            needs_snapshot=not marked and (len(store) > 0 or store.dead_count() > 0),
            recorded_retriever=self.recorded_retriever,
        )

    def _unjournaled(self) -> list[dict[str, Any]]:
        """The store file's last transaction's events when the journal lacks them
        (a writer stopped between the two writes), else nothing."""
        txn = self._pending_txn
        if not isinstance(txn, dict) or not isinstance(txn.get("id"), str):
            return []
        events = txn.get("events")
        if not isinstance(events, list) or self.journal.tail_contains(txn["id"]):
            return []
        return [e for e in events if isinstance(e, dict)]

    def _recover_journal(self) -> None:
        """Append what ``_unjournaled`` finds (writers only, under the lock)."""
        missing = self._unjournaled()
        if missing:
            self.journal.append(missing)
        self._pending_txn = None

    def _set_aside_orphan_journal(self) -> None:
        """A journal without its store (a store deleted by hand, an interrupted copy)
        must not be mistaken for the new store's history."""
        from ..records.entry import utc_now_iso

        for path in [
            self.journal.path,
            *self.journal.path.parent.glob(self.journal.path.name + ".[0-9]*"),
        ]:
            if os.path.lexists(path):  # (a rename moves a link, never its target)
                stamp = utc_now_iso().replace(":", "")
                os.replace(path, path.with_name(f"{path.name}.orphan-{stamp}"))

    def load(self, pick: PickRetriever) -> Loaded:
        if not self.path.exists():
            return self._read(pick)
        with store_lock(self.path, self.lock_timeout):
            # No journal append here (see the module docstring): a writer killed
            # between the store write and the journal append left its events in the
            # store file; ``events`` shows them, and the next ``transaction`` appends them.
            return self._read(pick)

    def refresh(self, view: View) -> Loaded | None:
        if self._stat() != self._signature or view.stale:
            return self.load(lambda _recorded: view.retriever)
        return None

    def translate(self, exc: BaseException, doing: str = "read the store") -> Exception | None:
        """None: the file's errors are raised as the store's own where they happen."""
        return None

    @contextlib.contextmanager
    def transaction(self, changes: Changes, view: View) -> Iterator[Loaded | None]:
        with store_lock(self.path, self.lock_timeout):
            remove_stale_temps(self.path)
            seen = None
            if self._stat() != self._signature or view.stale:
                seen = self._read(lambda _recorded: view.retriever)
            if self._signature is None:
                self._set_aside_orphan_journal()
            # Refused before anything is written: a journal planted as a link.
            self.journal.check_writable()
            self._recover_journal()
            yield seen
            if not changes.events and not changes.touched and not changes.opened:
                return
            assert changes.payload is not None  # (set by the ledger with the body done)
            if changes.events:  # the organic block changes with the events that cause it
                from .organic_rows import apply_block

                apply_block(self.store.payload_extra, changes.events)
            txn = secrets.token_hex(8)
            for event in changes.events:
                event["txn"] = txn
            with collector.paused():  # a payload is a few small containers per entry
                payload = changes.payload()
                payload["ledger"]["journal"] = JOURNAL_MARK
                payload["ledger"]["journal_txn"] = {"id": txn, "events": changes.events}
                if self.recorded_retriever is not None:
                    _name_retriever(payload, self.recorded_retriever)
                write_json_atomic(self.path, payload)
            self.created = self.created or self._signature is None
            self._signature = self._stat()
            self._pending_txn = payload["ledger"]["journal_txn"]  # until appended
            self.journal.append(changes.events)
            self._pending_txn = None

    def record_retriever(self, name: str, state: dict[str, Any] | None = None) -> None:
        """Record the retriever every host process searches with (in the ``retriever``
        block; a store not yet written gets it with its first write). ``state`` (the
        new retriever's vectors, when it has any) replaces the block's old state."""
        self.recorded_retriever = name
        if not self.path.exists():
            return
        with store_lock(self.path, self.lock_timeout):
            current = self._stat()
            payload = read_json(self.path)
            if not isinstance(payload, dict):
                raise StoreFormatError(f"{self.path} is not a valid darwin-memo store")
            if state:
                payload["retriever"] = dict(state)
            _name_retriever(payload, name)
            with collector.paused():
                write_json_atomic(self.path, payload)
            if current == self._signature:  # nothing else changed: our view stays current
                self._signature = self._stat()

    def history(self, entry_id: str) -> list[Any]:
        raise NotImplementedError  # notes live in the ledger's memory for JSON stores

    def events(self) -> Iterator[dict[str, Any]]:
        missing = self._unjournaled()
        yield from self.journal.read()
        if missing:
            notice_once(
                "unjournaled:" + str(self.path),
                f"{self.path}: its last transaction is not in {self.journal.path.name} "
                "yet (a writer stopped between the two files); it is shown from the "
                "store, and the next write adds it to the journal",
            )
            yield from missing

    def organic_rows(self, _ledger: object = None) -> Any:
        """The organic layer's links and per-entry state (``organic_rows.Rows``), from the
        store's ``"organic"`` block as last read (the argument, once the ledger, is
        not used)."""
        from .organic_rows import BLOCK_KEY, read_block

        return read_block(self.store.payload_extra.get(BLOCK_KEY))

    def events_after(self, seq: int) -> None:
        """A JSON store's journal is a file read whole (``events``): None."""
        return None

    def version_token(self) -> str:
        """A token that changes whenever any process writes the store: the store
        file's and its journal's identity, size and modification time."""
        parts = []
        for path in (self.path, self.journal.path):
            try:
                st = os.stat(path)
                parts.append(f"{st.st_ino}.{st.st_size}.{st.st_mtime_ns}")
            except FileNotFoundError:
                parts.append("-")
        return "f" + "/".join(parts)

    def close(self) -> None:
        return None
