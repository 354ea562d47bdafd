"""index.db as a whole: what it holds (for `oaken status`), publishing a rebuilt one, deleting it.

The live index.db is the symbolic link `index.db` -> `index-<generation>.db` (schema.py says why
a link and not a rename). Publishing a new one replaces the link in one rename, so a search opens
either the old index.db or the new one, never one half built. The old file is unlinked at once:
a reader that has it open keeps reading it, and the last one to close it removes its -wal and
-shm (they are named after it, so they are nobody else's).
"""

from __future__ import annotations

import os
from pathlib import Path

import apsw

from oaken.errors import IndexUnavailable
from oaken.index.keyword import checks
from oaken.index.keyword.reader import KeywordIndex
from oaken.index.keyword.schema import (
    BUILD_PREFIX,
    DAMAGED_SUFFIX,
    classify,
    damage,
    index_path,
    mark_damaged,
    unavailable,
)

_COMPANIONS = ("-wal", "-shm", "-journal", DAMAGED_SUFFIX, checks.CHECKED_SUFFIX)
_SWAP_SUFFIX = ".swap"  # index.db.swap: the new link, renamed over index.db


def status(data_dir: Path) -> dict:
    """What index.db holds, for `oaken status`: never raises. A damaged, locked or stale index.db
    has a `problem`: one line naming the file and the fix."""
    path = index_path(data_dir)
    if not path.exists():
        return {"state": "missing", "messages": 0, "chunks": 0, "seq": 0, "path": str(path)}
    try:
        idx = KeywordIndex(data_dir, fresh=True)  # its check reads the file, not a kept connection's cache
    except IndexUnavailable as e:
        return _unusable(path, getattr(e, "state", "corrupt"), str(e))
    try:
        # a large index.db is checked by the indexer once a day, not by every `oaken status`
        if checks.is_small(path):
            found = damage(idx.db)
            if found is not None:
                mark_damaged(path, found)
                return _unusable(path, "corrupt", str(unavailable(path, "corrupt", found)))
            checks.mark_checked(path)
        messages, chunks = idx.counts()
        real = os.path.realpath(path)
        unread, listed = idx.attachments_unread()
        return {
            "state": "ok",
            "messages": messages,
            "chunks": chunks,
            "seq": idx.seq(),
            "path": str(path),
            "bytes": os.stat(real).st_size + _size(real + "-wal"),
            "checked": checks.when_checked(path),
            # attachments whose words are not searchable (encrypted, broken, over a cap): warnings
            "attachments_unread": unread,
            "attachments_unread_list": [{"id": i, "subject": s, "why": w} for i, s, w in listed],
        }
    except IndexUnavailable as e:
        return _unusable(path, getattr(e, "state", "corrupt"), str(e))
    except apsw.Error as e:
        state = classify(e, path)
        return _unusable(path, state, str(unavailable(path, state, str(e))))
    finally:
        idx.close()


def _unusable(path: Path, state: str, problem: str) -> dict:
    return {"state": state, "messages": 0, "chunks": 0, "seq": 0, "path": str(path), "problem": problem}


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def published(data_dir: Path) -> Path | None:
    """The index-<generation>.db the live index.db links to; None for a plain file or none."""
    path = index_path(data_dir)
    try:
        target = os.readlink(path)
    except OSError:
        return None
    name = os.path.basename(target)
    return path.parent / name if name.startswith(BUILD_PREFIX) else None


def swap_in(data_dir: Path, built: Path) -> None:
    """Make `built` (closed, checkpointed, beside index.db) the live index.db in one rename."""
    path = index_path(data_dir)
    old = published(data_dir)
    link = path.with_name(path.name + _SWAP_SUFFIX)
    _unlink(link)
    os.symlink(built.name, link)  # relative: the data directory can move
    os.replace(link, path)
    if old is not None and old.name != built.name:
        try:
            _unlink(old)  # readers that have it open keep it; its -wal and -shm go with its last reader
        except OSError:
            pass  # published all the same; the next build's discard_leftovers removes it


def discard_build(built: Path) -> None:
    for suffix in ("", *_COMPANIONS):
        _unlink(Path(str(built) + suffix))


def discard_leftovers(data_dir: Path) -> None:
    """Remove what no reader can open any more: builds a crashed writer left unfinished, and the
    -wal and -shm of index.db files already replaced whose last reader was killed. Only a writer
    (holding oaken.index.writelock) calls this, so no build of another process is under way."""
    data_dir = Path(data_dir)
    path = index_path(data_dir)
    live = published(data_dir)
    _unlink(path.with_name(path.name + _SWAP_SUFFIX))
    try:
        names = os.listdir(data_dir)
    except OSError:
        return
    for name in names:
        if name.startswith(BUILD_PREFIX) and ".db" in name and (live is None or not name.startswith(live.name)):
            _unlink(data_dir / name)
    if path.is_symlink():  # a plain index.db replaced by the first rebuild: its files are no one's now
        for suffix in _COMPANIONS:
            _unlink(Path(str(path) + suffix))


def drop(data_dir: Path) -> None:
    """Delete index.db, the file it links to, their -wal and -shm, and any unfinished build."""
    path = index_path(data_dir)
    live = published(data_dir)
    for suffix in ("", *_COMPANIONS, _SWAP_SUFFIX):
        _unlink(Path(str(path) + suffix))
    if live is not None:
        discard_build(live)
    discard_leftovers(data_dir)


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
