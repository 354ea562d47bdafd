"""Keeps index.db in step with raw.db by following raw.db's change feed.

`Store.changes_since(seq)` lists every message changed or deleted after `seq` (triggers bump
messages.change_seq on any change; a deletion leaves a tombstone). For each change:
- new bytes (a content hash the index has not seen, or an older chunker): parse, chunk, rewrite;
- same bytes (labels, folders, flags, disposition, thread changed): update the filter fields only;
- a tombstone: the message leaves the index.
The seq reached is stored in index.db in the same transaction as the batch, so a kill at any
point resumes where it stopped. The batches themselves are oaken.index.feed_batches'.

The keyword pass is self-contained: `update` runs it first and then, unless keyword_only, the
vector pass (`oaken.index.embedding.embed_pending`), which reads the chunks index.db holds.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apsw

from oaken import chunking, diskspace, extras, log
from oaken import config as config_mod
from oaken.config import Config
from oaken.errors import IndexUnavailable, OakenError, StoreError
from oaken.index import keyword, text_pass, writelock
from oaken.index.feed_batches import Progress, follow
from oaken.index.keyword import checks
from oaken.index.keyword.schema import known_damage, mark_damaged
from oaken.store import Store


@dataclass(frozen=True)
class IndexReport:
    indexed: int = 0  # messages parsed and (re)written
    updated: int = 0  # messages whose filter fields changed, text untouched
    deleted: int = 0
    problems: int = 0  # messages indexed with a parse problem (still findable by headers)
    chunks: int = 0  # chunks written
    seq: int = 0  # raw.db change seq the index has reached
    seconds: float = 0.0
    rebuilt: bool = False  # index.db was built again (not a first build): rebuild_reason says why
    vectors: dict[str, Any] | None = field(default=None)  # the vector pass's report, if it ran
    rebuild_reason: str | None = None
    text: dict[str, Any] | None = None  # what the text index pass did (keyword_engine = "tantivy")


def _open_store(data_dir: Path) -> Store:
    path = data_dir / "raw.db"
    if not path.exists():
        raise StoreError(f"{path}: no raw.db yet; run `oaken import` or `oaken sync` first")
    return Store(path, readonly=True)


def keyword_pass(cfg: Config, *, progress: Progress | None = None, rebuild: bool = False) -> IndexReport:
    """Bring index.db up to date with raw.db.

    A missing index.db, and one that cannot be followed (`rebuild` asked for it; damaged; made by
    another version of Oaken or another chunker; or raw.db was replaced under it), is built whole
    beside the live one and swapped in when complete: a search meanwhile reads the old index.db,
    never one half built. Runs holding the writer lock (oaken.index.writelock)."""
    data_dir = config_mod.ensure_data_dir(cfg)
    try:
        return _keyword_pass(cfg, data_dir, progress=progress, rebuild=rebuild)
    except (apsw.Error, OSError) as e:
        # the last batch (or the whole new build) is rolled back; the live index.db is as before it
        if not diskspace.is_full(e, data_dir / "index.db"):
            raise
        raise keyword.unavailable(keyword.index_path(data_dir), "full", str(e)) from None


def _keyword_pass(cfg: Config, data_dir: Path, *, progress: Progress | None, rebuild: bool) -> IndexReport:
    started = time.perf_counter()
    counts = {"indexed": 0, "updated": 0, "deleted": 0, "problems": 0, "chunks": 0}
    with writelock.held(data_dir, "keyword pass"), _open_store(data_dir) as store:
        reason: str | None = "asked for (--rebuild)" if rebuild else None
        writer = None if rebuild else _live_writer(data_dir, store)
        if isinstance(writer, str):
            reason, writer = writer, None
        seq = 0
        prepared: dict | None = None  # the text index of a rebuilt index.db, made before its swap
        if writer is not None:
            try:
                before = writer.counts()[0]
                seq = follow(store, writer, cfg, counts, progress, fresh=False)
                if counts["indexed"] >= max(before, BULK_MESSAGES):  # a bulk load: see merge_segments
                    writer.merge_segments()
            except (apsw.CorruptError, apsw.NotADBError) as e:  # damage the check did not reach
                reason = f"damaged ({type(e).__name__}: {e})"
                counts = dict.fromkeys(counts, 0)
            finally:
                writer.close()
        if writer is None or reason is not None:
            if reason is not None:
                log.get("oaken.index").warning(
                    "index.rebuilding",
                    path=str(keyword.index_path(data_dir)),
                    reason=reason,
                    note="building a new index.db from raw.db beside it",
                )
            keyword.discard_leftovers(data_dir)
            writer = keyword.KeywordWriter.build(data_dir)
            try:
                seq = follow(store, writer, cfg, counts, progress, fresh=True)
                generation = writer.generation
                prepared = text_pass.prepare_text(cfg, data_dir, writer)  # before the swap: never without one
                writer.publish()
            except BaseException:
                writer.discard()
                raise
            _SOUND.add(_identity(keyword.index_path(data_dir), generation))  # built here: checked by building
        text = text_pass.follow_text(cfg, data_dir, store)
        if prepared is not None and text is not None and text["text"] == "level":
            text = prepared  # what this pass did to it
    report = IndexReport(
        indexed=counts["indexed"],
        updated=counts["updated"],
        deleted=counts["deleted"],
        problems=counts["problems"],
        chunks=counts["chunks"],
        seq=seq,
        seconds=time.perf_counter() - started,
        rebuilt=reason is not None,
        rebuild_reason=reason,
        text=text,
    )
    log.get("oaken.index").info("index.keyword_done", **{k: v for k, v in report.__dict__.items() if k != "vectors"})
    return report


# a pass adding at least this many messages, and at least as many as index.db held, is a bulk
# load: FTS5's segments are merged after it (KeywordWriter.merge_segments)
BULK_MESSAGES = 2000

# index.db files this process has found sound (quick_check) or built: (device, inode, generation)
_SOUND: set[tuple[int, int, str | None]] = set()


def _identity(path: Path, generation: str | None) -> tuple[int, int, str | None]:
    st = os.stat(path)
    return st.st_dev, st.st_ino, generation


def _live_writer(data_dir: Path, store: Store) -> keyword.KeywordWriter | str | None:
    """The live index.db opened for following raw.db; None when there is none yet; or why it
    must be built again instead. It is trusted only after SQLite's quick_check, once per process
    and file (0.2 s at Enron's 26 MB, 0.5 s at 100 MB; a large file once a day, see
    oaken.index.keyword.checks): a garbled page would otherwise be kept, and
    search would find nothing in it while `reindex` reported success. Damage done later, under a
    long-lived process (the daemon), is found when a write meets it (keyword_pass rebuilds then),
    and at once by `oaken status` and by the next `oaken reindex`."""
    path = keyword.index_path(data_dir)
    if not path.exists():
        return None
    known = known_damage(path)  # found by `oaken status` or another process's check since
    if known is not None:
        return f"damaged ({known})"
    try:
        writer = keyword.KeywordWriter(data_dir)
    except IndexUnavailable as e:
        state = getattr(e, "state", None)
        if state == "stale":
            return "made by another version of Oaken"
        if state == "corrupt":
            return f"damaged ({getattr(e, 'detail', e)})"
        raise  # locked: the other holder is not an Oaken writer (they take the writer lock)
    try:
        identity = _identity(path, writer.generation)
        if identity not in _SOUND:
            if checks.due(path):
                found = writer.damage()
                if found is not None:
                    writer.close()
                    mark_damaged(path, found)  # searches say so until the rebuilt index.db is swapped in
                    return f"damaged ({found})"
                checks.mark_checked(path)
            _SOUND.add(identity)
        # raw.db was replaced (what the index holds is not its mail), or another chunker made its
        # chunks (an upgrade): rebuilt, as for another schema
        if writer.seq() > store.seq():
            writer.close()
            return "raw.db was replaced: the index holds other mail"
        if writer.other_chunker(chunking.CHUNKER_VERSION):
            writer.close()
            return "made by another chunker version"
    except (IndexUnavailable, apsw.CorruptError, apsw.NotADBError) as e:
        writer.close()
        if getattr(e, "state", "corrupt") != "corrupt":
            raise
        return f"damaged ({getattr(e, 'detail', e)})"
    return writer


def pending(cfg: Config, *, rebuild: bool = False) -> int:
    """How many changes the next update (or rebuild) will read: a progress bar's total."""
    data_dir = config_mod.resolve_data_dir(cfg)
    seq = 0
    if not rebuild and keyword.index_path(data_dir).exists():
        try:
            with keyword.KeywordIndex(data_dir, cfg.index) as idx:
                seq = idx.seq()
        except IndexUnavailable:
            seq = 0
    with _open_store(data_dir) as store:
        return store.count_changes_since(seq)


