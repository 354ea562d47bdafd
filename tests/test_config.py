from __future__ import annotations

import os
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from oaken import config as cfg
from oaken.errors import ConfigError

ACCOUNT = """
[accounts.work]
host = "imap.example.com"
username = "me@example.com"
password_command = "pass show mail/work"
"""


def write(tmp_path: Path, text: str, mode: int = 0o600) -> Path:
    p = tmp_path / "config.toml"
    p.write_text(text)
    os.chmod(p, mode)
    return p


def test_defaults_without_a_file(oaken_home: Path) -> None:
    c = cfg.load()
    assert c.search.rrf_k == 60 and c.search.exact_boost == 3.0 and c.search.keyword_min_match == 0.5
    assert c.search.overfetch == 5 and c.search.max_candidates == 500 and c.search.fused_depth == 50 and c.search.vector_timeout_seconds == 10
    assert c.embedder.model == "all-MiniLM-L6-v2"
    assert c.triage.categories[0] == "work" and len(c.triage.categories) == 8
    assert c.data_dir == oaken_home


def test_one_account_is_enough_and_is_the_default(tmp_path: Path) -> None:
    c = cfg.load(write(tmp_path, ACCOUNT))
    a = c.accounts["work"]
    assert a.name == "work" and a.tls == "implicit" and a.effective_port == 993
    assert a.folders == ("*",)
    assert c.account() == "work"
    assert c.account("other") == "other"


def test_example_config_is_valid_and_shows_every_key() -> None:
    example = Path(__file__).parent.parent / "config.example.toml"
    c = cfg.load(example)
    data = tomllib.loads(example.read_text())
    for section in ("search", "index", "embedder", "triage", "daemon", "log", "paths", "mcp"):
        defaults = cfg.to_dict(cfg.Config())[section]
        shown = data[section]
        assert set(defaults) <= set(shown), f"[{section}] misses {set(defaults) - set(shown)}"
        for key, value in defaults.items():
            assert shown[key] == value, f"[{section}] {key}: example shows {shown[key]!r}, default is {value!r}"
    assert c.default_account in c.accounts


@pytest.mark.parametrize(
    "text, message",
    [
        ("[search]\nrrf_k = \"sixty\"\n", '[search] rrf_k: expected an integer, got \'sixty\''),
        ("[search]\nrfr_k = 60\n", "unknown key 'rfr_k'; did you mean 'rrf_k'?"),
        ("[serch]\nrrf_k = 60\n", "unknown key 'serch'; did you mean 'search'?"),
        ("[embedder]\nmodel = \"gpt\"\n", "[embedder] model: expected one of"),
        ("[search]\nkeyword_min_match = 2.0\n", "keyword_min_match: expected 0 to 1"),
        ("[search]\nfused_depth = 0\n", "fused_depth must be 1 or more"),
        ("[search]\nfused_depth = -5\n", "[search] fused_depth"),
        ("[search]\nllm_rewrite = true\n", "rewrite_command: required when llm_rewrite = true"),
        ("[log]\nformat = \"xml\"\n", "[log] format: expected one of"),
        ("[triage]\ncategories = \"work\"\n", "categories: expected a list of strings"),
        ("[index]\nchunk_max_tokens = 512\n", "the model reads 256 word pieces"),
        (ACCOUNT.replace('"imap.example.com"', '"imap.example.com"\ntls = "none"'), "sends the password in the clear"),
        (ACCOUNT.replace("imap.example.com", "127.0.0.1") + "port = \"imap\"\n", "port: expected an integer, got 'imap'"),
        (ACCOUNT.replace('password_command = "pass show mail/work"', ""), "no password source"),
        ("default_account = \"home\"\n" + ACCOUNT, "default_account: 'home' is not one of the accounts"),
        ("this is not toml", "not valid TOML"),
    ],
)
def test_invalid_values_name_file_key_value(tmp_path: Path, text: str, message: str) -> None:
    p = write(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        cfg.load(p)
    assert str(p) in str(e.value)
    assert message in str(e.value)


def test_plaintext_without_tls_is_allowed_on_loopback(tmp_path: Path) -> None:
    c = cfg.load(write(tmp_path, ACCOUNT.replace("imap.example.com", "127.0.0.1") + 'tls = "none"\n'))
    assert c.accounts["work"].effective_port == 143


def test_plaintext_password_needs_a_private_file(tmp_path: Path) -> None:
    text = ACCOUNT.replace('password_command = "pass show mail/work"', 'password = "hunter22"')
    with pytest.raises(ConfigError, match="chmod 600"):
        cfg.load(write(tmp_path, text, mode=0o644))
    assert cfg.load(write(tmp_path, text, mode=0o600)).accounts["work"].password == "hunter22"


def test_explicit_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="oaken init"):
        cfg.load(tmp_path / "nope.toml")


def test_data_dir_created_private(oaken_home: Path) -> None:
    path = cfg.ensure_data_dir(cfg.Config())
    assert path == oaken_home
    assert stat.S_IMODE(path.stat().st_mode) == 0o700


def test_data_dir_defaults_to_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("OAKEN_HOME")
    assert cfg.Config().data_dir == tmp_path / "xdg-data" / "oaken"
    assert cfg.config_path() == tmp_path / "xdg-config" / "oaken" / "config.toml"


def test_oaken_init_writes_a_loadable_private_config(oaken_home: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "oaken.cli", "init", "--host", "imap.example.com", "--username", "me",
         "--password-command", "pass show x"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    path = oaken_home / "config.toml"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    c = cfg.load(path)
    assert c.accounts["main"].host == "imap.example.com" and c.default_account == "main"
    again = subprocess.run([sys.executable, "-m", "oaken.cli", "init"], capture_output=True, text=True)
    assert again.returncode == 2 and "--force" in again.stderr
