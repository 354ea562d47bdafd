"""`oaken import`: Maildir folders, mbox files and folders of message files into raw.db.

Each message is stored once (by Message-ID and content) with its folder as a label; importing
the same mail again adds nothing. A message that cannot be parsed is stored raw and marked with its problem.
Memory: a batch is read and stored a group of about GROUP_BYTES at a time, and no message is
copied or parsed whole here (an mbox message's flags come from its header block).
"""

from __future__ import annotations

import contextlib
import email.message
import email.parser
import functools
import mailbox
import os
import re
import stat
import time
from dataclasses import dataclass, field
from email.policy import compat32
from pathlib import Path
from typing import Callable, Iterator, Sequence

from oaken import crashpoints, envelope, log
from oaken.errors import ImportFailed
from oaken.store import Incoming, Store

MAILDIR_FLAGS = {"S": "\\Seen", "F": "\\Flagged", "R": "\\Answered", "T": "\\Deleted", "D": "\\Draft"}
MESSAGE_SUFFIXES = {"", ".eml", ".txt", ".msg", ".mbox", ".mbx"}
_HEADER_LINE = re.compile(rb"^(From |[\x21-\x39\x3b-\x7e]+:)")
GROUP_BYTES = 64 << 20  # mail of a batch held in memory at once (one larger message is a group alone)


@dataclass(frozen=True)
class Item:
    """One message found on disk, not yet read."""

    folder: str
    source: str
    flags: tuple[str, ...]
    read: Callable[[], bytes]
    mtime: int | None = None


@dataclass
class ImportReport:
    seen: int = 0
    added: int = 0  # messages new to raw.db
    new_locations: int = 0  # already stored, now also known in this folder
    unchanged: int = 0  # files an earlier import stored, with the same mtime: not read again
    with_problems: int = 0  # stored, but with a parse problem
    skipped: list[str] = field(default_factory=list)  # files that are not mail, with the reason
    folders: dict[str, int] = field(default_factory=dict)
    # the folders holding a file that could not be stored: never recorded as listed whole
    failed_in: set[str] = field(default_factory=set, repr=False)


# A folder whose mtime is this recent is not recorded as listed whole: a file added in the same
# tick of the clock, after the listing, would leave the mtime as recorded (notmuch guards alike).
SETTLED_NS = 2_000_000_000


@dataclass
class ListedDirs:
    """Maildir cur/ and new/ folders by mtime: those an earlier import listed whole (`known`,
    path -> (mtime ns, files)) are not listed again while their mtime is the same; `listed` are
    the ones this import listed, to be recorded once their files are stored."""

    known: dict[str, tuple[int, int]] = field(default_factory=dict)
    listed: list[tuple[str, int, int]] = field(default_factory=list)
    stat_files: bool = True  # False: only counting (the progress bar): no file's mtime is read
    skipped_files: int = 0  # files of the folders not listed (counted as seen and unchanged)


def _is_maildir(path: Path) -> bool:
    return (path / "cur").is_dir() or (path / "new").is_dir()


def _maildir_flags(name: str, sub: str) -> tuple[str, ...]:
    _, sep, info = name.rpartition(":2,")
    if not sep:
        _, sep, info = name.rpartition("!2,")  # the separator some Windows tools use
    if not sep:
        return ()
    return tuple(MAILDIR_FLAGS[c] for c in info if c in MAILDIR_FLAGS)


