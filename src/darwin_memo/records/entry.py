"""The records darwin-memo passes around: entries, outcomes, tasks, trajectories.

Plain dataclasses. ``MemoryEntry.to_dict``/``from_dict`` speak the published
JSON store format: the five trust-lifecycle fields are written only when they
differ from their defaults, so files stay readable by older readers, and keys
this version does not know are carried along untouched instead of refused.
"""

from __future__ import annotations

import math
import operator
import os
import time
from dataclasses import dataclass, field, fields
from enum import Enum

from ..errors import StoreFormatError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "ALIVE_EPSILON",
    "CycleStats",
    "EntryKind",
    "MemoryEntry",
    "Outcome",
    "Task",
    "Trajectory",
    "new_id",
    "utc_now_iso",
]

#: An entry is alive while its energy is strictly above this.
ALIVE_EPSILON = 1e-9


_last_stamp: tuple[int, str] = (-1, "")


def utc_now_iso() -> str:
    """Now, in UTC, ISO-8601 at second precision (``2026-11-29T23:38:15+00:00``)."""
    global _last_stamp
    now = int(time.time())
    if now != _last_stamp[0]:  # a tick notes every merged entry: one text per second
        # time.strftime rather than datetime: the same text, without importing datetime.
        _last_stamp = (now, time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(now)))
    return _last_stamp[1]


def new_id() -> str:
    """A fresh 12-hex-digit id (entries and tickets)."""
    return os.urandom(6).hex()  # 48 random bits: 12 hex digits, as uuid4().hex[:12]


class EntryKind(str, Enum):
    """What produced an entry: the four reflection-QA kinds, experience, merges."""

    EXPLICIT = "explicit"
    INFERRED = "inferred"
    ENTITY = "entity"
    CROSS_DOC = "cross_doc"
    EXPERIENCE = "experience"
    CONSOLIDATED = "consolidated"

    def __str__(self) -> str:
        return self.value


_LIFECYCLE_DEFAULTS: dict[str, Any] = {
    "pinned": False,
    "probation": 0,
    "juvenile": 0,
    "imported_from": None,
    "imported_at": None,
}
_lifecycle = operator.attrgetter(*_LIFECYCLE_DEFAULTS)
_LIFECYCLE_AT_DEFAULTS = tuple(_LIFECYCLE_DEFAULTS.values())


@dataclass
class MemoryEntry:
    """A self-contained question/answer lesson with an energy balance."""

    question: str
    answer: str
    kind: EntryKind = EntryKind.EXPLICIT
    sources: list[str] = field(default_factory=list)
    energy: float = 1.0
    born_cycle: int = 0
    recorded_ts: str = field(default_factory=utc_now_iso)
    last_used_cycle: int = -1
    uses: int = 0
    lineage: list[str] = field(default_factory=list)
    pinned: bool = False
    probation: int = 0
    juvenile: int = 0
    imported_from: str | None = None
    imported_at: str | None = None
    id: str = field(default_factory=new_id)
    #: Keys read from a store file that this version does not know; written back as they were.
    extra: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def alive(self) -> bool:
        return self.energy > ALIVE_EPSILON

    @property
    def may_decide(self) -> bool:
        """Probationary imports ride along as supporters but never decide."""
        return self.probation <= 0

    @property
    def text(self) -> str:
        """What retrieval indexes: the question and the answer."""
        return self.question + " " + self.answer

    def to_dict(self) -> dict[str, Any]:
        """The published JSON shape (lifecycle fields omitted at their defaults)."""
        if not math.isfinite(self.energy):
            raise StoreFormatError(
                f"entry {self.id} has a non-finite energy ({self.energy!r}); "
                "refusing to write it (JSON has no such number)"
            )
        d: dict[str, Any] = {
            **self.extra,
            "question": self.question,
            "answer": self.answer,
            "kind": self.kind.value,
            "sources": list(self.sources),
            "energy": self.energy,
            "born_cycle": self.born_cycle,
            "recorded_ts": self.recorded_ts,
            "last_used_cycle": self.last_used_cycle,
            "uses": self.uses,
            "lineage": list(self.lineage),
        }
        lifecycle = _lifecycle(self)
        if lifecycle != _LIFECYCLE_AT_DEFAULTS:  # most entries: every field at its default
            for name, value, default in zip(
                _LIFECYCLE_DEFAULTS, lifecycle, _LIFECYCLE_AT_DEFAULTS, strict=True
            ):
                if value != default:
                    d[name] = value
        d["id"] = self.id
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MemoryEntry:
        """Read one entry dict, checking every field; unknown keys go to ``extra``.

        Raises ``StoreFormatError`` naming the entry and the field when a value
        has the wrong type, so one bad entry never poisons later operations.
        """
        if type(d) is dict:
            plain = _plain_entry(cls, d)
            if plain is not None:
                return plain
        if not isinstance(d, dict):
            raise StoreFormatError(f"an entry must be a JSON object, got {type(d).__name__}")
        ident = d.get("id")
        label = f"entry {ident!r}" if ident is not None else "an entry without an id"
        if not isinstance(ident, str) or not ident:
            raise StoreFormatError(f"{label}: 'id' must be a non-empty string")

        def bad(name: str, want: str) -> StoreFormatError:
            return StoreFormatError(f"{label}: {name!r} must be {want}, got {d[name]!r}")

        def text(name: str, default: str | None = None) -> str:
            if name not in d:
                if default is None:
                    raise StoreFormatError(f"{label}: missing required field {name!r}")
                return default
            if not isinstance(d[name], str):
                raise bad(name, "a string")
            return str(d[name])

        def integer(name: str, default: int) -> int:
            value = d.get(name, default)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise bad(name, "an integer")
            if isinstance(value, float):
                if not value.is_integer():
                    raise bad(name, "an integer")
                value = int(value)
            return int(value)

        def strings(name: str) -> list[str]:
            value = d.get(name, [])
            if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
                raise bad(name, "a list of strings")
            return list(value)

        def optional_text(name: str) -> str | None:
            value = d.get(name)
            if value is not None and not isinstance(value, str):
                raise bad(name, "a string or null")
            return value

        kind_raw = d.get("kind", EntryKind.EXPLICIT.value)
        try:
            kind = EntryKind(kind_raw)
        except ValueError:
            known = ", ".join(k.value for k in EntryKind)
            raise StoreFormatError(
                f"{label}: unknown kind {kind_raw!r} (known kinds: {known})"
            ) from None

        energy = d.get("energy", 1.0)
        if isinstance(energy, bool) or not isinstance(energy, (int, float)):
            raise bad("energy", "a number")
        if not math.isfinite(energy):
            raise bad("energy", "a finite number")

        pinned = d.get("pinned", False)
        if not isinstance(pinned, bool):
            raise bad("pinned", "true or false")

        known_keys = _ENTRY_KEYS
        return cls(
            question=text("question"),
            answer=text("answer"),
            kind=kind,
            sources=strings("sources"),
            energy=float(energy),
            born_cycle=integer("born_cycle", 0),
            recorded_ts=text("recorded_ts", ""),
            last_used_cycle=integer("last_used_cycle", -1),
            uses=integer("uses", 0),
            lineage=strings("lineage"),
            pinned=pinned,
            probation=integer("probation", 0),
            juvenile=integer("juvenile", 0),
            imported_from=optional_text("imported_from"),
            imported_at=optional_text("imported_at"),
            id=ident,
            extra={k: v for k, v in d.items() if k not in known_keys},
        )


