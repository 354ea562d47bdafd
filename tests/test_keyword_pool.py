"""Read connections to index.db kept between searches (oaken/index/keyword/pool.py), on real
index.db files: reused while the file is the live one, never after a rebuild replaced it, never
after a failure, never twice at once, and never across a fork."""

from __future__ import annotations

import os
from pathlib import Path

import apsw
import pytest

from oaken import config as config_mod
from oaken.config import Config
from oaken.errors import IndexUnavailable
from oaken.index import indexer, keyword
from oaken.index.keyword import KeywordFilters, KeywordIndex, quote
from oaken.index.keyword.pool import MAX_IDLE, POOL
from tests.index_fixtures import open_index


@pytest.fixture(autouse=True)
def _empty_pool() -> None:
    POOL.clear()


def _hits(idx: KeywordIndex) -> list[tuple[int, int]]:
    return [(h.message, h.chunk) for h in idx.query(quote("enron"), KeywordFilters(), 10)]


def test_a_closed_index_gives_its_connection_to_the_next_search(indexed: Config) -> None:
    with open_index(indexed) as first:
        conn = first.db
        expected = _hits(first)
        assert expected
    with open_index(indexed) as second:
        assert second.db is conn  # kept open between the two
        assert _hits(second) == expected
    first.close()  # a second close gives nothing back: two searches never share a connection
    with open_index(indexed) as a, open_index(indexed) as b:
        assert a.db is not b.db
        assert _hits(a) == _hits(b) == expected


def test_a_file_written_since_is_opened_anew(indexed: Config) -> None:
    """A kept connection's page cache may hold what was since written over from outside SQLite (a
    damaged disk): a file whose size or time changed is not read through one."""
    with open_index(indexed) as idx:
        kept = idx.db
    real = os.path.realpath(keyword.index_path(config_mod.resolve_data_dir(indexed)))
    st = os.stat(real)
    os.utime(real, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    with open_index(indexed) as idx:
        assert idx.db is not kept
        assert _hits(idx)
    with pytest.raises(apsw.ConnectionClosedError):
        kept.execute("SELECT 1")


def test_at_most_max_idle_connections_wait_per_file(indexed: Config) -> None:
    opened = [open_index(indexed) for _ in range(MAX_IDLE + 2)]
    for idx in opened:
        idx.close()
    assert sum(len(v) for v in POOL._idle.values()) == MAX_IDLE


def test_a_rebuilt_index_db_is_opened_anew_and_the_old_file_let_go(indexed: Config) -> None:
    data_dir = config_mod.resolve_data_dir(indexed)
    old = os.path.realpath(keyword.index_path(data_dir))
    with open_index(indexed) as idx:
        before = _hits(idx)
        kept = idx.db
    indexer.reindex(indexed, rebuild=True, keyword_only=True)
    new = os.path.realpath(keyword.index_path(data_dir))
    assert new != old and not os.path.exists(old)
    with open_index(indexed) as idx:
        assert idx.db is not kept
        assert Path(idx.db.filename) == Path(new)
        assert _hits(idx) == before  # the same mail, rebuilt
    assert all(path != old for path, _ in POOL._idle)
    assert not [f for f in os.listdir("/proc/self/fd") if os.path.realpath(f"/proc/self/fd/{f}") == old]


def test_a_connection_that_failed_is_closed_not_kept(indexed: Config) -> None:
    with open_index(indexed) as idx:
        broken = idx.db
        with pytest.raises(Exception):
            idx._run("SELECT * FROM no_such_table", [])
    with open_index(indexed) as idx:
        assert idx.db is not broken
    with pytest.raises(apsw.ConnectionClosedError):
        broken.execute("SELECT 1")


def test_a_damaged_index_db_is_reported_though_a_connection_waits(indexed: Config) -> None:
    """The damage mark (a quick_check's finding) is read at every open, pooled or not."""
    open_index(indexed).close()
    path = keyword.index_path(config_mod.resolve_data_dir(indexed))
    keyword.schema.mark_damaged(path, "page 7: btree broken")
    with pytest.raises(IndexUnavailable, match="btree broken"):
        open_index(indexed)


def test_a_forked_child_never_uses_its_parent_s_connections(indexed: Config) -> None:
    open_index(indexed).close()
    assert POOL._idle
    pid = os.fork()
    if pid == 0:  # the child: an empty pool, and a search of its own works
        code = 1
        try:
            if not POOL._idle:
                with open_index(indexed) as idx:
                    code = 0 if _hits(idx) else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    with open_index(indexed) as idx:  # the parent's connection is still good
        assert _hits(idx)
