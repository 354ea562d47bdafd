"""The embedding pass: bring vectors/ up to what index.db holds, newest mail first.

Runs after the keyword pass (`oaken reindex`, the daemon) and never blocks it: keyword search is
complete long before the vectors are. It holds the writer lock (oaken.index.writelock) while it
runs. Each round it
  1. drops a store built by another embedder or chunker, or by a backend whose vectors the
     fidelity checks do not allow to be mixed with the configured one's (stale vectors are never
     mixed in); a compatible backend keeps the rows and is added to the store's record. The new
     table is marked as being rebuilt, and searches leave it out, until every chunk is in it,
  2. follows raw.db's change feed to refresh the prefilter fields (labels, folders, disposition)
     of stored rows and to remove the vectors of deleted messages,
  3. removes rows of chunks that index.db no longer holds (a message re-chunked or deleted);
     steps 2-4 look at the messages changed since the last complete pass only, when there was
     one (oaken.index.vector_plan),
  4. embeds the body chunks index.db holds and vectors/ lacks, whole messages at a time, newest
     first, through the embedding cache; a writer thread stores one window while the model
     encodes the next.
Its records in vectors/ (how far raw.db's feed was followed, the last complete pass) are
oaken.index.vector_files'; which backends may be mixed, oaken.index.backend_record's.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, Sequence

from oaken import config as config_mod
from oaken.config import Config
from oaken.index import vector_plan, writelock
from oaken.index.backend_record import (  # noqa: F401 - re-exported
    incompatible_backend,
    incompatible_with,
    int8_repair_done,
    int8_repair_due,
    stored_backends,
)
from oaken.index.embed_cache import embed_cached, open_cache
from oaken.index.embedders import Embedder, backend_of, load_embedder
from oaken.index.vector_files import (  # noqa: F401 - re-exported
    CURSOR_FILE,
    LAST_PASS_FILE,
    chunker_version,
    cleanup_due,
    followed_seq,
    forget_last_pass,
    maintenance_due,
    read_cursor,
    read_last_pass,
    rebuilding,
    vectors_path,
    write_cursor,
    write_last_pass,
)
from oaken.index.vector_files import rebuilt as rebuilt_store
from oaken.index.vector_writer import WindowWriter
from oaken.index.vectors import ChunkVector, Fingerprint, MessageFields, VectorStore

if TYPE_CHECKING:
    from oaken.index.keyword import KeywordIndex, StoredChunk
    from oaken.store import Store

# Chunks per encode call: large, so the backend's length sort pads little. On Enron's 19,721
# distinct texts, windows of 512 pad to 9.2 % more word pieces than the texts hold, 2,048 to
# 2.7 %, 8,192 to 0.85 %, one window of all to 0.3 %. A pass that may be asked to stop (the
# daemon's) takes the smaller windows: it stops between windows, and one of 8,192 chunks is ~20 s.
WINDOW_CHUNKS = 8192
STOPPABLE_WINDOW_CHUNKS = 2048


@dataclass(frozen=True)
class EmbedReport:
    model: str | None  # the embedder's fingerprint; None when [embedder] model = "none"
    chunks: int  # body chunks index.db holds
    embedded: int  # chunks written to vectors/ this run
    encoded: int  # texts the model encoded (the others came from the cache or repeated a text)
    removed: int  # rows of chunks or messages that are gone
    refreshed: int  # messages whose prefilter fields were rewritten
    pending: int  # chunks still waiting (when `limit` stopped the run)
    rebuilt: bool  # a stale store (another model or chunker) was dropped
    seconds: float


def fingerprint_of(embedder: Embedder) -> Fingerprint:
    return Fingerprint(embedder.fingerprint, embedder.dim, chunker_version())


def embed_text(chunk: StoredChunk) -> str:
    """What is embedded: the chunk's own words with its message's subject as context."""
    subject = chunk.subject.strip()
    return f"{subject}\n{chunk.text}" if subject else chunk.text


def open_store(config: Config, *, create: bool = False, upkeep_later: bool = False) -> VectorStore:
    """The vector store with the [index] settings that govern it."""
    return VectorStore(
        config_mod.resolve_data_dir(config),
        create=create,
        upkeep_later=upkeep_later,
        ann_min_rows=config.index.vector_ann_min_rows,
        retention_seconds=config.index.vector_retention_seconds,
    )


def embed_pending(
    config: Config,
    *,
    progress: Callable[[int], None] | None = None,
    limit: int | None = None,
    embedder: Embedder | None = None,
    stop: threading.Event | None = None,
    upkeep_later: bool = False,
) -> EmbedReport:
    """Embed what index.db holds and vectors/ lacks; `limit` caps the chunks embedded this call,
    `stop` ends it after the window being embedded (what is left stays pending), `upkeep_later`
    leaves a maintenance that falls due to a pass without it (VectorUpkeep.finish_pass).

    The model is loaded only when there is something to embed (or vectors/ was not made under
    these settings): a pass with nothing to do reads a few figures and returns, and one that only
    follows raw.db's changes (triage, labels, deletions) needs LanceDB but no model.

    `progress(n)` is called with the number of chunks written since the last call."""
    started = time.monotonic()
    data_dir = config_mod.resolve_data_dir(config)
    if embedder is None and config.embedder.model == "none":
        return EmbedReport(None, 0, 0, 0, 0, 0, 0, False, 0.0)
    # one writer at a time: two passes at once would each find the same chunks missing and store
    # them twice
    with writelock.held(data_dir, "embedding pass"):
        if embedder is not None:
            forget_last_pass(data_dir)  # the caller's embedder may not be the one the settings name
            return _embed(
                config, data_dir, embedder, None, progress, limit, stop, started, given=True, upkeep_later=upkeep_later
            )
        last = read_last_pass(data_dir, config)
        idle = _nothing_to_do(config, data_dir, last, upkeep_later=upkeep_later)
        if idle is not None:
            return dataclasses.replace(idle, seconds=round(time.monotonic() - started, 3))
        return _embed(config, data_dir, None, last, progress, limit, stop, started, upkeep_later=upkeep_later)


def _embed(
    config: Config,
    data_dir: Path,
    embedder: Embedder | None,
    last: dict | None,
    progress: Callable[[int], None] | None,
    limit: int | None,
    stop: threading.Event | None,
    started: float,
    *,
    given: bool = False,
    upkeep_later: bool = False,
) -> EmbedReport:
    """The pass. `embedder` None: the settings' embedder, loaded here when needed; `last` (the
    record of the last complete pass under these settings) then names its fingerprint. `given`:
    the caller chose the embedder, so no record of the settings' embedder is written."""
    from oaken.index.keyword import KeywordIndex
    from oaken.store import open_store as open_raw

    redo: Embedder | None = None
    if embedder is None and last is None:
        # Lance's import (~0.4 s) overlaps with loading the model (mostly native); joined before
        # going on either way: a model that fails to load ends the process, and an import still
        # running on another thread while Python finalizes aborts it ("PyGILState_Release")
        importing = threading.Thread(target=_import_lance, name="oaken-import-lance", daemon=True)
        importing.start()
        try:
            embedder = load_embedder(config)
        finally:
            importing.join()
        if embedder is None:
            return EmbedReport(None, 0, 0, 0, 0, 0, 0, False, 0.0)
    store = open_store(config, create=True, upkeep_later=upkeep_later)
    if embedder is None:
        assert last is not None
        fp = Fingerprint.from_key(json.dumps(last["fingerprint"]))
        if not store.exists() or store.fingerprint() != fp:  # the record no longer describes vectors/
            embedder = load_embedder(config)
    if embedder is not None:
        fp = fingerprint_of(embedder)
    with KeywordIndex(data_dir) as index, open_raw(data_dir, readonly=True) as raw:
        # rows of another index.db's chunk ids stand for other text: rebuilt (from the cache, quickly)
        generation = index.generation()
        rebuilt = store.ensure(fp, generation=generation)
        if embedder is not None:
            if not rebuilt and incompatible_backend(store, embedder, data_dir):
                # the cache holds that backend's vectors too (it is keyed by fingerprint): forget them all
                with open_cache(store.path.parent) as cache:
                    cache.drop_other_models(keep="")
                rebuilt = store.ensure(
                    fp,
                    rebuild=True,
                    generation=generation,
                    reason="vectors of a backend the fidelity checks do not allow to mix",
                )
            if int8_repair_due(embedder, data_dir):
                with open_cache(store.path.parent) as cache:
                    cache.drop_other_models(keep="")  # the wrong vectors are cached too
                if store.count():
                    rebuilt = store.ensure(
                        fp,
                        rebuild=True,
                        generation=generation,
                        reason="openvino-int8 vectors of 32-token batches, wrong on this CPU before this version",
                    )
                int8_repair_done(data_dir)
            store.record_backend(backend_of(embedder))
        raw_seq = raw.seq()
        index_state = index.chunk_state()  # read before the chunks: a later change shows as a mismatch
        plan = None
        if rebuilt:  # the record no longer describes vectors/: a pass stopped now must not trust it
            forget_last_pass(data_dir)
        # a table being filled again (a rebuild a stopped pass began) is compared whole: the
        # record of the last complete pass may still match raw.db and index.db
        whole = rebuilt or given or rebuilding(data_dir)
        since = None if whole else vector_plan.follows_on(data_dir, last, index_state, raw_seq, raw)
        if since is not None:
            plan = vector_plan.changed_plan(store, index, raw, since, raw_seq)
        if plan is None:
            plan = vector_plan.whole_plan(store, index, raw, read_cursor(data_dir), raw_seq, rebuilt)
        removed, refreshed, todo, has_rows, wanted_count = plan
        total_todo = sum(n for _, n in todo)
        if limit is not None:
            todo = _take(todo, limit)
        if todo and embedder is None:
            loaded = load_embedder(config)
            assert loaded is not None
            if fingerprint_of(loaded) != fp or incompatible_backend(store, loaded, data_dir):
                redo = loaded  # the record was wrong: the whole pass again, as without one
            else:
                embedder = loaded
                store.record_backend(backend_of(embedder))
        if redo is None:
            embedded, encoded = (
                (0, 0)
                if embedder is None
                else _embed_messages(store, index, raw, embedder, [m for m, _ in todo], progress, stop, has_rows)
            )
            complete = stop is None or not stop.is_set()
            if complete:  # the ANN index can wait for the next pass
                store.finish_pass(embedded)
            write_cursor(data_dir, raw_seq)
            pending = max(0, total_todo - embedded)
            if complete and pending == 0:
                rebuilt_store(data_dir)  # whole again: searches may use it
            if given:
                forget_last_pass(data_dir)
            elif complete and pending == 0:
                # The chunks embedded are index.db's, as far as it had followed raw.db: a pass that
                # read raw.db ahead of it (sync storing while the model loaded) covered raw.db only
                # to index.db's seq. Recorded as raw.db's, the next pass followed the feed from
                # there and never embedded the messages between (48 of 100 in the fault suite).
                write_last_pass(data_dir, config, fp, min(raw_seq, index_state[0]), index_state, wanted_count)
    if redo is not None:
        forget_last_pass(data_dir)
        return _embed(config, data_dir, redo, None, progress, limit, stop, started, upkeep_later=upkeep_later)
    return EmbedReport(
        fp.model,
        wanted_count,
        embedded,
        encoded,
        removed,
        refreshed,
        pending,
        rebuilt,
        round(time.monotonic() - started, 3),
    )