_ENTRY_KEYS = frozenset(f.name for f in fields(MemoryEntry)) - {"extra"}

#: The fields a plain entry (what ``to_dict`` writes for most) holds, with their JSON types.
_PLAIN_TYPES: dict[str, type] = {
    "question": str,
    "answer": str,
    "kind": str,
    "sources": list,
    "energy": float,
    "born_cycle": int,
    "recorded_ts": str,
    "last_used_cycle": int,
    "uses": int,
    "lineage": list,
    "id": str,
}
_KINDS = {k.value: k for k in EntryKind}
_STR = {str}


def _plain_entry(cls: type[MemoryEntry], d: dict[str, Any]) -> MemoryEntry | None:
    """``from_dict`` for a plain entry, read without the per-field checks' overhead; None
    for anything else (the careful path then reads it, or says what is wrong)."""
    types = _PLAIN_TYPES
    for key, value in d.items():
        if types.get(key) is not type(value):
            return None
    get = d.get
    question, answer, ident = get("question"), get("answer"), get("id")
    kind = _KINDS.get(get("kind", EntryKind.EXPLICIT.value))
    energy = get("energy", 1.0)
    sources, lineage = get("sources", []), get("lineage", [])
    if (
        question is None
        or answer is None
        or not ident
        or kind is None
        or not math.isfinite(energy)
        or not set(map(type, sources)) <= _STR
        or not set(map(type, lineage)) <= _STR
    ):
        return None
    return cls(
        question=question,
        answer=answer,
        kind=kind,
        sources=list(sources),
        energy=energy,
        born_cycle=get("born_cycle", 0),
        recorded_ts=get("recorded_ts", ""),
        last_used_cycle=get("last_used_cycle", -1),
        uses=get("uses", 0),
        lineage=list(lineage),
        id=ident,
    )


#: A plain entry as ``to_dict`` writes it: its keys in order (``_PLAIN_TYPES`` lists
#: them so; a test checks it), and their JSON types.
_WRITTEN_KEYS = tuple(_PLAIN_TYPES)
_WRITTEN_TYPES = tuple(_PLAIN_TYPES.values())
_WRITTEN_LEN = len(_WRITTEN_KEYS)


def read_entry(d: Any) -> MemoryEntry:
    """``MemoryEntry.from_dict`` for a dict decoded from a store, which the entry may keep.

    An entry written as ``to_dict`` writes a plain one (most of a store) is checked
    with two tuple comparisons and keeps the decoded lists instead of copying them;
    anything else goes through ``from_dict``.
    """
    if type(d) is not dict or len(d) != _WRITTEN_LEN:
        return MemoryEntry.from_dict(d)
    values = tuple(d.values())
    if tuple(map(type, values)) != _WRITTEN_TYPES or tuple(d) != _WRITTEN_KEYS:
        return MemoryEntry.from_dict(d)
    question, answer, kind, sources, energy, born, stamp, last, uses, lineage, ident = values
    member = _KINDS.get(kind)
    if member is None or not ident or not math.isfinite(energy):
        return MemoryEntry.from_dict(d)
    try:  # every item a str (a decoded str is never a subclass)
        "".join(sources)
        "".join(lineage)
    except TypeError:
        return MemoryEntry.from_dict(d)
    return MemoryEntry(
        question, answer, member, sources, energy, born, stamp, last, uses, lineage,
        False, 0, 0, None, None, ident,
    )  # fmt: skip


#: An entry's kind as an SQLite store's ``entries.kind`` column holds it (schema 15): its
#: position here as one digit (the column's TEXT affinity keeps it as text), one byte
#: instead of up to 12. Frozen: a new kind is appended. Rows written before hold the
#: name (never one character long), and are read alike.
KIND_NAMES = ("explicit", "inferred", "entity", "cross_doc", "experience", "consolidated")
KIND_CODES = {name: str(code) for code, name in enumerate(KIND_NAMES)}


def kind_name(value: Any) -> str:
    """A row's ``kind`` column as the kind's name: a code (schema 15) or the name."""
    text = str(value)
    if len(text) != 1:
        return text
    code = ord(text) - 48
    if 0 <= code < len(KIND_NAMES):
        return KIND_NAMES[code]
    raise StoreFormatError(
        f"a row's kind is {text!r}, which no kind has: the store is damaged or was "
        "written by a newer darwin-memo (upgrade, or run `darwin-memo ledger FILE verify`)"
    )


#: A row's JSON (``backends.sqlstore.row_json``) for an entry every other field of
#: which is at its default or in the row's columns: its keys in order, and their types.
_COMPACT_KEYS = ("question", "answer", "sources", "recorded_ts")
_COMPACT_TYPES = (str, str, list, str)


def read_compact(d: Any, ident: str, energy: float, kind: str) -> MemoryEntry:
    """The entry a row's compact JSON ``d`` holds, with the row's ``id``, ``energy`` and
    ``kind`` (a ``kind`` in ``d`` itself wins: rows of an earlier development version).

    The common shape (a lesson not settled yet) is checked with two tuple comparisons,
    as ``read_entry`` does; anything else goes through ``from_dict``. From schema 11 a
    row holds that shape as its four values alone, a list in ``_COMPACT_KEYS`` order.
    """
    values: tuple[Any, ...] | None = None
    if type(d) is list:
        if len(d) != len(_COMPACT_KEYS):
            raise StoreFormatError(
                f"a row's list holds {len(d)} values, not a lesson's "
                "question, answer, sources and recorded_ts"
            )
        values = tuple(d)
    elif type(d) is dict and len(d) == 4 and tuple(d) == _COMPACT_KEYS:
        values = tuple(d.values())
    if values is not None and tuple(map(type, values)) == _COMPACT_TYPES:
        question, answer, sources, stamp = values
        member = _KINDS.get(kind)
        if member is not None and ident and type(energy) is float and math.isfinite(energy):
            try:
                "".join(sources)
            except TypeError:
                pass
            else:
                return MemoryEntry(
                    question, answer, member, sources, energy, 0, stamp, -1, 0, [],
                    False, 0, 0, None, None, ident,
                )  # fmt: skip
    if type(d) is list:  # not a lesson's values: from_dict names what is wrong
        d = dict(zip(_COMPACT_KEYS, d, strict=True))
    if type(d) is dict:
        d["id"] = ident
        d["energy"] = energy
        d.setdefault("kind", kind)
    return MemoryEntry.from_dict(d)


@dataclass(frozen=True)
class Outcome:
    """A measured change in a conserved resource. Never a grade."""

    delta: float
    detail: str = ""


@dataclass
class Task:
    """One decision an environment asks memory about."""

    prompt: str
    context: dict[str, Any] = field(default_factory=dict)


@dataclass
class Trajectory:
    """What happened to one task: the answer, who decided it, what it measured.

    ``task`` is the task's prompt text, as published (the ``Task`` itself, with its
    context, stays with the environment).
    """

    cycle: int
    task: str
    answer: str
    deciding_entry: str | None
    supporting_entries: list[str]
    outcome: Outcome


@dataclass
class CycleStats:
    """One row of the survival table."""

    cycle: int
    population: int
    births: int
    deaths: int
    merges: int
    total_energy: float
    resource_delta: float
    tasks: int = 0
    silent: int = 0
    nonzero_outcomes: int = 0
