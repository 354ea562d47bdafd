"""The few settings a no-change sync check needs (one account, the data directory, the log level),
read from config.toml without oaken.config's dataclasses.

Why: a cold `oaken sync` that finds nothing new should cost little more than its IMAP round
trips, and the typed config's import is a large part of what it costs today. This reader is
strict rather than complete: it answers only for a file whose accounts, [paths] and [log] it can
read exactly as oaken.config does (the same keys, types, choices and defaults; the same refusals,
as None), and None for anything else, so that the full command reads the file and says what is
wrong. The other tables are only checked to be tables: their values are the full command's.
"""

from __future__ import annotations

import os

from oaken import paths

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing on the cold path
if TYPE_CHECKING:
    from typing import Any

_TOP = ("default_account", "accounts", "paths", "search", "index", "embedder", "triage", "daemon", "mcp", "log")
_SECRETS = ("password", "password_command", "password_env", "password_file")
# oaken.config.AccountConfig's keys: (default, the type a value must have, its choices)
_ACCOUNT: dict[str, tuple[Any, str, tuple[str, ...]]] = {
    "host": ("", "str", ()),
    "port": (0, "int", ()),
    "tls": ("implicit", "str", ("implicit", "starttls", "none")),
    "allow_plaintext": (False, "bool", ()),
    "ca_file": (None, "str", ()),
    "username": ("", "str", ()),
    "auth": ("password", "str", ("password", "xoauth2", "oauthbearer")),
    "password": (None, "str", ()),
    "password_command": (None, "str", ()),
    "password_env": (None, "str", ()),
    "password_file": (None, "str", ()),
    "oauth2_token_command": (None, "str", ()),
    "folders": (("*",), "strings", ()),
    "exclude": ((), "strings", ()),
    "batch_size": (500, "int", ()),
    "timeout_seconds": (60.0, "float", ()),
}
_LOG = {"format": ("console", "json"), "level": ("debug", "info", "warning", "error")}
_LOOPBACK = ("localhost", "127.0.0.1", "::1")  # hosts oaken.config lets a password reach in the clear


class Account:
    """An [accounts.NAME] table with oaken.config's defaults filled in (its attribute names)."""

    host: str
    port: int
    tls: str
    allow_plaintext: bool
    ca_file: str | None
    username: str
    auth: str
    password: str | None
    password_command: str | None
    password_env: str | None
    password_file: str | None
    oauth2_token_command: str | None
    folders: tuple[str, ...]
    exclude: tuple[str, ...]
    batch_size: int
    timeout_seconds: float

    def __init__(self, name: str, values: dict[str, Any]):
        self.name = name
        for key, (default, _kind, _choices) in _ACCOUNT.items():
            setattr(self, key, values.get(key, default))

    @property
    def effective_port(self) -> int:
        return self.port or (993 if self.tls == "implicit" else 143)


class Settings:
    """What the no-change check reads: the account, the data directory, the log settings."""

    def __init__(self, account: Account, data_dir: str, log_level: str, log_file: str | None):
        self.account = account
        self.data_dir = data_dir
        self.log_level = log_level
        self.log_file = log_file


CHECKED_NAME = "config-checked"  # in the data directory: the config file the full command accepted


def _file_key(path: str, st: os.stat_result) -> str:
    """A config file as it is (path, size, times, inode): another key, another file."""
    return f"{os.path.realpath(path)}\n{st.st_size} {st.st_mtime_ns} {st.st_ctime_ns} {st.st_ino}\n"


def remember_checked(config_path: str, data_dir: str) -> None:
    """Say that oaken.config accepted this config file as it is now (after a full sync): read()
    answers only for a file the full reader has accepted, so that a wrong value in a table this
    reader does not check ([search], [index], ...) is still refused, with its reason, by the next
    `oaken sync`. Best effort: without the note the full pass runs."""
    try:
        key = _file_key(config_path, os.stat(config_path))
        with open(os.path.join(data_dir, CHECKED_NAME), "w", encoding="utf-8") as f:
            f.write(key)
    except OSError:
        pass


