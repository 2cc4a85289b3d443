"""Second keyword spellings for published parameters.

The published package and its specification sometimes name the same parameter
differently (``deciding_entry`` / ``deciding``, ``start_timestamp`` /
``start_ts``). Callers written against either keep working: the function takes
the published name, and :func:`keyword_aliases` maps the other spelling onto it.
"""

from __future__ import annotations

import functools

TYPE_CHECKING = False
if TYPE_CHECKING:  # the one-shot CLI imports this; typing stays out of its start-up
    from collections.abc import Callable
    from typing import ParamSpec, TypeVar

    P = ParamSpec("P")
    R = TypeVar("R")

__all__ = ["keyword_aliases"]


def keyword_aliases(**aliases: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Accept ``alias=value`` as ``parameter=value``, for each ``alias="parameter"``.

    Giving one parameter under both names is a ``TypeError``, as for any duplicate.
    """

    def wrap(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def call(*args: P.args, **kwargs: P.kwargs) -> R:
            for alias in aliases.keys() & kwargs.keys():
                name = aliases[alias]
                if name in kwargs:
                    raise TypeError(f"{fn.__name__}() got {name!r} twice (also as {alias!r})")
                kwargs[name] = kwargs.pop(alias)
            return fn(*args, **kwargs)

        return call

    return wrap
