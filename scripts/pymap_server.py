#!/usr/bin/env python3
"""A private pymap (https://github.com/icgood/pymap, `pip install pymap`) for the conformance tests:
a second real IMAP server besides Dovecot, written independently in Python, so that a quirk of one
server is caught by tests rather than by users.

pymap runs with its maildir backend on one loopback port offering STARTTLS (pymap has no implicit
TLS port; it also takes a login in the clear), with a self-signed certificate that clients trust
through its `ca_file`; Oaken's account uses tls = "starttls". Everything lives in one mkdtemp folder under /tmp:

    <dir>/cert.pem, key.pem      the certificate (valid for 127.0.0.1 and localhost)
    <dir>/mail/                  pymap's base directory: its users files and one Maildir per user
    <dir>/pymap.log, pymap.pid

    python scripts/pymap_server.py start     # prints the folder, the port and the test user (JSON)
    python scripts/pymap_server.py stop [DIR]

From Python: `Pymap().start()`, `.add_user(name, password)`, `.folder_path(user, folder)`,
`.set_uidvalidity(user, folder, value)`, `.restart()`, `.stop()`.

What pymap 0.36 offers after login: IMAP4rev1 LITERAL+ ID BINARY UIDPLUS MOVE CHILDREN APPENDLIMIT
IDLE OBJECTID MULTIAPPEND. No CONDSTORE/QRESYNC, LIST-STATUS, ESEARCH, SPECIAL-USE, ENABLE,
NAMESPACE or UNSELECT; its Maildir keeps only the keywords listed in a folder's dovecot-keywords
file (none by default) and silently drops others, and rewrites a message on the way to disk (LF line
ends), so BODY[] is not byte for byte what was appended. See docs/conformance.md.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dovecot import _alive, _make_cert, free_port  # noqa: E402

STATE_FILE = Path(tempfile.gettempdir()) / "oaken-pymap.json"
DEFAULT_USER = ("oaken", "oaken-test-password")
# pymap checks passwords with PBKDF2; its default 500,000 rounds cost ~0.25 s per login
HASH_ROUNDS = 1000


def ensure_installed() -> None:
    """pymap comes from PyPI into the venv that runs the tests (not from Debian)."""
    try:
        import pymap  # noqa: F401
        import pysasl.hashing  # noqa: F401
    except ImportError:
        raise RuntimeError(f"pymap is not installed in {sys.prefix}: run {sys.executable} -m pip install "
                           "'pymap>=0.36,<0.37'") from None


def _hash(password: str) -> str:
    from pysasl.hashing import BuiltinHash

    return BuiltinHash(rounds=HASH_ROUNDS).hash(password)


def _write_atomic(path: Path, text: str) -> None:
    """pymap rereads its users files on every login: a reader sees the old file or the new one."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


