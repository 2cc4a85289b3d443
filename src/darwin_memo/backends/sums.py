"""Running sums of the living, unpinned balances, by kind (SQLite schema 10, PostgreSQL 3).

A row's ``energy`` is its balance at tick ``anchor``; an unpinned entry pays upkeep
every tick after that, with no floor, until it is buried. So at tick ``T`` the living
unpinned entries of a kind hold, together,

    sum(energy) - upkeep * (rows * T - sum(anchor))

The store keeps ``rows``, ``sum(anchor)`` and ``sum(energy)`` of each kind in the
``energy_sums`` table, changed with every row it writes, and a tick's total balance
(and ``ledger stats``) needs no scan of the population: only the pinned entries are
read (their balance stops at zero; they are few). The energy is summed exactly, as an
integer count of the smallest step a float can take (``2**-1074``): a sum that rows
join and leave a million times over stays the sum of the rows it holds, to the bit,
and equals what a scan of them finds (``scan_sums``; ``ledger verify`` compares them).
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterable

from ..records.entry import kind_name

__all__ = ["ONE", "EnergySums", "exact", "read_sums", "scan_sums"]

#: The scale of an exact sum: ``exact(1.0) == ONE``.
ONE = 1 << 1074


def exact(x: float) -> int:
    """``x * 2**1074`` as an int: exact for every finite float."""
    n, d = x.as_integer_ratio()  # d is a power of two, at most 2**1074
    return n << (1075 - d.bit_length())


class EnergySums:
    """``kind -> [rows, sum of anchors, exact sum of energies]`` over living, unpinned rows."""

    __slots__ = ("changed", "kinds")

    def __init__(self, kinds: dict[str, list[int]] | None = None) -> None:
        self.kinds: dict[str, list[int]] = kinds if kinds is not None else {}
        #: Kinds changed since the sums were read (``write`` writes only those).
        self.changed: set[str] = set()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, EnergySums):
            return NotImplemented
        return self._nonzero() == other._nonzero()

    def __repr__(self) -> str:
        return f"EnergySums({self._nonzero()!r})"

    def _nonzero(self) -> dict[str, list[int]]:
        return {k: v for k, v in self.kinds.items() if any(v)}

    def add(self, kind: str, energy: float, anchor: int, sign: int = 1) -> None:
        """A row of ``kind`` joins (``sign=1``) or leaves (``sign=-1``) the sums."""
        held = self.kinds.get(kind)
        if held is None:
            held = self.kinds[kind] = [0, 0, 0]
        held[0] += sign
        held[1] += sign * anchor
        held[2] += sign * exact(energy)
        self.changed.add(kind)

    def add_rows(self, rows: Iterable[tuple[str, float, int]], sign: int = 1) -> None:
        """``add(kind, energy, anchor, sign)`` for each row: by kind, each distinct
        balance made exact once (a consolidation buries half a million rows, most of
        them at a handful of balances)."""
        by_kind: dict[str, tuple[list[float], list[int]]] = {}
        for kind, energy, anchor in rows:
            lists = by_kind.get(kind)
            if lists is None:
                lists = by_kind[kind] = ([], [])
            lists[0].append(energy)
            lists[1].append(anchor)
        for kind, (energies, anchors) in by_kind.items():
            held = self.kinds.get(kind)
            if held is None:
                held = self.kinds[kind] = [0, 0, 0]
            held[0] += sign * len(energies)
            held[1] += sign * sum(anchors)
            held[2] += sign * sum(exact(e) * n for e, n in Counter(energies).items())
            self.changed.add(kind)

    def totals(self, tick: int, upkeep: float) -> dict[str, int]:
        """Each kind's exact balance at ``tick`` (kinds with no row left out)."""
        u = exact(upkeep)
        return {
            kind: energies - u * (count * tick - anchors)
            for kind, (count, anchors, energies) in self.kinds.items()
            if count
        }

    def write(self, conn: sqlite3.Connection) -> None:
        """Write the kinds changed since read (a kind with nothing left: deleted)."""
        for kind in sorted(self.changed):
            count, anchors, energies = self.kinds.get(kind, (0, 0, 0))
            if count or anchors or energies:
                conn.execute(
                    "INSERT INTO energy_sums (kind, entries, anchors, energy) "
                    "VALUES (?, ?, ?, ?) ON CONFLICT (kind) DO UPDATE SET "
                    "entries = excluded.entries, anchors = excluded.anchors, "
                    "energy = excluded.energy",
                    (kind, count, anchors, str(energies)),
                )
            else:
                conn.execute("DELETE FROM energy_sums WHERE kind = ?", (kind,))
        self.changed.clear()


def read_sums(conn: sqlite3.Connection) -> EnergySums:
    """The sums as the store holds them."""
    return EnergySums(
        {
            str(kind): [int(count), int(anchors), int(energy)]
            for kind, count, anchors, energy in conn.execute(
                "SELECT kind, entries, anchors, energy FROM energy_sums"
            )
        }
    )


def scan_sums(conn: sqlite3.Connection) -> EnergySums:
    """The sums of the rows as they are (a scan of every living, unpinned row)."""
    sums = EnergySums()
    sums.add_rows(
        (kind_name(kind), float(energy), int(anchor))
        for kind, energy, anchor in conn.execute(
            "SELECT kind, energy, anchor FROM entries WHERE alive = 1 AND pinned = 0"
        )
    )
    return sums