def _was_checked(key: str, data_dir: str) -> bool:
    """Whether oaken.config accepted the config file of this key (remember_checked)."""
    try:
        with open(os.path.join(data_dir, CHECKED_NAME), encoding="utf-8") as f:
            return f.read() == key
    except OSError:
        return False


def read(config_path: str | None, account: str | None) -> Settings | None:
    """The settings for `oaken [--config config_path] sync [--account account]`, or None when
    this reader cannot vouch that oaken.config would read the same (or would accept the file):
    also when the full reader has not accepted the file as it was read (remember_checked)."""
    path = config_path or paths.config_file()
    try:
        with open(path, "rb") as f:
            raw = f.read()
            st = os.fstat(f.fileno())  # of the bytes read: the key and the mode are theirs
    except OSError:  # no file (no account: the full command says so), or unreadable
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    from oaken.sync import toml_lite

    data = toml_lite.loads(text)  # a plain file without tomllib's import; anything else with it
    if data is None:
        import tomllib

        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError:
            return None
    settings = settings_of(data, account, st.st_mode)
    if settings is None or not _was_checked(_file_key(path, st), settings.data_dir):
        return None
    return settings


def settings_of(data: dict[str, Any], account: str | None, mode: int = 0o600) -> Settings | None:
    """read() for a parsed document; `mode`: the file's, as a password in it needs it private."""
    if any(key not in _TOP for key in data):
        return None
    for key in _TOP[2:]:
        if not isinstance(data.get(key, {}), dict):
            return None
    tables = data.get("accounts", {})
    if not isinstance(tables, dict) or not tables:
        return None
    accounts = {}
    for name, table in tables.items():
        values = _account_values(table)
        if values is None:
            return None
        accounts[name] = Account(name, values)
    default = data.get("default_account")
    if default is not None and (not isinstance(default, str) or default not in accounts):
        return None
    name = account or default or (next(iter(accounts)) if len(accounts) == 1 else None)
    if name not in accounts:
        return None
    if mode & 0o077 and any(a.password for a in accounts.values()):
        return None  # oaken.config refuses a password in a file others may read
    data_dir = data.get("paths", {}).get("data_dir")
    if set(data.get("paths", {})) - {"data_dir"} or not isinstance(data_dir, (str, type(None))):
        return None
    log = data.get("log", {})
    if set(log) - {"format", "level", "file"} or any(log.get(k, v[0]) not in v for k, v in _LOG.items()):
        return None
    if not isinstance(log.get("file", ""), str):
        return None
    return Settings(accounts[name], paths.data_dir_of(data_dir), log.get("level", "info"), log.get("file"))


def _account_values(table: Any) -> dict[str, Any] | None:
    """An account table's values, or None where oaken.config would refuse it or read it otherwise."""
    if not isinstance(table, dict) or any(key not in _ACCOUNT for key in table):
        return None
    for key, value in table.items():
        _default, kind, choices = _ACCOUNT[key]
        if not _is(value, kind) or (choices and value not in choices):
            return None
    values: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in table.items()}
    if "timeout_seconds" in values:
        values["timeout_seconds"] = float(values["timeout_seconds"])
    host, port, tls = values.get("host", ""), values.get("port", 0), values.get("tls", "implicit")
    if not host or not values.get("username") or port > 65535 or values.get("batch_size", 500) == 0:
        return None
    if tls == "none" and not (values.get("allow_plaintext") or host in _LOOPBACK):
        return None  # oaken.config allows other loopback addresses too: the full command reads those
    secrets = [k for k in _SECRETS if values.get(k)]
    auth = values.get("auth", "password")
    if len(secrets) > 1 or (auth == "password" and not secrets):
        return None
    if auth != "password" and not values.get("oauth2_token_command"):
        return None
    return values


def _is(value: Any, kind: str) -> bool:
    if kind == "str":
        return isinstance(value, str)
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool) and value >= 0
    if kind == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0
    return isinstance(value, list) and all(isinstance(v, str) for v in value)  # strings