def behind(cfg: Config) -> bool:
    """Whether raw.db holds changes index.db has not followed (cheap: two one-row reads; no
    index.db yet counts as behind when raw.db exists). The daemon asks this every second."""
    data_dir = config_mod.resolve_data_dir(cfg)
    raw_path = data_dir / "raw.db"
    if not raw_path.exists():
        return False
    with Store(raw_path, readonly=True) as store:
        target = store.seq()
    if not keyword.index_path(data_dir).exists():
        return target > 0
    try:
        with keyword.KeywordIndex(data_dir, cfg.index) as idx:
            return idx.seq() != target  # greater: raw.db was replaced, and the pass rebuilds
    except IndexUnavailable:
        return True  # stale, damaged or locked: the pass rebuilds it or reports why not


def upkeep_due(cfg: Config) -> bool:
    """Whether vectors/ waits for upkeep a pass left for later: the cleanup after a maintenance's
    retention (VectorUpkeep.tidy), or a maintenance a daemon's pass did not do in its write (one
    small JSON read; VectorUpkeep.finish_pass). The daemon asks this once no change waits."""
    from oaken.index.vector_files import cleanup_due, maintenance_due

    if cfg.embedder.model == "none":
        return False
    data_dir = config_mod.resolve_data_dir(cfg)
    # upkeep this install cannot do (the vectors extra removed) is not asked for again and again
    return (cleanup_due(data_dir) or maintenance_due(data_dir)) and not extras.vectors_missing(cfg.embedder.model)


