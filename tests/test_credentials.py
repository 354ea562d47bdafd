"""A secret source that fails says how it failed and never what it printed: a password command may
print the password on stderr too, and the error goes to the terminal and the log."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from oaken.config import AccountConfig
from oaken.errors import SyncError
from oaken.sync.credentials import oauth2_token, password

ROOT = Path(__file__).resolve().parent.parent
SECRET = "Tr0ub4dor-and-3"
LEAKY = f"echo {SECRET}; echo {SECRET} >&2; exit 3"


def _account(**over: Any) -> AccountConfig:
    return AccountConfig(name="work", host="127.0.0.1", port=9, tls="none", username="me", **over)


def test_a_failed_password_command_is_named_with_its_exit_status_not_its_output():
    with pytest.raises(SyncError) as err:
        password(_account(password_command=LEAKY))
    message = str(err.value)
    assert SECRET not in message
    assert "password_command" in message and "exited with status 3" in message and "by hand" in message
    assert err.value.__cause__ is None and err.value.__context__ is None


def test_a_command_killed_by_a_signal_is_named_by_the_signal():
    with pytest.raises(SyncError, match="killed by signal SIGKILL") as err:
        password(_account(password_command=f"echo {SECRET} >&2; kill -9 $$"))
    assert SECRET not in str(err.value)


def test_a_failed_oauth2_token_command_does_not_echo_the_token():
    with pytest.raises(SyncError) as err:
        oauth2_token(_account(auth="xoauth2", oauth2_token_command=LEAKY))
    assert SECRET not in str(err.value)
    assert "oauth2_token_command: the command exited with status 3" in str(err.value)


def test_a_password_file_that_is_not_text_is_not_quoted(tmp_path: Path):
    secret = tmp_path / "password"
    secret.write_bytes(SECRET.encode() + b"\xff\xfe\n")
    os.chmod(secret, 0o600)
    with pytest.raises(SyncError, match="not UTF-8 text") as err:
        password(_account(password_file=str(secret)))
    assert SECRET not in str(err.value)


def test_a_timed_out_command_names_its_program_not_an_assignment_before_it(monkeypatch: pytest.MonkeyPatch):
    def timeout(*_a: object, **_k: object) -> None:
        raise subprocess.TimeoutExpired("sh", 60, output=SECRET, stderr=SECRET)

    monkeypatch.setattr(subprocess, "run", timeout)
    with pytest.raises(SyncError, match="'pass' did not finish in 60 s") as err:
        password(_account(password_command=f"PASSWORD_STORE_KEY={SECRET} pass show mail"))
    assert SECRET not in str(err.value)


@pytest.mark.parametrize("mode", ["--once", "--daemon"])
def test_oaken_sync_shows_and_logs_no_secret_from_a_failed_command(oaken_home: Path, tmp_path: Path, mode: str):
    oaken_home.mkdir(parents=True)
    log_file = tmp_path / "oaken.log"
    config = oaken_home / "config.toml"
    config.write_text(
        'default_account = "work"\n'
        '[accounts.work]\nhost = "127.0.0.1"\nport = 9\ntls = "none"\nusername = "me"\n'
        f'password_command = "{LEAKY}"\n'
        '[embedder]\nmodel = "none"\n'
        f'[log]\nlevel = "debug"\nfile = "{log_file}"\n'
    )
    os.chmod(config, 0o600)
    out = subprocess.run([sys.executable, "-m", "oaken.cli", "sync", mode], capture_output=True, text=True,
                         timeout=30, cwd=ROOT, stdin=subprocess.DEVNULL)
    logged = log_file.read_text() if log_file.exists() else ""
    assert SECRET not in out.stdout + out.stderr + logged
    assert out.returncode == 1, out.stderr
    assert "password_command: the command exited with status 3" in out.stderr
