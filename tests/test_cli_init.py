"""`oaken init`: a first config file, one more account in an existing one, and a --force that says
what it replaced."""

from __future__ import annotations

import stat
import tomllib
from pathlib import Path

import pytest

from oaken import config as config_mod
from oaken.cli import main

ACCOUNT = ["--host", "imap.example.com", "--username", "me@example.com", "--password-command", "pass show mail"]


def _run(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_init_makes_oaken_home_private(oaken_home: Path, capsys) -> None:
    rc, out, _err = _run(capsys, "init", *ACCOUNT)
    assert rc == 0 and out.strip() == f"wrote {oaken_home / 'config.toml'}"
    # with OAKEN_HOME set, the config's folder is the data directory: every message lands there
    assert stat.S_IMODE(oaken_home.stat().st_mode) == 0o700
    assert stat.S_IMODE((oaken_home / "config.toml").stat().st_mode) == 0o600
    assert list(config_mod.load().accounts) == ["main"]


def test_init_adds_an_account_and_keeps_the_rest(oaken_home: Path, capsys) -> None:
    path = oaken_home / "config.toml"
    oaken_home.mkdir(mode=0o700)
    path.write_text('[accounts.work]\nhost = "imap.work.example"\nusername = "me"\npassword_env = "WORK_PW"\n'
                    '[search]\nrrf_k = 30\n[embedder]\nmodel = "none"\n')
    rc, out, _err = _run(capsys, "init", "--account", "home", *ACCOUNT, "--port", "1993")
    assert rc == 0, _err
    assert out.strip() == f"added account 'home' to {path}; accounts: work, home; default_account: work"
    cfg = config_mod.load()
    assert list(cfg.accounts) == ["work", "home"]
    assert cfg.accounts["work"].password_env == "WORK_PW"
    assert cfg.accounts["home"].host == "imap.example.com" and cfg.accounts["home"].port == 1993
    # commands that used the only account without --account still use it
    assert cfg.account() == "work"
    assert cfg.search.rrf_k == 30 and cfg.embedder.model == "none"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600

    before = path.read_bytes()
    rc, _out, err = _run(capsys, "init", "--account", "home", *ACCOUNT)
    assert rc == 2 and err.strip() == (f"oaken init: {path}: has an account 'home' already; pass another "
                                       "--account name, or edit that account in the file")
    assert path.read_bytes() == before


def test_init_refuses_what_it_cannot_add(oaken_home: Path, capsys) -> None:
    rc, _out, _err = _run(capsys, "init", *ACCOUNT)
    assert rc == 0
    path = oaken_home / "config.toml"
    before = path.read_bytes()
    rc, _out, err = _run(capsys, "init")  # nothing to add
    assert rc == 2 and err.startswith(f"oaken init: {path}: exists already; give --host and --username")
    rc, _out, err = _run(capsys, "init", "--account", "x")  # an account with no host
    assert rc == 2 and "give its --host too" in err
    rc, _out, err = _run(capsys, "init", "--account", "x", "--host", "h", "--username", "u")  # no password source
    assert rc == 2 and "[accounts.x]: no password source" in err
    assert path.read_bytes() == before
    path.write_text("[accounts\n")
    rc, _out, err = _run(capsys, "init", "--account", "x", *ACCOUNT)
    assert rc == 2 and f"{path}: not valid TOML" in err


def test_force_says_what_it_replaced_and_keeps_it(oaken_home: Path, capsys) -> None:
    assert main(["init", *ACCOUNT]) == 0
    assert main(["init", "--account", "second", *ACCOUNT]) == 0
    path = oaken_home / "config.toml"
    old = path.read_bytes()
    capsys.readouterr()
    rc, out, _err = _run(capsys, "init", "--force", "--account", "third", *ACCOUNT)
    assert rc == 0
    backup = oaken_home / "config.toml.bak"
    assert out.splitlines() == [f"wrote {path}",
                                f"the file it replaced, with the accounts main, second, is now {backup}"]
    assert backup.read_bytes() == old and stat.S_IMODE(backup.stat().st_mode) == 0o600
    assert list(tomllib.loads(path.read_text())["accounts"]) == ["third"]


def test_init_help_says_it_adds(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["init", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "an existing config file keeps its accounts and settings and gains this one" in text
    assert "the old one is kept beside it as .bak" in text


def test_force_starts_over_from_a_broken_file(oaken_home: Path, capsys) -> None:
    oaken_home.mkdir()
    path = oaken_home / "config.toml"
    path.write_text("[accounts\n")
    rc, out, _err = _run(capsys, "init", "--force", *ACCOUNT)
    assert rc == 0 and out.splitlines()[-1] == (f"the file it replaced, not readable as TOML, is now "
                                                f"{oaken_home / 'config.toml.bak'}")
    assert list(config_mod.load().accounts) == ["main"]


def test_init_without_an_account_says_so_and_how_to_add_one(oaken_home: Path, capsys) -> None:
    rc, out, _ = _run(capsys, "init")  # not a terminal: nothing is asked
    assert rc == 0 and "no IMAP account yet" in out and "oaken init --host HOST --username USER" in out


def test_init_at_a_terminal_asks_for_the_account(oaken_home: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr("sys.stdout.isatty", lambda: True)
    answers = iter(["imap.example.org", "alex", "starttls", "143", "pass show mail"])
    monkeypatch.setattr("builtins.input", lambda _prompt: next(answers))
    rc, out, _ = _run(capsys, "init")
    assert rc == 0 and "no IMAP account yet" not in out
    written = tomllib.loads((oaken_home / "config.toml").read_text())
    account = written["accounts"]["main"]
    assert (account["host"], account["username"], account["tls"], account["port"]) == (
        "imap.example.org", "alex", "starttls", 143)
    assert account["password_command"] == "pass show mail"
