"""A query that always answers with one row (a count, a PRAGMA, a row of `meta`) gets none only from
a damaged file: the error names the file and the query, instead of a TypeError on None."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest

from oaken.errors import IndexUnavailable, StoreError
from oaken.index import keyword
from oaken.sqlite_rows import one_row, one_value
from oaken.store import Store


def test_one_row_and_one_value_read_the_row(tmp_path: Path) -> None:
    db = apsw.Connection(str(tmp_path / "x.db"))
    db.execute("CREATE TABLE t(a, b); INSERT INTO t VALUES (1, 'x')")
    assert one_row(db, "SELECT a, b FROM t WHERE a = ?", (1,)) == (1, "x")
    assert one_value(db, "SELECT count(*) FROM t") == 1


def test_a_missing_row_of_raw_db_names_the_file_and_the_query(tmp_path: Path) -> None:
    path = tmp_path / "raw.db"
    with Store(path) as store:
        store.db.execute("DELETE FROM meta WHERE key = 'seq'")
        with pytest.raises(StoreError) as caught:
            store.seq()
    said = str(caught.value)
    assert str(path) in said and "SELECT value FROM meta WHERE key = 'seq'" in said and "damaged" in said


def test_a_missing_row_of_index_db_is_a_damaged_index(tmp_path: Path) -> None:
    writer = keyword.KeywordWriter(tmp_path)
    try:
        writer.db.execute("DELETE FROM meta WHERE key = 'seq'")
        with pytest.raises(IndexUnavailable) as caught:
            writer.seq()
    finally:
        writer.close()
    assert caught.value.state == "corrupt"
    assert "meta WHERE key = 'seq'" in str(caught.value) and "oaken reindex --rebuild" in str(caught.value)
