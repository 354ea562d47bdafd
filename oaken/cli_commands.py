"""The commands other than `oaken search`: init, import, status, triage, show, sync, reindex and mcp.
Each parses nothing (oaken.cli did), calls the library and prints what it returned."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any, Callable

from oaken.cli_output import SyncBar, as_dict, progress_bar, to_json
from oaken.errors import ConfigError, UsageError

if TYPE_CHECKING:
    from oaken import config as config_mod
    from oaken.mailbox import Mailbox


def _mailbox(args: argparse.Namespace) -> Mailbox:
    """The session the command works through: the same one a Python caller gets (oaken.Mailbox)."""
    from oaken.mailbox import Mailbox

    return Mailbox(config=_config(args))


def _config(args: argparse.Namespace) -> config_mod.Config:
    from oaken import config as config_mod

    cfg = config_mod.load(args.config) if args.config else config_mod.load()
    from oaken import log

    log.configure(cfg.log)
    return cfg


def cmd_init(args: argparse.Namespace) -> int:
    from pathlib import Path

    from oaken import config as config_mod
    from oaken import config_writer

    path = Path(args.config) if args.config else config_mod.config_path()
    if not args.host and (args.account or args.username or args.port or args.password_command):
        raise UsageError(
            "--account, --username, --port and --password-command describe an account: give its --host too", "init"
        )
    if not args.host and sys.stdin.isatty() and sys.stdout.isatty():
        _ask_account(args)  # a person at a terminal is asked; a script gets the note below
    name = args.account or "main"
    account = (
        config_writer.account_table(
            args.host, args.username or "", tls=args.tls, port=args.port, password_command=args.password_command
        )
        if args.host
        else None
    )
    try:
        if path.exists() and not args.force and account is not None:
            added = config_writer.add_account(path, name, account)
            print(
                f"added account {name!r} to {path}; accounts: {', '.join(added.accounts)}; "
                f"default_account: {added.default_account or 'none'}"
            )
            return 0
        written = config_writer.start(path, name, account, force=args.force)
    except ConfigError as e:  # what init was asked cannot be written: said as init's usage error
        raise UsageError(str(e), "init") from None
    print(f"wrote {path}")
    if written.backup is not None:
        print(f"the file it replaced, {written.replaced}, is now {written.backup}")
    if account is None:
        print(
            "it has no IMAP account yet: `oaken import PATH` works now (Maildir, mbox, .eml); to sync, "
            f"`oaken init --host HOST --username USER` adds an account to {path}"
        )
    return 0


def _ask_account(args: argparse.Namespace) -> None:
    """Fill args' account fields from answers at the terminal; an empty host means none."""
    print("An IMAP account to sync (leave the host empty to only import mail from files).")
    args.host = input("IMAP host: ").strip() or None
    if args.host is None:
        return
    args.username = input("user name: ").strip() or None
    tls = input("TLS [implicit/starttls/none] (implicit): ").strip().lower() or "implicit"
    if tls not in ("implicit", "starttls", "none"):
        raise UsageError(f"TLS {tls!r}: expected implicit, starttls or none", "init")
    args.tls = tls
    port = input("port (the usual one for that TLS): ").strip()
    if port and not port.isdigit():
        raise UsageError(f"port {port!r}: expected a number", "init")
    args.port = int(port) if port else None
    args.password_command = input("command that prints the password (e.g. `pass show mail`): ").strip() or None


