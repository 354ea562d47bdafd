"""What an account presents to its server and what it trusts: the password or OAuth2 token from
the one source the config names, and the TLS context. Kept apart from the connection so that a
secret's origin is read in one place and every secret is registered with the log's redaction
before anything could print it.

Light on purpose (the log, subprocess and ssl imported where used): the cold no-change check
(nochange.py) reads the password here too, and hands it over (`hand_over`) when it finds a change,
so that the full pass in the same process does not run the password command a second time.
"""

from __future__ import annotations

import os

from oaken.errors import SyncError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing on the cold path
if TYPE_CHECKING:
    import ssl
    from typing import Any

    from oaken.config import AccountConfig

# a password read by the no-change check of this process, for the full pass after it: taken once
_handed: dict[tuple[str, str], str] = {}
# a source that failed in the no-change check, for the full pass to report without asking again
_failed: dict[tuple[str, str], SyncError] = {}


def account_section(account: Any) -> str:
    """The config section an error names, e.g. `[accounts.work]`."""
    return f"[accounts.{account.name}]"


def _program(command: str) -> str:
    """The program a shell command runs, to name in an error: its first word after any
    `NAME=value` assignments (which may hold a secret themselves)."""
    import shlex  # only for an error; not worth importing for every sync

    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    for word in words:
        name, eq, _ = word.partition("=")
        if not (eq and name.isidentifier()):
            return word
    return "the command"


def _run_secret_command(account: Any, key: str, command: str) -> str:
    """Run `command` and return the first line it prints. Its output is never quoted in an error:
    a secret command may print the secret on stderr too, and an error reaches the terminal and the
    log before the secret could be registered for masking."""
    import subprocess

    where = account_section(account)
    try:
        out = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise SyncError(
            f"{where} {key}: {_program(command)!r} did not finish in 60 s; run the command by hand to see why"
        ) from None
    if out.returncode != 0:
        raise SyncError(
            f"{where} {key}: the command {_exit_status(out.returncode)}; "
            "run it by hand to see why (its output is not shown, as it may hold the secret)"
        )
    value = out.stdout.splitlines()[0].strip() if out.stdout.strip() else ""
    if not value:
        raise SyncError(
            f"{where} {key}: the command printed nothing on its first line; it should print the secret there"
        )
    return value


def _exit_status(returncode: int) -> str:
    if returncode < 0:
        import signal

        try:
            return f"was killed by signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with status {returncode}"


def password(account: AccountConfig) -> str:
    """The password from the one source the config names (like mbsync's PassCmd), registered
    with the log's redaction."""
    from oaken import log

    failed = _failed.pop(_source(account), None)
    if failed is not None:
        raise failed  # a command that prompts (pass, gpg) is not asked twice for one `oaken sync`
    value = _handed.pop(_source(account), None) or read_password(account)
    log.register_secret(value)
    return value


def hand_over(account: Any, value: str) -> None:
    """Keep a password read_password gave, for the next password() of the same account and source."""
    _handed[_source(account)] = value


def hand_over_failure(account: Any, error: SyncError) -> None:
    """Keep why read_password failed, for the next password() of the same account and source to
    raise instead of reading again."""
    _failed[_source(account)] = error


def _source(account: Any) -> tuple[str, str]:
    return account.name, account.password_command or account.password_env or account.password_file or "password"


def read_password(account: Any) -> str:
    """The password from the one source the config names, not yet registered with the log (the
    caller logs nothing, or registers it: password())."""
    where = account_section(account)
    value: str | None = None
    if account.password_command:
        value = _run_secret_command(account, "password_command", account.password_command)
    elif account.password_env:
        value = os.environ.get(account.password_env)
        if not value:
            raise SyncError(f"{where} password_env: the environment variable {account.password_env} is not set")
    elif account.password_file:
        from pathlib import Path

        path = Path(account.password_file).expanduser()
        try:
            if path.stat().st_mode & 0o077:
                raise SyncError(f"{where} password_file: {path} is readable by others; run: chmod 600 {path}")
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError as e:
            raise SyncError(f"{where} password_file: cannot read {path}: {e.strerror}") from None
        except UnicodeDecodeError:  # its text is not quoted: it is the secret
            raise SyncError(f"{where} password_file: {path} is not UTF-8 text") from None
        value = lines[0].strip() if lines else ""
        if not value:
            raise SyncError(f"{where} password_file: {path} is empty")
    elif account.password:
        value = account.password
    if not value:
        raise SyncError(f"{where}: no password source; set password_command, password_env or password_file")
    return value


def oauth2_token(account: AccountConfig) -> str:
    if not account.oauth2_token_command:
        raise SyncError(f"{account_section(account)} oauth2_token_command: required when auth = {account.auth!r}")
    from oaken import log

    token = _run_secret_command(account, "oauth2_token_command", account.oauth2_token_command)
    log.register_secret(token)
    return token


def ssl_context(account: Any) -> ssl.SSLContext:
    """The system's trust store, or only `ca_file` when set (a private server); TLS 1.2 at least."""
    import ssl

    ctx = ssl.create_default_context(cafile=account.ca_file) if account.ca_file else ssl.create_default_context()
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx
