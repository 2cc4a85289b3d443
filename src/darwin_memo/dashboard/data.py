"""What the dashboard shows, read from a store without writing to it.

``StoreView`` holds one ledger opened on the store (the same way the read-only
CLI views open it) and answers the dashboard's questions. Request threads take
turns on it through one lock, because the SQLite connection and the ledger's
cached view are shared.

Three rules keep a 100,000-entry store responsive:

* Tables are paged on the server. For SQLite stores the paging, sorting and
  searching run as read-only SQL on the ledger's connection: sorting by balance
  walks the ``(alive, pinned, death_tick)`` index (lazy upkeep makes a living
  entry's death tick a monotone function of its balance once it is more than a
  tick from death), and word search intersects the token postings that retrieval
  keeps. Only the rows on the page become ``MemoryEntry`` objects, and each is
  shown as the CLI's ``top --json`` row. JSON stores live in memory anyway and
  are filtered and sorted as lists, and so are PostgreSQL stores' (their living
  population is the ledger's view; the SQL above is SQLite's dialect).
* Everything else is computed once per store version (the ``meta.version`` row
  of SQLite and PostgreSQL stores, or the JSON file's and journal's stat) and
  cached until the next write. The journal is read incrementally on SQLite and
  PostgreSQL.
* ``doctor`` reads every entry's notes, which takes seconds on a large store, so
  it runs as ``darwin-memo doctor --json`` in a child process (``DoctorWorker``)
  and the page shows the latest finished diagnosis, marked stale while a newer
  one is computed.

The objects served are the CLI's: ``top --json`` rows, ``why --json`` life
stories, ``doctor --json`` findings, ``ledger stats`` and the ``timeline`` and
``economics`` pieces of ``observe``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..backends import is_postgres_url
from ..backends.pages import FLAGS, SORT_KEYS
from ..ledger import Ledger
from ..observe import (
    _num,
    _opt_num,
    entry_life,
    filter_events,
    ledger_economics,
    ledger_events,
    tick_fields,
    timeline,
    top_row,
)
from ..store import MemoryStore

__all__ = [
    "CAUSES",
    "MAX_PAGE",
    "RELATED_K",
    "RELATED_MAX_POPULATION",
    "SORT_KEYS",
    "DoctorWorker",
    "PageQuery",
    "StoreView",
    "series",
]

JsonDict = dict[str, Any]

#: Causes of death, in the order the dashboard stacks them.
CAUSES = ("executed", "starved", "merged", "forgotten")
#: The largest page a request may ask for.
MAX_PAGE = 500
DEFAULT_PAGE = 50
#: The most related entries a life story lists.
RELATED_K = 5
#: Above this many living entries a life story lists no neighbours: the similarity
#: graph is built in Python while the page waits (about 6 s at 100k entries), so the
#: page points at ``darwin-memo ledger STORE related ID`` instead.
RELATED_MAX_POPULATION = 10_000
#: Events ``/api/events`` returns unless asked for another number.
DEFAULT_EVENTS = 200
_PAGE_CACHE = 64


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# -- the journal as series over ticks ----------------------------------------------


def _bucket() -> JsonDict:
    return {
        "died": dict.fromkeys(CAUSES, 0),
        "delta": 0.0,
        "credited": 0.0,
        "debited": 0.0,
        "decides": 0,
        "silent": 0,
        "settles": 0,
    }


def series(
    events: Sequence[JsonDict], damaged: set[str] | frozenset[str] = frozenset()
) -> JsonDict:
    """One row per tick record: ``observe.timeline``'s fields plus where energy went.

    Each row covers the journal since the previous tick record: deaths by cause
    (a burial counts as ``executed`` when the entry is on the store's damage
    record, else ``starved``; ``forget`` is ``forgotten``; merge members are
    ``merged``), the measured resource delta and the energy the settlements
    credited and debited, decisions, and the upkeep the tick charged (None when
    the record predates ``upkeep_charged``). Activity after the last tick makes a
    trailing row with ``open: true`` and no population figures.
    """
    rows: list[JsonDict] = []
    current = _bucket()
    active = False
    open_tick: int | None = None
    seen: set[str] = set()

    def died(entry_id: Any, cause: str, into: JsonDict | None = None) -> None:
        if isinstance(entry_id, str) and entry_id not in seen:
            seen.add(entry_id)
            (into or current)["died"][cause] += 1

    def burial_cause(entry_id: Any) -> str:
        return "executed" if entry_id in damaged else "starved"

    for e in events:
        if not isinstance(e, dict):
            continue
        kind = e.get("event")
        if kind == "tick":
            for entry_id in _list(e.get("dead_entries")):
                died(entry_id, burial_cause(entry_id))
            rows.append(
                {
                    **tick_fields(e),
                    "upkeep_charged": _opt_num(e.get("upkeep_charged")),
                    **_finish(current),
                }
            )
            current, active = _bucket(), False
            continue
        if kind == "merge" and rows and rows[-1]["tick"] == _int(e.get("tick")):
            # A tick records its merges right after itself: they belong to its row.
            for member in _list(e.get("members")):
                died(member, "merged", into=rows[-1])
            continue
        if kind not in ("settle", "forget", "merge", "decide"):
            continue
        active = True
        open_tick = _int(e.get("tick"))
        if kind == "decide":
            current["decides"] += 1
            current["silent"] += e.get("silent") is True
        elif kind == "settle":
            current["settles"] += 1
            current["delta"] += _num(e.get("delta"))
            for item in _list(e.get("applied")):
                if isinstance(item, dict):
                    credit = _num(item.get("credit"))
                    current["credited" if credit > 0 else "debited"] += abs(credit)
            for entry_id in _list(e.get("buried")):
                died(entry_id, burial_cause(entry_id))
        elif kind == "forget":
            died(e.get("entry"), "forgotten")
        else:
            for member in _list(e.get("members")):
                died(member, "merged")
    if active:
        rows.append(
            {
                "tick": open_tick,
                "population": None,
                "total_energy": None,
                "deaths": None,
                "merges": None,
                "pending": None,
                "upkeep_charged": None,
                **_finish(current),
                "open": True,
            }
        )
    totals = dict.fromkeys(CAUSES, 0)
    for row in rows:
        for cause in CAUSES:
            totals[cause] += row["died"][cause]
    return {"ticks": rows, "deaths_by_cause": totals}


def _finish(bucket: JsonDict) -> JsonDict:
    out = dict(bucket)
    for key in ("delta", "credited", "debited"):
        out[key] = round(out[key], 6) + 0.0
    return out


# -- paging ----------------------------------------------------------------------


class PageQuery:
    """A validated table request: search text, filters, sort, window."""

    def __init__(
        self,
        q: str = "",
        sort: str = "balance",
        order: str = "desc",
        offset: int = 0,
        limit: int = DEFAULT_PAGE,
        kind: str = "",
        flag: str = "",
    ) -> None:
        if sort not in SORT_KEYS:
            raise ValueError(f"sort must be one of {', '.join(SORT_KEYS)}; got {sort!r}")
        if order not in ("asc", "desc"):
            raise ValueError(f"order must be asc or desc; got {order!r}")
        if flag and flag not in FLAGS:
            raise ValueError(f"flag must be one of {', '.join(FLAGS)}; got {flag!r}")
        if offset < 0:
            raise ValueError("offset must be >= 0")
        if not 1 <= limit <= MAX_PAGE:
            raise ValueError(f"limit must be between 1 and {MAX_PAGE}")
        if len(q) > 1000:
            raise ValueError("the search text is limited to 1000 characters")
        self.q = q.strip()
        self.sort = sort
        self.order = order
        self.offset = offset
        self.limit = limit
        self.kind = kind
        self.flag = flag

    def key(self) -> tuple[Any, ...]:
        return (self.q, self.sort, self.order, self.offset, self.limit, self.kind, self.flag)

    @property
    def desc(self) -> bool:
        return self.order == "desc"


# -- the view --------------------------------------------------------------------


class StoreView:
    """One store opened for reading, shared by the server's threads (see module doc)."""

    def __init__(self, path: str | Path, *, lock_timeout: float = 2.0) -> None:
        self.path = store_ref(path)
        self.lock_timeout = lock_timeout
        self.ledger = Ledger.open(self.path, create=False, lock_timeout=lock_timeout)
        #: How the page names the store: the file name, or the URL without its password.
        self.name = str(getattr(self.ledger.backend, "url_display", "")) or Path(path).name
        self.lock = threading.RLock()
        self._version = ""
        self._cache: dict[str, tuple[str, Any]] = {}
        self._pages: OrderedDict[tuple[Any, ...], JsonDict] = OrderedDict()
        self._events: list[JsonDict] = []
        self._events_seq = 0
        self._events_version = ""
        self._organic: Any = None  # the organic layer, opened on first use (``_related``)

    # -- plumbing ------------------------------------------------------------------

    @property
    def backend_kind(self) -> str:
        return str(getattr(self.ledger.backend, "kind", "unknown"))

    def close(self) -> None:
        with self.lock:
            self.ledger.close()

    def version(self) -> str:
        """A token that changes whenever any process writes the store."""
        with self.lock:
            self.ledger.refresh()
            self._version = version_token(self.ledger)
            return self._version

    def _cached(self, name: str, compute: Callable[[], Any]) -> Any:
        """``compute()`` once per store version (call with the lock held)."""
        version = self.version()
        hit = self._cache.get(name)
        if hit is not None and hit[0] == version:
            return hit[1]
        value = compute()
        self._cache[name] = (version, value)
        return value

    def _page_cached(self, key: tuple[Any, ...], compute: Callable[[], JsonDict]) -> JsonDict:
        version = self.version()
        full = (version, *key)
        if full in self._pages:
            self._pages.move_to_end(full)
            return self._pages[full]
        value = compute()
        self._pages[full] = value
        while len(self._pages) > _PAGE_CACHE:
            self._pages.popitem(last=False)
        return value

    def events(self) -> list[JsonDict]:
        """The whole journal, oldest first (read incrementally on SQLite)."""
        with self.lock:
            version = self.version()
            backend = self.ledger.backend
            found = backend.events_after(self._events_seq) if backend is not None else None
            if found is None:  # a journal read whole (JSON, in memory)
                if version != self._events_version:
                    self._events = ledger_events(self.ledger)
                    self._events_version = version
                return self._events
            top, fresh = found
            if top < self._events_seq and backend is not None:  # the store was replaced
                self._events, self._events_seq = [], 0
                top, fresh = backend.events_after(0) or (0, [])
            for seq, record in fresh:
                if isinstance(record, dict):
                    self._events.append(record)
                self._events_seq = seq
            return self._events

    # -- summary ---------------------------------------------------------------------

    def summary(self) -> JsonDict:
        """Counts, balances and economics: the header of the page."""
        with self.lock:
            return dict(self._cached("summary", self._summary))

    def _summary(self) -> JsonDict:
        ledger = self.ledger
        store = ledger.store
        if self.backend_kind == "sqlite":
            exact_balances = getattr(store, "exact_balances", None)
            balances = exact_balances() if exact_balances is not None else None
            if balances is not None:  # the running sums (schema 10): no scan
                from ..backends.sums import ONE

                whole = sum(balances.values())
                total = whole / ONE
                shares = {k: round(balances[k] / whole, 3) for k in sorted(balances)}
                shares = shares if whole > 0 else {}
                kinds = sorted(balances)
            else:  # a store without the running sums: the store's own scan
                total = store.total_energy()
                by_share = store.energy_share_by_kind()
                shares = {k: round(v, 3) for k, v in sorted(by_share.items())}
                kinds = sorted(by_share)
            pinned = store.page_entries(flag="pinned", limit=1)[1]
            stats = {
                "alive": len(store),
                "graveyard": store.dead_count(),
                "pending_tickets": len(ledger.pending()),
                "total_energy": _round_energy(total),
                "energy_share_by_kind": shares,
            }
        else:
            stats = ledger.stats()
            pinned = sum(1 for e in store.alive() if e.pinned)
            kinds = sorted({e.kind.value for e in store.alive()})
        return {
            "store": self.name,
            "backend": self.backend_kind,
            "version": self._version,
            "tick": ledger.tick_count,
            "upkeep": store.upkeep,
            "stats": stats,
            "counts": {
                "alive": stats["alive"],
                "dead": stats["graveyard"],
                "pinned": int(pinned),
                "pending": stats["pending_tickets"],
            },
            "total_energy": stats["total_energy"],
            "economics": ledger_economics(ledger, self.events()),
            "kinds": kinds,
        }

    def series(self) -> JsonDict:
        """Population, energy, deaths by cause and the economics, one row per tick."""
        with self.lock:
            return dict(
                self._cached(
                    "series", lambda: series(self.events(), frozenset(self.ledger.damaged))
                )
            )

    def timeline(self) -> list[JsonDict]:
        with self.lock:
            return list(self._cached("timeline", lambda: timeline(self.events())))

    def recent_events(self, since: str | None = None, last: int = DEFAULT_EVENTS) -> JsonDict:
        with self.lock:
            return {"events": filter_events(self.events(), since=since, last=last)}

    # -- living entries --------------------------------------------------------------

    def entries(self, query: PageQuery) -> JsonDict:
        """A page of living entries as ``top --json`` rows, with the total that matched."""
        with self.lock:
            return self._page_cached(("entries", *query.key()), lambda: self._entries(query))

    def _entries(self, query: PageQuery) -> JsonDict:
        page, total = self.ledger.store.page_entries(
            sort=query.sort,
            order=query.order,
            kind=query.kind,
            flag=query.flag,
            search=query.q,
            offset=query.offset,
            limit=query.limit,
        )
        tick, store = self.ledger.tick_count, self.ledger.store
        return {
            "tick": tick,
            "total": total,
            "offset": query.offset,
            "limit": query.limit,
            "sort": query.sort,
            "order": query.order,
            "q": query.q,
            "entries": [top_row(e, tick, store) for e in page],
        }

    # -- the graveyard ---------------------------------------------------------------

    def graveyard(self, query: PageQuery) -> JsonDict:
        """A page of dead entries, most recently buried first, with their causes."""
        with self.lock:
            return self._page_cached(("graveyard", *query.key()), lambda: self._graveyard(query))

    def _graveyard(self, query: PageQuery) -> JsonDict:
        ids, total = self.ledger.store.page_graveyard(
            kind=query.kind, search=query.q, offset=query.offset, limit=query.limit
        )
        rows = [row for row in (self._dead_row(i) for i in ids) if row is not None]
        return {
            "tick": self.ledger.tick_count,
            "total": total,
            "offset": query.offset,
            "limit": query.limit,
            "q": query.q,
            "deaths_by_cause": self.series()["deaths_by_cause"],
            "entries": rows,
        }

    def _dead_row(self, entry_id: str) -> JsonDict | None:
        life = entry_life(self.ledger, entry_id)
        if life is None:
            return None
        died: int | None = None
        for note in reversed(life["events"]):
            if note.get("event") in ("death", "buried", "merged"):
                died = _int(note.get("tick"))
                break
        return {
            "id": entry_id,
            "question": life["question"],
            "cause": life["cause_of_death"],
            "uses": life["uses"],
            "sources": life["sources"],
            "kind": life["kind"],
            "balance": life["balance"],
            "died_tick": died,
            "merged_into": life["merged_into"],
        }

    # -- one entry, tickets ------------------------------------------------------------

    def entry(self, entry_id: str) -> JsonDict | None:
        """The ``why --json`` life story plus ``related``: up to ``RELATED_K`` rows of
        ``ledger STORE related`` (the organic layer's neighbours, with their learned
        links), so the page can link an entry to its neighbours. None when the store
        never held the id."""
        with self.lock:
            self.version()
            life = entry_life(self.ledger, entry_id)
            if life is None:
                return None
            return {**life, "related": self._related(entry_id)}

    def _related(self, entry_id: str) -> list[JsonDict]:
        """The organic layer's rows for ``entry_id`` (call with the lock held).

        The layer is opened once and kept: it rebuilds its graph incrementally and
        reloads the persisted links only when the store changed. Reading it writes
        nothing. A store whose backend keeps no organic rows, or that holds more than
        ``RELATED_MAX_POPULATION`` living entries, lists none.
        """
        from ..organic import OrganicMemory, related_json

        if len(self.ledger.store) > RELATED_MAX_POPULATION:
            return []
        if self._organic is None:
            try:
                self._organic = OrganicMemory.open(self.ledger)
            except ValueError:
                return []
        rows: list[JsonDict] = related_json(self._organic, entry_id, RELATED_K)["related"]
        return rows

    def tickets(self) -> JsonDict:
        """Open tickets, oldest first, as the spec's ``pending`` rows plus provenance."""
        with self.lock:
            return dict(self._cached("tickets", self._tickets))

    def _tickets(self) -> JsonDict:
        tick = self.ledger.tick_count
        pending = sorted(self.ledger.pending(), key=lambda t: (t.born_tick, t.id))
        return {
            "tick": tick,
            "tickets": [
                {
                    "id": t.id,
                    "query": t.query,
                    "born_tick": t.born_tick,
                    "age_ticks": tick - t.born_tick,
                    "deciding_entry": t.deciding_entry,
                    "supporting_entries": list(t.supporting_entries),
                }
                for t in pending
            ],
        }


