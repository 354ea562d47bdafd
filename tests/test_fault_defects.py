"""Defects the fault suite (scripts/fault_suite.py) found, each held here by a quick test."""

from __future__ import annotations

import shutil
from pathlib import Path

import apsw
import numpy as np
import pytest

from oaken import api
from oaken.config import Config, EmbedderConfig, PathsConfig
from oaken.index import indexer, keyword
from oaken.index.embed_cache import EmbedCache
from oaken.search.engine import search
from tests.test_disk_full import _mount, _unmount

MAIL = Path(__file__).parent / "data" / "search"


def test_the_embedding_cache_on_a_full_disk_raises_the_full_disk(tmp_path: Path) -> None:
    """Before: SQLite rolled back itself, `with db:` rolled back again and the user read
    'SQLError: cannot rollback - no transaction is active' instead of the disk being full."""
    mount = _mount("1m")
    try:
        cache = EmbedCache(mount / "embed_cache.db")
        with pytest.raises(apsw.FullError):
            for n in range(1000):  # 1.5 KB a vector: fills the 1 MB disk
                cache.put_many("m", [(f"{n}-{i}".encode(), np.ones(384, dtype=np.float32)) for i in range(50)])
    finally:
        _unmount(mount)


def test_text_that_is_not_utf8_inside_index_db_is_damage_not_a_traceback(tmp_path: Path) -> None:
    """Garbage inside a sound page passes quick_check; reading it raised UnicodeDecodeError out of
    the search (a traceback; the daemon said internal_error)."""
    src = tmp_path / "mail"
    shutil.copytree(MAIL, src)
    cfg = Config(paths=PathsConfig(data_dir=str(tmp_path / "home")), embedder=EmbedderConfig(model="none"))
    api.import_mail([src], config=cfg)
    indexer.reindex(cfg, keyword_only=True)
    db = apsw.Connection(str(keyword.index_path(tmp_path / "home")))
    db.execute("UPDATE messages SET subject = CAST(x'6e756cb2' AS TEXT)")
    db.close()
    response = search("meeting", config=cfg)
    assert response.degraded and response.degraded_reason == "keyword_index_unavailable"
    assert any("not UTF-8" in w and "reindex --rebuild" in w for w in response.warnings), response.warnings


def test_a_folded_first_header_line_is_skipped_not_the_end_of_the_headers(tmp_path: Path) -> None:
    """Before: the envelope said 'no headers', so Subject and Message-ID were lost and the message
    could not be found by its subject (the email package skips that line and reads on)."""
    from oaken import envelope

    raw = (b" folded first line\r\nSubject: zebra crossing\r\nMessage-ID: <fold1@example.com>\r\n\r\n"
           b"body words here\r\n")
    env = envelope.read(raw)
    assert (env.subject, env.message_id) == ("zebra crossing", "fold1@example.com")
    assert env.problem == "FirstHeaderLineIsContinuationDefect"
    src = tmp_path / "mail"
    src.mkdir()
    (src / "1.eml").write_bytes(raw)
    cfg = Config(paths=PathsConfig(data_dir=str(tmp_path / "home")), embedder=EmbedderConfig(model="none"))
    api.import_mail([src], config=cfg)
    indexer.reindex(cfg, keyword_only=True)
    assert [h.message_id for h in search("zebra", config=cfg).hits] == ["fold1@example.com"]
    # and with an mbox From_ line after the folded one (the fault suite's hostile message)
    env = envelope.read(b" folded\r\nFrom someone@example.com Mon Mar  4 10:00:00 2024\r\nSubject: zebra\r\n"
                        b"Message-ID: <fold2@example.com>\r\n\r\nbody\r\n")
    assert (env.subject, env.message_id) == ("zebra", "fold2@example.com")


def test_an_offset_near_the_largest_integer_does_not_break_the_vector_side(tmp_path: Path) -> None:
    """Before: offset + limit went to LanceDB as the vector side's depth and overflowed its 32-bit
    limit: degraded 'error' with Python's OverflowError text in the warning."""
    src = tmp_path / "mail"
    shutil.copytree(MAIL, src)
    cfg = Config(paths=PathsConfig(data_dir=str(tmp_path / "home")), embedder=EmbedderConfig(model="concept"))
    api.import_mail([src], config=cfg)
    indexer.reindex(cfg)
    response = search("meeting", config=cfg, offset=2**31 - 11, limit=10)
    assert not response.degraded, response.warnings
    assert response.hits == () and not any("Error" in w for w in response.warnings)
    assert search("meeting", config=cfg).hits  # the first page is as before


def test_damage_a_check_found_is_said_by_every_search_until_the_rebuild(tmp_path: Path) -> None:
    """Garbage inside b-tree pages can leave SQLite answering wrong without an error; a search does
    not run quick_check (0.2 s+). Before: `oaken status` said 'corrupt' and searches went on
    answering from the damaged file as if whole. Now what a check finds is remembered beside the
    file, and searches say keyword_index_unavailable until reindex swaps in a rebuilt index.db."""
    src = tmp_path / "mail"
    shutil.copytree(MAIL, src)
    home = tmp_path / "home"
    cfg = Config(paths=PathsConfig(data_dir=str(home)), embedder=EmbedderConfig(model="none"))
    api.import_mail([src], config=cfg)
    indexer.reindex(cfg, keyword_only=True)
    assert not search("meeting", config=cfg).degraded
    path = keyword.index_path(home)
    real = Path(path).resolve()
    with open(real, "r+b") as f:  # garbage over a page in the middle, as the fault suite writes
        size = real.stat().st_size
        f.seek(size // 2 // 4096 * 4096)
        f.write(b"\xa5" * 4096)
    assert keyword.status(home)["state"] == "corrupt"
    response = search("meeting", config=cfg)
    assert response.degraded and response.degraded_reason == "keyword_index_unavailable"
    report = indexer.reindex(cfg, keyword_only=True)
    assert report.rebuilt and "damaged" in (report.rebuild_reason or "")
    assert not search("meeting", config=cfg).degraded and keyword.status(home)["state"] == "ok"