def _nothing_to_do(config: Config, data_dir: Path, last: dict | None, *, upkeep_later: bool) -> EmbedReport | None:
    """The report of a pass with nothing to do, found without LanceDB or the model; None when
    there may be work (or when index.db or raw.db cannot be read: the pass reports that). Upkeep
    that waits is work, unless this pass leaves it for later (`upkeep_later`)."""
    from oaken.errors import OakenError
    from oaken.index.keyword import KeywordIndex, index_path
    from oaken.store import open_store as open_raw

    folder = vectors_path(data_dir)
    if not index_path(data_dir).exists() or not (data_dir / "raw.db").exists() or rebuilding(data_dir):
        return None
    try:
        with KeywordIndex(data_dir) as index, open_raw(data_dir, readonly=True) as raw:
            state, raw_seq = index.chunk_state(), raw.seq()
    except OakenError:
        return None
    if not folder.is_dir():
        # nothing embedded yet, and nothing to embed
        return EmbedReport(config.embedder.model, 0, 0, 0, 0, 0, 0, False, 0.0) if state[1] == 0 else None
    if not upkeep_later and (cleanup_due(data_dir) or maintenance_due(data_dir)):
        return None  # the pass ends with the upkeep left for later (VectorUpkeep.finish_pass, tidy)
    if last is not None and last.get("raw_seq") == raw_seq and last.get("index") == list(state):
        return EmbedReport(str(last["fingerprint"]["model"]), int(last.get("chunks", 0)), 0, 0, 0, 0, 0, False, 0.0)
    return None


