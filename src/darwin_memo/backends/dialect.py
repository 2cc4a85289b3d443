"""The few places where SQLite's SQL and PostgreSQL's differ, as fragments.

The SQL stores (``sqlstore``, ``sqlsearch``, ``sqlwrites``, ``pages``, ``organic_rows``)
write each statement once. Where both databases accept the same text they use it as
it is: upserts are ``INSERT ... ON CONFLICT (key) DO UPDATE SET c = excluded.c`` or
``ON CONFLICT DO NOTHING`` (SQLite from 3.24), never SQLite's ``INSERT OR REPLACE``
or ``INSERT OR IGNORE``. Where the dialects really differ, a statement asks its
store's ``Dialect`` for the fragment (``SQLITE`` or ``POSTGRES``)::

    f"UPDATE t SET x = {d.greatest('0.0', 'x')} WHERE {d.unindexed('alive')} = 1"

The one difference left outside this module is the placeholder: the statements use
``?`` (sqlite3's ``qmark`` paramstyle) and ``postgres.PgConnection`` turns each into
psycopg's ``%s`` (``format``), which is all it changes in a statement.
"""

from __future__ import annotations

from typing import Any

__all__ = ["POSTGRES", "SQLITE", "Dialect"]


class Dialect:
    """One database's spelling of what SQLite and PostgreSQL spell differently.

    A plain class, not a dataclass: it is imported by every one-shot CLI call, and
    generating a frozen dataclass's methods costs more than the rest of this module.
    """

    __slots__ = ("name", "postgres")

    def __init__(self, name: str) -> None:
        #: ``"sqlite"`` or ``"postgres"`` (the backend's ``kind``).
        self.name = name
        self.postgres = name == "postgres"

    def __repr__(self) -> str:
        return f"Dialect({self.name!r})"

    def unindexed(self, column: str) -> str:
        """``column`` in a condition that should not pick an index.

        SQLite's unary ``+`` (``+alive``) keeps its planner from walking the ``alive``
        index where a look-up of a few rowids is what is wanted. PostgreSQL has no such
        hint (there ``+alive`` is arithmetic), and its planner, which keeps statistics,
        needs none.
        """
        return column if self.postgres else f"+{column}"

    def greatest(self, *values: str) -> str:
        """The largest of ``values`` (SQL expressions) in one row: SQLite's scalar
        ``MAX(a, b)``, PostgreSQL's ``GREATEST`` (its ``MAX`` is an aggregate only)."""
        return f"{'GREATEST' if self.postgres else 'MAX'}({', '.join(values)})"

    def least(self, *values: str) -> str:
        """The smallest of ``values`` in one row: ``MIN(a, b)`` or ``LEAST``."""
        return f"{'LEAST' if self.postgres else 'MIN'}({', '.join(values)})"

    def returning_rowid(self) -> str:
        """What follows an ``INSERT INTO entries`` whose new ``rowid`` is wanted.

        psycopg has no ``lastrowid``, so PostgreSQL returns it (``RETURNING rowid``);
        sqlite3's cursor has it, and ``RETURNING`` needs SQLite 3.35, newer than some
        Pythons ship.
        """
        return " RETURNING rowid" if self.postgres else ""

    def inserted_rowid(self, cursor: Any) -> int:
        """The ``rowid`` of the row the INSERT just run gave (see ``returning_rowid``)."""
        if self.postgres:
            row = cursor.fetchone()
            return int(row[0])
        return int(cursor.lastrowid or 0)

    def json_number(self, field: str, default: int) -> str:
        """A number kept in a row's ``data`` JSON object (left out at its default)."""
        if self.postgres:
            return f"COALESCE(CAST(data::jsonb ->> '{field}' AS DOUBLE PRECISION), {default})"
        return f"COALESCE(json_extract(data, '$.{field}'), {default})"

    def contains(self, column: str) -> str:
        """Whether ``lower(column)`` contains the next parameter."""
        return f"{'strpos' if self.postgres else 'instr'}(lower({column}), ?) > 0"

    @property
    def collate_c(self) -> str:
        """Appended to a text expression ordered by code point, as Python orders
        strings: SQLite's default collation does; PostgreSQL's needs ``COLLATE "C"``."""
        return ' COLLATE "C"' if self.postgres else ""


SQLITE = Dialect("sqlite")
POSTGRES = Dialect("postgres")
