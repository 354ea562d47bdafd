"""`oaken`: parses arguments, calls the library, prints the result, turns errors into one line.

Exit codes: 0 done (a search with no hits too), 1 a failure, 2 a usage error or a bad config or value.
"""

from __future__ import annotations

import argparse
import os
import sys
from oaken.errors import ConfigError, IndexUnavailable, OakenError, TriageError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing on the cold search path
if TYPE_CHECKING:
    from typing import Any, Callable

    from oaken import config as config_mod
    from oaken.mailbox import Mailbox

# A cold `oaken search` is the command people run most: this module imports only what argument
# parsing needs, each command loads its own modules, and only the command asked for gets a parser.


class UsageError(OakenError):
    """A command line that cannot be run as given; `command` is the subcommand it was meant for."""

    def __init__(self, message: str, command: str | None = None):
        super().__init__(message)
        self.command = command


# the JSON forms of `oaken search` (docs/cli.md): raised when a field changes meaning or goes away
FORMAT_VERSION = 1


def _json(obj: Any) -> str:
    import json

    def default(o: Any) -> Any:
        from dataclasses import asdict, is_dataclass  # not needed for the daemon's answer, a dict

        if is_dataclass(o):
            return asdict(o)  # type: ignore[arg-type]
        if isinstance(o, (set, frozenset, tuple)):
            return list(o)
        if isinstance(o, os.PathLike):
            return os.fspath(o)
        raise TypeError(f"not JSON: {type(o).__name__}")

    return json.dumps(obj, default=default, indent=2, ensure_ascii=False)


def _asdict(obj: Any) -> dict[str, Any]:
    from dataclasses import asdict

    return asdict(obj)


PROGRESS_EVERY = 10.0  # seconds between progress lines when stderr is not a terminal


def progress_bar(total: int | None, desc: str, unit: str = "msg") -> tuple[Callable[[int], None], Callable[[], None]]:
    """A bar on a terminal; elsewhere (a log file, systemd, a pipe) a line on stderr every
    PROGRESS_EVERY seconds and one at the end, so long work is never silent for minutes."""
    if not sys.stderr.isatty():
        return _progress_lines(total, desc, unit)
    from tqdm import tqdm

    bar = tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, leave=False)
    return bar.update, bar.close


def _progress_lines(total: int | None, desc: str, unit: str) -> tuple[Callable[[int], None], Callable[[], None]]:
    import time

    started = time.monotonic()
    state = {"done": 0, "said": started}

    def say() -> None:
        of = f" of {total}" if total else ""
        print(f"oaken: {desc}: {state['done']}{of} {unit} ({time.monotonic() - started:.0f} s)", file=sys.stderr,
              flush=True)

    def update(n: int) -> None:
        state["done"] += n
        now = time.monotonic()
        if now - state["said"] >= PROGRESS_EVERY:
            state["said"] = now
            say()

    def close() -> None:
        if state["said"] != started:  # said something along the way: say where it ended
            say()

    return update, close


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


# ---- commands ------------------------------------------------------------------------------

