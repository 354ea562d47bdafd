"""Queries that always answer with one row: an aggregate (`count(*)`), a PRAGMA, an INSERT or
UPDATE ... RETURNING of a row the schema keeps (raw.db's and index.db's `meta`).

apsw's `fetchone()` gives None when no row comes back; for these queries that only happens to a
file that is damaged or was changed outside Oaken, and indexing the None would raise a TypeError
that names neither. Here it is an OakenError naming the file and the query.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from oaken.errors import StoreError

if TYPE_CHECKING:
    import apsw


def one_row(
    db: apsw.Connection,
    sql: str,
    bindings: apsw.Bindings | None = None,
    *,
    damaged: Callable[[str], Exception] | None = None,
) -> tuple[Any, ...]:
    """The row `sql` answers with. None raises `damaged(detail)` (detail names the query; an
    index builds its own IndexUnavailable from it), by default a StoreError naming the file too."""
    row = db.execute(sql, bindings).fetchone()
    if row is None:
        detail = f"`{sql}` returned no row"
        if damaged is not None:
            raise damaged(detail)
        raise StoreError(f"{db.filename}: {detail}; the file is damaged or was changed outside Oaken")
    return row  # apsw's rows are tuples


def one_value(
    db: apsw.Connection,
    sql: str,
    bindings: apsw.Bindings | None = None,
    *,
    damaged: Callable[[str], Exception] | None = None,
) -> Any:
    """The first column of the row `sql` answers with (one_row says what happens without one)."""
    return one_row(db, sql, bindings, damaged=damaged)[0]
