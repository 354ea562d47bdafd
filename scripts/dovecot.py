#!/usr/bin/env python3
"""A private Dovecot (Debian dovecot-imapd) for tests, benchmarks and the demo.

Everything lives in one mkdtemp folder under /tmp (config, state, logs, Maildirs, certificate):
pytest's tmp_path sits under a 0700 folder that Dovecot's unprivileged processes cannot reach,
and Dovecot refuses mail owned by uids under 500, so the Maildirs belong to `nobody`.

    python scripts/dovecot.py start      # prints the folder, ports and the test user
    python scripts/dovecot.py stop [DIR]

From Python: `Dovecot().start()`, `.add_user(name, password)`, `.doveadm(...)`, `.kill_sessions()`,
`.restart()`, `.stop()`.
"""

from __future__ import annotations

import json
import os
import pwd
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

STATE_FILE = Path(tempfile.gettempdir()) / "oaken-dovecot.json"
DEFAULT_USER = ("oaken", "oaken-test-password")


_ports = random.SystemRandom()


def free_port(avoid: tuple[int, ...] = ()) -> int:
    """A loopback port nobody listens on, for a server started a moment later. Taken below the
    kernel's ephemeral range (32768-60999 by default), where bind(0) and every outgoing
    connection take theirs: a port from bind(0) is free only until the next connection of any
    process on the machine takes it as its own, which then keeps the server from starting.
    `avoid`: ports the same server will listen on too (two draws can agree: Dovecot then refused
    its config, "duplicate listener", a test error about once in 12,000 starts)."""
    low, high = 20000, 32000
    for _ in range(200):
        port = _ports.randrange(low, high)  # not the module's generator, which a test may seed
        if port in avoid:  # another listener of the same server, not bound yet
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free loopback port between {low} and {high}")