def _looks_like_mail(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    first = head.lstrip(b"\r\n\t ").split(b"\n", 1)[0]
    return bool(_HEADER_LINE.match(first))


def _is_mbox(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(5) == b"From "
    except OSError:
        return False


def _reader(path: Path) -> Callable[[], bytes]:
    return lambda: path.read_bytes()


def _mtime(path: Path) -> int | None:
    try:
        return int(path.stat().st_mtime)
    except OSError:
        return None


def _folder_name(root: Path, folder: Path) -> str:
    if folder == root:
        return root.resolve().name or "INBOX"
    rel = folder.relative_to(root).as_posix()
    # Maildir++ nests as ".Parent.Child"
    parts = [p[1:].replace(".", "/") if p.startswith(".") else p for p in rel.split("/")]
    return "/".join(parts)


def _walk_maildir(
    root: Path, folder: Path, name: str, report: ImportReport | None = None, dirs: ListedDirs | None = None
) -> Iterator[Item]:
    for sub in ("new", "cur"):
        d = folder / sub
        try:
            st = os.stat(d)
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode):
            continue
        mtime = st.st_mtime_ns
        if dirs is not None and report is not None:
            before = dirs.known.get(str(d))
            if before is not None and before[0] == mtime:  # nothing added, renamed or removed since
                report.seen += before[1]
                report.unchanged += before[1]
                dirs.skipped_files += before[1]
                continue
        files = 0
        for entry in sorted(os.scandir(d), key=lambda e: e.name):
            if not entry.is_file() or entry.name.startswith("."):
                continue
            p = Path(entry.path)
            flags = () if sub == "new" else _maildir_flags(entry.name, sub)
            files += 1
            yield Item(name, str(p), flags, _reader(p), _mtime(p) if dirs is None or dirs.stat_files else None)
        if dirs is not None and time.time_ns() - mtime > SETTLED_NS:
            dirs.listed.append((str(d), mtime, files))


def _walk_mbox(path: Path, name: str) -> Iterator[Item]:
    box = mailbox.mbox(str(path), create=False)
    try:
        keys = list(box.keys())
    except Exception as e:  # noqa: BLE001
        raise ImportFailed(f"{path}: cannot be read as an mbox: {e}") from None
    for key in keys:
        msg = _mbox_headers(box, key)
        status = (msg.get("Status", "") or "") + (msg.get("X-Status", "") or "")
        flags = tuple(f for c, f in (("R", "\\Seen"), ("F", "\\Flagged"), ("A", "\\Answered")) if c in status)
        yield Item(name, f"{path}#{key}", flags, functools.partial(box.get_bytes, key), None)


def _mbox_headers(box: mailbox.mbox, key: str) -> email.message.Message:
    """The header block of one mbox message, read as box.get_message reads it (which would parse
    and then deep-copy the whole message, attachments and all)."""
    lines = []
    with contextlib.closing(box.get_file(key)) as f:  # past the "From " line
        for line in f:
            if line[:1] in (b"\r", b"\n"):
                break
            lines.append(line)
    return email.parser.BytesHeaderParser(policy=compat32).parsebytes(b"".join(lines))


def discover(path: Path, report: ImportReport, dirs: ListedDirs | None = None) -> Iterator[Item]:
    """Every message under `path`, whatever layout it has; with `dirs`, a Maildir folder listed
    whole before and unchanged since is counted as seen and unchanged, not listed."""
    if not path.exists():
        raise ImportFailed(f"{path}: no such file or folder")
    if path.is_file():
        if _is_mbox(path):
            yield from _walk_mbox(path, path.stem)
        elif _looks_like_mail(path) or path.suffix.lower() in MESSAGE_SUFFIXES:
            yield Item(path.parent.resolve().name or "INBOX", str(path), (), _reader(path), _mtime(path))
        else:
            raise ImportFailed(f"{path}: neither an mbox nor a mail message (no header on its first line)")
        return
    if path.name in ("cur", "new", "tmp") and _is_maildir(path.parent):
        # a Maildir's cur/ named by itself held nothing to import: that one Maildir was meant
        maildir = path.parent
        yield from _walk_maildir(maildir, maildir, maildir.resolve().name or "INBOX", report, dirs)
        return
    root = path
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        dirnames.sort()
        if here.name in ("cur", "new", "tmp") and _is_maildir(here.parent):
            dirnames[:] = []
            continue
        # A hidden folder that is no Maildir++ folder is another program's data kept beside the
        # mail (notmuch's .notmuch/xapian, mu's, a client's cache): its files are not messages.
        for d in [d for d in dirnames if d.startswith(".") and not _is_maildir(here / d)]:
            dirnames.remove(d)
            report.skipped.append(f"{here / d}: a hidden folder that is not a Maildir (another program's data)")
        name = _folder_name(root, here)
        if _is_maildir(here):
            yield from _walk_maildir(root, here, name, report, dirs)
            dirnames[:] = [d for d in dirnames if d not in ("cur", "new", "tmp")]
        for fname in sorted(filenames):
            p = here / fname
            if fname.startswith(".") or p.suffix.lower() not in MESSAGE_SUFFIXES:
                if not fname.startswith("."):
                    report.skipped.append(f"{p}: not a mail file (suffix {p.suffix})")
                continue
            if p.suffix.lower() != ".eml" and _is_mbox(p):  # an .eml file is one message: no need to look
                yield from _walk_mbox(p, f"{name}/{p.stem}" if here != root else p.stem)
            else:
                # stored even when it does not look like mail: with its problem, never dropped
                yield Item(name, str(p), (), _reader(p), _mtime(p))


def _incoming(item: Item, folder_id: int, report: ImportReport) -> Incoming | None:
    """The message read for storing; None (and the reason in the report) when there is none."""
    try:
        raw = item.read()
    except OSError as e:
        report.skipped.append(f"{item.source}: cannot be read: {e}")
        report.failed_in.add(os.path.dirname(item.source))
        return None
    if not raw or raw.isspace():  # not raw.strip(): that copies the message
        report.skipped.append(f"{item.source}: empty, nothing to store")
        report.failed_in.add(os.path.dirname(item.source))
        return None
    return Incoming(
        raw,
        envelope.content_hash(raw),
        envelope.read(raw),
        folder_id,
        flags=tuple(item.flags),
        internaldate=item.mtime,
        source=item.source,
    )


def stored_under(paths: Sequence[Path]) -> list[str] | None:
    """The prefixes an import of `paths` finds its stored files and folders under (Store.
    local_sources, import_dirs): the paths as given, since the files' names start with them; None
    (all of the account's) when one is "." or empty, whose files' names do not."""
    given = [str(p) for p in paths]
    return None if any(g in ("", ".") for g in given) else given


def import_paths(
    store: Store,
    account: str,
    paths: list[Path],
    *,
    batch_size: int = 500,
    progress: Callable[[int], None] | None = None,
) -> ImportReport:
    """Import everything under `paths`; each batch is one transaction, so a kill loses only it."""
    logger = log.get("oaken.import")
    report = ImportReport()
    account_id = store.ensure_account(account)
    # A Maildir file never changes under its name (a flag change renames it), so a file stored
    # before with the same mtime is skipped unread: a no-change import reads no mail.
    under = stored_under(paths)
    known = store.local_sources(account_id, under)
    dirs = ListedDirs(store.import_dirs(account_id, under))
    folder_ids: dict[str, int] = {}
    pending: list[Item] = []

    def store_group(items: list[Incoming], folders: list[str]) -> None:
        for folder, result in zip(folders, store.add_messages(account_id, items)):
            report.added += result.new_message
            report.new_locations += result.new_location and not result.new_message
            if result.problem:
                report.with_problems += 1
            report.folders[folder] = report.folders.get(folder, 0) + 1

    def flush() -> None:
        with store.transaction():
            # stored as one transaction in a few groups (a few statements each, not a dozen per
            # message): one ends half way, so that the crash point lands with half the batch
            # written, and one ends wherever GROUP_BYTES of mail have been read, so that a batch
            # of large messages is never in memory whole
            half = len(pending) // 2 + 1
            items: list[Incoming] = []
            folders: list[str] = []
            size = 0
            read_any = False
            for n, item in enumerate(pending, 1):
                if item.folder not in folder_ids:
                    folder_ids[item.folder] = store.ensure_folder(account_id, item.folder).id
                incoming = _incoming(item, folder_ids[item.folder], report)
                if incoming is not None:
                    items.append(incoming)
                    folders.append(item.folder)
                    size += len(incoming.raw)
                    read_any = True
                if n == half or size >= GROUP_BYTES or n == len(pending):
                    store_group(items, folders)
                    items, folders, size = [], [], 0
                if n == half and read_any:
                    crashpoints.reached("import.mid_batch", stored=report.added)
        crashpoints.reached("import.after_commit", stored=report.added)
        if progress:
            progress(len(pending))
        pending.clear()

    for path in paths:
        for item in discover(Path(path), report, dirs):
            if progress and dirs.skipped_files:  # a folder not listed: its files pass on the bar at once
                progress(dirs.skipped_files)
                dirs.skipped_files = 0
            report.seen += 1
            if item.mtime is not None and known.get(item.source, -1) == item.mtime:
                report.unchanged += 1
                if progress:
                    progress(1)  # counted in the bar's total like every other message
                continue
            pending.append(item)
            if len(pending) >= batch_size:
                flush()
    if progress and dirs.skipped_files:
        progress(dirs.skipped_files)
    if pending:
        flush()
    if dirs.listed:  # every file of these stored (or known): the next import need not list them
        with store.transaction():
            store.set_import_dirs(account_id, [d for d in dirs.listed if d[0] not in report.failed_in])
    for skipped in report.skipped:
        logger.warning("import.skipped", reason=skipped)
    logger.info(
        "import.done",
        account=account,
        seen=report.seen,
        added=report.added,
        with_problems=report.with_problems,
        skipped=len(report.skipped),
    )
    return report


def count(paths: list[Path], listed: dict[str, tuple[int, int]] | None = None) -> int:
    """How many messages an import will see, for the progress bar (cheap: no file is read, nor a
    Maildir file's mtime: a million of them cost ~80 s to stat). `listed`: the folders an import
    listed whole (Store.import_dirs), counted from the record while unchanged, not listed."""
    report = ImportReport()
    dirs = ListedDirs(dict(listed or {}), stat_files=False)
    total = 0
    for path in paths:
        try:
            for _ in discover(Path(path), report, dirs):
                total += 1
        except ImportFailed:
            pass
    return total + dirs.skipped_files
