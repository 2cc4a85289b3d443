"""Dataclasses that do not import ``dataclasses`` until someone asks for their fields.

Importing the standard ``dataclasses`` module pulls in ``inspect`` (and with it
``ast``, ``dis`` and ``tokenize``): about a third of what a one-shot
``darwin-memo ledger FILE decide`` spends before it reads the store. ``@record``
writes the same methods ``@dataclass`` writes for the plain cases this package
uses (``__init__`` with defaults and default factories, ``__post_init__``,
``__repr__``, ``__eq__``, ``__hash__``, ``frozen=True``, ``__match_args__``),
and leaves ``__dataclass_fields__`` and ``__dataclass_params__`` to be computed on
first access, from a real dataclass built with the same declarations. So
``dataclasses.fields``, ``asdict``, ``astuple``, ``replace`` and ``is_dataclass``
work on records as on any dataclass, and only code that calls them pays for the
import. ``tests/test_records.py`` checks every record of the package against the
dataclass its declaration would make.

Not supported (a ``TypeError`` at class creation says so): inheritance between
records, ``ClassVar``/``InitVar`` annotations, and the other ``@dataclass`` options.
"""

from __future__ import annotations

import reprlib

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover - seen by type checkers only
    from collections.abc import Callable
    from typing import Any, TypeVar

    from typing_extensions import dataclass_transform

    T = TypeVar("T")
    C = TypeVar("C", bound=type)
else:

    def dataclass_transform(**_kwargs: object) -> Callable[[T], T]:
        return lambda f: f


__all__ = ["field", "field_names", "record"]

_FIELDS = "__dataclass_fields__"
_PARAMS = "__dataclass_params__"


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


_MISSING: Any = _Missing()


class _Factory:
    def __repr__(self) -> str:
        return "<factory>"  # what signatures show, as for a dataclass


_FACTORY: Any = _Factory()


class _Field:
    """What ``field(...)`` declares, until the class is built."""

    __slots__ = ("compare", "default", "default_factory", "repr")

    def __init__(self, default: Any, default_factory: Any, repr: bool, compare: bool) -> None:
        if default is not _MISSING and default_factory is not _MISSING:
            raise ValueError("cannot specify both default and default_factory")
        self.default = default
        self.default_factory = default_factory
        self.repr = repr
        self.compare = compare


def field(
    *,
    default: Any = _MISSING,
    default_factory: Any = _MISSING,
    repr: bool = True,
    compare: bool = True,
) -> Any:
    """``dataclasses.field`` for records: a default, a default factory, repr, compare."""
    return _Field(default, default_factory, repr, compare)


def field_names(cls: type) -> tuple[str, ...]:
    """A record's field names in declaration order (without building the metadata)."""
    return tuple(cls.__dict__["__record_fields__"])