def cmd_init(args: argparse.Namespace) -> int:
    from pathlib import Path

    from oaken import config as config_mod
    from oaken import config_writer

    path = Path(args.config) if args.config else config_mod.config_path()
    if not args.host and (args.account or args.username or args.port or args.password_command):
        raise UsageError("--account, --username, --port and --password-command describe an account: "
                         "give its --host too", "init")
    if not args.host and sys.stdin.isatty() and sys.stdout.isatty():
        _ask_account(args)  # a person at a terminal is asked; a script gets the note below
    name = args.account or "main"
    account = config_writer.account_table(args.host, args.username or "", tls=args.tls, port=args.port,
                                          password_command=args.password_command) if args.host else None
    try:
        if path.exists() and not args.force and account is not None:
            added = config_writer.add_account(path, name, account)
            print(f"added account {name!r} to {path}; accounts: {', '.join(added.accounts)}; "
                  f"default_account: {added.default_account or 'none'}")
            return 0
        written = config_writer.start(path, name, account, force=args.force)
    except ConfigError as e:  # what init was asked cannot be written: said as init's usage error
        raise UsageError(str(e), "init") from None
    print(f"wrote {path}")
    if written.backup is not None:
        print(f"the file it replaced, {written.replaced}, is now {written.backup}")
    if account is None:
        print("it has no IMAP account yet: `oaken import PATH` works now (Maildir, mbox, .eml); to sync, "
              f"`oaken init --host HOST --username USER` adds an account to {path}")
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

    from oaken import extras, importer

    box = _mailbox(args)
    paths = [Path(p).expanduser() for p in args.paths]
    total = importer.count(paths) if sys.stderr.isatty() else None
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
        result = box.import_mail(paths, account=args.account, index=not args.no_index, progress=update,
                                 index_progress=index_progress)
    finally:
        close()
        index_close()
    report = result.stored
    if args.json:
        print(_json({**_asdict(report), "index": {"error": result.index_error} if result.index_error
                     else result.index}))
    else:
        model = box.config.embedder.model
        if result.index is not None and model != "none" and not extras.vectors_missing(model):
            print("keyword index up to date; `oaken reindex` (or a running `oaken sync --daemon`) embeds the new mail")
        print(f"{report.seen} messages read, {report.added} new, {report.new_locations} now also in another folder, "
              f"{report.with_problems} with parse problems (stored raw, findable by their headers), "
              f"{len(report.skipped)} files skipped")
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
        print(_json(data))
        return 0
    print(f"data directory: {data['data_dir']}")
    if not (Path(data["data_dir"]) / "raw.db").exists():
        print("no mail yet: run `oaken sync` or `oaken import`")
        return 0
    print(f"messages: {data['messages']}")
    for name, acc in data.get("accounts", {}).items():
        print(f"account {name}: {acc['messages']} messages, {acc['unread']} unread, "
              f"{acc['with_problems']} with parse problems, {acc['bytes'] / 1e6:.1f} MB")
        for fname, f in acc["folders"].items():
            print(f"  {fname}: {f['messages']}")
    for f in data.get("problem_messages", [])[:10]:
        print(f"parse problem in {f['id']}: {f['subject'][:50]!r}: {f['problem'][:80]}")
    fc = data.get("flag_changes")
    if fc and (fc["pending"] or fc["rejected"]):
        print(f"flag changes for the server: {fc['pending']} pending, {fc['rejected']} refused by the server")
    index = data.get("index", {})
    # a damaged, locked or stale index.db: one line naming the file and the fix, not SQLite's report
    print("keyword index: " + (f"{index['state']}: {index['problem']}" if index.get("problem") else _fields(index)))
    print("vectors: " + _fields(data.get("vectors", {})))
    return 0


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
    result = _mailbox(args).triage(args.id, category=args.category, priority=args.priority,
                                   disposition=args.disposition)
    print(_json(result) if args.json else
          f"{args.id}: category {_none(result.category)}, priority {_none(result.priority)}, "
          f"disposition {_none(result.disposition)}")
    return 0


def _none(value: object) -> str:
    return "none" if value is None else str(value)


def cmd_show(args: argparse.Namespace) -> int:
    msg = _mailbox(args).show(args.id, peek=args.peek)
    if args.raw:
        sys.stdout.buffer.write(msg.raw)
        sys.stdout.buffer.flush()
    elif args.json:
        data = _asdict(msg)
        data.pop("raw")
        print(_json(data))
    else:
        for name, value in msg.headers:
            print(f"{name}: {value}")
        print(f"Folders: {', '.join(msg.folders)}")
        print()
        print(msg.text.rstrip("\n"))
    return 0


