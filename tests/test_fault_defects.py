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
