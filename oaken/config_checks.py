"""The checks of a config that its types cannot say (oaken.config builds the typed settings, then
asks these): ranges, settings that need one another, an account's password sources, and a config
file that holds a password but others may read. Each error names the file, the key and the value."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import TYPE_CHECKING

from oaken.errors import ConfigError

if TYPE_CHECKING:
    from oaken.config import AccountConfig, Config


def is_loopback(host: str) -> bool:
    """Whether `host` is this machine: the one place a password may go without TLS unasked."""
    if host == "localhost":
        return True
    import ipaddress  # only for an account without TLS: not imported by every command

    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_account(source: str, where: str, a: AccountConfig) -> None:
    """What one account's values must agree on, beyond each value's own type."""
    if not a.host:
        raise ConfigError(f'{source}: {where} host: required, e.g. host = "imap.example.com"')
    if not a.username:
        raise ConfigError(f"{source}: {where} username: required")
    if a.port > 65535:
        raise ConfigError(f"{source}: {where} port: expected 1-65535, got {a.port}")
    if a.tls == "none" and not (a.allow_plaintext or is_loopback(a.host)):
        raise ConfigError(
            f'{source}: {where} tls: "none" sends the password in the clear to {a.host}; '
            'use "implicit" or "starttls", or set allow_plaintext = true if you mean it'
        )
    secrets = [k for k in ("password", "password_command", "password_env", "password_file") if getattr(a, k)]
    if len(secrets) > 1:
        raise ConfigError(f"{source}: {where}: give one of {', '.join(secrets)}, not several")
    if a.auth == "password" and not secrets:
        raise ConfigError(f"{source}: {where}: no password source; set password_command, password_env or password_file")
    if a.auth in ("xoauth2", "oauthbearer") and not a.oauth2_token_command:
        raise ConfigError(f"{source}: {where} oauth2_token_command: required when auth = {a.auth!r}")
    if a.batch_size == 0:
        raise ConfigError(f"{source}: {where} batch_size: expected 1 or more, got 0")


def check_config(source: str, c: Config) -> None:
    """What the settings must agree on across keys and tables, beyond each value's own type."""
    if c.default_account is not None and c.accounts and c.default_account not in c.accounts:
        raise ConfigError(
            f"{source}: default_account: {c.default_account!r} is not one of the accounts ({', '.join(c.accounts)})"
        )
    s = c.search
    if s.time_zone:
        from oaken.search.dates import zone

        try:
            zone(s.time_zone)
        except ValueError as e:
            raise ConfigError(f"{source}: [search] time_zone: {e}") from None
    if s.llm_rewrite and not s.rewrite_command:
        raise ConfigError(f"{source}: [search] rewrite_command: required when llm_rewrite = true")
    if not 0.0 <= s.keyword_min_match <= 1.0:
        raise ConfigError(f"{source}: [search] keyword_min_match: expected 0 to 1, got {s.keyword_min_match}")
    if not 0.0 <= s.keyword_partial_weight <= 1.0:
        raise ConfigError(f"{source}: [search] keyword_partial_weight: expected 0 to 1, got {s.keyword_partial_weight}")
    for model, cosine in s.vector_min_cosine.items():
        if not -1.0 <= cosine <= 1.0:
            raise ConfigError(
                f"{source}: [search.vector_min_cosine] {model!r}: expected a cosine from -1 to 1, got {cosine}"
            )
    if s.rrf_k == 0 or s.overfetch == 0 or s.max_candidates == 0 or s.fused_depth == 0:
        raise ConfigError(f"{source}: [search] rrf_k, overfetch, max_candidates and fused_depth must be 1 or more")
    i = c.index
    if not 0 < i.chunk_target_tokens <= i.chunk_max_tokens <= 256:
        raise ConfigError(
            f"{source}: [index] chunk_target_tokens and chunk_max_tokens: need "
            f"0 < target <= max <= 256 (the model reads 256 word pieces), got "
            f"{i.chunk_target_tokens} and {i.chunk_max_tokens}"
        )
    if not c.triage.categories:
        raise ConfigError(f"{source}: [triage] categories: expected at least one category")
    if c.daemon.no_idle_poll_seconds < 1.0:
        raise ConfigError(
            f"{source}: [daemon] no_idle_poll_seconds: expected 1 or more, got {c.daemon.no_idle_poll_seconds}"
        )


def check_secret_file_mode(path: Path, config: Config) -> None:
    """A file that could hold a password must not be readable by others (like ssh's keys)."""
    if not config.accounts:
        return
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO) and any(a.password for a in config.accounts.values()):
        raise ConfigError(
            f"{path}: holds a password but is readable by others (mode {stat.S_IMODE(mode):o}); run: chmod 600 {path}"
        )
