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


def _compile(cls: type, defs: list[tuple[str, str, list[str]]], scope: dict[str, Any]) -> None:
    """Define ``(name, args, body)`` methods on ``cls`` with one ``exec`` (one compile)."""
    source = "\n".join(
        f"def {name}({args}):\n" + "\n".join(f"    {line}" for line in body or ["pass"])
        for name, args, body in defs
    )
    namespace: dict[str, Any] = {}
    exec(source, scope, namespace)
    for name, _args, _body in defs:
        fn = namespace[name]
        fn.__qualname__ = f"{cls.__qualname__}.{name}"
        fn.__module__ = cls.__module__
        setattr(cls, name, fn)


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