class _LazyMetadata:
    """``__dataclass_fields__`` / ``__dataclass_params__``, built on first access."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, obj: object, cls: type) -> Any:
        _install_metadata(cls)
        return cls.__dict__[self.name]


def _install_metadata(cls: type) -> None:
    import dataclasses

    spec: dict[str, _Field] = cls.__dict__["__record_fields__"]
    namespace: dict[str, Any] = {
        "__annotations__": {name: cls.__annotations__[name] for name in spec},
        "__module__": cls.__module__,
        "__qualname__": cls.__qualname__,
    }
    for name, f in spec.items():
        namespace[name] = dataclasses.field(
            default=f.default if f.default is not _MISSING else dataclasses.MISSING,
            default_factory=(
                f.default_factory if f.default_factory is not _MISSING else dataclasses.MISSING
            ),
            repr=f.repr,
            compare=f.compare,
        )
    frozen = cls.__dict__["__record_frozen__"]
    twin: type = dataclasses.dataclass(frozen=frozen)(type(cls.__name__, (), namespace))
    # Replace the lazy descriptors with the values, so this runs once per class.
    type.__setattr__(cls, _FIELDS, twin.__dict__[_FIELDS])
    type.__setattr__(cls, _PARAMS, twin.__dict__[_PARAMS])


def _frozen_error(name: str) -> Exception:
    from dataclasses import FrozenInstanceError

    return FrozenInstanceError(f"cannot assign to field {name!r}")


#: Every record built in this process: "module.qualname" -> (key, methods source, scope
#: names). ``methods_module_source`` writes them out; see ``_precompiled``.
_BUILT: dict[str, tuple[str, str, tuple[str, ...]]] = {}

#: The module holding this package's record methods as ordinary source.
METHODS_MODULE = "darwin_memo._record_methods"


def _precompiled() -> dict[str, Any]:
    """The generated methods: methods source + scope names -> a factory of the functions.

    Compiling the methods' text costs more than the rest of importing a record's
    module (the parser runs on every import), while the same functions written in a
    module come from its cached bytecode. ``darwin_memo/_record_methods.py`` holds them,
    written by ``write_methods_module``; a record whose text is not there
    (a new or changed declaration) is compiled as before, so a stale file costs time,
    never correctness. ``tests/test_records.py`` fails when the file is stale.
    """
    global _METHODS
    if _METHODS is None:
        try:
            from ._record_methods import METHODS
        except ImportError:  # pragma: no cover - a tree without the generated file
            METHODS = {}
        _METHODS = METHODS
    return _METHODS


_METHODS: dict[str, Any] | None = None


def _compile(cls: type, defs: list[tuple[str, str, list[str]]], scope: dict[str, Any]) -> None:
    """Define ``(name, args, body)`` methods on ``cls`` (generated ones, or one ``exec``)."""
    source = "\n".join(
        f"def {name}({args}):\n" + "\n".join(f"    {line}" for line in body or ["pass"])
        for name, args, body in defs
    )
    names = tuple(sorted(scope))
    key = f"{source}\n# scope: {' '.join(names)}"
    _BUILT[f"{cls.__module__}.{cls.__qualname__}"] = (key, source, names)
    factory = _precompiled().get(key)
    if factory is not None:
        made = factory(**scope)
    else:
        namespace: dict[str, Any] = {}
        exec(source, scope, namespace)
        made = tuple(namespace[name] for name, _args, _body in defs)
    for (name, _args, _body), fn in zip(defs, made, strict=True):
        fn.__qualname__ = f"{cls.__qualname__}.{name}"
        fn.__module__ = cls.__module__
        setattr(cls, name, fn)


def methods_module_source() -> str:
    """The text of ``_record_methods.py`` for every record built in this process."""
    out = [
        '"""Methods of the package\'s records, written by ``records.write_methods_module``.',
        "",
        "Generated: do not edit. ``darwin_memo.records`` uses a factory here when a record's",
        "methods source and scope match its key exactly (else it compiles them itself), so",
        "importing a record reads bytecode instead of parsing text. tests/test_records.py",
        "checks that this file is current.",
        '"""',
        "# ruff: noqa",
        "# mypy: ignore-errors",
        "# fmt: off",
        "",
    ]
    table = []
    for i, where in enumerate(sorted(w for w in _BUILT if w in RECORDS)):
        key, source, names = _BUILT[where]
        returned = [
            line[4 : line.index("(")] for line in source.split("\n") if line.startswith("def ")
        ]
        out.append(f"def _{i}({', '.join(names)}):  # {where}")
        out.extend(f"    {line}" if line else "" for line in source.split("\n"))
        out.append(f"    return ({', '.join(returned)},)")
        out.append("")
        table.append(f"    {key!r}: _{i},")
    out.append("")
    out.append("METHODS = {")
    out.extend(table)
    out.append("}")
    return "\n".join(out) + "\n"


def write_methods_module() -> str:
    """Rewrite ``_record_methods.py`` from every record of the package; return its path.

    Run after changing a record's declaration::

        python -c "from darwin_memo.records import write_methods_module as w; print(w())"
    """
    import importlib
    import os

    for module in sorted({where.rsplit(".", 1)[0] for where in RECORDS}):
        importlib.import_module(module)
    target = os.path.join(os.path.dirname(__file__), "_record_methods.py")
    with open(target, "w", encoding="utf-8") as fh:
        fh.write(methods_module_source())
    return target


#: The package's records (``_record_methods.py`` holds their methods).
RECORDS = (
    "darwin_memo.consolidate.Merge",
    "darwin_memo.diagnose.Finding",
    "darwin_memo.economy.Books",
    "darwin_memo.ledger.Changes",
    "darwin_memo.ledger.Ticket",
    "darwin_memo.protocol.ProtocolAnswer",
    "darwin_memo.store.LoadProblem",
    "darwin_memo.survival.SurvivalConfig",
    "darwin_memo.survival.SurvivalReport",
    "darwin_memo.types.CycleStats",
    "darwin_memo.types.MemoryEntry",
    "darwin_memo.types.Outcome",
    "darwin_memo.types.Task",
    "darwin_memo.types.Trajectory",
)