def cmd_import(args: argparse.Namespace) -> int:
    from pathlib import Path

    from oaken import api, extras

    box = _mailbox(args)
    paths = [Path(p).expanduser() for p in args.paths]
    total = api.import_count(paths, account=args.account, config=box.config) if sys.stderr.isatty() else None
    update, close = progress_bar(total, "import")
    index_update: Callable[[int], None] | None = None
    index_close: Callable[[], None] = lambda: None  # noqa: E731

    def index_progress(n: int) -> None:
        nonlocal index_update, index_close
        if index_update is None:
            close()  # the import's bar ends when the index's starts
            index_update, index_close = progress_bar(None, "index")
        index_update(n)

    try:
        result = box.import_mail(
            paths, account=args.account, index=not args.no_index, progress=update, index_progress=index_progress
        )
    finally:
        close()
        index_close()
    report = result.stored
    if args.json:
        print(
            to_json({**as_dict(report), "index": {"error": result.index_error} if result.index_error else result.index})
        )
    else:
        model = box.config.embedder.model
        if result.index is not None and model != "none" and not extras.vectors_missing(model):
            print("keyword index up to date; `oaken reindex` (or a running `oaken sync --daemon`) embeds the new mail")
        print(
            f"{report.seen} messages read, {report.added} new, {report.new_locations} now also in another folder, "
            f"{report.with_problems} with parse problems (stored raw, findable by their headers), "
            f"{len(report.skipped)} files skipped"
        )
        for s_ in report.skipped[:20]:
            print(f"  skipped {s_}")
        if len(report.skipped) > 20:
            print(f"  ... and {len(report.skipped) - 20} more")
    if result.index_error is not None:
        print(f"oaken: the mail is stored in raw.db, but not yet searchable: {result.index_error}", file=sys.stderr)
        return 1
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from pathlib import Path

    data = _mailbox(args).status()
    if args.json:
        print(to_json(data))
        return 0
    print(f"data directory: {data['data_dir']}")
    if not (Path(data["data_dir"]) / "raw.db").exists():
        print("no mail yet: run `oaken sync` or `oaken import`")
        return 0
    print(f"messages: {data['messages']}")
    for name, acc in data.get("accounts", {}).items():
        print(
            f"account {name}: {acc['messages']} messages, {acc['unread']} unread, "
            f"{acc['with_problems']} with parse problems, {acc['bytes'] / 1e6:.1f} MB"
        )
        for fname, f in acc["folders"].items():
            print(f"  {fname}: {f['messages']}")
    for f in data.get("problem_messages", [])[:10]:
        print(f"parse problem in {f['id']}: {f['subject'][:50]!r}: {f['problem'][:80]}")
    fc = data.get("flag_changes")
    if fc and (fc["pending"] or fc["rejected"]):
        print(f"flag changes for the server: {fc['pending']} pending, {fc['rejected']} refused by the server")
    index = data.get("index", {})
    # a damaged, locked or stale index.db: one line naming the file and the fix, not SQLite's report
    shown = {k: v for k, v in index.items() if k != "attachments_unread_list"}
    print("keyword index: " + (f"{index['state']}: {index['problem']}" if index.get("problem") else _fields(shown)))
    for a in index.get("attachments_unread_list", [])[:10]:
        for why in a["why"].splitlines():
            print(f"attachment not searchable in {a['id']} ({a['subject'][:40]!r}): {why[:120]}")
    print("vectors: " + _fields(data.get("vectors", {})))
    print("search server: " + _search_server(data.get("search_server", {})))
    return 0


def _search_server(server: dict[str, Any]) -> str:
    """Who answers `oaken search` warm: the daemon, a background server (and when it exits), or no one."""
    if not server.get("running"):
        return "none running"
    if server.get("role") == "daemon":
        return f"the daemon, pid {server['pid']}"
    return (
        f"background, pid {server['pid']}, {server.get('state')}, exits after "
        f"{server.get('idle_exit_minutes')} idle minutes (log {server.get('log')})"
    )


def _fields(values: dict[str, Any]) -> str:
    """`key value, key value`; a nested table in parentheses, a missing value as "none"."""

    def text(v: Any) -> str:
        if isinstance(v, dict):
            return "(" + _fields(v) + ")"
        return "none" if v is None else str(v)

    return ", ".join(f"{k} {text(v)}" for k, v in values.items())


def cmd_triage(args: argparse.Namespace) -> int:
    if args.category is None and args.priority is None and args.disposition is None:
        raise UsageError("give at least one of --category, --priority, --disposition", "triage")
    result = _mailbox(args).triage(
        args.id, category=args.category, priority=args.priority, disposition=args.disposition
    )
    print(
        to_json(result)
        if args.json
        else f"{args.id}: category {_none(result.category)}, priority {_none(result.priority)}, "
        f"disposition {_none(result.disposition)}"
    )
    return 0


def _none(value: object) -> str:
    return "none" if value is None else str(value)


def cmd_show(args: argparse.Namespace) -> int:
    box = _mailbox(args)
    msg = box.show(args.id, peek=args.peek)
    if args.raw:
        sys.stdout.buffer.write(msg.raw)
        sys.stdout.buffer.flush()
    elif args.json:
        data = as_dict(msg)
        data.pop("raw")
        print(to_json(data))
    else:
        from datetime import datetime

        from oaken.search.dates import zone

        tz = zone(box.config.search.time_zone)  # as a mail client shows it: in the reader's zone
        for name, value in msg.headers:
            if name.lower() == "date" and msg.date:
                value = datetime.fromtimestamp(msg.date, tz=tz).strftime("%a, %d %b %Y %H:%M:%S %z")
            print(f"{name}: {value}")
        print(f"Folders: {', '.join(msg.folders)}")
        print()
        print(msg.text.rstrip("\n"))
    return 0


