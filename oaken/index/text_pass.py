"""After each keyword pass: the text index ([index] keyword_engine = "tantivy") brought level with
index.db, or deleted when the engine is FTS5 again.

A failure here fails nothing else: index.db is already up to date and searches rank with FTS5
until a later pass brings the text index level (oaken/index/keyword/text/writer.py).
"""

from __future__ import annotations

from pathlib import Path

import apsw

from oaken import extras, log
from oaken.config import Config
from oaken.errors import IndexUnavailable
from oaken.index import keyword
from oaken.index.keyword.text.schema import drop
from oaken.store import Store


def follow_text(cfg: Config, data_dir: Path, store: Store) -> dict | None:
    """What was done to the text index (None: nothing to do, the engine is FTS5)."""
    if cfg.index.keyword_engine != "tantivy":
        if drop(data_dir):
            log.get("oaken.index").info("index.text_dropped", path=str(data_dir), reason="keyword_engine fts5")
        return None
    if extras.tantivy_missing():
        log.get("oaken.index").warning("index.text_unavailable", reason=extras.TANTIVY_INSTALL + "; ranking with FTS5")
        return {"text": "not installed"}
    from oaken.index.keyword.text import writer
    from oaken.index.keyword.text.schema import Sidecar, repeats

    def changed(seq: int) -> list[int]:
        out: set[int] = set()
        while page := store.changes_since(seq, limit=5000):
            out.update(c.message for c in page)
            seq = page[-1].seq
        return sorted(out)

    try:
        with keyword.KeywordIndex(data_dir, cfg.index, fresh=True) as idx:
            want = Sidecar(idx.generation(), idx.seq(), repeats(idx.weights))
            report = writer.follow(data_dir, idx.db, changed, want, *idx.counts())
        drop(data_dir, keep=want.generation)  # those of index.db files no longer live
    except (ValueError, OSError, apsw.Error, IndexUnavailable) as e:
        return _failed(data_dir, e)
    if report["text"] != "level":
        log.get("oaken.index").info("index.text_done", **report)
    return report


def prepare_text(cfg: Config, data_dir: Path, built: keyword.KeywordWriter) -> dict | None:
    """Before a rebuilt index.db is swapped in: its text index, built from it, so that searches
    reading the new index.db find a text index that mirrors it at once (None: the engine is FTS5)."""
    if cfg.index.keyword_engine != "tantivy" or extras.tantivy_missing():
        return None
    from oaken.index.keyword.text import writer
    from oaken.index.keyword.text.schema import Sidecar, repeats

    try:
        weights = keyword.KeywordIndex.weights_of(cfg.index)
        want = Sidecar(built.generation, built.seq(), repeats(weights))
        report = {"text": "built", "chunks": writer.build(data_dir, built.db, want)}
    except (ValueError, OSError, apsw.Error) as e:
        return _failed(data_dir, e)
    log.get("oaken.index").info("index.text_done", reason="index.db rebuilt", **report)
    return report


def _failed(data_dir: Path, e: BaseException) -> dict:
    log.get("oaken.index").warning(
        "index.text_failed", path=str(data_dir), error=str(e), note="searches rank with FTS5 meanwhile"
    )
    return {"text": "failed", "error": str(e)}
