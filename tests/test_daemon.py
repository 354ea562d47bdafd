"""`oaken sync --daemon` as a real process against a real Dovecot: IDLE, local changes pushed,
reconnect after the server drops it, one daemon per data directory, SIGTERM between batches."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from oaken import config as config_mod
from oaken.index import keyword
from oaken.store import open_store
from oaken.sync.runner import sync
from tests.dovecot_fixtures import Mailbox, assert_mirrored
from tests.tcp_proxy import TcpProxy
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parent.parent


def _count() -> int:
    try:
        with open_store(config_mod.resolve_data_dir(config_mod.load()), readonly=True) as store:
            return store.message_count()
    except Exception:  # noqa: BLE001 - raw.db not created yet
        return 0


def _start(tmp_path: Path, name: str = "daemon", *, index: bool = False) -> tuple[subprocess.Popen, Path]:
    log = tmp_path / f"{name}.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "oaken.cli", "sync", "--daemon", *([] if index else ["--no-index"])],
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=ROOT)
    return proc, log


def _stop(proc: subprocess.Popen) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=20)


@pytest.fixture
def daemons():
    started: list[subprocess.Popen] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_daemon_idles_pushes_reconnects_refuses_a_twin_and_stops_on_sigterm(
        imap_box: Mailbox, real_mail, tmp_path: Path, daemons):
    imap_box.fill("INBOX", real_mail[:5])
    imap_box.fill("Other", real_mail[5:8])
    imap_box.write_config()
    cfg = config_mod.load()
    proc, log = _start(tmp_path)
    daemons.append(proc)
    wait_until("the first sync", lambda: _count() == 8)

    # new mail is announced by IDLE (the poll interval is 30 s)
    imap_box.fill("INBOX", real_mail[8:9])
    wait_until("IDLE to bring the new message", lambda: _count() == 9)

    # a message opened locally is marked read on the server within seconds
    with open_store(config_mod.resolve_data_dir(cfg)) as store, store.transaction():
        inbox = store.folder(store.account_id("test"), "INBOX")
        first = min(store.folder_uids(inbox.id, inbox.uidvalidity).items())[1][0]
        mid = store.meta(first).message_id
        store.mark_read(first)
    wait_until("the push", lambda: any(m == mid and "\\Seen" in f for m, _fo, f in imap_box.server_state()))

    # the server kills every session: the daemon reconnects and carries on
    assert imap_box.server.kill_sessions() >= 2
    imap_box.fill("INBOX", real_mail[9:10])
    wait_until("mail after a reconnect", lambda: _count() == 10)

    twin = subprocess.run([sys.executable, "-m", "oaken.cli", "sync", "--daemon"], capture_output=True, text=True,
                          timeout=30, cwd=ROOT)
    assert twin.returncode == 1
    assert f"pid {proc.pid}" in twin.stderr and "already syncs" in twin.stderr

    assert _stop(proc) == 0
    text = log.read_text()
    assert "connection lost" in text or "idle connection lost" in text
    assert "daemon stopped" in text
    # the IDLE connections closed by the stop are not reported as lost
    assert "connection lost" not in text[text.index("stopping on a signal"):]
    assert "folder synced" in text and "folder=INBOX" in text  # one structured event per folder
    assert imap_box.password not in text
    assert_mirrored(imap_box, cfg)


def test_sigterm_lets_the_running_batch_commit_and_exits_0(imap_box: Mailbox, real_mail, tmp_path: Path, daemons):
    imap_box.fill("INBOX", real_mail[:40])
    proxy = TcpProxy(imap_box.server.ssl_port)
    proxy.rate = 60_000  # about 2 s for the whole folder
    try:
        imap_box.write_config(port=proxy.port, batch_size=5)
        cfg = config_mod.load()
        proc, _log = _start(tmp_path)
        daemons.append(proc)
        wait_until("the first batch", lambda: _count() >= 5)
        assert _stop(proc) == 0
        with open_store(config_mod.resolve_data_dir(cfg), readonly=True) as store:
            stored = store.message_count()
            inbox = store.folder(store.account_id("test"), "INBOX")
            uids = store.folder_uids(inbox.id, inbox.uidvalidity)
            assert 5 <= stored < 40 and stored % 5 == 0, f"{stored} stored: not whole batches"
            # newest first, whole batches: UIDNEXT waits under the oldest UID missing, the oldest batch
            assert sorted(uids) == list(range(41 - stored, 41)) and inbox.uidnext == 1
    finally:
        proxy.close()
    assert sync(imap_box.config()).new == 40 - stored
    assert_mirrored(imap_box, cfg)


def test_the_lock_is_released_when_a_daemon_is_killed(imap_box: Mailbox, real_mail, tmp_path: Path, daemons):
    imap_box.fill("INBOX", real_mail[:2])
    imap_box.write_config()
    first, _ = _start(tmp_path, "first")
    daemons.append(first)
    wait_until("the first sync", lambda: _count() == 2)
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    second, _ = _start(tmp_path, "second")
    daemons.append(second)
    imap_box.fill("INBOX", real_mail[2:3])
    wait_until("the second daemon to sync", lambda: _count() == 3)
    assert _stop(second) == 0


def test_the_daemon_indexes_what_it_stores(imap_box: Mailbox, real_mail, tmp_path: Path, daemons):
    imap_box.fill("INBOX", real_mail[:6])
    data = imap_box.config_dict()
    data["embedder"] = {"model": "concept"}  # the deterministic stand-in: no model load
    imap_box.write_config(data)
    data_dir = config_mod.resolve_data_dir(config_mod.load())
    proc, log = _start(tmp_path, "indexing", index=True)
    daemons.append(proc)
    wait_until("the first batch indexed", lambda: keyword.status(data_dir)["messages"] == 6, timeout=60)
    imap_box.fill("INBOX", real_mail[6:7])
    wait_until("new mail indexed", lambda: keyword.status(data_dir)["messages"] == 7, timeout=60)
    assert _stop(proc) == 0
    assert "indexing failed" not in log.read_text()


def test_sigterm_during_the_first_model_export_exits_0(imap_box: Mailbox, real_mail, tmp_path: Path, daemons):
    """The first use of a fast backend exports it for about a minute; that runs in a child process
    (oaken.index.backends.prepare), so a SIGTERM meanwhile stops the daemon cleanly (it used to
    end in SIGABRT with native export threads running) and the child follows its parent."""
    imap_box.fill("INBOX", real_mail[:3])
    data = imap_box.config_dict()
    data["embedder"] = {"model": "all-MiniLM-L6-v2", "backend": "onnx-int8"}  # not exported in this data dir
    imap_box.write_config(data)
    data_dir = config_mod.resolve_data_dir(config_mod.load())
    proc, log = _start(tmp_path, "export", index=True)
    daemons.append(proc)

    def preparing() -> list[int]:
        found = subprocess.run(["pgrep", "-f", f"oaken.index.backends.prepare onnx-int8 {data_dir} "],
                               capture_output=True, text=True).stdout.split()
        return [int(pid) for pid in found]

    wait_until("the export under way in a child", lambda: "embedder_export" in log.read_text() and bool(preparing()),
          timeout=120)
    wait_until("the first batch", lambda: _count() == 3, timeout=60)  # the daemon is in its loop
    assert _stop(proc) == 0, log.read_text()[-3000:]
    wait_until("the exporting child to end with its parent", lambda: not preparing(), timeout=10)
    # the int8 export did not finish, and nothing half-made was taken for done
    assert not list((data_dir / "models").rglob("onnx-int8-v1/model.onnx"))


def test_a_triage_is_searched_at_once_through_the_daemon_and_its_index_follows(
        imap_box: Mailbox, real_mail, tmp_path: Path, daemons):
    """`oaken triage` writes raw.db only. The daemon's next search already sees it (raw.db decides
    disposition), and its indexer follows the change within seconds, though sync saw nothing."""
    from oaken.index.keyword import KeywordFilters, KeywordIndex
    from oaken.errors import VectorUnavailable
    from oaken.index.vectors import VectorStore
    from oaken.search import client

    imap_box.fill("INBOX", real_mail[:4])
    data = imap_box.config_dict()
    data["embedder"] = {"model": "concept"}  # the deterministic stand-in: no model load
    imap_box.write_config(data)
    cfg = config_mod.load()
    data_dir = config_mod.resolve_data_dir(cfg)
    proc, log = _start(tmp_path, "triage", index=True)
    daemons.append(proc)
    wait_until("the first batch indexed", lambda: keyword.status(data_dir)["messages"] == 4, timeout=60)
    wait_until("the search socket", lambda: client.ask_raw(cfg, "", {}) is not None, timeout=60)
    with open_store(data_dir, readonly=True) as store:
        target = store.all_message_ids()[-1]

    def archived_in_index() -> list[int]:
        with KeywordIndex(data_dir) as index:
            return [h.message for h in index.newest(KeywordFilters(dispositions=("archived",)), limit=10)]

    def vector_rows(columns: tuple[str, ...] = ("chunk_id",)) -> list[dict]:
        try:
            return VectorStore(data_dir).rows_of([target], columns)
        except VectorUnavailable:  # vectors/ made, its table not written yet: the daemon is on it
            return []

    def archived_in_vectors() -> bool:
        rows = vector_rows(("disposition",))
        return bool(rows) and {r["disposition"] for r in rows} == {"archived"}

    wait_until("the vectors", lambda: bool(vector_rows()), timeout=60)
    assert archived_in_index() == [] and not archived_in_vectors()
    done = subprocess.run([sys.executable, "-m", "oaken.cli", "triage", str(target), "--disposition", "archived"],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    answer = client.ask_raw(cfg, "in:archived", {})  # at once: no wait for any indexer
    assert answer is not None and [h["id"] for h in answer["hits"]] == [target]
    answer = client.ask_raw(cfg, "", {"disposition": "archived"})
    assert answer is not None and [h["id"] for h in answer["hits"]] == [target]

    wait_until("the daemon's index.db to follow raw.db", lambda: archived_in_index() == [target], timeout=20)
    wait_until("the daemon's vectors to follow raw.db", archived_in_vectors, timeout=30)
    assert _stop(proc) == 0
    assert "indexing failed" not in log.read_text()


def test_a_stopping_daemon_waits_for_the_embedder_still_loading(tmp_path: Path) -> None:
    """A model half loaded when the interpreter shut down aborted the daemon on SIGTERM (exit -6,
    "terminate called without an active exception"): the search server's warming thread is handed
    to the daemon, which waits for it, bounded, and says so when the bound runs out."""
    import threading

    import structlog.testing

    from oaken import log
    from oaken.config import Config, EmbedderConfig, PathsConfig
    from oaken.daemon import Daemon
    from oaken.daemon.search_socket import start_search_server

    cfg = Config(paths=PathsConfig(data_dir=str(tmp_path / "home")), embedder=EmbedderConfig(model="none"))
    stop, never = threading.Event(), threading.Event()
    handed: list[threading.Thread] = []
    srv = start_search_server(cfg, stop, warm_after=never, threads=handed)
    try:
        assert srv is not None and [t.name for t in handed] == ["oaken-search-warm"] and handed[0].is_alive()
    finally:
        stop.set()
        srv.thread.join(5)
    handed[0].join(5)
    assert not handed[0].is_alive()  # a stop while waiting for the first login ends the warming

    daemon = Daemon.__new__(Daemon)  # only the stop path's wait is exercised here
    daemon.log = log.get("oaken.daemon")
    loading = threading.Event()
    slow = threading.Thread(target=lambda: loading.wait(0.6), daemon=True)
    daemon._warming = [slow]
    slow.start()
    daemon._wait_for_warming()
    assert not slow.is_alive()  # waited for it
    stuck = threading.Thread(target=lambda: loading.wait(30), daemon=True)
    daemon._warming = [stuck]
    daemon.WARMING_WAIT_S = 0.2
    stuck.start()
    with structlog.testing.capture_logs() as logged:  # whatever stream an earlier test left it on
        daemon._wait_for_warming()
    assert stuck.is_alive() and any("still loading when the daemon stopped" in e["event"] for e in logged)
    loading.set()
