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
