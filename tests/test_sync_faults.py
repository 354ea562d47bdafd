"""Faults mid-sync; each test ends with the server's state mirrored exactly, nothing duplicated."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

import pytest

from oaken import config as config_mod
from oaken.store import open_store
from oaken.sync.imap import ConnectionLost
from oaken.sync.runner import sync
from tests.dovecot_fixtures import Mailbox, assert_mirrored
from tests.tcp_proxy import TcpProxy

ROOT = Path(__file__).resolve().parent.parent


def _count(cfg: config_mod.Config) -> int:
    with open_store(config_mod.resolve_data_dir(cfg), readonly=True) as store:
        return store.message_count()


def _when(condition: Callable[[], bool], action: Callable[[], object], timeout: float = 20.0) -> threading.Thread:
    def run() -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not condition():
            time.sleep(0.005)
        action()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


@pytest.fixture
def proxy(imap_box: Mailbox):
    p = TcpProxy(imap_box.server.ssl_port)
    yield p
    p.close()


FAULTS = {
    "session killed": lambda box, proxy: box.server.kill_sessions(),
    "server restarted": lambda box, proxy: box.server.restart(),
    "connection reset": lambda box, proxy: proxy.reset(),
    "link blackholed": lambda box, proxy: setattr(proxy, "blackholed", True),
    "TLS record forged": lambda box, proxy: proxy.corrupt(),
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_fault_mid_fetch_then_the_next_sync_resumes(imap_box: Mailbox, real_mail, proxy: TcpProxy, fault: str):
    imap_box.fill("INBOX", real_mail[:40])
    imap_box.fill("Other", real_mail[40:])
    proxy.rate = 100_000  # slow enough that the fault lands inside a FETCH
    cfg = imap_box.config(port=proxy.port, batch_size=15, timeout_seconds=1.0)
    hit = _when(lambda: proxy.downstream > 60_000, lambda: FAULTS[fault](imap_box, proxy))
    try:
        with pytest.raises(ConnectionLost) as lost:
            sync(cfg)
    finally:
        hit.join()
    if fault == "TLS record forged":
        assert "SSL" in str(lost.value)
    stored = _count(cfg)
    assert 0 < stored < len(real_mail), f"the fault did not land mid-sync ({stored} stored)"
    proxy.blackholed = False
    proxy.rate = None
    report = sync(cfg)
    assert report.new == len(real_mail) - stored
    assert_mirrored(imap_box, cfg)


def test_a_throttled_and_delayed_link_still_mirrors(imap_box: Mailbox, real_mail, proxy: TcpProxy):
    imap_box.fill("INBOX", real_mail[:20])
    proxy.rate = 400_000
    proxy.delay = 0.002
    cfg = imap_box.config(port=proxy.port, batch_size=7, timeout_seconds=2.0)
    assert sync(cfg).new == 20
    assert_mirrored(imap_box, cfg)


def _oaken_sync(env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "oaken.cli", "sync", "--once", "--no-index"],
                          capture_output=True, text=True, timeout=60, env=env, cwd=ROOT)


@pytest.mark.parametrize("point", ["sync.mid_batch", "sync.before_state", "sync.mid_flag_push"])
def test_kill_9_at_a_named_point_then_resume(imap_box: Mailbox, real_mail, tmp_path: Path, point: str):
    imap_box.fill("INBOX", real_mail[:30])
    imap_box.write_config(batch_size=10)
    cfg = config_mod.load()
    crash_log = tmp_path / "crash.log"
    env = {**os.environ, "OAKEN_CRASH_AT": f"{point}:2", "OAKEN_CRASH_LOG": str(crash_log)}
    if point == "sync.mid_flag_push":
        sync(cfg)
        with open_store(config_mod.resolve_data_dir(cfg)) as store, store.transaction():
            for message in store.message_ids_in(store.account_id("test"))[:3]:
                store.mark_read(message)
    died = _oaken_sync(env)
    assert died.returncode == -9, died.stderr
    passes = crash_log.read_text().splitlines()
    assert [line.split()[:2] for line in passes] == [[point, "pass=1"], [point, "pass=2"]]
    with open_store(config_mod.resolve_data_dir(cfg), readonly=True) as store:
        if point == "sync.mid_flag_push":
            # the first change was committed, the second reached the server but not raw.db
            assert len(store.pending_flag_changes()) == 2
            assert sum("\\Seen" in f for _m, _f, f in imap_box.server_state().elements()) == 2
        else:  # batch 1 committed with its folder state; batch 2 rolled back whole
            assert store.message_count() == 10
            inbox = store.folder(store.account_id("test"), "INBOX")
            # newest first: the newest batch is stored, and UIDNEXT waits under the oldest UID missing
            assert sorted(store.folder_uids(inbox.id, inbox.uidvalidity)) == list(range(21, 31))
            assert inbox.uidnext == 1
    env.pop("OAKEN_CRASH_AT")
    again = _oaken_sync(env)
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith("test: ") and " new, " in again.stdout
    assert_mirrored(imap_box, cfg)
    with open_store(config_mod.resolve_data_dir(cfg), readonly=True) as store:
        assert not store.pending_flag_changes()
    if point == "sync.mid_flag_push":
        assert sum("\\Seen" in f for _m, _f, f in imap_box.server_state().elements()) == 3


def _stuck(bodies: list[bytes]) -> list:
    time.sleep(3600)  # a header worker that never answers (in the forked worker process)
    return []


def test_a_stuck_header_worker_costs_speed_not_the_sync(imap_box: Mailbox, real_mail, monkeypatch):
    from oaken.sync import folder

    monkeypatch.setattr(folder, "_read_all", _stuck)  # the worker, forked after this, runs it
    monkeypatch.setattr(folder, "WORKER_SECONDS", 0.5)
    imap_box.fill("INBOX", real_mail[:30])
    cfg = imap_box.config(batch_size=10)
    report = sync(cfg)
    assert report.complete and report.new == 30
    assert_mirrored(imap_box, cfg)
