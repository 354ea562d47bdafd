"""The small JSON files in vectors/ beside the LanceDB table, each replaced whole (`write_json`):

  state.json       a summary of the table that `oaken status` reads without importing LanceDB;
  rebuilding.json  there while the table is being built again (another model or chunker, a rebuilt
                   index.db, `oaken reindex --rebuild`): a search then says its vector side is
                   degraded instead of answering from the part of the mail embedded so far as if
                   it were all of it. The embedding pass removes it once every chunk is embedded;
  raw_seq.json     how far the embedding pass has followed raw.db's change feed;
  last_pass.json   the settings, fingerprint and raw.db/index.db positions of the last complete
                   pass, so the next one can tell it has nothing to do without loading the model.

Nothing here imports numpy or LanceDB.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oaken import paths

if TYPE_CHECKING:
    from oaken.config import Config
    from oaken.index.vector_rows import Fingerprint

STATE_FILE = "state.json"
REBUILDING_FILE = "rebuilding.json"
CURSOR_FILE = "raw_seq.json"
LAST_PASS_FILE = "last_pass.json"
# last_pass.json's format; a record of another is not trusted. 2: its raw_seq is where index.db
# stood when the pass read its chunks (1 said raw.db's, ahead of index.db after a sync: the
# messages between were never embedded; the first pass after an upgrade compares every row).
LAST_PASS_VERSION = 2


def vectors_path(data_dir: Path) -> Path:
    return Path(paths.vectors_dir(data_dir))


def write_json(path: Path, data: object) -> None:
    """A small JSON file beside the vectors (state, cursor, last pass), replaced whole: a reader
    never sees half of it, and two writers (threads or processes) never share a temporary file."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def read_state(data_dir: Path) -> dict[str, Any] | None:
    """The summary the last write left, or None when there is no store."""
    try:
        return json.loads((vectors_path(data_dir) / STATE_FILE).read_text())
    except (OSError, ValueError):
        return None


def cleanup_after(state: dict[str, Any] | None) -> float | None:
    """From a state summary (`read_state`): the time (time.time()) after which the versions the
    last maintenance superseded, kept through the retention, may be removed; None when none wait
    (see VectorUpkeep.tidy)."""
    value = state.get("cleanup_after") if isinstance(state, dict) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def cleanup_due(data_dir: Path) -> bool:
    """A deferred cleanup is waiting and its time has come: read without LanceDB, so the daemon
    can ask every second and a no-change pass still loads nothing."""
    at = cleanup_after(read_state(data_dir))
    return at is not None and time.time() >= at


def maintenance_due(data_dir: Path) -> bool:
    """Whether the writes since the last maintenance reached `maintain_every`, as the state file
    records it (read without LanceDB, as `cleanup_due` is): a pass that left it for later (the
    daemon's) wants a pass without upkeep_later to do it (VectorUpkeep.finish_pass)."""
    state = read_state(data_dir)
    return isinstance(state, dict) and state.get("upkeep_due") is True


def drop(data_dir: Path, *, rebuilding: str | None = None) -> None:
    """Remove vectors/ (derived data: `oaken reindex` rebuilds it; the embed cache makes that quick).
    With `rebuilding` (why), the new vectors/ is marked as being rebuilt until the embedding pass
    has embedded every chunk (see REBUILDING_FILE)."""
    shutil.rmtree(vectors_path(data_dir), ignore_errors=True)
    if rebuilding is not None:
        mark_rebuilding(data_dir, rebuilding)


def mark_rebuilding(data_dir: Path, reason: str) -> None:
    folder = vectors_path(data_dir)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not (folder / REBUILDING_FILE).exists():
        write_json(folder / REBUILDING_FILE, {"reason": reason, "since": time.time()})


def rebuilding(data_dir: Path) -> dict[str, Any] | None:
    """Why vectors/ is being rebuilt, or None when it is not (see REBUILDING_FILE)."""
    try:
        found = json.loads((vectors_path(data_dir) / REBUILDING_FILE).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {"reason": "unknown"}
    return found if isinstance(found, dict) else {"reason": "unknown"}


def rebuilt(data_dir: Path) -> None:
    """The table holds every chunk again: searches may use it."""
    try:
        (vectors_path(data_dir) / REBUILDING_FILE).unlink()
    except FileNotFoundError:
        pass


# ---- the embedding pass's records ----------------------------------------------------------------


def chunker_version() -> str:
    from oaken.chunking import CHUNKER_VERSION

    return str(CHUNKER_VERSION)


def _settings(config: Config) -> dict:
    """What decides which embedder a pass loads and how the store is kept."""
    out = {
        "model": config.embedder.model,
        "backend": config.embedder.backend,
        "chunker": chunker_version(),
        "ann_min_rows": config.index.vector_ann_min_rows,
    }
    width = os.environ.get("OAKEN_CONCEPT_DIM")
    if config.embedder.model == "concept" and width:  # the stand-in at a benchmark's width (embedders._concept)
        out["concept_dim"] = width
    return out


def read_last_pass(data_dir: Path, config: Config) -> dict | None:
    """The record of the last complete pass, if it ran under these settings."""
    try:
        record = json.loads((vectors_path(data_dir) / LAST_PASS_FILE).read_text())
    except (OSError, ValueError):
        return None
    ok = (
        isinstance(record, dict)
        and record.get("version") == LAST_PASS_VERSION
        and record.get("settings") == _settings(config)
        and isinstance(record.get("fingerprint"), dict)
    )
    return record if ok else None


def write_last_pass(
    data_dir: Path, config: Config, fp: Fingerprint, raw_seq: int, index_state: tuple[int, int, int, str], chunks: int
) -> None:
    record = {
        "version": LAST_PASS_VERSION,
        "settings": _settings(config),
        "fingerprint": json.loads(fp.key()),
        "raw_seq": raw_seq,
        "index": list(index_state),
        "chunks": chunks,
    }
    write_json(vectors_path(data_dir) / LAST_PASS_FILE, record)


def forget_last_pass(data_dir: Path) -> None:
    try:
        (vectors_path(data_dir) / LAST_PASS_FILE).unlink()
    except OSError:
        pass


def followed_seq(data_dir: Path) -> int:
    """How far vectors/ has followed raw.db's change feed: the prefilter fields of its rows hold
    raw.db's state as of this seq (0 when unknown). A search trusts them no further."""
    return read_cursor(data_dir)


def read_cursor(data_dir: Path) -> int:
    try:
        return int(json.loads((vectors_path(data_dir) / CURSOR_FILE).read_text())["seq"])
    except (OSError, ValueError, KeyError):
        return 0


def write_cursor(data_dir: Path, seq: int) -> None:
    write_json(vectors_path(data_dir) / CURSOR_FILE, {"seq": seq})


def ann_base_rows(state: dict[str, Any] | None) -> int | None:
    """Rows the ANN index was last built over, as the state file records them (None: not known,
    as for a store built before it did)."""
    value = state.get("ann_base_rows") if isinstance(state, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def writes_since_upkeep(state: dict[str, Any] | None) -> int:
    """Writes since the last maintenance, as the state file counts them: each pass opens its own
    store, so a count kept only in memory would never reach maintain_every."""
    try:
        return int(state.get("writes_since_upkeep", 0)) if isinstance(state, dict) else 0
    except (ValueError, TypeError):
        return 0
