from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import overload

@overload
def greedy_groups(
    tokens: Sequence[Iterable[Hashable]], threshold: float, sink: None = None
) -> list[list[int]]: ...
@overload
def greedy_groups(
    tokens: Sequence[Iterable[Hashable]],
    threshold: float,
    sink: Callable[[list[list[int]]], object],
) -> None: ...