def _build(cls: C, frozen: bool) -> C:
    for base in cls.__mro__[1:]:
        if "__record_fields__" in base.__dict__ or _FIELDS in base.__dict__:
            raise TypeError(f"{cls.__qualname__}: records cannot inherit from records")
    # Not inspect.get_annotations: importing inspect is what this module avoids.
    annotations: dict[str, Any] = cls.__dict__.get("__annotations__", {})  # noqa: RUF063
    spec: dict[str, _Field] = {}
    for name, kind in annotations.items():
        if "ClassVar" in str(kind) or "InitVar" in str(kind):
            raise TypeError(f"{cls.__qualname__}.{name}: ClassVar/InitVar is not supported")
        value = cls.__dict__.get(name, _MISSING)
        f = value if isinstance(value, _Field) else _Field(value, _MISSING, True, True)
        spec[name] = f
        # As @dataclass leaves them: the default as a class attribute, else nothing.
        if f.default is not _MISSING:
            setattr(cls, name, f.default)
        elif name in cls.__dict__:
            delattr(cls, name)

    scope: dict[str, Any] = {"_FACTORY": _FACTORY, "_frozen_error": _frozen_error}
    params = ["self"]
    body = []
    seen_default = False
    for name, f in spec.items():
        if f.default is not _MISSING:
            scope[f"_dflt_{name}"] = f.default
            params.append(f"{name}=_dflt_{name}")
            seen_default = True
            value = name
        elif f.default_factory is not _MISSING:
            scope[f"_fact_{name}"] = f.default_factory
            params.append(f"{name}=_FACTORY")
            seen_default = True
            value = f"_fact_{name}() if {name} is _FACTORY else {name}"
        else:
            if seen_default:
                raise TypeError(f"non-default argument {name!r} follows default argument")
            params.append(name)
            value = name
        if frozen:
            body.append(f"_object_setattr(self, {name!r}, {value})")
        else:
            body.append(f"self.{name} = {value}")
    if frozen:
        scope["_object_setattr"] = object.__setattr__
    if "__post_init__" in cls.__dict__:
        body.append("self.__post_init__()")
    shown = ", ".join(f"{n}={{self.{n}!r}}" for n, f in spec.items() if f.repr)
    compared = [n for n, f in spec.items() if f.compare]
    mine = "".join(f"self.{n}," for n in compared)
    theirs = "".join(f"other.{n}," for n in compared)
    defs = [
        ("__init__", ", ".join(params), body),
        ("__repr__", "self", [f'return f"{{type(self).__qualname__}}({shown})"']),
        (
            "__eq__",
            "self, other",
            [
                "if other.__class__ is self.__class__:",
                f"    return ({mine}) == ({theirs})",
                "return NotImplemented",
            ],
        ),
    ]
    if frozen:
        scope["_cls"] = cls
        scope["_names"] = frozenset(spec)
        defs.append(("__hash__", "self", [f"return hash(({mine}))"]))
        for method, args, call in (
            ("__setattr__", "self, name, value", "__setattr__(name, value)"),
            ("__delattr__", "self, name", "__delattr__(name)"),
        ):
            defs.append(
                (
                    method,
                    args,
                    [
                        "if type(self) is _cls or name in _names:",
                        "    raise _frozen_error(name)",
                        f"super(_cls, self).{call}",
                    ],
                )
            )
    _compile(cls, defs, scope)
    cls.__dict__["__init__"].__annotations__ = {**{n: annotations[n] for n in spec}, "return": None}
    type.__setattr__(cls, "__repr__", reprlib.recursive_repr("...")(cls.__dict__["__repr__"]))
    if not frozen:
        cls.__hash__ = None  # type: ignore[assignment]  # as @dataclass(eq=True)
    type.__setattr__(cls, "__match_args__", tuple(spec))
    type.__setattr__(cls, "__record_fields__", spec)
    type.__setattr__(cls, "__record_frozen__", frozen)
    type.__setattr__(cls, _FIELDS, _LazyMetadata(_FIELDS))
    type.__setattr__(cls, _PARAMS, _LazyMetadata(_PARAMS))
    return cls


@dataclass_transform(field_specifiers=(field,))
def record(cls: Any = None, /, *, frozen: bool = False) -> Any:
    """``@dataclass`` / ``@dataclass(frozen=True)`` without importing ``dataclasses``."""
    if cls is None:
        return lambda c: _build(c, frozen)
    return _build(cls, frozen)
