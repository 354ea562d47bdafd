"""`oaken search`: the command people run most, so a cold one imports only what it needs here:
a warm daemon's answer is printed as it came, with no typed config, store or engine loaded."""

from __future__ import annotations

import sys

from oaken.cli_output import print_search
from oaken.errors import UsageError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing on the cold search path
if TYPE_CHECKING:
    import argparse


def cmd_search(args: argparse.Namespace) -> int:
    if args.limit < 0 or args.offset < 0:
        raise UsageError("--limit and --offset take a number of 0 or more", "search")
    from oaken.mailbox import Mailbox

    query = " ".join(args.query)
    try:
        query.encode("utf-8")
    except UnicodeEncodeError:  # bytes the locale could not decode, kept by Python as surrogates
        shown = query.encode("utf-8", "surrogateescape").decode("ascii", "backslashreplace")
        raise UsageError(
            f"the query {shown} holds bytes that are not text in this terminal's encoding; "
            "type it as UTF-8 (check LANG / LC_ALL)",
            "search",
        ) from None
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
    # With no daemon answering and vectors present, the first search starts the background search
    # server (oaken.search.background) and answers from keywords; --no-daemon searches here, whole.
    box = Mailbox(config=args.config, daemon=not args.no_daemon, autostart=not args.no_daemon)
    if args.config:
        box.config  # noqa: B018 - read now, so a bad file is refused before a daemon is asked
    warned: list[str] = []
    data, by_daemon = box.search_json(query, warn=warned.append, **params)
    for why in warned:
        print(f"oaken: warning: {why}", file=sys.stderr)
    # said only when it is so: the vector side ran in this process (it loads the model for that)
    loaded_here = "vector" in data.get("timings", {}) and data.get("degraded_reason") != "no_embedder"
    if not by_daemon and not warned and not args.no_daemon and loaded_here:
        print(
            "oaken: no search daemon is running, so this process loaded the model itself; "
            "`oaken sync --daemon` keeps it loaded and answers faster"
            + ("" if box.config.search.server_idle_minutes else " ([search] server_idle_minutes = 0: none is started)"),
            file=sys.stderr,
        )
    return print_search(data, fmt="json" if args.json else args.format, color=args.color)
