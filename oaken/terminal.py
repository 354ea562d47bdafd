"""What the terminal a command prints on is: its width and whether to colour. One answer for the
full command, the fast path's client and the daemon rendering for it (oaken.protocol)."""

from __future__ import annotations

import os
import sys

PIPE_WIDTH = 160  # piped into grep or a file, the table keeps whole subjects instead of fitting a terminal


def columns() -> int:
    """shutil.get_terminal_size without importing shutil (and the compression modules it loads)."""
    try:
        return int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        pass
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):
        return 100


def table_settings(color: str) -> tuple[bool, int]:
    """(colour on, width) of `oaken search`'s table on this process's stdout, for `--color COLOR`:
    colour on a terminal unless NO_COLOR is set (https://no-color.org), or when asked for."""
    tty = sys.stdout.isatty()
    on = color == "always" or (color == "auto" and tty and not os.environ.get("NO_COLOR"))
    return on, columns() if tty else PIPE_WIDTH