def _vector_pass(
    cfg: Config, progress: Progress | None, stop: threading.Event | None = None, *, upkeep_later: bool = False
) -> dict[str, Any] | None:
    """The embedding pass of the vector side, after the keyword pass; its failure is reported, not
    raised: keyword search is complete without it."""
    problem = extras.vectors_problem(cfg.embedder.model)
    if problem is not None:  # a keyword-only install whose config asks for meaning search
        return {"error": problem, "code": "not_installed"}
    try:
        from oaken.index import embedding
    except ImportError:  # model "none" on a keyword-only install
        return None

    try:
        report = embedding.embed_pending(cfg, progress=progress, stop=stop, upkeep_later=upkeep_later)
    except OakenError as e:
        log.get("oaken.index").warning("index.vectors_failed", error=str(e))
        return {"error": str(e), "code": getattr(e, "code", "error")}
    except Exception as e:  # noqa: BLE001 - LanceDB says ENOSPC as a RuntimeError; anything else is a bug
        vectors_dir = config_mod.ensure_data_dir(cfg) / "vectors"
        if not diskspace.is_full(e, vectors_dir):
            raise
        # LanceDB commits a version whole or not at all: what was stored stays; the rest is pending
        message = diskspace.full_message(
            vectors_dir, fix="run `oaken reindex`: embedding goes on with the chunks still pending"
        )
        log.get("oaken.index").warning("index.vectors_failed", error=message)
        return {"error": message, "code": "disk_full"}
    return dataclasses.asdict(report) if dataclasses.is_dataclass(report) else {"result": report}


def update(
    config: Config | None = None,
    *,
    keyword_only: bool = False,
    progress: Progress | None = None,
    vector_progress: Progress | None = None,
    stop: threading.Event | None = None,
    upkeep_later: bool = False,
) -> IndexReport:
    """Index what changed in raw.db since the last run: keyword first, then (unless keyword_only) vectors.
    `stop` (the daemon stopping) ends the vector pass early; what it left stays pending.
    `upkeep_later`: a maintenance of vectors/ that falls due is left for a later pass without it
    (the daemon runs one once nothing changes: VectorUpkeep.finish_pass).

    `progress(n)` counts messages of the keyword pass, `vector_progress(n)` chunks embedded.
    A damaged index.db is built again (and the report says why); a locked one raises IndexUnavailable."""
    cfg = config if config is not None else config_mod.load()
    report = keyword_pass(cfg, progress=progress)
    if not keyword_only:
        vec = _vector_pass(cfg, vector_progress, stop, upkeep_later=upkeep_later)
        if vec is not None:
            report = dataclasses.replace(report, vectors=vec)
    return report


def _drop_vectors(data_dir: Path, cfg: Config) -> None:
    try:
        from oaken.index import vectors
    except ImportError:
        return
    # marked as being rebuilt: until the embedding pass has embedded every chunk again, a search
    # says its vector side is degraded rather than answer from a part of the mail
    vectors.drop(data_dir, rebuilding="asked for (--rebuild)" if cfg.embedder.model != "none" else None)


def reindex(
    config: Config | None = None,
    *,
    rebuild: bool = False,
    keyword_only: bool = False,
    progress: Progress | None = None,
    vector_progress: Progress | None = None,
) -> IndexReport:
    """`oaken reindex`: bring the indexes up to date; with rebuild, build them again from raw.db.

    It holds the writer lock for the whole run: a second `oaken reindex` (or the daemon's
    indexing) waits for it, and then finds nothing left to do. A rebuilt index.db is swapped in
    whole; vectors/ is emptied after that and is reported as being rebuilt until it is whole."""
    cfg = config if config is not None else config_mod.load()
    data_dir = config_mod.ensure_data_dir(cfg)
    with writelock.held(data_dir, "oaken reindex" + (" --rebuild" if rebuild else "")):
        report = keyword_pass(cfg, progress=progress, rebuild=rebuild)
        if not keyword_only:
            if rebuild:
                _drop_vectors(data_dir, cfg)
            vec = _vector_pass(cfg, vector_progress)
            if vec is not None:
                report = dataclasses.replace(report, vectors=vec)
    return report