def _round_energy(x: float) -> float | int:
    value = round(x, 3)
    return 0 if value == 0 else value + 0.0


def store_ref(memory: str | Path) -> str | Path:
    """A ``postgresql://`` URL stays a string (``Path`` would fold its ``//``); else a path."""
    if not isinstance(memory, Path) and is_postgres_url(memory):
        return memory
    return Path(memory)


def version_token(ledger: Ledger) -> str:
    """What changes when the store changes (the backend's ``version_token``)."""
    if ledger.backend is not None:
        return ledger.backend.version_token()
    store = ledger.store  # without a backend, the entries are held in memory
    if not isinstance(store, MemoryStore):
        raise TypeError(f"a ledger without a backend holds a MemoryStore, not {store!r}")
    return "m" + str(store.version)


# -- doctor, in the background ---------------------------------------------------------


#: ``darwin-memo doctor STORE --json`` with STORE read from stdin.
_DOCTOR = (
    "import sys; from darwin_memo.cli import main; "
    "sys.exit(main(['doctor', sys.stdin.read(), '--json']))"
)


class DoctorWorker:
    """Runs ``darwin-memo doctor STORE --json`` in a child process, off the request threads.

    ``findings(version, wait)`` returns the diagnosis for ``version`` when it is
    ready within ``wait`` seconds, else the latest finished one marked ``stale``
    (and ``pending`` while a run is under way). A run starts only when asked, and
    no sooner than twice the previous run's duration after it, so a large store
    that is written continuously does not keep a core busy with diagnoses.

    A child process rather than a thread: the diagnosis reads every entry's notes
    (seconds on a large store) without holding this process's interpreter lock,
    and it needs no second handle on the store inside this process (a second
    SQLite handle in one process can drop the first one's file locks).
    """

    def __init__(self, path: str | Path, *, timeout: float = 600.0) -> None:
        self.path = path
        self.timeout = timeout
        self._cond = threading.Condition()
        self._result: JsonDict | None = None
        self._running = False
        self._next_start = 0.0
        self._proc: subprocess.Popen[str] | None = None
        self._closed = False

    def close(self) -> None:
        with self._cond:
            self._closed = True
            proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()

    def findings(self, version: str, wait: float = 0.5) -> JsonDict:
        deadline = time.monotonic() + wait
        with self._cond:
            if self._fresh(version):
                return self._answer(version)
            if not self._running and not self._closed and time.monotonic() >= self._next_start:
                self._running = True
                threading.Thread(
                    target=self._run, args=(version,), name="darwin-memo-doctor", daemon=True
                ).start()
            while not self._fresh(version) and self._running:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            return self._answer(version)

    def _fresh(self, version: str) -> bool:
        return self._result is not None and self._result["as_of"] == version

    def _answer(self, version: str) -> JsonDict:
        if self._result is None:
            return {
                "findings": [],
                "as_of": None,
                "stale": True,
                "pending": True,
                "error": None,
                "seconds": None,
            }
        out = dict(self._result)
        out["stale"] = out["as_of"] != version
        out["pending"] = out["stale"] and (self._running or not self._closed)
        return out

    def _diagnose(self) -> list[JsonDict]:
        env = dict(os.environ, PYTHONUTF8="1")
        env.pop("DARWIN_MEMO_DEBUG", None)
        with self._cond:
            if self._closed:
                raise RuntimeError("the dashboard is closing")
            # The store goes in on stdin, not argv: a URL may carry a password, and a
            # command line is visible to every user of the machine.
            self._proc = subprocess.Popen(
                [sys.executable, "-c", _DOCTOR],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                stdin=subprocess.PIPE,
                text=True,
                encoding="utf-8",
                env=env,
            )
        proc = self._proc
        try:
            out, err = proc.communicate(str(self.path), timeout=self.timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise RuntimeError(f"doctor took longer than {self.timeout:g} s") from None
        # doctor exits 1 when it finds an error-severity degeneracy: still a diagnosis.
        if proc.returncode in (0, 1) and out.lstrip().startswith("{"):
            findings = json.loads(out).get("findings")
            if isinstance(findings, list):
                return [f for f in findings if isinstance(f, dict)]
        lines = err.strip().splitlines()
        raise RuntimeError(lines[-1] if lines else f"doctor exited with status {proc.returncode}")

    def _run(self, version: str) -> None:
        started = time.monotonic()
        result: JsonDict
        try:
            result = {"findings": self._diagnose(), "as_of": version, "error": None}
        except Exception as exc:  # reported on the page, never raised in a thread
            previous = self._result or {"findings": [], "as_of": None}
            result = {
                "findings": previous["findings"],
                "as_of": previous["as_of"],
                "error": str(exc) or type(exc).__name__,
            }
        elapsed = time.monotonic() - started
        result["seconds"] = round(elapsed, 3)
        with self._cond:
            self._result = result
            self._running = False
            self._proc = None
            self._next_start = time.monotonic() + 2 * elapsed
            self._cond.notify_all()
