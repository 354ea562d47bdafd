"""A cold `oaken sync --once` that finds nothing new, answered without the full sync.

Why: most runs of `oaken sync` from a timer or a hook find nothing new, and the full command's
imports (the typed config, the log, imapclient, the store) cost several times the exchange with
the server. This check reads the account from config.toml (light_config.py), the folder state
from raw.db with the stdlib's sqlite3 (read-only: it writes nothing), asks the server one
LIST-STATUS (light_imap.py) and decides with the rules the full pass uses (folder_rules.py). It
answers only when the full pass would have changed nothing and said nothing but its summary
line: every folder the pass covers unchanged by UIDVALIDITY, UIDNEXT, MESSAGES and
HIGHESTMODSEQ (so only with CONDSTORE, where a flag change moves HIGHESTMODSEQ), none renamed,
deleted or new, no local flag change waiting to be pushed or refused, no message waiting to be
swept. Anything else, or anything it cannot read, returns None: the full command then runs the
pass (with the password already read, credentials.hand_over), as it would have without it.
"""

from __future__ import annotations

import os
import sys
import time

from oaken.errors import SyncError
from oaken.sync import credentials, light_config, light_imap
from oaken.sync.folder_rules import assumed_uses, moved_away, row_kept, unchanged, wanted

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing on the cold path
if TYPE_CHECKING:
    from typing import Any

# raw.db's schema this check reads: len(oaken.store.migrations.MIGRATIONS), which it cannot
# import without apsw (tests/test_fast_sync.py holds the two equal). Another version: the full
# pass, which migrates.
SCHEMA_VERSION = 10


class Stored:
    """A folders row of raw.db, with the attribute names of oaken.store.Folder."""

    __slots__ = (
        "id",
        "name",
        "delimiter",
        "special_use",
        "uidvalidity",
        "uidnext",
        "highestmodseq",
        "exists_count",
        "mailbox_id",
    )

    id: int
    name: str

    def __init__(self, *row: Any):
        for key, value in zip(self.__slots__, row):
            setattr(self, key, value)


def parse_argv(argv: list[str]) -> dict[str, Any] | None:
    """`[--config FILE] sync [--once] [--no-index] [--account NAME]` as argparse reads it, or None
    for any other form (the full command then reads it)."""
    options: dict[str, Any] = {"config": None, "account": None}
    i = 0
    if argv[:1] == ["--config"] and len(argv) > 1:
        options["config"], i = argv[1], 2
    elif argv[:1] and argv[0].startswith("--config="):
        options["config"], i = argv[0].partition("=")[2], 1
    if argv[i : i + 1] != ["sync"] or options["config"] == "" or (options["config"] or "").startswith("-"):
        return None
    rest = argv[i + 1 :]
    k = 0
    while k < len(rest):
        arg = rest[k]
        k += 1
        if arg in ("--once", "--no-index"):
            continue
        if arg == "--account" and k < len(rest):
            value = rest[k]
            k += 1
        elif arg.startswith("--account="):
            value = arg.partition("=")[2]
        else:
            return None  # --daemon, --print-unit, -h, an abbreviation argparse would take
        if not value or value.startswith("-"):
            return None
        options["account"] = value
    return options


def run(options: dict[str, Any]) -> int | None:
    """Print the no-change summary and return 0, or None: the full pass must run."""
    started = time.perf_counter()
    settings = light_config.read(options["config"], options["account"])
    if settings is None or settings.log_level == "debug":
        return None  # debug: the full pass logs its timings
    account = settings.account
    if account.auth != "password":
        return None
    raw = os.path.join(settings.data_dir, "raw.db")
    try:
        stored = read_state(raw, account.name)
    except Exception:  # noqa: BLE001 - raw.db as this check cannot read it: the full pass opens it
        return None
    if stored is None:
        return None
    try:
        password = credentials.read_password(account)
    except SyncError as e:  # the full pass says why, without running a password command twice
        credentials.hand_over_failure(account, e)
        return None
    except Exception:  # noqa: BLE001 - the full pass reads it again and says why it cannot
        return None
    try:
        quiet = folders_unchanged(account, stored, password)
    except Exception:  # noqa: BLE001 - a refused login, a lost link, an answer not read here
        quiet = None
    if quiet is None:
        credentials.hand_over(account, password)
        return None
    seconds = time.perf_counter() - started
    print(
        f"{account.name}: 0 new, 0 matched again, 0 flag changes, 0 expunged, 0 local changes pushed; "
        f"{quiet} of {quiet} folders unchanged; {seconds:.2f} s"
    )
    sys.stdout.flush()
    return 0


def read_state(path: str, account: str) -> tuple[dict[str, Stored], set[int]] | None:
    """(the account's folder rows by name, the ids of folders with local flag changes pending),
    or None when the full pass has something to do whatever the server says: no raw.db or no
    such account yet, another schema, refused changes to report, messages to sweep."""
    if not os.path.exists(path) or any(c in path for c in "?#%"):
        return None
    import sqlite3

    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        if db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
            return None
        row = db.execute("SELECT id FROM accounts WHERE name = ?", (account,)).fetchone()
        if row is None:
            return None
        waiting = db.execute(
            "SELECT EXISTS(SELECT 1 FROM flag_queue WHERE state = 'rejected') "
            "OR EXISTS(SELECT 1 FROM orphan_candidates)"
        ).fetchone()[0]
        if waiting:
            return None
        folders = {
            r[1]: Stored(*r)
            for r in db.execute(
                "SELECT id, name, delimiter, special_use, uidvalidity, uidnext, highestmodseq, exists_count, "
                "mailbox_id FROM folders WHERE account_id = ?",
                (row[0],),
            )
        }
        pending = {
            r[0]
            for r in db.execute(
                "SELECT DISTINCT l.folder_id FROM flag_queue q JOIN locations l ON l.id = q.location "
                "WHERE q.state = 'pending'"
            )
        }
        return folders, pending
    finally:
        db.close()


def folders_unchanged(account: Any, stored: tuple[dict[str, Stored], set[int]], password: str) -> int | None:
    """How many folders the pass covers, when the server shows every one of them unchanged and
    none moved away; None when the full pass has work (or this session cannot tell)."""
    session = light_imap.Session(account, password)
    try:
        if "CONDSTORE" not in session.caps and "QRESYNC" not in session.caps:
            return None  # without HIGHESTMODSEQ a flag change is invisible to STATUS
        server = session.list_folders()
    finally:
        session.logout()
    local, pending = stored
    listed = {f.name: f for f in server}
    gone, unsure = moved_away(local.values(), listed)
    if gone or unsure:
        return None
    assumed = assumed_uses(server)
    selected = [f for f in server if wanted(f, account, assumed)]
    for sf in selected:
        row = local.get(sf.name)
        if row is None or row.id in pending or not row_kept(row, sf) or not unchanged(row, sf):
            return None
    return len(selected)
