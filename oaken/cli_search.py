"""`oaken search`: the command people run most, so a cold one imports only what it needs here:
a warm daemon's answer is printed as it came, with no typed config, store or engine loaded."""

from __future__ import annotations

import os
import sys

from oaken.cli_output import plain, to_json
from oaken.errors import UsageError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing on the cold search path
if TYPE_CHECKING:
    import argparse

# the JSON forms of `oaken search` (docs/cli.md): raised when a field changes meaning or goes away
FORMAT_VERSION = 1


def cmd_search(args: argparse.Namespace) -> int:
    if args.limit < 0 or args.offset < 0:
        raise UsageError("--limit and --offset take a number of 0 or more", "search")
    from oaken.mailbox import Mailbox

    query = " ".join(args.query)
    params = dict(
        limit=args.limit,
        offset=args.offset,
        account=args.account,
        thread=args.thread,
        sort=args.sort,
        explain=args.explain,
    )
    # not cli_commands._config(): a search logs nothing, and structlog's import would double a cold
    # call's time. A config named on the command line is read whole, daemon or not (a bad one is
    # refused, rc 2), and only a daemon in the data directory it names may answer; without one, a
    # warm daemon's answer is printed as it came and this process loads no typed config, store or
    # engine.
    box = Mailbox(config=args.config, daemon=not args.no_daemon)
    if args.config:
        box.config  # noqa: B018 - read now, so a bad file is refused before a daemon is asked
    warned: list[str] = []
    data, by_daemon = box.search_json(query, warn=warned.append, **params)
    for why in warned:
        print(f"oaken: warning: {why}", file=sys.stderr)
    if not by_daemon and not warned and not args.no_daemon and box.loads_model():
        print(
            "oaken: no search daemon is running, so this process loaded the model itself; "
            "`oaken sync --daemon` keeps it loaded and answers faster",
            file=sys.stderr,
        )
    from oaken.search.client import View

    response = View(data)
    for warning in response.warnings:
        print(f"oaken: warning: {warning}", file=sys.stderr)
    if response.degraded:
        print(f"oaken: {response.mode} results only ({response.degraded_reason})", file=sys.stderr)
    fmt = "json" if args.json else args.format
    if fmt == "json":
        print(to_json({"format_version": FORMAT_VERSION, **plain(response)}))
    elif fmt == "jsonl":  # one hit a line, for jq and line-by-line readers
        import json

        for hit in plain(response)["hits"]:
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