def ensure_installed() -> None:
    """apt-get install dovecot-imapd when this machine has no Dovecot (a fresh CI machine)."""
    if shutil.which("dovecot") and shutil.which("doveadm"):
        return
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run([*sudo, "apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run([*sudo, "apt-get", "install", "-y", "-qq", "--no-install-recommends", "dovecot-imapd"],
                   check=True, env=env)
    # the package starts a system-wide Dovecot on 143/993; ours never needs it
    subprocess.run([*sudo, "systemctl", "disable", "--now", "dovecot"], check=False, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _dovecot_bin() -> str:
    return shutil.which("dovecot") or "/usr/sbin/dovecot"


def _make_cert(folder: Path) -> None:
    """A self-signed certificate valid for 127.0.0.1 and localhost: clients verify it via ca_file."""
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30",
         "-keyout", str(folder / "key.pem"), "-out", str(folder / "cert.pem"),
         "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    os.chmod(folder / "key.pem", 0o600)


_CONFIG = """\
base_dir = {dir}/run
state_dir = {dir}/state
log_path = {dir}/dovecot.log
info_log_path = {dir}/dovecot-info.log
protocols = imap
listen = 127.0.0.1
ssl = yes
ssl_cert = <{dir}/cert.pem
ssl_key = <{dir}/key.pem
disable_plaintext_auth = no
auth_mechanisms = {mechanisms}
auth_failure_delay = 0
auth_cache_size = 0
mail_location = maildir:{dir}/mail/%u
mail_uid = {uid}
mail_gid = {gid}
first_valid_uid = {uid}
last_valid_uid = {uid}
mail_max_userip_connections = 200
mail_fsync = never
verbose_proctitle = yes
imap_idle_notify_interval = 2 mins
{capability}
namespace inbox {{
  inbox = yes
  separator = /
{special_use}
}}
{oauth2_passdb}
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {dir}/users/%u
}}
userdb {{
  driver = static
  args = uid={uid} gid={gid} home={dir}/home/%u
}}
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {port}
  }}
  inet_listener imaps {{
    address = 127.0.0.1
    port = {ssl_port}
    ssl = yes
  }}
}}
service anvil {{
  unix_listener anvil-auth-penalty {{
    mode = 0
  }}
}}
"""


SPECIAL_USE = """  mailbox Junk {
    special_use = \\Junk
  }
  mailbox Trash {
    special_use = \\Trash
  }
  mailbox Sent {
    special_use = \\Sent
  }"""


@dataclass
class Dovecot:
    """One private server. `capability` overrides what it advertises after login (e.g. a server
    without CONDSTORE/QRESYNC/LIST-STATUS); `oauth2_url` enables XOAUTH2/OAUTHBEARER checked
    against that token introspection endpoint."""

    dir: Path | None = None
    port: int = 0
    ssl_port: int = 0
    capability: str | None = None
    special_use: bool = True  # False: no folder flagged \Junk, \Trash or \Sent (servers without RFC 6154)
    oauth2_url: str | None = None
    users: dict[str, str] = field(default_factory=dict)
    pid: int | None = None
    owner_pid: int | None = None  # when this process dies, so does the server (a killed test run)
    _watchdog: subprocess.Popen | None = None

    @property
    def conf(self) -> Path:
        assert self.dir is not None
        return self.dir / "dovecot.conf"

    @property
    def ca_file(self) -> str:
        assert self.dir is not None
        return str(self.dir / "cert.pem")

    def start(self) -> "Dovecot":
        ensure_installed()
        if self.dir is None:
            self.dir = Path(tempfile.mkdtemp(prefix="oaken-dovecot-"))
            # Dovecot's unprivileged processes (nobody, dovenull, dovecot) must reach into it
            os.chmod(self.dir, 0o755)
        if not self.conf.exists():
            self._write_config()
        for sub in ("run", "state"):
            (self.dir / sub).mkdir(exist_ok=True)
        subprocess.run([_dovecot_bin(), "-c", str(self.conf)], check=True,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._wait_listening()
        self.pid = int((self.dir / "run" / "master.pid").read_text().strip())
        if self.owner_pid and self._watchdog is None:
            self._watchdog = _watch(self.owner_pid, self.dir)
        return self

    def _write_config(self) -> None:
        assert self.dir is not None
        self.port = self.port or free_port()
        self.ssl_port = self.ssl_port or free_port(avoid=(self.port,))
        nobody = pwd.getpwnam("nobody")
        for sub in ("mail", "home"):
            p = self.dir / sub
            p.mkdir(exist_ok=True)
            os.chown(p, nobody.pw_uid, nobody.pw_gid)
        _make_cert(self.dir)
        (self.dir / "users").mkdir(exist_ok=True)
        mechanisms = "plain login"
        oauth2_passdb = ""
        if self.oauth2_url:
            mechanisms += " xoauth2 oauthbearer"
            (self.dir / "oauth2.conf.ext").write_text(
                f"introspection_mode = post\nintrospection_url = {self.oauth2_url}\n"
                "force_introspection = yes\nusername_attribute = username\n"
                "active_attribute = active\nactive_value = true\n"
            )
            oauth2_passdb = (f"passdb {{\n  driver = oauth2\n  mechanisms = xoauth2 oauthbearer\n"
                             f"  args = {self.dir}/oauth2.conf.ext\n}}\n")
        self.conf.write_text(_CONFIG.format(
            dir=self.dir, uid=nobody.pw_uid, gid=nobody.pw_gid, port=self.port, ssl_port=self.ssl_port,
            mechanisms=mechanisms, oauth2_passdb=oauth2_passdb,
            capability=f"imap_capability = {self.capability}" if self.capability else "",
            special_use=SPECIAL_USE if self.special_use else "",
        ))

    def _wait_listening(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    if s.recv(100).startswith(b"* OK"):
                        return
            except OSError:
                time.sleep(0.02)
        raise RuntimeError(f"Dovecot did not answer on 127.0.0.1:{self.port}; see {self.dir}/dovecot.log")

    def add_user(self, name: str, password: str) -> None:
        """A passwd-file user; Dovecot rereads the file on the next login."""
        assert self.dir is not None
        self.users[name] = password
        # one passwd-file per user: Dovecot rereads a changed file only about once a second, a new
        # file it has never opened is read at once
        (self.dir / "users").mkdir(exist_ok=True)
        (self.dir / "users" / name).write_text(f"{name}:{{PLAIN}}{password}::::::\n")

    def doveadm(self, *args: str) -> str:
        """Change server state behind the client's back (save, flags, expunge, mailbox update)."""
        out = subprocess.run(["doveadm", "-c", str(self.conf), *args], capture_output=True, text=True,
                             stdin=subprocess.DEVNULL, timeout=30)
        if out.returncode != 0:
            raise RuntimeError(f"doveadm {' '.join(args)}: exit {out.returncode}: {out.stderr.strip()}")
        return out.stdout

    def session_pids(self) -> list[int]:
        """The imap processes serving logged-in clients: children of this master named `imap`."""
        return self.child_pids("imap")

    def child_pids(self, name: str | None = None) -> list[int]:
        pids = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            comm = stat[stat.index("(") + 1:stat.rindex(")")]
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
            if ppid == self.pid and (name is None or comm == name):
                pids.append(int(entry))
        return pids

    def cpu_seconds(self) -> float:
        """CPU time (user + system) the server has used: the master, the children it has reaped
        and those alive (imap-login's TLS, the imap sessions). A benchmark takes the difference
        around a run, once the client's sessions have ended (`wait_sessions_ended`)."""
        tick = os.sysconf("SC_CLK_TCK")
        total = 0
        for pid in [self.pid, *self.child_pids()]:
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                continue  # ended between the listing and the read: reaped, so counted in the master
            fields = stat[stat.rindex(")") + 2:].split()
            # utime, stime (13th-14th of stat); the master adds cutime, cstime of reaped children
            total += sum(int(x) for x in fields[11:15 if pid == self.pid else 13])
        return total / tick

    def wait_sessions_ended(self, timeout: float = 2.0) -> None:
        """Until no client session is left (its CPU then counts in the master's reaped total)."""
        deadline = time.monotonic() + timeout
        while self.child_pids("imap") + self.child_pids("imap-login") and time.monotonic() < deadline:
            time.sleep(0.01)

    def kill_sessions(self) -> int:
        """SIGKILL every imap session process: the client sees its connection die mid-command."""
        pids = self.session_pids()
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return len(pids)

    def stop(self, *, remove: bool = False) -> None:
        """Stop the server and its sessions (which outlive a SIGTERM'd master here, unlike a reboot)."""
        if self.pid:
            # children keep the listening sockets: a lingering login process would accept a
            # client after the restart and drop it
            sessions = self.child_pids()
            try:
                os.kill(self.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            for pid in sessions:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and any(_alive(p) for p in (self.pid, *sessions)):
                time.sleep(0.02)
            self.pid = None
        if remove and self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            if self._watchdog is not None:
                self._watchdog.kill()
                self._watchdog.wait()
                self._watchdog = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def state(self) -> dict:
        return {"dir": str(self.dir), "port": self.port, "ssl_port": self.ssl_port, "pid": self.pid,
                "ca_file": self.ca_file, "users": self.users}


def _watch(owner: int, folder: Path) -> subprocess.Popen:
    """A shell that stops the server and removes its folder once `owner` is gone, so a test run
    killed by a timeout leaves no Dovecot behind. It reads the pid file, so restarts are covered."""
    script = (f"while kill -0 {owner} 2>/dev/null; do sleep 1; done; "
              f"[ -f {folder}/run/master.pid ] && kill $(cat {folder}/run/master.pid); sleep 1; rm -rf {folder}")
    return subprocess.Popen(["sh", "-c", script], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie child of ours counts as gone
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except OSError:
        return False


def main(argv: list[str]) -> int:
    cmd = argv[0] if argv else "start"
    if cmd == "start":
        server = Dovecot().start()
        server.add_user(*DEFAULT_USER)
        STATE_FILE.write_text(json.dumps(server.state(), indent=2))
        print(json.dumps(server.state(), indent=2))
        return 0
    if cmd == "stop":
        state = json.loads(STATE_FILE.read_text()) if STATE_FILE.exists() else {}
        folder = argv[1] if len(argv) > 1 else state.get("dir")
        if not folder:
            print("dovecot.py stop: no running server recorded; give its folder", file=sys.stderr)
            return 1
        server = Dovecot(dir=Path(folder))
        pid_file = Path(folder) / "run" / "master.pid"
        server.pid = int(pid_file.read_text()) if pid_file.exists() else None
        server.stop(remove=True)
        if state.get("dir") == folder:
            STATE_FILE.unlink(missing_ok=True)
        print(f"stopped and removed {folder}")
        return 0
    print("usage: python scripts/dovecot.py start|stop [DIR]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
