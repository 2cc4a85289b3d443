"""``@record`` classes behave as the dataclasses their declarations would make."""

from __future__ import annotations

import copy
import dataclasses
import importlib
import inspect
import json
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from darwin_memo.records import field, field_names, record

RECORDS = [
    ("darwin_memo.types", "MemoryEntry"),
    ("darwin_memo.types", "Outcome"),
    ("darwin_memo.types", "Task"),
    ("darwin_memo.types", "Trajectory"),
    ("darwin_memo.types", "CycleStats"),
    ("darwin_memo.ledger", "Ticket"),
    ("darwin_memo.ledger", "Changes"),
    ("darwin_memo.protocol", "ProtocolAnswer"),
    ("darwin_memo.survival", "SurvivalConfig"),
    ("darwin_memo.survival", "SurvivalReport"),
    ("darwin_memo.store", "LoadProblem"),
    ("darwin_memo.consolidate", "Merge"),
    ("darwin_memo.economy", "Books"),
    ("darwin_memo.diagnose", "Finding"),
]


def _twin(cls: type) -> type:
    """The real dataclass made from the record's own source text."""
    module = sys.modules[cls.__module__]
    source = inspect.getsource(cls)
    source = source.replace("@record(frozen=True)", "@dc_twin_.dataclass(frozen=True)")
    source = source.replace("@record", "@dc_twin_.dataclass")
    source = source.replace("field(", "dc_twin_.field(")
    namespace = dict(vars(module))
    namespace["dc_twin_"] = dataclasses
    exec(compile(source, f"<twin of {cls.__qualname__}>", "exec"), namespace)
    twin = namespace[cls.__name__]
    assert dataclasses.is_dataclass(twin) and twin is not cls
    return twin


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
    if kind.startswith(("list", "tuple")):
        return [f"{f.name}-{salt}"] if kind.startswith("list") else (f"{f.name}-{salt}",)
    if kind.startswith(("dict", "Mapping")):
        return {f.name: salt}
    if kind.startswith("set"):
        return {salt}
    return None


def _kwargs(twin: type, salt: int) -> dict[str, Any]:
    kwargs = {f.name: _value(f, salt) for f in dataclasses.fields(twin)}
    if twin.__name__ == "MemoryEntry":
        from darwin_memo.types import EntryKind

        kwargs["kind"] = EntryKind.INFERRED
    if twin.__name__ == "SurvivalConfig":
        return {}  # validated knobs: its defaults are the interesting case
    return kwargs


@pytest.mark.parametrize(("module", "name"), RECORDS, ids=[n for _, n in RECORDS])
def test_every_record_matches_its_dataclass_twin(module: str, name: str) -> None:
    cls = getattr(importlib.import_module(module), name)
    twin = _twin(cls)
    assert dataclasses.is_dataclass(cls)
    ours, theirs = dataclasses.fields(cls), dataclasses.fields(twin)
    assert [f.name for f in ours] == [f.name for f in theirs] == list(field_names(cls))
    for a, b in zip(ours, theirs, strict=True):
        assert (a.type, a.default, a.default_factory, a.init, a.repr, a.compare, a.hash) == (
            b.type,
            b.default,
            b.default_factory,
            b.init,
            b.repr,
            b.compare,
            b.hash,
        )
        assert a._field_type is b._field_type  # type: ignore[attr-defined]
        assert ("has class attribute", hasattr(cls, a.name)) == (
            "has class attribute",
            hasattr(twin, b.name),
        )
    assert cls.__dataclass_params__.frozen == twin.__dataclass_params__.frozen  # type: ignore[attr-defined]
    assert cls.__match_args__ == twin.__match_args__  # type: ignore[attr-defined]
    assert (cls.__hash__ is None) == (twin.__hash__ is None)
    assert str(inspect.signature(cls)) == str(inspect.signature(twin))

    kw1, kw2 = _kwargs(twin, 1), _kwargs(twin, 2)
    a, b = cls(**kw1), twin(**kw1)
    assert repr(a) == repr(b)
    assert dataclasses.asdict(a) == dataclasses.asdict(b)
    assert dataclasses.astuple(a) == dataclasses.astuple(b)
    assert a == cls(**kw1)
    assert not a != cls(**kw1)  # noqa: SIM202 - __ne__ comes from __eq__
    assert a != b  # another class, as two dataclasses of one shape are unequal
    if kw2 != kw1:
        assert (a == cls(**kw2)) == (b == twin(**kw2))
    if twin.__hash__ is not None:
        assert hash(a) == hash(cls(**kw1)) == hash(b)
    if twin.__dataclass_params__.frozen:  # type: ignore[attr-defined]
        first = next(iter(kw1), None)
        if first:
            with pytest.raises(dataclasses.FrozenInstanceError, match=first):
                setattr(a, first, None)
            with pytest.raises(dataclasses.FrozenInstanceError):
                delattr(a, first)
    copied = copy.deepcopy(a)
    assert copied == a and copied is not a
    if kw1:
        changed = dataclasses.replace(a, **{next(iter(kw1)): kw2[next(iter(kw1))]})
        assert type(changed) is cls
    with pytest.raises(TypeError, match="unexpected keyword argument 'no_such_field'"):
        cls(**kw1, no_such_field=1)


