"""What the commands print beside their results: JSON, and progress on stderr (a bar on a
terminal, a line every PROGRESS_EVERY seconds elsewhere). Imports nothing at the top that a cold
`oaken search` would not load anyway."""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing on the cold search path
if TYPE_CHECKING:
    from typing import Any, Callable

PROGRESS_EVERY = 10.0  # seconds between progress lines when stderr is not a terminal
# the JSON forms of `oaken search` (docs/cli.md): raised when a field changes meaning or goes away
FORMAT_VERSION = 1


def to_json(obj: Any) -> str:
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


def as_dict(obj: Any) -> dict[str, Any]:
    from dataclasses import asdict

    return asdict(obj)


def plain(response: Any) -> dict[str, Any]:
    """A response as JSON-ready data: the daemon's answer is already a dict (client.View)."""
    if isinstance(response, dict):
        return dict(response)
    import json

    return json.loads(to_json(response))


def print_search(data: dict[str, Any], *, fmt: str, color: str) -> int:
    """Print a search response (its JSON dict) as `oaken search` does, its warnings on stderr, and
    return the exit code. The full command (oaken.cli_search) prints through here; the fast path
    (oaken.quick_search) prints what the daemon made with render_search for the same settings."""
    from oaken.terminal import table_settings

    on, width = table_settings(color)
    out, err, code = render_search(data, fmt=fmt, color=on, width=width)
    sys.stderr.write(err)
    sys.stdout.write(out)
    return code


def render_search(data: dict[str, Any], *, fmt: str, color: bool, width: int) -> tuple[str, str, int]:
    """(stdout, stderr, exit code) of `oaken search` for a response (its JSON dict), in `fmt`, its
    table `width` columns wide: one function for the command's own printing and the daemon's
    rendering for the fast path, so that the two are the same bytes."""
    from oaken.search.client import View

    response = View(data)
    err = [f"oaken: warning: {warning}\n" for warning in response.warnings]
    if response.degraded:
        err.append(f"oaken: {response.mode} results only ({response.degraded_reason})\n")
    if fmt == "json":
        out = to_json({"format_version": FORMAT_VERSION, **plain(response)}) + "\n"
    elif fmt == "jsonl":  # one hit a line, for jq and line-by-line readers
        import json

        out = "".join(
            json.dumps({"format_version": FORMAT_VERSION, **hit}, ensure_ascii=False) + "\n"
            for hit in plain(response)["hits"]
        )
    elif fmt == "ids":
        out = "".join(f"{hit.id}\n" for hit in response.hits)
    else:
        from oaken.search import render

        out = render.table(response, color=color, width=width) + "\n"
    # the search could not choose an account (an unknown one, several and none named, no mail):
    # the warning above names those there are; a script must not take it for "nothing found"
    return out, "".join(err), 0 if getattr(response, "account", None) else 1


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
        print(
            f"oaken: {desc}: {state['done']}{of} {unit} ({time.monotonic() - started:.0f} s)",
            file=sys.stderr,
            flush=True,
        )

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


class SyncBar:
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