def _import_lance() -> None:
    try:
        import lance  # noqa: F401
    except Exception:  # noqa: BLE001 - the caller's own import reports it
        pass


def _take(todo: list[tuple[int, int]], limit: int) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    n = 0
    for m, k in todo:
        if n >= limit:
            break
        out.append((m, k))
        n += k
    return out


def _embed_messages(
    store: VectorStore,
    index: KeywordIndex,
    raw: Store,
    embedder: Embedder,
    messages: Sequence[int],
    progress: Callable[[int], None] | None,
    stop: threading.Event | None = None,
    has_rows: set[int] | frozenset[int] = frozenset(),
) -> tuple[int, int]:
    """Embed every body chunk of `messages`, in windows of about WINDOW_CHUNKS chunks
    (STOPPABLE_WINDOW_CHUNKS when `stop` may end the pass)."""
    if not messages:
        return 0, 0
    encoded = 0
    writer = WindowWriter(store, progress)
    try:
        with open_cache(store.path.parent) as cache:
            size = WINDOW_CHUNKS if stop is None else STOPPABLE_WINDOW_CHUNKS
            for window in _message_windows(index, messages, size):
                if stop is not None and stop.is_set():
                    break
                metas = raw.metas({c.message for c in window})
                chunks = [c for c in window if c.message in metas]  # deleted from raw.db meanwhile
                vectors, n = embed_cached(
                    [embed_text(c) for c in chunks],
                    model=embedder.fingerprint,
                    dim=embedder.dim,
                    cache=cache,
                    encode=embedder.embed_documents,
                )
                encoded += n
                fields = {m: MessageFields.from_meta(meta) for m, meta in metas.items()}
                writer.put(
                    fields,
                    [ChunkVector(c.id, c.message, v) for c, v in zip(chunks, vectors)],
                    fresh=has_rows.isdisjoint(fields),
                )
    finally:
        written = writer.close()
    return written, encoded


def _message_windows(index: KeywordIndex, messages: Sequence[int], size: int) -> Iterator[list[StoredChunk]]:
    """Body chunks of `messages` in their order, cut into windows that never split a message."""
    step = 256
    window: list[StoredChunk] = []
    for i in range(0, len(messages), step):
        part = messages[i : i + step]
        by_message: dict[int, list[StoredChunk]] = {}
        for c in index.chunks_of(part, kind="embedded"):
            by_message.setdefault(c.message, []).append(c)
        for m in part:
            window.extend(by_message.get(m, ()))
            if len(window) >= size:
                yield window
                window = []
    if window:
        yield window