def test_pickles_and_keeps_mutable_defaults_apart() -> None:
    from darwin_memo.types import MemoryEntry

    a, b = MemoryEntry("q", "a"), MemoryEntry("q", "a")
    a.sources.append("x")
    assert b.sources == [] and a.id != b.id and a.recorded_ts
    assert pickle.loads(pickle.dumps(a)) == a
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'answer'"):
        MemoryEntry("q")  # type: ignore[call-arg]


def test_defaults_after_required_and_unsupported_shapes_are_refused() -> None:
    with pytest.raises(TypeError, match="non-default argument 'b' follows default"):

        @record
        class Bad:
            a: int = 1
            b: int

    @record
    class Base:
        a: int

    with pytest.raises(TypeError, match="cannot inherit"):

        @record
        class Child(Base):
            b: int = 0

    with pytest.raises(ValueError, match="both default and default_factory"):
        field(default=1, default_factory=list)


def test_post_init_runs_and_recursion_is_safe() -> None:
    seen = []

    @record
    class Node:
        name: str
        children: list[Any] = field(default_factory=list)

        def __post_init__(self) -> None:
            seen.append(self.name)

    n = Node("root")
    n.children.append(n)
    assert seen == ["root"]
    assert (
        repr(n)
        == "test_post_init_runs_and_recursion_is_safe.<locals>.Node(name='root', children=[...])"
    )


def test_the_ledger_path_never_imports_dataclasses(tmp_path: Path) -> None:
    """A one-shot `ledger decide` / `settle` imports no dataclasses, pathlib, typing, argparse,
    nor the `sqlite3` package (and with it datetime): the SQLite driver's C module alone."""
    store = tmp_path / "s.db"
    subprocess.run(
        [sys.executable, "-m", "darwin_memo", "ledger", str(store), "add", "how do I restart",
         "systemctl restart api"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    code = f"""
import contextlib, io, json, sys
from darwin_memo.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    main(["ledger", {str(store)!r}, "decide", "how do I restart the api"])
    ticket = json.loads(out.getvalue())["ticket_id"]
    main(["ledger", {str(store)!r}, "settle", ticket, "-0.5", "--detail", "ci run 7"])
heavy = ("argparse", "dataclasses", "datetime", "inspect", "pathlib", "sqlite3", "typing")
print(out.getvalue().splitlines()[-1])
print(sorted(m for m in heavy if m in sys.modules))
from darwin_memo import records
print(sorted(w for w, (key, _, _) in records._BUILT.items() if key not in records._precompiled()))
"""
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    settled, imported, compiled = proc.stdout.strip().splitlines()[-3:]
    assert json.loads(settled) == {"settled": True}
    assert imported == "[]"
    assert compiled == "[]"  # every record's methods came from _record_methods.py


def test_the_generated_methods_are_current() -> None:
    """``_record_methods.py`` holds exactly what the records' declarations generate."""
    from darwin_memo import records

    for module, _name in RECORDS:
        importlib.import_module(module)
    assert sorted(records.RECORDS) == sorted(f"{m}.{n}" for m, n in RECORDS)
    path = Path(records.__file__).with_name("_record_methods.py")
    assert path.read_text(encoding="utf-8") == records.methods_module_source(), (
        "src/darwin_memo/_record_methods.py is stale: run "
        "python -c 'from darwin_memo.records import write_methods_module as w; w()'"
    )
    for module, name in RECORDS:
        cls = getattr(sys.modules[module], name)
        assert cls.__init__.__code__.co_filename == str(path)
        assert cls.__init__.__qualname__ == f"{name}.__init__"
        assert cls.__init__.__module__ == module


def test_a_record_missing_from_the_generated_module_is_compiled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A stale or absent ``_record_methods.py`` costs time, never correctness."""
    from darwin_memo import records

    monkeypatch.setattr(records, "_METHODS", {})

    @record(frozen=True)
    class Point:
        x: int
        y: int = 2

    p = Point(1)
    assert (p.x, p.y, repr(p)) == (1, 2, f"{Point.__qualname__}(x=1, y=2)")
    assert Point.__init__.__code__.co_filename == "<string>"
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.x = 5  # type: ignore[misc]
