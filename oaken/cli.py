"""`oaken`: parses arguments, calls the library, prints the result, turns errors into one line.

Exit codes: 0 done (a search with no hits too), 1 a failure, 2 a usage error or a bad config or value.

A cold `oaken search` is the command people run most: this module imports only what argument
parsing needs, only the command asked for gets a parser, and its code is imported when it runs
(oaken.cli_search; the others are in oaken.cli_commands).
"""

from __future__ import annotations

import argparse
import sys

from oaken.errors import ConfigError, OakenError, TriageError, UsageError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing on the cold search path
if TYPE_CHECKING:
    from typing import Any, Callable


# ---- argument parsing ----------------------------------------------------------------------


class _Formatter(argparse.HelpFormatter):
    """argparse's formatter, told the width so that it does not import shutil to ask (a cold search
    builds one per option)."""

    def __init__(
        self, prog: str, indent_increment: int = 2, max_help_position: int = 24, width: int | None = None
    ) -> None:
        from oaken.terminal import columns

        super().__init__(prog, indent_increment, max_help_position, width or columns() - 2)


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
        s.add_argument(
            "--force",
            action="store_true",
            help="start a new file even if one exists (the old one is kept beside it as .bak)",
        )
        s.add_argument(
            "--account",
            help="name of the account to add (default: main); an existing config "
            "file keeps its accounts and settings and gains this one",
        )
        s.add_argument("--host")
        s.add_argument("--port", type=int)
        s.add_argument("--username")
        s.add_argument("--tls", default="implicit", choices=["implicit", "starttls", "none"])
        s.add_argument("--password-command")

    if only in (None, "import"):
        s = sub.add_parser("import", help="import Maildir folders, mbox files or folders of .eml files")
        s.add_argument("paths", nargs="+")
        s.add_argument("--account", help="account to import into (default: default_account, else 'local')")
        s.add_argument("--no-index", action="store_true", help="do not update the keyword index afterwards")
        s.add_argument("--json", action="store_true")

    if only in (None, "status"):
        s = sub.add_parser("status", help="what raw.db and the indexes hold")
        s.add_argument("--json", action="store_true")

    if only in (None, "triage"):
        s = sub.add_parser("triage", help="set a message's category, priority or disposition")
        s.add_argument("id", type=int)
        s.add_argument(
            "--category",
            help="one of [triage] categories in the config (default: work, personal, "
            "finance, travel, shopping, newsletters, notifications, social)",
        )
        s.add_argument("--priority", type=int, help="0-3, 3 the most urgent")
        s.add_argument(
            "--disposition",
            choices=["inbox", "archived", "discarded"],
            help="discarded mail is left out of searches unless in: names it",
        )
        s.add_argument("--json", action="store_true")

    if only in (None, "show"):
        s = sub.add_parser("show", help="print a message and mark it read")
        s.add_argument("id", type=int)
        s.add_argument("--peek", action="store_true", help="leave it unread")
        s.add_argument("--raw", action="store_true", help="print the raw RFC 822 bytes")
        s.add_argument("--json", action="store_true")

    if only in (None, "sync"):
        s = sub.add_parser("sync", help="mirror IMAP folders into raw.db")
        mode = s.add_mutually_exclusive_group()
        mode.add_argument("--once", action="store_true", help="one pass, then exit (the default)")
        mode.add_argument("--daemon", action="store_true", help="keep syncing, indexing and answering searches")
        s.add_argument("--account")
        s.add_argument("--no-index", action="store_true", help="do not index after syncing")
        s.add_argument(
            "--print-unit",
            action="store_true",
            help="print a systemd user unit that runs this oaken's daemon, and exit",
        )

    if only in (None, "reindex"):
        s = sub.add_parser("reindex", help="bring index.db and the vectors up to date")
        s.add_argument("--rebuild", action="store_true", help="delete both indexes and build them again")
        s.add_argument("--keyword-only", action="store_true", help="skip the vectors")
        s.add_argument("--json", action="store_true")

    if only in (None, "search"):
        s = sub.add_parser(
            "search",
            help='search mail: words, "phrases", -exclusions, from: after: label: ...',
            epilog="A word starting with - looks like an option to the shell's argument parser: "
            "put -- before the query (oaken search -- invoice -draft) or quote it whole.",
        )
        s.add_argument("query", nargs="*", help='words, "phrases", -exclusions and operators (README.md, "Search")')
        s.add_argument("--account")
        s.add_argument("--limit", type=int, default=10)
        s.add_argument("--offset", type=int, default=0)
        s.add_argument("--sort", choices=["relevance", "date"], default="relevance")
        s.add_argument("--thread", type=int)
        s.add_argument(
            "--format",
            choices=["text", "json", "jsonl", "ids"],
            default="text",
            help="text (a table), json (the whole response), jsonl (a hit a line) or ids "
            "(a message id a line); docs/cli.md describes each, with format_version",
        )
        s.add_argument("--json", action="store_true", help="the same as --format json")
        s.add_argument(
            "--color",
            choices=["auto", "always", "never"],
            default="auto",
            help="bold matches and subjects: auto means on a terminal unless NO_COLOR is set",
        )
        s.add_argument("--explain", action="store_true")
        s.add_argument("--no-daemon", action="store_true", help="search in this process even if a daemon runs")

    if only in (None, "mcp"):
        s = sub.add_parser(
            "mcp",
            help="serve search to AI agents: an MCP server on stdin/stdout (docs/mcp.md)",
            description="An MCP server over stdio for an agent's client to start: tools search, show, thread, "
            "status (and triage with [mcp] allow_triage = true). Read-only; never marks mail read unless asked.",
        )
        s.add_argument("--no-daemon", action="store_true", help="search in this process even if a daemon runs")
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


COMMANDS = ("init", "import", "status", "triage", "show", "sync", "reindex", "search", "mcp")


def _handler(command: str) -> Callable[[argparse.Namespace], int]:
    """The function that runs `command`, imported now: a cold search loads no other command."""
    if command == "search":
        from oaken.cli_search import cmd_search

        return cmd_search
    from oaken import cli_commands

    return getattr(cli_commands, f"cmd_{command}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        args, extra = build_parser(_command(argv)).parse_known_args(argv)
        if args.command is None:
            raise UsageError(f"give a command: {', '.join(COMMANDS)} (`oaken --help` says what each does)")
        if extra:
            raise _unrecognized(args, extra, argv)
        return _handler(args.command)(args)
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
        after = argv[argv.index("search") + 1 :]
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
        return (
            f"a SQLite file other than raw.db cannot be read ({e}); the indexes are built from raw.db: "
            "`oaken reindex --rebuild` makes them again"
        )
    return f"SQLite: {type(e).__name__}: {e}"


if __name__ == "__main__":
    sys.exit(main())
