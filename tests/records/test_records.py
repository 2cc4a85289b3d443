"""The package's records are plain dataclasses with the published shapes.

Field order, defaults, equality, hashing and repr are what users (and the 0.7.1 store
files) see; ``tests/compat/test_compat_files.py`` checks the files themselves.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import inspect
import pickle
from typing import Any

import pytest

#: (module, class, frozen) for every record the package defines.
RECORDS = [
    ("darwin_memo.records.entry", "MemoryEntry", False),
    ("darwin_memo.records.entry", "Outcome", True),
    ("darwin_memo.records.entry", "Task", False),
    ("darwin_memo.records.entry", "Trajectory", False),
    ("darwin_memo.records.entry", "CycleStats", False),
    ("darwin_memo.ledger", "Ticket", False),
    ("darwin_memo.ledger", "Changes", False),
    ("darwin_memo.answer.protocol", "ProtocolAnswer", False),
    ("darwin_memo.economy.config", "SurvivalConfig", False),
    ("darwin_memo.sim.survival", "SurvivalReport", False),
    ("darwin_memo.store", "LoadProblem", True),
    ("darwin_memo.economy.merge", "Merge", True),
    ("darwin_memo.economy.rules", "Books", False),
    ("darwin_memo.sim.diagnose", "Finding", True),
]

#: Records of the published API: plain dataclasses there, instances with a ``__dict__``
#: (user code may set attributes of its own on them), so no slots here either.
PUBLISHED_RECORDS = {
    "MemoryEntry",
    "Task",
    "Trajectory",
    "CycleStats",
    "Ticket",
    "ProtocolAnswer",
    "SurvivalConfig",
    "SurvivalReport",
}

#: The published signatures (spec section 1), each with this version's additions last.
SIGNATURES = {
    "MemoryEntry": (
        "(question: 'str', answer: 'str', kind: 'EntryKind' = <EntryKind.EXPLICIT: "
        "'explicit'>, sources: 'list[str]' = <factory>, energy: 'float' = 1.0, "
        "born_cycle: 'int' = 0, recorded_ts: 'str' = <factory>, last_used_cycle: 'int' = "
        "-1, uses: 'int' = 0, lineage: 'list[str]' = <factory>, pinned: 'bool' = False, "
        "probation: 'int' = 0, juvenile: 'int' = 0, imported_from: 'str | None' = None, "
        "imported_at: 'str | None' = None, id: 'str' = <factory>, "
        "extra: 'dict[str, Any]' = <factory>) -> None"
    ),
    "Outcome": "(delta: 'float', detail: 'str' = '') -> None",
    "Trajectory": (
        "(cycle: 'int', task: 'str', answer: 'str', deciding_entry: 'str | None', "
        "supporting_entries: 'list[str]', outcome: 'Outcome') -> None"
    ),
    "CycleStats": (
        "(cycle: 'int', population: 'int', births: 'int', deaths: 'int', merges: 'int', "
        "total_energy: 'float', resource_delta: 'float', tasks: 'int' = 0, "
        "silent: 'int' = 0, nonzero_outcomes: 'int' = 0) -> None"
    ),
    "Ticket": (
        "(query: 'str', answer: 'str', deciding_entry: 'str | None', "
        "supporting_entries: 'list[str]', born_tick: 'int', id: 'str' = <factory>) -> None"
    ),
    "ProtocolAnswer": (
        "(text: 'str', deciding_entry: 'str | None' = None, "
        "supporting_entries: 'list[str]' = <factory>, annotated_text: 'str' = '', "
        "refused: 'bool' = False, attribution: 'str' = 'local') -> None"
    ),
    "SurvivalReport": (
        "(stats: 'list[CycleStats]' = <factory>, "
        "trajectories: 'list[Trajectory]' = <factory>) -> None"
    ),
}


def _cls(module: str, name: str) -> type:
    cls: type = getattr(importlib.import_module(module), name)
    return cls


def _value(f: dataclasses.Field[Any], salt: int) -> Any:
    kind = str(f.type)
    if kind.startswith("str"):
        return f"{f.name}-{salt}"
    if kind.startswith("int"):
        return 3 + salt
    if kind.startswith("float"):
        return 0.5 + salt
    if kind.startswith("bool"):
        return bool(salt % 2)
    if kind.startswith("list"):
        return [f"{f.name}-{salt}"]
    if kind.startswith("tuple"):
        return (f"{f.name}-{salt}",)
    if kind.startswith("dict"):
        return {f.name: salt}
    if kind.startswith("set"):
        return {salt}
    return None


def _kwargs(cls: type, salt: int) -> dict[str, Any]:
    if cls.__name__ == "SurvivalConfig":
        return {"cycles": 3 + salt}  # validated knobs: the others keep their defaults
    kwargs = {f.name: _value(f, salt) for f in dataclasses.fields(cls)}
    if cls.__name__ == "MemoryEntry":
        from darwin_memo.records.entry import EntryKind

        kwargs["kind"] = EntryKind.INFERRED
    return kwargs


@pytest.mark.parametrize(("module", "name", "frozen"), RECORDS, ids=[n for _, n, _ in RECORDS])
def test_every_record_is_a_plain_dataclass(module: str, name: str, frozen: bool) -> None:
    cls = _cls(module, name)
    assert dataclasses.is_dataclass(cls)
    assert cls.__dataclass_params__.frozen is frozen  # type: ignore[attr-defined]
    assert cls.__match_args__ == tuple(  # type: ignore[attr-defined]
        f.name for f in dataclasses.fields(cls)
    )
    kw1, kw2 = _kwargs(cls, 1), _kwargs(cls, 2)
    a = cls(**kw1)
    assert a == cls(**kw1) and not a != cls(**kw1)  # noqa: SIM202 - __ne__ from __eq__
    assert a != cls(**kw2)
    assert repr(a).startswith(f"{cls.__qualname__}(")
    assert (cls.__hash__ is None) is not frozen  # eq without frozen: unhashable
    if frozen:
        assert hash(a) == hash(cls(**kw1))
        first = next(iter(kw1))
        with pytest.raises(dataclasses.FrozenInstanceError, match=first):
            setattr(a, first, None)
    elif cls.__name__ in PUBLISHED_RECORDS:  # as published: instances keep a __dict__
        a.note_of_its_own = 1  # type: ignore[attr-defined]
        assert vars(a)["note_of_its_own"] == 1
    else:
        with pytest.raises(AttributeError):  # slots: a mistyped field name is refused
            a.no_such_field = 1  # type: ignore[attr-defined]
    copied = copy.deepcopy(a)
    assert copied == a and copied is not a
    assert pickle.loads(pickle.dumps(a)) == a
    first = next(iter(kw1))
    changed = dataclasses.replace(a, **{first: kw2[first]})
    assert type(changed) is cls and getattr(changed, first) == kw2[first]
    with pytest.raises(TypeError, match="unexpected keyword argument 'no_such_field'"):
        cls(**kw1, no_such_field=1)


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_published_field_order_and_defaults(name: str) -> None:
    module = next(m for m, n, _ in RECORDS if n == name)
    assert str(inspect.signature(_cls(module, name))) == SIGNATURES[name]


def test_survival_config_keeps_the_published_knobs_first() -> None:
    from darwin_memo.economy.config import SurvivalConfig

    defaults = {f.name: f.default for f in dataclasses.fields(SurvivalConfig)}
    assert defaults == {
        "cycles": 30,
        "credit_gain": 0.6,
        "supporting_share": 0.25,
        "consolidate_every": 5,
        "merge_threshold": 0.55,
        "conflict_threshold": None,
        "write_experience": True,
        "resource_scale": None,
        "admission_window": 0,
        "upkeep_requires_settlement": False,
        "merge_source_policy": "off",
        "merge_similarity": "jaccard",  # this version's addition
    }
    with pytest.raises(ValueError, match="cycles must be >= 0"):
        SurvivalConfig(cycles=-1)  # __post_init__ still runs


def test_an_entry_compares_and_shows_without_its_unknown_keys() -> None:
    from darwin_memo.records.entry import EntryKind, MemoryEntry

    a = MemoryEntry("q", "a", id="e1", recorded_ts="t", extra={"x": 1})
    b = MemoryEntry("q", "a", id="e1", recorded_ts="t")
    assert a == b and "extra" not in repr(a)
    assert repr(b) == (
        "MemoryEntry(question='q', answer='a', kind=<EntryKind.EXPLICIT: 'explicit'>, "
        "sources=[], energy=1.0, born_cycle=0, recorded_ts='t', last_used_cycle=-1, "
        "uses=0, lineage=[], pinned=False, probation=0, juvenile=0, imported_from=None, "
        "imported_at=None, id='e1')"
    )
    assert dataclasses.astuple(b)[:3] == ("q", "a", EntryKind.EXPLICIT)
    assert a != MemoryEntry("q", "a", id="e2", recorded_ts="t")


def test_pickles_and_keeps_mutable_defaults_apart() -> None:
    from darwin_memo.records.entry import MemoryEntry

    a, b = MemoryEntry("q", "a"), MemoryEntry("q", "a")
    a.sources.append("x")
    assert b.sources == [] and a.id != b.id and a.recorded_ts
    assert len(a.id) == 12 and int(a.id, 16) >= 0
    assert pickle.loads(pickle.dumps(a)) == a
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'answer'"):
        MemoryEntry("q")  # type: ignore[call-arg]


def test_a_record_that_holds_itself_shows_without_recursing() -> None:
    from darwin_memo.sim.survival import SurvivalReport

    report = SurvivalReport()
    report.stats.append(report)  # type: ignore[arg-type]
    assert repr(report) == "SurvivalReport(stats=[...], trajectories=[])"