@dataclass
class Pymap:
    """One private pymap server (maildir backend, STARTTLS on `port`)."""

    dir: Path | None = None
    port: int = 0
    users: dict[str, str] = field(default_factory=dict)
    pid: int | None = None
    owner_pid: int | None = None  # when this process dies, so does the server (a killed test run)
    debug: bool = False  # pymap --debug: every line of every session in pymap.log
    _proc: subprocess.Popen | None = None
    _watchdog: subprocess.Popen | None = None

    @property
    def ca_file(self) -> str:
        assert self.dir is not None
        return str(self.dir / "cert.pem")

    @property
    def base(self) -> Path:
        assert self.dir is not None
        return self.dir / "mail"

    @property
    def log_file(self) -> Path:
        assert self.dir is not None
        return self.dir / "pymap.log"

    def start(self) -> "Pymap":
        ensure_installed()
        if self.dir is None:
            self.dir = Path(tempfile.mkdtemp(prefix="oaken-pymap-"))
        if not (self.dir / "cert.pem").exists():
            _make_cert(self.dir)
        self.base.mkdir(exist_ok=True)
        self.port = self.port or free_port()
        self._write_users()
        command = [sys.executable, "-c", "from pymap.main import main; main()",
                   *(["--debug"] if self.debug else []),
                   "--host", "127.0.0.1", "--port", str(self.port),
                   "--cert", str(self.dir / "cert.pem"), "--key", str(self.dir / "key.pem"),
                   "maildir", str(self.base)]
        # FQDN: the name in pymap's greeting; without it pymap asks socket.getfqdn() (the resolver)
        env = {**os.environ, "FQDN": "localhost"}
        env.pop("CERT_FILE", None)  # would override --cert/--key
        env.pop("KEY_FILE", None)
        with open(self.log_file, "ab") as log:
            self._proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                                          start_new_session=True)
        self.pid = self._proc.pid
        (self.dir / "pymap.pid").write_text(str(self.pid))
        self._wait_listening()
        if self.owner_pid and self._watchdog is None:
            self._watchdog = _watch(self.owner_pid, self.dir)
        return self

    def _wait_listening(self, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                break
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    if s.recv(100).startswith(b"* OK"):
                        return
            except OSError:
                time.sleep(0.05)
        tail = self.log_file.read_text(errors="replace")[-2000:] if self.log_file.exists() else ""
        raise RuntimeError(f"pymap did not answer on 127.0.0.1:{self.port}; {self.log_file}:\n{tail}")

    # ---- users ----------------------------------------------------------------------------------

    def add_user(self, name: str, password: str) -> None:
        """A user with its own Maildir (<base>/<name>); pymap reads the users files at each login."""
        if ":" in name or "\n" in name:
            raise ValueError(f"user name {name!r}: no ':' or newline")
        self.users[name] = password
        if self.dir is not None and self.base.exists():  # else start() writes them
            self._write_users()

    def _write_users(self) -> None:
        # passwd(5) and shadow(5) formats: name:password:uid:gid:comment:home:shell, name:hash:...
        passwd = "".join(f"{n}:x::::{n}:\r\n" for n in self.users)
        shadow = "".join(f"{n}:{_hash(p)}:::::::\r\n" for n, p in self.users.items())
        _write_atomic(self.base / "pymap-etc-passwd", passwd)
        _write_atomic(self.base / "pymap-etc-shadow", shadow)

    # ---- state behind the clients' back -----------------------------------------------------------

    def folder_path(self, user: str, folder: str) -> Path:
        """The Maildir of `folder` (pymap's default "++" layout: INBOX at the top, `a/b` in `.a.b`)."""
        home = self.base / user
        return home if folder.upper() == "INBOX" else home / ("." + folder.replace("/", "."))

    def uidvalidity(self, user: str, folder: str) -> int:
        header = (self.folder_path(user, folder) / "dovecot-uidlist").read_text().split("\n", 1)[0]
        return int(next(w[1:] for w in header.split() if w.startswith("V")))

    def set_uidvalidity(self, user: str, folder: str, value: int) -> None:
        """What `doveadm mailbox update --uid-validity` does on Dovecot: the folder's UIDVALIDITY
        changes in its dovecot-uidlist header, UIDs stay. Under pymap's own lock file, so no session
        writes the list meanwhile; a session sees it at its next SELECT."""
        path = self.folder_path(user, folder)
        lock = path / "dovecot-uidlist.lock"
        deadline = time.monotonic() + 10
        while True:
            try:
                fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                break
            except FileExistsError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{lock}: held for 10 s") from None
                time.sleep(0.01)
        try:
            uidlist = path / "dovecot-uidlist"
            header, _nl, rest = uidlist.read_text().partition("\n")
            words = [f"V{value}" if w.startswith("V") else w for w in header.rstrip("\r").split()]
            _write_atomic(uidlist, " ".join(words) + "\r\n" + rest)
        finally:
            os.close(fd)
            os.unlink(lock)

    # ---- lifecycle --------------------------------------------------------------------------------

    def stop(self, *, remove: bool = False) -> None:
        if self.pid:
            try:
                os.killpg(self.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and self._running():
                time.sleep(0.02)
            if self._running():
                try:
                    os.killpg(self.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if self._proc is not None:
                self._proc.wait(timeout=5)
                self._proc = None
            self.pid = None
        if remove and self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            if self._watchdog is not None:
                self._watchdog.kill()
                self._watchdog.wait()
                self._watchdog = None

    def _running(self) -> bool:
        if self._proc is not None:
            return self._proc.poll() is None
        return self.pid is not None and _alive(self.pid)

    def restart(self) -> None:
        self.stop()
        self.start()

    def state(self) -> dict:
        return {"dir": str(self.dir), "port": self.port, "tls": "starttls", "pid": self.pid,
                "ca_file": self.ca_file, "users": self.users}


def _watch(owner: int, folder: Path) -> subprocess.Popen:
    """A shell that stops the server and removes its folder once `owner` is gone, so a test run
    killed by a timeout leaves no pymap behind. It reads the pid file, so restarts are covered."""
    # pymap leads its own process group (start_new_session): `kill -SIG -PGID` ends it and anything
    # it started; dash's kill takes no `--`
    script = (f"while kill -0 {owner} 2>/dev/null; do sleep 1; done; "
              f"if [ -f {folder}/pymap.pid ]; then pg=$(cat {folder}/pymap.pid); kill -TERM -$pg; "
              f"sleep 2; kill -KILL -$pg 2>/dev/null; fi; rm -rf {folder}")
    return subprocess.Popen(["sh", "-c", script], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)


def main(argv: list[str]) -> int:
    cmd = argv[0] if argv else "start"
    if cmd == "start":
        server = Pymap()
        server.add_user(*DEFAULT_USER)
        server.start()
        STATE_FILE.write_text(json.dumps(server.state(), indent=2))
        print(json.dumps(server.state(), indent=2))
        return 0
    if cmd == "stop":
        state = json.loads(STATE_FILE.read_text()) if STATE_FILE.exists() else {}
        folder = argv[1] if len(argv) > 1 else state.get("dir")
        if not folder:
            print("pymap_server.py stop: no running server recorded; give its folder", file=sys.stderr)
            return 1
        server = Pymap(dir=Path(folder))
        pid_file = Path(folder) / "pymap.pid"
        server.pid = int(pid_file.read_text()) if pid_file.exists() else None
        server.stop(remove=True)
        if state.get("dir") == folder:
            STATE_FILE.unlink(missing_ok=True)
        print(f"stopped and removed {folder}")
        return 0
    print("usage: python scripts/pymap_server.py start|stop [DIR]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
