"""Which account and which of its folders a pass syncs, and which of them it may skip unopened:
the config's account, every subscribed folder but \\Junk and \\Trash narrowed by the `folders` and
`exclude` patterns, and a folder whose STATUS shows nothing new since our state."""

from __future__ import annotations

from oaken import config as config_mod
from oaken.config import AccountConfig, Config
from oaken.errors import ConfigError

# the rules themselves live in folder_rules.py, shared with the cold no-change check (nochange.py)
from oaken.sync.folder_rules import DEFAULT_EXCLUDED_USES, USUAL_NAMES, assumed_uses, unchanged, wanted

__all__ = ["DEFAULT_EXCLUDED_USES", "USUAL_NAMES", "account_config", "assumed_uses", "unchanged", "wanted"]


def account_config(config: Config, account: str | None) -> AccountConfig:
    """The account named (or the default one), or a ConfigError that says which to name."""
    name = config.account(account)
    if not config.accounts:
        raise ConfigError(
            f"{config.source or config_mod.config_path()}: no [accounts.NAME] table; "
            "`oaken init --host ... --username ...` writes one"
        )
    if name is None:
        raise ConfigError(
            f"{config.source}: several accounts ({', '.join(config.accounts)}); "
            "pass --account NAME or set default_account"
        )
    if name not in config.accounts:
        raise ConfigError(f"{config.source}: no account {name!r} (accounts: {', '.join(config.accounts)})")
    return config.accounts[name]
