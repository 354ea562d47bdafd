"""TLS, certificate checks, password sources, OAuth2 and one clear error for a refused login."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Iterator
from urllib.parse import parse_qs

import pytest

from oaken.errors import ConfigError, SyncError
from oaken.sync.imap import ConnectionLost
from oaken.sync.runner import sync
from tests.dovecot_fixtures import Dovecot, Mailbox, _mailbox, assert_mirrored

ROOT = Path(__file__).resolve().parent.parent


def _auth_failures(box: Mailbox) -> int:
    assert box.server.dir is not None
    text = "".join(p.read_text(errors="replace") for p in box.server.dir.glob("dovecot*.log"))
    return sum(1 for line in text.splitlines() if "auth failed" in line and f"user=<{box.user}>" in line)


def test_starttls_with_a_verified_certificate(imap_box: Mailbox, real_mail):
    imap_box.fill("INBOX", real_mail[:3])
    cfg = imap_box.config(tls="starttls", port=imap_box.server.port)
    assert sync(cfg).new == 3
    assert_mirrored(imap_box, cfg)


def test_plaintext_is_allowed_to_loopback_only(imap_box: Mailbox, real_mail):
    imap_box.fill("INBOX", real_mail[:2])
    cfg = imap_box.config(tls="none", port=imap_box.server.port)
    assert sync(cfg).new == 2
    with pytest.raises(ConfigError, match="allow_plaintext"):
        imap_box.config(tls="none", host="imap.example.com")


def test_an_untrusted_certificate_is_refused_once(imap_box: Mailbox):
    cfg = imap_box.config(ca_file=None)
    with pytest.raises(SyncError, match="certificate not trusted") as err:
        sync(cfg)
    assert not isinstance(err.value, ConnectionLost)


def test_a_refused_login_is_one_clear_error_not_a_retry_storm(imap_box: Mailbox):
    data = imap_box.config_dict(password_command="printf %s wrong-password-123")
    imap_box.write_config(data)
    env = {**os.environ}
    out = subprocess.run([sys.executable, "-m", "oaken.cli", "sync", "--daemon"], capture_output=True, text=True,
                         timeout=30, env=env, cwd=ROOT)
    assert out.returncode == 1
    assert "login as" in out.stderr and "refused" in out.stderr and "password source" in out.stderr
    assert "wrong-password-123" not in out.stderr + out.stdout
    assert _auth_failures(imap_box) == 1


def test_password_from_environment_and_from_a_private_file(imap_box: Mailbox, real_mail, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch):
    imap_box.fill("INBOX", real_mail[:1])
    monkeypatch.setenv("OAKEN_TEST_PASSWORD", imap_box.password)
    assert sync(imap_box.config(password_command=None, password_env="OAKEN_TEST_PASSWORD")).new == 1
    secret = tmp_path / "password"
    secret.write_text(imap_box.password + "\n")
    os.chmod(secret, 0o644)
    cfg = imap_box.config(password_command=None, password_file=str(secret))
    with pytest.raises(SyncError, match="chmod 600"):
        sync(cfg)
    os.chmod(secret, 0o600)
    report = sync(cfg)
    assert report.skipped == 1


# ---- OAuth2 (what Gmail and Microsoft 365 need), against Dovecot's oauth2 passdb ---------------

TOKENS: dict[str, str] = {}  # token -> user, read by the introspection endpoint below


class _Introspection(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
        token = (parse_qs(body).get("token") or [""])[0]
        user = TOKENS.get(token)
        payload = {"active": "true", "username": user} if user else {"active": "false"}
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def oauth_dovecot() -> Iterator[Dovecot]:
    http = HTTPServer(("127.0.0.1", 0), _Introspection)
    threading.Thread(target=http.serve_forever, daemon=True).start()
    server = Dovecot(oauth2_url=f"http://127.0.0.1:{http.server_address[1]}/introspect").start()
    yield server
    server.stop(remove=True)
    http.shutdown()


@pytest.mark.parametrize("mechanism", ["xoauth2", "oauthbearer"])
def test_oauth2_token_from_a_command(oauth_dovecot: Dovecot, oaken_home: Path, real_mail, mechanism: str):
    box = _mailbox(oauth_dovecot, oaken_home)
    box.fill("INBOX", real_mail[:2])
    token = f"tok-{box.user}-{mechanism}"
    TOKENS[token] = box.user
    cfg = box.config(auth=mechanism, password_command=None, oauth2_token_command=f"printf %s {token}")
    assert sync(cfg).new == 2
    assert_mirrored(box, cfg)
    expired = box.config(auth=mechanism, password_command=None, oauth2_token_command="printf %s expired-token")
    with pytest.raises(SyncError, match="token from oauth2_token_command"):
        sync(expired)