class _SyncBar:
    """tqdm on a terminal for the first sync; the runner announces the total it expects."""

    def __init__(self) -> None:
        self.bar: Any = None

    def set_total(self, total: int) -> None:
        if total and sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc="sync", unit="msg", file=sys.stderr, leave=False)

    def __call__(self, n: int) -> None:
        if self.bar is not None:
            self.bar.update(n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def cmd_sync(args: argparse.Namespace) -> int:
    if args.print_unit:
        from oaken import systemd

        print(systemd.unit(args.config, args.account), end="")
        return 0
    box = _mailbox(args)
    if args.daemon:
        from oaken import daemon

        return daemon.run(box.config, account=args.account, index=not args.no_index)
    bar = _SyncBar()
    try:
        result = box.sync(args.account, index=not args.no_index, progress=bar,
                          retried=lambda why: print(f"oaken: {why}", file=sys.stderr))
    finally:
        bar.close()
    report = result.stored
    changed = [f for f in report.folders if not f.skipped]
    print(f"{report.account}: {report.new} new, {sum(f.matched for f in changed)} matched again, "
          f"{sum(f.flags for f in changed)} flag changes, {sum(f.expunged for f in changed)} expunged, "
          f"{sum(f.pushed for f in changed)} local changes pushed; {report.skipped} of {len(report.folders)} "
          f"folders unchanged; {report.seconds:.2f} s")
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
        report = box.reindex(rebuild=args.rebuild, keyword_only=args.keyword_only, progress=keyword_progress,
                             vector_progress=vector_progress)
    finally:
        for done in bars:
            done()
    if args.json:
        print(_json(report))
        return 0
    print(f"{report.indexed} messages indexed ({report.chunks} chunks), {report.updated} updated in place, "
          f"{report.deleted} removed, {report.problems} only partly readable (findable by their headers); "
          f"{report.seconds:.1f} s" + (" (rebuilt)" if report.rebuilt else ""))
    if report.rebuild_reason:
        print(f"index.db was built again from raw.db: {report.rebuild_reason}")
    vec = report.vectors
    if vec and vec.get("code") == "disk_full":  # work left that waits on the user
        print(f"oaken: vectors: not updated: {vec['error']}", file=sys.stderr)
        return 1
    if vec and "error" in vec:
        print(f"vectors: not updated: {vec['error']}")
    elif vec:
        print(f"vectors: {vec.get('embedded', 0)} chunks embedded, {vec.get('pending', 0)} pending "
              f"({vec.get('model')}, {vec.get('seconds', 0):.1f} s)")
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    if args.limit < 0 or args.offset < 0:
        raise UsageError("--limit and --offset take a number of 0 or more", "search")
    from oaken.mailbox import Mailbox

    query = " ".join(args.query)
    params = dict(limit=args.limit, offset=args.offset, account=args.account, thread=args.thread, sort=args.sort,
                  explain=args.explain)
    # not _config(): a search logs nothing, and structlog's import would double a cold call's time.
    # A config named on the command line is read whole, daemon or not (a bad one is refused, rc 2),
    # and only a daemon in the data directory it names may answer; without one, a warm daemon's
    # answer is printed as it came and this process loads no typed config, store or engine.
    box = Mailbox(config=args.config, daemon=not args.no_daemon)
    if args.config:
        box.config  # noqa: B018 - read now, so a bad file is refused before a daemon is asked
    warned: list[str] = []
    data, by_daemon = box.search_json(query, warn=warned.append, **params)
    for why in warned:
        print(f"oaken: warning: {why}", file=sys.stderr)
    if not by_daemon and not warned and not args.no_daemon and box.loads_model():
        print("oaken: no search daemon is running, so this process loaded the model itself; "
              "`oaken sync --daemon` keeps it loaded and answers faster", file=sys.stderr)
    from oaken.search.client import View

    response = View(data)
    for warning in response.warnings:
        print(f"oaken: warning: {warning}", file=sys.stderr)
    if response.degraded:
        print(f"oaken: {response.mode} results only ({response.degraded_reason})", file=sys.stderr)
    fmt = "json" if args.json else args.format
    if fmt == "json":
        print(_json({"format_version": FORMAT_VERSION, **_plain(response)}))
    elif fmt == "jsonl":  # one hit a line, for jq and line-by-line readers
        import json

        for hit in _plain(response)["hits"]:
            print(json.dumps({"format_version": FORMAT_VERSION, **hit}, ensure_ascii=False))
    elif fmt == "ids":
        for hit in response.hits:
            print(hit.id)
    else:
        from oaken.search import render

        tty = sys.stdout.isatty()
        color = args.color == "always" or (args.color == "auto" and tty and not os.environ.get("NO_COLOR"))
        # piped into grep or a file, the table keeps whole subjects instead of fitting a terminal
        print(render.table(response, color=color, width=None if tty else 160))
    # the search could not choose an account (an unknown one, several and none named, no mail):
    # the warning above names those there are; a script must not take it for "nothing found"
    return 0 if getattr(response, "account", None) else 1


def _plain(response: Any) -> dict[str, Any]:
    """A response as JSON-ready data: the daemon's answer is already a dict (client.View)."""
    if isinstance(response, dict):
        return dict(response)
    import json

    return json.loads(_json(response))


# ---- argument parsing ----------------------------------------------------------------------

class _Formatter(argparse.HelpFormatter):
    """argparse's formatter, told the width so that it does not import shutil to ask (a cold search
    builds one per option)."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        from oaken.search.render import terminal_columns

        super().__init__(prog, indent_increment, max_help_position, width or terminal_columns() - 2)


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message, self.prog.partition(" ")[2] or None)  # "oaken search" -> search


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """Every command's parser, or only that of the command `only` (a cold search need not build eight)."""
    p = _Parser(prog="oaken", description="Local-first mail search.")
    p.add_argument("--config", help="config file (default: $OAKEN_HOME/config.toml or ~/.config/oaken/config.toml)")
    from oaken import __version__

    p.add_argument("--version", action="version", version=f"oaken {__version__}")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)  # none given: main says which there are

    if only in (None, "init"):
        s = sub.add_parser("init", help="write a starting config file, or add an account to it")
        s.add_argument("--force", action="store_true",
                       help="start a new file even if one exists (the old one is kept beside it as .bak)")
        s.add_argument("--account", help="name of the account to add (default: main); an existing config "
                                         "file keeps its accounts and settings and gains this one")
        s.add_argument("--host")
        s.add_argument("--port", type=int)
        s.add_argument("--username")
        s.add_argument("--tls", default="implicit", choices=["implicit", "starttls", "none"])
        s.add_argument("--password-command")
        s.set_defaults(func=cmd_init)

    if only in (None, "import"):
        s = sub.add_parser("import", help="import Maildir folders, mbox files or folders of .eml files")
        s.add_argument("paths", nargs="+")
        s.add_argument("--account", help="account to import into (default: default_account, else 'local')")
        s.add_argument("--no-index", action="store_true", help="do not update the keyword index afterwards")
        s.add_argument("--json", action="store_true")
        s.set_defaults(func=cmd_import)

    if only in (None, "status"):
        s = sub.add_parser("status", help="what raw.db and the indexes hold")
        s.add_argument("--json", action="store_true")
        s.set_defaults(func=cmd_status)

    if only in (None, "triage"):
        s = sub.add_parser("triage", help="set a message's category, priority or disposition")
        s.add_argument("id", type=int)
        s.add_argument("--category", help="one of [triage] categories in the config (default: work, personal, "
                                          "finance, travel, shopping, newsletters, notifications, social)")
        s.add_argument("--priority", type=int, help="0-3, 3 the most urgent")
        s.add_argument("--disposition", choices=["inbox", "archived", "discarded"],
                       help="discarded mail is left out of searches unless in: names it")
        s.add_argument("--json", action="store_true")
        s.set_defaults(func=cmd_triage)

    if only in (None, "show"):
        s = sub.add_parser("show", help="print a message and mark it read")
        s.add_argument("id", type=int)
        s.add_argument("--peek", action="store_true", help="leave it unread")
        s.add_argument("--raw", action="store_true", help="print the raw RFC 822 bytes")
        s.add_argument("--json", action="store_true")
        s.set_defaults(func=cmd_show)

    if only in (None, "sync"):
        s = sub.add_parser("sync", help="mirror IMAP folders into raw.db")
        mode = s.add_mutually_exclusive_group()
        mode.add_argument("--once", action="store_true", help="one pass, then exit (the default)")
        mode.add_argument("--daemon", action="store_true", help="keep syncing, indexing and answering searches")
        s.add_argument("--account")
        s.add_argument("--no-index", action="store_true", help="do not index after syncing")
        s.add_argument("--print-unit", action="store_true",
                       help="print a systemd user unit that runs this oaken's daemon, and exit")
        s.set_defaults(func=cmd_sync)

    if only in (None, "reindex"):
        s = sub.add_parser("reindex", help="bring index.db and the vectors up to date")
        s.add_argument("--rebuild", action="store_true", help="delete both indexes and build them again")
        s.add_argument("--keyword-only", action="store_true", help="skip the vectors")
        s.add_argument("--json", action="store_true")
        s.set_defaults(func=cmd_reindex)

    if only in (None, "search"):
        s = sub.add_parser("search", help="search mail: words, \"phrases\", -exclusions, from: after: label: ...",
                           epilog="A word starting with - looks like an option to the shell's argument parser: "
                                  "put -- before the query (oaken search -- invoice -draft) or quote it whole.")
        s.add_argument("query", nargs="*", help="words, \"phrases\", -exclusions and operators "
                                                     "(README.md, \"Search\")")
        s.add_argument("--account")
        s.add_argument("--limit", type=int, default=10)
        s.add_argument("--offset", type=int, default=0)
        s.add_argument("--sort", choices=["relevance", "date"], default="relevance")
        s.add_argument("--thread", type=int)
        s.add_argument("--format", choices=["text", "json", "jsonl", "ids"], default="text",
                       help="text (a table), json (the whole response), jsonl (a hit a line) or ids "
                            "(a message id a line); docs/cli.md describes each, with format_version")
        s.add_argument("--json", action="store_true", help="the same as --format json")
        s.add_argument("--color", choices=["auto", "always", "never"], default="auto",
                       help="bold matches and subjects: auto means on a terminal unless NO_COLOR is set")
        s.add_argument("--explain", action="store_true")
        s.add_argument("--no-daemon", action="store_true", help="search in this process even if a daemon runs")
        s.set_defaults(func=cmd_search)
    return p


