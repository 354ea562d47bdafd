"""Where Oaken's files live, answered without the typed config.

A cold `oaken search` that the daemon answers needs only the socket's path, and loading
oaken.config (dataclasses, validation) would cost more than the search itself. oaken.config asks
this module too, so the two can never disagree.
"""

from __future__ import annotations

import os

SOCKET_NAME = "search.sock"
VECTORS_DIR = "vectors"  # the LanceDB store in the data directory (oaken.index.vectors)


def config_file() -> str:
    """$OAKEN_HOME/config.toml, else the XDG config home's oaken/config.toml."""
    home = os.environ.get("OAKEN_HOME")
    if home:
        return os.path.join(home, "config.toml")
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(xdg, "oaken", "config.toml")


def default_data_dir() -> str:
    """$OAKEN_HOME, else the XDG data home's oaken/: where data lives when [paths] data_dir is unset."""
    home = os.environ.get("OAKEN_HOME")
    if home:
        return home
    xdg = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(xdg, "oaken")


def data_dir_of(configured: str | None) -> str:
    """The data directory for a `[paths] data_dir` value ("" means the default)."""
    return os.path.expanduser(configured) if configured else default_data_dir()


def vectors_dir(data_dir: str | os.PathLike[str]) -> str:
    """Where the vector store lives: a keyword search tests it without importing numpy or LanceDB."""
    return os.path.join(data_dir, VECTORS_DIR)


def socket_file(config_path: str | None = None) -> str | None:
    """The search socket's path for a config file (default: the usual one), or None when the file
    cannot be read as TOML: the caller then loads the config properly and reports the fault."""
    try:
        with open(config_path or config_file(), "rb") as f:
            text = f.read()
    except FileNotFoundError:
        if config_path:
            return None
        text = b""  # no config file at the usual place: every default
    except OSError:
        return None
    configured = ""
    if b"data_dir" in text:  # TOML is parsed only when the file may name a data directory
        import tomllib

        try:
            value = tomllib.loads(text.decode("utf-8")).get("paths", {}).get("data_dir", "")
        except (tomllib.TOMLDecodeError, UnicodeDecodeError, AttributeError):
            return None
        if not isinstance(value, str):
            return None
        configured = value
    return os.path.join(data_dir_of(configured), SOCKET_NAME)


def usual_socket_file() -> str | None:
    """socket_file() for the usual config file, without tomllib (~15 ms) when its only
    mention of data_dir is a plain one-line string under [paths]; anything else is read by tomllib
    there, which also decides what a file it cannot read means."""
    try:
        with open(config_file(), "rb") as f:
            text = f.read()
    except OSError:
        return socket_file()
    value = plain_data_dir(text.decode("utf-8", "replace")) if b"data_dir" in text else ""
    if value is None:
        return socket_file()
    return os.path.join(data_dir_of(value), SOCKET_NAME)


def plain_data_dir(text: str) -> str | None:
    """The value of `data_dir = "..."` (or '...') under a `[paths]` header, when the file says it
    in that one plain way: one such line, no escapes, no multi-line strings; None for anything
    else, so that a full TOML reader decides."""
    if '"""' in text or "'''" in text:
        return None
    table, found = "", None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            head = line.partition("#")[0].rstrip()
            if line.startswith("[[") or not head.endswith("]"):
                table = "?"  # an array of tables, or a line of an array: not [paths]
                continue
            table = head[1:-1].strip()
            continue
        if "data_dir" not in line:
            continue
        key, eq, rest = line.partition("=")
        rest = rest.strip()
        if found is not None or table != "paths" or not eq or key.strip() != "data_dir" or len(rest) < 2:
            return None
        quote = rest[0]
        value, close, after = rest[1:].partition(quote)
        after = after.strip()
        if quote not in "\"'" or not close or "\\" in value or (after and not after.startswith("#")):
            return None
        found = value
    return found
