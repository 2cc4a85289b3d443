from typing import Any

def plain_entries(
    records: list[Any],
    start: int,
    opening: float,
    keys: tuple[str, ...],
    types: tuple[type, ...],
    kinds: dict[str, Any],
    make: Any,
    population: dict[str, Any],
    living: list[Any],
) -> tuple[int, float]: ...
