"""The `oaken` command's entry point: `oaken search` answered by a running daemon (or background
search server) is sent and printed here, before argparse, the typed config or the Mailbox load;
and a cold `oaken sync` that finds nothing new is answered by oaken.sync.nochange.

Why: a warm search is the command people run most, and the full command's start-up (argparse and
its gettext/locale, the command's modules) costs more than the daemon's answer. This path reads
only what it needs: the arguments (a plain subset of `oaken search`'s options), the socket's
path (oaken.paths, the config file's `[paths] data_dir` only), then asks the daemon for the
search rendered (oaken.quick_search: version handshake and request id kept) and prints what it
made with the full command's own function (oaken.cli_output.render_search), so the bytes are the same.

Anything else goes to oaken.cli.main, silently: another command, an option or spelling it does
not know (argparse's abbreviations, `--config`, `--no-daemon`, a value that is not plain), no
socket or no one on it, or a daemon that answers with an error (the full command asks again and
says what it says today).
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing on the cold search path
if TYPE_CHECKING:
    from typing import Any

# `oaken search`'s options as oaken.cli.build_parser declares them: name -> (default, choices);
# choices None: a whole number of 0 or more; () : any text; a flag's default is False
_VALUED: dict[str, tuple[Any, tuple[str, ...] | None]] = {
    "--limit": (10, None),
    "--offset": (0, None),
    "--thread": (None, None),
    "--account": (None, ()),
    "--sort": ("relevance", ("relevance", "date")),
    "--format": ("text", ("text", "json", "jsonl", "ids")),
    "--color": ("auto", ("auto", "always", "never")),
}
_FLAGS = ("--json", "--explain")


def main() -> int:
    """The console script's `main`: the fast path when it can answer, else the full command."""
    argv = sys.argv[1:]
    try:
        code = fast(argv)
    except KeyboardInterrupt:  # as oaken.cli.main says it
        print("oaken: interrupted", file=sys.stderr)
        return 130
    if code is not None:
        return code
    from oaken.cli import main as full

    return full(argv)


def fast(argv: list[str]) -> int | None:
    """The exit code of a command answered here, or None: the full command runs it."""
    if argv[:1] == ["search"]:
        options = parse_search(argv[1:])
        return None if options is None else search(options, argv[1:])
    if "sync" in argv[:3]:  # `oaken [--config FILE] sync ...`: a no-change pass (oaken/sync/nochange.py)
        from oaken.sync import nochange

        sync_options = nochange.parse_argv(argv)
        return None if sync_options is None else nochange.run(sync_options)
    return None


def parse_search(args: list[str]) -> dict[str, Any] | None:
    """The options of `oaken search ARGS` as argparse would read them, or None when the arguments
    are not in the plain form this reader knows (argparse then reads them, and reports a fault)."""
    options: dict[str, Any] = {name[2:]: default for name, (default, _) in _VALUED.items()}
    options.update({flag[2:]: False for flag in _FLAGS})
    words: list[str] = []
    closed = False  # an option came after the query's words: argparse takes no more words
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            if words or "--" in args[i:]:
                return None  # argparse's handling of these differs between Python versions
            words.extend(args[i:])
            break
        if not arg.startswith("-"):
            if closed:
                return None  # argparse refuses a second run of words
            words.append(arg)
            continue
        if words:
            closed = True
        if arg in _FLAGS:
            options[arg[2:]] = True
            continue
        name, eq, value = arg.partition("=")
        if name not in _VALUED:
            return None  # -h, --config, --no-daemon, an abbreviation, a word starting with -
        if not eq:
            if i >= len(args):
                return None
            value = args[i]
            i += 1
        if not value or value.startswith("-"):
            return None
        choices = _VALUED[name][1]
        if choices is None:
            if not (value.isascii() and value.isdigit()):
                return None
            options[name[2:]] = int(value)
        elif choices and value not in choices:
            return None
        else:
            options[name[2:]] = value
    options["query"] = words
    return options


def search(options: dict[str, Any], args: list[str]) -> int | None:
    """Ask the daemon for this search rendered (oaken.quick_search) and print it; None when no
    daemon answered with one (the full command then does what it does today, asking again). A
    daemon that failed in a way this process may search instead (one that timed out, or speaks
    another protocol) is said as the full command says it, and the full command searches here
    without asking it a second time."""
    try:
        from oaken import paths, quick_search

        where = paths.usual_socket_file()
        if where is None:
            return None  # a config file that needs the full reader
        params = {k: options[k] for k in ("limit", "offset", "account", "thread", "sort", "explain")}
        fmt = "json" if options["json"] else options["format"]
        answer = quick_search.ask(where, " ".join(options["query"]), params, fmt, options["color"])
    except Exception as e:  # a daemon that failed or is of another protocol, a bug here: the full path says
        if getattr(e, "fallback", False):
            print(f"oaken: warning: {e}; searching in this process instead", file=sys.stderr)
            from oaken.cli import main as full

            return full(["search", "--no-daemon", *args])
        return None
    if answer is None:
        return None
    try:
        sys.stderr.write(answer["stderr"])
        sys.stdout.write(answer["stdout"])
        sys.stdout.flush()
    except BrokenPipeError:
        return 0  # as oaken.cli.main: a reader that stopped reading (| head) is no failure
    return int(answer["exit"])


if __name__ == "__main__":  # `python -m oaken.fastpath ARGS`: the console script's path, for benchmarks
    sys.exit(main())
