"""Opening a session: TCP, TLS (implicit or STARTTLS, certificates checked), then the login or the
OAuth2 token. Plaintext goes only to loopback or where the config allows it. Each failure is named
for what to fix: a refused login or an untrusted certificate raises SyncError once, a network
failure ConnectionLost (the caller retries)."""

from __future__ import annotations

import ssl
from typing import Callable, TypeVar

from imapclient import IMAPClient

from oaken.config import AccountConfig
from oaken.config_checks import is_loopback
from oaken.errors import SyncError
from oaken.sync.credentials import account_section, oauth2_token, password, ssl_context
from oaken.sync.link_errors import TRANSIENT, ConnectionLost

Session = TypeVar("Session")


def login(
    account: AccountConfig, session: Callable[[AccountConfig, IMAPClient], Session], *, timeout: float | None = None
) -> Session:
    """Open, secure and log in, then `session(account, client)` (oaken.sync.imap.Connection, whose
    first commands fail the same way as the login's)."""
    where = account_section(account)
    port = account.effective_port
    if account.tls == "none" and not (account.allow_plaintext or is_loopback(account.host)):
        raise SyncError(
            f'{where} tls: "none" to {account.host} would send the password in the clear; '
            "use implicit or starttls, or set allow_plaintext = true"
        )
    secret = oauth2_token(account) if account.auth in ("xoauth2", "oauthbearer") else password(account)
    t = timeout if timeout is not None else (account.timeout_seconds or 60.0)
    try:
        ctx = ssl_context(account)
    except (OSError, ssl.SSLError) as e:
        raise SyncError(f"{where} ca_file: cannot load {account.ca_file}: {e}") from None
    client = None
    try:
        if account.tls == "implicit":
            client = IMAPClient(account.host, port, ssl=True, ssl_context=ctx, timeout=t)
        else:
            client = IMAPClient(account.host, port, ssl=False, timeout=t)
            if account.tls == "starttls":
                if not client.has_capability("STARTTLS"):
                    raise SyncError(
                        f"{where} tls: {account.host}:{port} does not offer STARTTLS; "
                        'use tls = "implicit" with its IMAPS port'
                    )
                client.starttls(ctx)
        if account.auth == "xoauth2":
            client.oauth2_login(account.username, secret)
        elif account.auth == "oauthbearer":
            client.oauthbearer_login(account.username, secret)
        else:
            client.login(account.username, secret)
        return session(account, client)
    except ssl.SSLCertVerificationError as e:
        _drop(client)
        raise SyncError(
            f"{where} {account.host}:{port}: certificate not trusted ({e.verify_message}); "
            "for a private server set ca_file to its certificate"
        ) from None
    except IMAPClient.AbortError as e:
        _drop(client)
        raise ConnectionLost(f"{where} {account.host}:{port}: connection lost while logging in: {e}") from None
    except IMAPClient.Error as e:
        _drop(client)
        raise SyncError(
            f"{where} {account.host}:{port}: login as {account.username!r} refused ({e}); "
            f"check the {'token from oauth2_token_command' if account.auth != 'password' else 'password source'}"
        ) from None
    except TRANSIENT as e:
        _drop(client)
        raise ConnectionLost(f"{where} {account.host}:{port}: {type(e).__name__}: {e}") from None


def _drop(client: IMAPClient | None) -> None:
    if client is not None:
        try:
            client.shutdown()
        except Exception:  # noqa: BLE001 - a dead link cannot say goodbye
            pass
