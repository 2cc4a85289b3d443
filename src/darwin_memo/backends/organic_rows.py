"""The organic layer's rows: what a transaction's events change, applied by a backend.

The organic layer (``darwin_memo.organic``) keeps, per store, learned links
(``a < b``, a weight in (0, 1]) and per entry a recall count and an activation. None
of it is written by the organic code: an operation's *events* say what happened, and
the backend that writes the operation derives the changes from them, in the same
transaction (``organic_ops``):

* ``recall`` (``entry``, ``level``, ``activated``: ``[[id, level], ...]``,
  ``strengthened``: ``[[id, by], ...]``): the entry's recall count + 1, every level
  raised to at least the one given, every link ``entry``-``id`` strengthened by ``by``
  (capped at 1.0). Increments, never values written back, so two processes recalling
  at once both count;
* ``tick`` and ``organic_decay``: links x0.9 and activations x0.5, what falls below
  1e-3 forgotten (a tick also buries its ``dead_entries``);
* ``settle`` (``buried``) and ``forget`` (``entry``): the dead entries' rows go;
* ``merge`` (``entry``, ``members``): the members' links move to the heir (a link
  both had keeps the larger weight; links among the members vanish), the heir's recall
  count is the members' sum and its activation their largest, and the members' rows go.

SQLite and PostgreSQL apply them as SQL (``apply_sql``); a JSON store keeps the same state as a
block ``"organic"`` beside the entries (``apply_block``; the published format ignores
keys it does not know): ``{"links": [[a, b, weight], ...], "entries": {id: [recalls,
activation], ...}}``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .dialect import Dialect

__all__ = [
    "ACTIVATION_DECAY",
    "BLOCK_KEY",
    "LINK_DECAY",
    "ORGANIC_EVENTS",
    "PRUNE_BELOW",
    "Rows",
    "apply_block",
    "apply_sql",
    "block_of",
    "entries_written_since",
    "organic_ops",
    "read_block",
    "read_sql",
    "rows_version",
    "write_sql",
]

#: Links are scaled by this at each tick (``dynamics.HEBB_DECAY``).
LINK_DECAY = 0.9
#: Activations are scaled by this at each tick (``activation.DECAY_FACTOR``).
ACTIVATION_DECAY = 0.5
#: Links and activations below this are forgotten.
PRUNE_BELOW = 1e-3
#: The events that change the organic rows.
ORGANIC_EVENTS = frozenset({"recall", "tick", "organic_decay", "settle", "forget", "merge"})
#: The JSON payload's key for the organic block.
BLOCK_KEY = "organic"

#: ``(links {(a, b): weight} with a < b, state {id: (recalls, activation)})``.
Rows = tuple[dict[tuple[str, str], float], dict[str, tuple[int, float]]]
Op = tuple[Any, ...]


def rows_version(backend: Any) -> object | None:
    """What ``backend`` last saw of its store, as a value that moves with every write.

    An SQL store's ``meta.version`` (every write transaction bumps it, a recall's
    included), a JSON store's file signature (inode, size, mtime). The organic layer
    reloads its rows only when this moved since it last read them; ``None`` (a backend
    that tracks neither) means "reload every time". Read it after the ledger's
    refresh and before the rows, so rows read are never older than the version.
    """
    for name in ("_seen", "_signature"):  # SqliteBackend/PostgresBackend, JsonBackend
        value = getattr(backend, name, None)
        if value is not None and value != -1:  # (-1: an SQL backend that has read nothing)
            return (name, value)
    return None


def entries_written_since(backend: Any, since: object | None) -> list[str] | None:
    """Ids of the entries whose rows were written after ``since`` (a past ``rows_version``).

    In the store's order (an entry that joined, left or changed balance is listed;
    the caller asks the store which are alive). ``[]`` when the store has not moved;
    ``None`` when the backend cannot say (a JSON store, or ``since`` unknown): walk
    the population then. An SQL store answers from its ``entries_by_version`` index,
    so the cost follows the number of changes, not the store's size.
    """
    now = rows_version(backend)
    if now is None or since is None:
        return None
    if now == since:
        return []
    if not (
        isinstance(since, tuple) and since[0] == "_seen" and now[0] == "_seen"  # type: ignore[index]
    ):
        return None
    rows = backend.conn.execute(
        "SELECT id FROM entries WHERE version > ? ORDER BY rowid", (int(since[1]),)
    )
    return [str(entry_id) for (entry_id,) in rows]


def _pair(x: str, y: str) -> tuple[str, str]:
    return (x, y) if x < y else (y, x)


def organic_ops(events: Iterable[dict[str, Any]]) -> list[Op]:
    """The organic changes the events of one transaction make, in order."""
    ops: list[Op] = []
    for e in events:
        kind = e.get("event")
        if kind not in ORGANIC_EVENTS:
            continue
        if kind == "recall":
            ops.append(
                (
                    "recall",
                    str(e["entry"]),
                    float(e.get("level", 1.0)),
                    [(str(i), float(v)) for i, v in e.get("activated", []) if float(v) > 0],
                    [(str(i), float(by)) for i, by in e.get("strengthened", [])],
                )
            )
        elif kind in ("tick", "organic_decay"):
            ops.append(("decay",))
            dead = [str(i) for i in e.get("dead_entries", [])]
            if dead:
                ops.append(("bury", dead))
        elif kind == "settle":
            buried = [str(i) for i in e.get("buried", [])]
            if buried:
                ops.append(("bury", buried))
        elif kind == "forget":
            ops.append(("bury", [str(e["entry"])]))
        elif kind == "merge":
            ops.append(("merge", str(e["entry"]), [str(m) for m in e.get("members", [])]))
    return ops


def _apply(rows: Rows, ops: Sequence[Op]) -> None:
    """Apply ``ops`` to rows held in memory (a JSON store's block)."""
    links, state = rows
    for op in ops:
        if op[0] == "recall":
            _, entry, level, activated, strengthened = op
            recalls, act = state.get(entry, (0, 0.0))
            state[entry] = (recalls + 1, max(act, level))
            for other, value in activated:
                recalls, act = state.get(other, (0, 0.0))
                state[other] = (recalls, max(act, value))
            for other, by in strengthened:
                if other != entry:
                    key = _pair(entry, other)
                    links[key] = min(1.0, links.get(key, 0.0) + by)
        elif op[0] == "decay":
            for key, w in list(links.items()):
                if w * LINK_DECAY >= PRUNE_BELOW:
                    links[key] = w * LINK_DECAY
                else:
                    del links[key]
            for entry, (recalls, act) in list(state.items()):
                act = act * ACTIVATION_DECAY if act * ACTIVATION_DECAY >= PRUNE_BELOW else 0.0
                if recalls or act:
                    state[entry] = (recalls, act)
                else:
                    del state[entry]
        elif op[0] == "bury":
            _forget(rows, set(op[1]))
        elif op[0] == "merge":
            _, heir, members = op
            group = set(members)
            moved: dict[str, float] = {}
            for (a, b), w in links.items():
                if a in group and b not in group:
                    moved[b] = max(moved.get(b, 0.0), w)
                elif b in group and a not in group:
                    moved[a] = max(moved.get(a, 0.0), w)
            for other, w in moved.items():
                if other != heir:
                    key = _pair(heir, other)
                    links[key] = max(links.get(key, 0.0), w)
            held = [state[m] for m in members if m in state]
            if held:
                recalls, act = state.get(heir, (0, 0.0))
                state[heir] = (
                    recalls + sum(r for r, _ in held),
                    max([act] + [a for _, a in held]),
                )
            _forget(rows, group - {heir})


def _forget(rows: Rows, gone: set[str]) -> None:
    links, state = rows
    for key in [k for k in links if k[0] in gone or k[1] in gone]:
        del links[key]
    for entry in gone:
        state.pop(entry, None)


# -- a JSON store's block --------------------------------------------------------------


def read_block(block: Any) -> Rows:
    """The rows a JSON store's ``"organic"`` block holds (malformed parts are skipped)."""
    links: dict[tuple[str, str], float] = {}
    state: dict[str, tuple[int, float]] = {}
    if not isinstance(block, dict):
        return links, state
    for item in block.get("links", []) if isinstance(block.get("links"), list) else []:
        if isinstance(item, list) and len(item) == 3:
            a, b, w = item
            if isinstance(a, str) and isinstance(b, str) and a != b and _number(w):
                links[_pair(a, b)] = min(1.0, max(0.0, float(w)))
    entries = block.get("entries")
    for entry, value in entries.items() if isinstance(entries, dict) else []:
        if isinstance(value, list) and len(value) == 2 and all(_number(v) for v in value):
            state[str(entry)] = (max(0, int(value[0])), min(1.0, max(0.0, float(value[1]))))
    return links, state


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value == value


def apply_block(extra: dict[str, Any], events: Iterable[dict[str, Any]]) -> None:
    """Apply a transaction's events to the ``"organic"`` block of a JSON payload's extras.

    A store that never had organic state gets no block until a recall makes one.
    """
    ops = organic_ops(events)
    if not ops or (BLOCK_KEY not in extra and not any(op[0] == "recall" for op in ops)):
        return
    rows = read_block(extra.get(BLOCK_KEY))
    _apply(rows, ops)
    extra[BLOCK_KEY] = block_of(rows)


def block_of(rows: Rows) -> dict[str, Any]:
    """The ``"organic"`` block that holds ``rows`` (links and entries sorted by id)."""
    links, state = rows
    return {
        "links": [[a, b, w] for (a, b), w in sorted(links.items())],
        "entries": {entry: [recalls, act] for entry, (recalls, act) in sorted(state.items())},
    }


# -- SQLite ------------------------------------------------------------------------------


def read_sql(conn: Any) -> Rows:
    """The rows of an SQL store (SQLite schema 17, PostgreSQL version 6)."""
    links: dict[tuple[str, str], float] = {}
    for a, b, w in conn.execute("SELECT a, b, weight FROM organic_links"):
        if isinstance(a, str) and isinstance(b, str) and a != b and _number(w):
            links[_pair(a, b)] = min(1.0, max(0.0, float(w)))
    state: dict[str, tuple[int, float]] = {}
    for entry, recalls, act in conn.execute(
        "SELECT entry_id, recalls, activation FROM organic_state"
    ):
        if isinstance(entry, str) and _number(recalls) and _number(act):
            state[entry] = (max(0, int(recalls)), min(1.0, max(0.0, float(act))))
    return links, state


def _statements(d: Dialect) -> tuple[str, str, str, str, str]:
    """The upserts ``apply_sql`` runs, with ``d``'s row-wise maximum and minimum:
    (recalled, activated, strengthened, moved, merged)."""
    raised = d.greatest("organic_state.activation", "excluded.activation")
    recalled = (
        "INSERT INTO organic_state (entry_id, recalls, activation) VALUES (?, 1, ?) "
        "ON CONFLICT (entry_id) DO UPDATE SET recalls = organic_state.recalls + 1, "
        f"activation = {raised}"
    )
    activated = (
        "INSERT INTO organic_state (entry_id, recalls, activation) VALUES (?, 0, ?) "
        f"ON CONFLICT (entry_id) DO UPDATE SET activation = {raised}"
    )
    strengthened = (
        f"INSERT INTO organic_links (a, b, weight) VALUES (?, ?, {d.least('1.0', '?')}) "
        "ON CONFLICT (a, b) DO UPDATE SET "
        f"weight = {d.least('1.0', 'organic_links.weight + excluded.weight')}"
    )
    moved = (
        "INSERT INTO organic_links (a, b, weight) VALUES (?, ?, ?) ON CONFLICT (a, b) "
        f"DO UPDATE SET weight = {d.greatest('organic_links.weight', 'excluded.weight')}"
    )
    merged = (
        "INSERT INTO organic_state (entry_id, recalls, activation) VALUES (?, ?, ?) "
        "ON CONFLICT (entry_id) DO UPDATE SET recalls = organic_state.recalls + excluded.recalls, "
        f"activation = {raised}"
    )
    return recalled, activated, strengthened, moved, merged


def apply_sql(conn: Any, events: Iterable[dict[str, Any]], dialect: Dialect) -> None:
    """Apply a transaction's events to an SQL store's rows, inside its transaction.

    Every change is an increment or a bound (``recalls + 1``, ``MIN(1, weight + by)``,
    ``MAX(activation, level)``, spelled as ``dialect`` spells them) on the rows as they
    are at commit, so concurrent recalls from other processes are never overwritten.
    """
    ops = organic_ops(events)
    if not ops:
        return
    if not any(op[0] == "recall" for op in ops):
        (held,) = conn.execute(
            "SELECT EXISTS (SELECT 1 FROM organic_state) OR EXISTS (SELECT 1 FROM organic_links)"
        ).fetchone()
        if not held:  # a store nobody recalled in: nothing to decay or clean up
            return
    recalled, activated_sql, strengthened_sql, moved_sql, merged_sql = _statements(dialect)
    for op in ops:
        if op[0] == "recall":
            _, entry, level, activated, strengthened = op
            conn.execute(recalled, (entry, level))
            conn.executemany(activated_sql, activated)
            conn.executemany(
                strengthened_sql,
                [(*_pair(entry, other), by) for other, by in strengthened if other != entry],
            )
        elif op[0] == "decay":
            conn.execute("UPDATE organic_links SET weight = weight * ?", (LINK_DECAY,))
            conn.execute("DELETE FROM organic_links WHERE weight < ?", (PRUNE_BELOW,))
            conn.execute(
                "UPDATE organic_state SET activation = CASE WHEN activation * ? < ? THEN 0.0 "
                "ELSE activation * ? END WHERE activation > 0",
                (ACTIVATION_DECAY, PRUNE_BELOW, ACTIVATION_DECAY),
            )
            conn.execute("DELETE FROM organic_state WHERE recalls = 0 AND activation <= 0")
        elif op[0] == "bury":
            _forget_sql(conn, op[1])
        elif op[0] == "merge":
            _, heir, members = op
            group = set(members)
            moved: dict[str, float] = {}
            for m in members:
                for a, b, w in conn.execute(
                    "SELECT a, b, weight FROM organic_links WHERE a = ? OR b = ?", (m, m)
                ).fetchall():
                    other = b if a == m else a
                    if other not in group and other != heir:
                        moved[other] = max(moved.get(other, 0.0), float(w))
            conn.executemany(moved_sql, [(*_pair(heir, o), w) for o, w in sorted(moved.items())])
            held = []
            for m in members:
                row = conn.execute(
                    "SELECT recalls, activation FROM organic_state WHERE entry_id = ?", (m,)
                ).fetchone()
                if row is not None:
                    held.append((int(row[0]), float(row[1])))
            if held:
                conn.execute(
                    merged_sql,
                    (heir, sum(r for r, _ in held), max(a for _, a in held)),
                )
            _forget_sql(conn, [m for m in members if m != heir])


def write_sql(conn: Any, rows: Rows) -> None:
    """Write ``rows`` into an SQL store's empty organic tables (a copy: ``migrate``).

    SQLite or PostgreSQL (the statements are the same in both); inside the caller's
    transaction.
    """
    links, state = rows
    conn.executemany(
        "INSERT INTO organic_links (a, b, weight) VALUES (?, ?, ?)",
        [(*_pair(a, b), w) for (a, b), w in sorted(links.items()) if a != b],
    )
    conn.executemany(
        "INSERT INTO organic_state (entry_id, recalls, activation) VALUES (?, ?, ?)",
        [(entry, recalls, act) for entry, (recalls, act) in sorted(state.items())],
    )


def _forget_sql(conn: Any, gone: Sequence[str]) -> None:
    conn.executemany("DELETE FROM organic_links WHERE a = ? OR b = ?", [(i, i) for i in gone])
    conn.executemany("DELETE FROM organic_state WHERE entry_id = ?", [(i,) for i in gone])