def cmd_sync(args: argparse.Namespace) -> int:
    if args.print_unit:
        from oaken import systemd

        print(systemd.unit(args.config, args.account), end="")
        return 0
    box = _mailbox(args)
    if args.daemon:
        from oaken import daemon

        return daemon.run(box.config, account=args.account, index=not args.no_index)
    bar = SyncBar()
    try:
        result = box.sync(
            args.account,
            index=not args.no_index,
            progress=bar,
            retried=lambda why: print(f"oaken: {why}", file=sys.stderr),
        )
    finally:
        bar.close()
    from oaken import config as config_mod
    from oaken.sync import light_config

    # the config was read and accepted whole, and the data directory exists: the next no-change
    # check (oaken.sync.nochange) may answer for this file while it stays as it is
    light_config.remember_checked(args.config or str(config_mod.config_path()), str(box.data_dir))
    report = result.stored
    changed = [f for f in report.folders if not f.skipped]
    print(
        f"{report.account}: {report.new} new, {sum(f.matched for f in changed)} matched again, "
        f"{sum(f.flags for f in changed)} flag changes, {sum(f.expunged for f in changed)} expunged, "
        f"{sum(f.pushed for f in changed)} local changes pushed; {report.skipped} of {len(report.folders)} "
        f"folders unchanged; {report.seconds:.2f} s"
    )
    for old, new in report.renamed:
        print(f"  folder renamed: {old} -> {new}")
    for name in report.deleted:
        print(f"  folder deleted on the server: {name}")
    for message, op, flag, error in report.rejected_flag_changes:
        print(f"  refused by the server: {op}{flag} on message {message}: {error}", file=sys.stderr)
    if result.index_error is not None:
        print(f"oaken: the mail is stored in raw.db, but not yet searchable: {result.index_error}", file=sys.stderr)
        return 1
    return 0


def cmd_reindex(args: argparse.Namespace) -> int:
    from oaken.index import indexer

    box = _mailbox(args)
    total = indexer.pending(box.config, rebuild=args.rebuild) if sys.stderr.isatty() else None
    bars: list[Callable[[], None]] = []

    def bar(total_: int | None, desc: str, unit: str) -> Callable[[int], None]:
        for done in bars:  # the keyword bar ends when the vector bar starts
            done()
        bars.clear()
        update_, close_ = progress_bar(total_, desc, unit)
        bars.append(close_)
        return update_

    keyword_bar: Callable[[int], None] | None = None
    vector_bar: Callable[[int], None] | None = None

    def keyword_progress(n: int) -> None:
        nonlocal keyword_bar
        keyword_bar = keyword_bar or bar(total, "keyword index", "msg")
        keyword_bar(n)

    def vector_progress(n: int) -> None:
        nonlocal vector_bar
        vector_bar = vector_bar or bar(None, "embed", "chunk")
        vector_bar(n)

    try:
        report = box.reindex(
            rebuild=args.rebuild,
            keyword_only=args.keyword_only,
            progress=keyword_progress,
            vector_progress=vector_progress,
        )
    finally:
        for done in bars:
            done()
    if args.json:
        print(to_json(report))
        return 0
    print(
        f"{report.indexed} messages indexed ({report.chunks} chunks), {report.updated} updated in place, "
        f"{report.deleted} removed, {report.problems} only partly readable (findable by their headers); "
        f"{report.seconds:.1f} s" + (" (rebuilt)" if report.rebuilt else "")
    )
    if report.rebuild_reason:
        print(f"index.db was built again from raw.db: {report.rebuild_reason}")
    vec = report.vectors
    if vec and vec.get("code") == "disk_full":  # work left that waits on the user
        print(f"oaken: vectors: not updated: {vec['error']}", file=sys.stderr)
        return 1
    if vec and "error" in vec:
        print(f"vectors: not updated: {vec['error']}")
    elif vec:
        print(
            f"vectors: {vec.get('embedded', 0)} chunks embedded, {vec.get('pending', 0)} pending "
            f"({vec.get('model')}, {vec.get('seconds', 0):.1f} s)"
        )
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    import importlib.util

    from oaken.errors import OakenError

    if importlib.util.find_spec("mcp") is None:
        raise OakenError("`oaken mcp` needs the MCP SDK: pip install 'oaken[mcp]'")
    box = _mailbox(args)
    box.daemon = not args.no_daemon
    from oaken import mcp_server

    return mcp_server.serve(box)
