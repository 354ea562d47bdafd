"""Writing config.toml: `oaken init` starting a file, or adding an account to one. Reading it
is oaken/config.py's job; what is written here is checked by that reader first, so a file Oaken
writes is always one it loads back."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oaken import config as config_mod
from oaken.errors import ConfigError


@dataclass(frozen=True)
class Written:
    path: Path
    accounts: tuple[str, ...]  # the accounts the file holds now
    default_account: str | None
    backup: Path | None = None  # where the file it replaced was kept (init --force)
    replaced: str | None = None  # what that file held, in words


def account_table(
    host: str,
    username: str = "",
    *,
    tls: str = "implicit",
    port: int | None = None,
    password_command: str | None = None,
) -> dict[str, Any]:
    """One [accounts.NAME] table as `oaken init` writes it."""
    account: dict[str, Any] = {"host": host, "username": username, "tls": tls}
    if port:
        account["port"] = port
    if password_command:
        account["password_command"] = password_command
    return account


def start(path: Path, name: str = "main", account: dict[str, Any] | None = None, *, force: bool = False) -> Written:
    """A new config: every setting at its default, and `account` as `name` if given. An existing
    file is refused unless `force`, and then kept beside it as .bak, never silently dropped."""
    if path.exists() and not force:
        raise ConfigError(
            f"{path}: exists already; give --host and --username to add an account to it, "
            "or --force to start a new file (the old one is kept beside it as .bak)"
        )
    data: dict[str, Any] = {"default_account": name, "accounts": {name: account}} if account is not None else {}
    config_mod.from_dict(data, source=str(path))  # refuse to write what we would not load back
    defaults = config_mod.to_dict(config_mod.Config())
    out = {**data, **{k: v for k, v in defaults.items() if k not in data}}
    backup = replaced = None
    if path.exists():
        try:
            accounts = read(path).get("accounts")
            names = list(accounts) if isinstance(accounts, dict) else []
            replaced = f"with the accounts {', '.join(names)}" if names else "with no accounts"
        except ConfigError:
            replaced = "not readable as TOML"  # starting over is what --force is for
        backup = path.with_name(path.name + ".bak")
        os.replace(path, backup)
    write(path, out)
    return Written(path, tuple(data.get("accounts", {})), data.get("default_account"), backup, replaced)


def add_account(path: Path, name: str, account: dict[str, Any]) -> Written:
    """One more [accounts.NAME] in an existing config, every other account and setting kept."""
    data = read(path)
    accounts = data.setdefault("accounts", {})
    if not isinstance(accounts, dict):
        raise ConfigError(f"{path}: accounts: expected tables [accounts.NAME], got {accounts!r}")
    if name in accounts:
        raise ConfigError(
            f"{path}: has an account {name!r} already; pass another --account name, or edit that account in the file"
        )
    if "default_account" not in data and len(accounts) <= 1:
        # with one account, commands used it without --account; they still do with two
        data["default_account"] = next(iter(accounts), name)
    accounts[name] = account
    config_mod.from_dict(data, source=str(path))  # refuse to write what we would not load back
    write(path, data)
    return Written(path, tuple(accounts), data.get("default_account"))


def read(path: Path) -> dict[str, Any]:
    import tomllib

    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot be read: {e}") from None


def write(path: Path, data: dict[str, Any]) -> None:
    """Write the config whole or not at all, private (it may name a password command); a new
    config directory is private too (with OAKEN_HOME set, it is the data directory)."""
    import tomli_w

    if not path.parent.exists():
        path.parent.mkdir(parents=True, mode=0o700)
        os.chmod(path.parent, 0o700)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        tomli_w.dump(data, f)
    os.replace(tmp, path)