def _command(argv: list[str]) -> str | None:
    """The command word, when argv names one before any option other than --config."""
    i = 0
    while i < len(argv):
        if argv[i] == "--config":
            i += 2
        elif argv[i].startswith("--config="):
            i += 1
        else:
            return argv[i] if argv[i] in COMMANDS else None
    return None


COMMANDS = ("init", "import", "status", "triage", "show", "sync", "reindex", "search")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        args, extra = build_parser(_command(argv)).parse_known_args(argv)
        if args.command is None:
            raise UsageError(f"give a command: {', '.join(COMMANDS)} (`oaken --help` says what each does)")
        if extra:
            raise _unrecognized(args, extra, argv)
        return args.func(args)
    except UsageError as e:
        print(f"oaken {e.command}: {e}" if e.command else f"oaken: {e}", file=sys.stderr)
        return 2
    except ConfigError as e:
        print(f"oaken: config: {e}", file=sys.stderr)
        return 2
    except TriageError as e:  # a value on the command line outside [triage]'s vocabulary
        print(f"oaken triage: {e}", file=sys.stderr)
        return 2
    except OakenError as e:
        print(f"oaken: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("oaken: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as e:
        if type(e).__module__ != "apsw":
            raise  # a bug: its traceback is the report
        print(f"oaken: {_sqlite_failure(e)}", file=sys.stderr)
        return 1


def _unrecognized(args: argparse.Namespace, extra: list[str], argv: list[str]) -> UsageError:
    message = f"unrecognized arguments: {' '.join(extra)}"
    if args.command == "search" and any(a.startswith("-") and not a.startswith("--") for a in extra):
        # `oaken search virus -outlook`: the exclusion was taken for an option
        words = set(args.query) | set(extra)
        after = argv[argv.index("search") + 1:]
        query = " ".join(a for a in after if a in words)
        message += f"; a query with -exclusions goes after --: oaken search -- {query}"
    return UsageError(message, args.command)


def _sqlite_failure(e: Exception) -> str:
    """One line for a SQLite error that reached the command: raw.db named when it was raw.db's."""
    from oaken.store import DAMAGE, store_error

    error = store_error(e)
    if error is not None:
        return str(error)
    if isinstance(e, DAMAGE):
        return (f"a SQLite file other than raw.db cannot be read ({e}); the indexes are built from raw.db: "
                "`oaken reindex --rebuild` makes them again")
    return f"SQLite: {type(e).__name__}: {e}"


if __name__ == "__main__":
    sys.exit(main())
