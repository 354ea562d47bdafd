"""The readers behind the cold no-change sync check (oaken/sync/nochange.py) read what the full
command reads: light_config.py what oaken.config reads, toml_lite.py what tomllib reads, wherever
they answer (and they leave to the full command what it refuses)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oaken import config as config_mod
from oaken.sync import light_config, nochange, toml_lite

CONFIGS = [
    {"accounts": {"a": {"host": "h", "username": "u", "password_env": "X"}}},
    {
        "accounts": {
            "a": {
                "host": "127.0.0.1",
                "username": "u",
                "password_command": "c",
                "tls": "none",
                "port": 1430,
                "folders": ["INBOX", "Work/*"],
                "exclude": ["Work/old"],
                "timeout_seconds": 5,
                "batch_size": 10,
                "ca_file": "/x",
            }
        },
        "log": {"level": "warning"},
        "paths": {"data_dir": "~/mail"},
    },
    {
        "default_account": "b",
        "accounts": {
            "a": {"host": "h", "username": "u", "password_env": "X"},
            "b": {"host": "h2", "username": "v", "password_file": "/f", "tls": "starttls"},
        },
    },
    {"accounts": {"a": {"host": "h", "username": "u", "password_env": "X", "port": True}}},
    {"accounts": {"a": {"host": "h", "username": "u", "password_env": "X", "password_command": "c"}}},
    {"accounts": {"a": {"host": "h", "username": "u"}}},
    {"accounts": {"a": {"host": "example.com", "username": "u", "password_env": "X", "tls": "none"}}},
    {"accounts": {"a": {"host": "h", "username": "u", "password_env": "X", "tls": "ssl"}}},
    {"accounts": {"a": {"host": "h", "username": "u", "password_env": "X", "folder": ["INBOX"]}}},
    {"accounts": {"a": {"host": "h", "username": "u", "password_env": "X", "batch_size": 0}}},
    {"accounts": {"a": {"host": "h", "username": "u", "password_env": "X", "timeout_seconds": -1}}},
    {"default_account": "z", "accounts": {"a": {"host": "h", "username": "u", "password_env": "X"}}},
    {"accounts": {"a": {"host": "h", "username": "u", "password_env": "X"}}, "log": {"level": "loud"}},
    {"accounts": {"a": {"host": "h", "username": "u", "password_env": "X"}}, "pathz": {}},
    {"accounts": {"a": {"host": "h", "username": "u", "auth": "xoauth2", "oauth2_token_command": "t"}}},
]


@pytest.mark.parametrize("data", CONFIGS)
def test_the_light_config_reads_what_the_full_one_reads(data: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the light reader answers, oaken.config accepts the file and gives the same account;
    where oaken.config refuses it, the light reader does not answer."""
    monkeypatch.setenv("OAKEN_HOME", "/tmp/oaken-light-config-test")
    light = light_config.settings_of(data, None)
    try:
        full = config_mod.from_dict(data)
        account = full.accounts[full.account(None) or ""]
    except Exception:  # noqa: BLE001 - refused, or no account to choose
        assert light is None
        return
    if light is None:
        return  # the light reader may leave a file to the full one, never the reverse
    for key in light_config._ACCOUNT:
        assert getattr(light.account, key) == getattr(account, key), key
    assert light.account.effective_port == account.effective_port
    assert light.data_dir == str(config_mod.resolve_data_dir(full))
    assert light.log_level == full.log.level


def test_the_schema_it_reads_is_the_stores() -> None:
    from oaken.store.migrations import MIGRATIONS

    assert nochange.SCHEMA_VERSION == len(MIGRATIONS)


# ---- the plain-TOML reader agrees with tomllib wherever it answers -----------------------------

LINES = [
    "",
    "# a comment",
    "[accounts.work]",
    "[accounts . home]",
    "[paths]",
    "[log]",
    "[[accounts]]",
    "[a]]",
    "[]",
    'host = "imap.example.com"',
    "host = 'literal \"quoted\"'",
    'password_command = "pass show \\"mail\\" \\\\ \\u00e9"',
    'bad = "\\q"',
    "port = 993",
    "port = +993",
    "port = -0",
    "port = 007",
    "port = 1_000",
    "port = 0x10",
    "timeout_seconds = 5.0",
    "timeout_seconds = 5.",
    "timeout_seconds = 1e3",
    "x = .5",
    "x = inf",
    "x = 2024-01-01",
    "allow_plaintext = true",
    "allow_plaintext = false",
    "allow_plaintext = True",
    'folders = ["INBOX", "Work/*"]',
    "folders = [",
    '    "INBOX",  # the inbox',
    '    "Work/*",',
    "]",
    "folders = []",
    'mixed = [1, "a"]',
    "nested = [[1, 2], [3]]",
    "dotted.key = 1",
    '"quoted" = 1',
    "x = {a = 1}",
    'multi = """a"""',
    "key =",
    "key = 1 # a comment",
    "key = 1 2",
    "t = \t'tab'\t",
    'k = "a\tb"',
    "1234 = 1",
    "é = 1",
    "k = 'a\x7f'",
]


@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from(LINES), max_size=12), st.sampled_from(["\n", "\r\n"]))
def test_the_plain_toml_reader_agrees_with_tomllib(lines: list[str], newline: str) -> None:
    text = newline.join(lines)
    lite = toml_lite.loads(text)
    if lite is not None:
        assert lite == tomllib.loads(text)


def test_the_files_oaken_init_writes_are_plain() -> None:
    import tomli_w

    account = {
        "host": "imap.example.com",
        "port": 993,
        "username": "me@example.com",
        "timeout_seconds": 5.0,
        "password_command": 'pass show "mail/work" \\ é',
        "folders": ["INBOX", "Work/*"],
        "exclude": [],
    }
    text = tomli_w.dumps({"default_account": "work", "accounts": {"work": account}, "embedder": {"model": "none"}})
    assert toml_lite.loads(text) == tomllib.loads(text)
    example = (Path(__file__).resolve().parent.parent / "config.example.toml").read_text()
    assert toml_lite.loads(example) in (None, tomllib.loads(example))
