"""The rows of vectors/ that no longer count: replaced by newer rows or belonging to deleted
chunks, still on disk, hidden from every reader.

Why not delete them: a deleted row in any fragment an ANN index segment covers makes Lance check
every row of each IVF partition a search visits against a deletion mask. At a million messages
that was 145 of a 175 ms vector search, and a triage or label change of old mail (which rewrites
its rows with the new fields) put one there for good, since Lance rewrites a fragment only past
10 % deleted and rewriting a big one costs a minute (docs/scale.md). So a change appends the new
rows and records the old ones here, by their row address (Lance's `_rowid`: fragment << 32 |
offset), and readers drop them: the search from the candidates it re-scores anyway, the others
from what they read. The upkeep deletes them for real where that is cheap (small fragments it
rewrites) and, past SUPERSEDED_MAX_SHARE, everywhere.

The file, superseded.npy, is an (n, 3) int64 array of (row address, first table version it is
hidden in, first version it is deleted in for real), replaced whole. A row is hidden from a reader
at version v when since <= v < until: a reader at an older version still sees the rows of that
version, and one that opened a version before the upkeep deleted a row still has it hidden. An
entry goes once no version before its deletion is left on disk (`drop_deleted_before`). An append
that replaces rows is recorded before it commits as pending (since = -1 - base): every write
first settles what a writer that died left pending (VectorStore.settle): dated base + 1 when the
table moved past base (the append was the only commit a writer could make after it), dropped
when it did not. Readers skip pending entries, so until the next write they may see an old and a
new row of one chunk, never neither.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Iterable

import numpy as np

SUPERSEDED_FILE = "superseded.npy"
# Past this share of the table's rows, the superseded rows in the big fragments are deleted for
# real and those fragments rewritten (VectorUpkeep): a minute at a million messages, so rare.
SUPERSEDED_MAX_SHARE = 0.02


def fragment_of(rowids: np.ndarray) -> np.ndarray:
    return np.asarray(rowids, dtype=np.int64) >> 32


NOT_DELETED = 1 << 62
# Without the file no reader can tell which rows count: vectors/ is built again (from the embed
# cache, quickly), as for a table of another model.
REBUILT = "the next embedding pass (`oaken reindex`, or the daemon once mail changes) builds vectors/ again"


class SupersededRows:
    """superseded.npy of one vectors/ folder (see the module's docstring)."""

    def __init__(self, folder: Path):
        self.file = folder / SUPERSEDED_FILE
        self._lock = threading.Lock()
        self._cache: tuple[tuple[int, int, int], np.ndarray] | None = None
        self._hidden: tuple[tuple[int, int, int], int, np.ndarray] | None = None

    # ---- reading ----------------------------------------------------------------------------

    def _key(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.file)
        except FileNotFoundError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def entries(self) -> np.ndarray:
        """Every entry, pending ones included: (n, 3) int64."""
        key = self._key()
        if key is None:
            return np.zeros((0, 3), dtype=np.int64)
        with self._lock:
            if self._cache is not None and self._cache[0] == key:
                return self._cache[1]
        try:
            found = np.load(self.file, allow_pickle=False)
        except FileNotFoundError:
            return np.zeros((0, 3), dtype=np.int64)
        except (OSError, ValueError, EOFError) as exc:
            raise ValueError(f"{self.file}: cannot be read ({exc}); {REBUILT}") from exc
        if found.ndim != 2 or found.shape[1] != 3 or found.dtype.kind not in "iu":
            raise ValueError(f"{self.file}: not a list of superseded rows; {REBUILT}")
        found = found.astype(np.int64, copy=False)
        with self._lock:
            self._cache = (key, found)
        return found

    def readable(self) -> bool:
        try:
            self.entries()
        except ValueError:
            return False
        return True

    def hidden(self, version: int) -> np.ndarray:
        """The row addresses hidden from a reader at `version`, sorted (kept for the last version asked)."""
        key = self._key()
        with self._lock:
            if key is not None and self._hidden is not None and self._hidden[:2] == (key, version):
                return self._hidden[2]
        e = self.entries()
        rows = np.sort(e[(e[:, 1] >= 0) & (e[:, 1] <= version) & (version < e[:, 2]), 0])
        if key is not None:
            with self._lock:
                self._hidden = (key, version, rows)
        return rows

    def live_mask(self, rowids: np.ndarray, version: int) -> np.ndarray | None:
        """Which of `rowids` a reader at `version` sees; None when it sees them all."""
        hidden = self.hidden(version)
        if not hidden.size or not len(rowids):
            return None
        rowids = np.asarray(rowids, dtype=np.int64)
        at = np.clip(np.searchsorted(hidden, rowids), 0, hidden.size - 1)
        live = hidden[at] != rowids
        return None if live.all() else live

    def pending(self) -> np.ndarray:
        e = self.entries()
        return e[e[:, 1] < 0]

    # ---- writing (the pass holding the write lock) --------------------------------------------

    def _write(self, entries: np.ndarray) -> None:
        if not entries.size:
            self.file.unlink(missing_ok=True)
            return
        tmp = self.file.with_name(f"{self.file.name}.{os.getpid()}.{threading.get_ident()}.tmp.npy")
        np.save(tmp, np.ascontiguousarray(entries, dtype=np.int64), allow_pickle=False)
        os.replace(tmp, self.file)

    def _add(self, rowids: Iterable[int], since: int) -> None:
        e = self.entries()
        rows = np.unique(np.fromiter(rowids, dtype=np.int64))
        rows = rows[~np.isin(rows, e[:, 0])]  # an address is entered once: count() subtracts entries
        if rows.size:
            added = np.column_stack([rows, np.full(rows.size, since), np.full(rows.size, NOT_DELETED)])
            self._write(np.concatenate([e, added]))

    def hide(self, rowids: Iterable[int], version: int) -> None:
        """Hide `rowids` from readers at `version` and later (a deletion: no append to wait for)."""
        self._add(rowids, version)

    def hide_after(self, rowids: Iterable[int], base: int) -> None:
        """Record `rowids` as pending: replaced by an append about to commit on version `base`."""
        self._add(rowids, -1 - base)

    def settle(self, latest: int) -> None:
        """Date the pending entries whose append committed (the table moved past their base) and
        drop the others. Sound only when every commit is preceded by a settle (VectorStore.settle)."""
        e = self.entries()
        pending = e[:, 1] < 0
        if not pending.any():
            return
        base = -1 - e[:, 1]
        done = pending & (latest > base)
        e = e.copy()
        e[done, 1] = base[done] + 1
        self._write(e[~pending | done])

    def deleted(self, rowids: np.ndarray, version: int) -> None:
        """The rows at `rowids` were deleted for real in `version`: readers of earlier versions
        still have them hidden, later ones no longer count them."""
        e = self.entries()
        if e.size and len(rowids):
            e = e.copy()
            e[np.isin(e[:, 0], np.asarray(rowids, dtype=np.int64)), 2] = version
            self._write(e)

    def drop_deleted_before(self, oldest: int) -> None:
        """Forget rows deleted for real in a version no older version remains on disk before."""
        e = self.entries()
        gone = e[:, 2] <= oldest
        if gone.any():
            self._write(e[~gone])

    def clear(self) -> None:
        self.file.unlink(missing_ok=True)
        with self._lock:
            self._cache = None
            self._hidden = None
