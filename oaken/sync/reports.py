"""What a sync pass reports, per folder and for the account, and the names of the timers behind
its debug line "sync timing". Kept apart from the folder sync itself, so that a pass that finds
every folder unchanged reports without importing the download machinery."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

Progress = Callable[[int], None]  # messages handled, per stored batch
OnBatch = Callable[[int], None]  # locations added, per stored batch that added any

# wall seconds of the storing thread by what it waited on (oaken/sync/folder.py)
TIMERS = ("select", "search", "wait_fetch", "wait_headers", "rows", "sqlite", "callbacks", "workers", "threads")


@dataclass(frozen=True)
class FolderReport:
    folder: str
    new: int = 0  # locations added from downloaded messages
    matched: int = 0  # re-matched after a UIDVALIDITY change without downloading
    flags: int = 0  # locations whose flags changed on the server
    expunged: int = 0  # locations removed
    pushed: int = 0  # local flag changes applied on the server
    rejected: int = 0  # local flag changes the server refused (kept, reported)
    uidvalidity_changed: bool = False
    skipped: bool = False  # unchanged by STATUS: not even selected
    complete: bool = True  # False when stopped between batches
    bytes: int = 0
    seconds: float = 0.0


@dataclass(frozen=True)
class SyncReport:
    account: str
    folders: tuple[FolderReport, ...] = ()
    renamed: tuple[tuple[str, str], ...] = ()
    deleted: tuple[str, ...] = ()
    rejected_flag_changes: tuple[tuple[int, str, str, str], ...] = ()  # (message, op, flag, error)
    complete: bool = True
    seconds: float = 0.0

    @property
    def new(self) -> int:
        return sum(f.new for f in self.folders)

    @property
    def changed(self) -> bool:
        return bool(
            self.renamed
            or self.deleted
            or any(f.new or f.matched or f.flags or f.expunged or f.pushed for f in self.folders)
        )

    @property
    def skipped(self) -> int:
        return sum(f.skipped for f in self.folders)
