"""The background search server `oaken search` starts when no daemon answers (oaken.search.background):
real `oaken` processes, real sockets, the concept embedder over real mail with real LanceDB vectors."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from oaken import api, paths
from oaken.config import Config, EmbedderConfig, PathsConfig
from oaken.index import embedding
from oaken.mailbox import Mailbox
from oaken.search import background, client
from oaken.store import open_store
from tests.search_fixtures import build_mailbox, config_for
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parent.parent
QUERY = "invoice"  # keyword hits in tests/data/search; meaning finds more
HEAVY = ("lance", "lancedb", "numpy", "oaken.search.engine")


@pytest.fixture(scope="module")
def vectors_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = build_mailbox(tmp_path_factory.mktemp("background"))
    assert embedding.embed_pending(config_for(home, model="concept")).embedded > 0
    return home


@pytest.fixture
def home(vectors_home: Path, tmp_path: Path, oaken_home: Path):
    """A copy of the mailbox with vectors, named by OAKEN_HOME's config.toml; every server started
    on it is stopped at the end."""
    copy = Path(shutil.copytree(vectors_home, tmp_path / "mail"))
    write_config(oaken_home, copy)
    yield copy
    stop_server(copy)


def write_config(oaken_home: Path, data_dir: Path, idle_minutes: float = 30.0) -> None:
    oaken_home.mkdir(parents=True, exist_ok=True)
    (oaken_home / "config.toml").write_text(
        f'[paths]\ndata_dir = "{data_dir}"\n\n[embedder]\nmodel = "concept"\n\n'
        f"[search]\nserver_idle_minutes = {idle_minutes}\n"
    )


def record(data_dir: Path) -> dict:
    try:
        text = (data_dir / background.LOCK_NAME).read_text()
    except FileNotFoundError:
        return {}
    return json.loads(text) if text.strip() else {}


def stop_server(data_dir: Path) -> None:
    for pid in servers(data_dir):
        os.kill(pid, signal.SIGKILL)
    wait_until("no background server left", lambda: not servers(data_dir), timeout=20)


def servers(data_dir: Path) -> list[int]:
    """Live background server processes of this test: by their command line and OAKEN_HOME."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            environ = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"oaken.search.background" in cmdline and background.alive(int(entry)):
            if f"OAKEN_HOME={os.environ['OAKEN_HOME']}".encode() in environ:
                found.append(int(entry))
    return found


def search(*args: str) -> tuple[dict, str, set[str]]:
    """`oaken search --json ARGS` as a new process: (its JSON, its stderr, which of HEAVY it imported)."""
    code = (
        "import sys\nfrom oaken.cli import main\n"
        f"rc = main(['search', '--json', *{list(args)!r}])\n"
        f"print('LOADED', ','.join(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)\n"
        "sys.exit(rc)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    err, _, loaded = proc.stderr.rpartition("LOADED ")
    return json.loads(proc.stdout), err, set(filter(None, loaded.strip().split(",")))


def ready(data_dir: Path) -> bool:
    return record(data_dir).get("state") == "ready" and client.ask_at(str(data_dir / "search.sock"), "", {}) is not None


def test_the_first_search_starts_a_server_and_the_next_one_uses_it(home: Path) -> None:
    first, err, loaded = search(QUERY)
    assert (first["mode"], first["degraded"], first["degraded_reason"]) == ("keyword", True, "vector_starting")
    assert first["hits"] and "starting in the background" in err and "keyword results only (vector_starting)" in err
    assert "loaded the model itself" not in err
    assert loaded == {"oaken.search.engine"}  # keywords answered here: no LanceDB, no numpy
    wait_until("the background server's socket", lambda: ready(home), timeout=60)
    assert len(servers(home)) == 1
    pid = record(home)["pid"]
    assert pid in servers(home) and record(home)["role"] == "background"

    second, err, loaded = search(QUERY)
    assert (second["mode"], second["degraded"]) == ("hybrid", False)
    assert loaded == set() and err == ""  # answered through the socket
    assert {h["id"] for h in first["hits"]} <= {h["id"] for h in second["hits"]}
    assert servers(home) == [pid]  # the same server: none started again

    status = Mailbox().status()["search_server"]
    assert status["running"] and status["pid"] == pid and status["role"] == "background"
    assert status["idle_exit_minutes"] == 30.0 and status["state"] == "ready"


def test_a_listing_is_not_degraded_while_the_server_starts(home: Path) -> None:
    listing, err, _ = search("is:unread")
    assert not listing["degraded"] and listing["mode"] == "keyword" and "loaded the model" not in err
    wait_until("the background server", lambda: bool(servers(home)), timeout=30)


def test_it_exits_when_idle(home: Path, oaken_home: Path) -> None:
    write_config(oaken_home, home, idle_minutes=0.02)  # 1.2 s
    search(QUERY)
    wait_until("a server", lambda: bool(servers(home)), timeout=30)
    wait_until("the idle server to exit", lambda: not servers(home), timeout=60)
    assert record(home) == {} and not (home / "search.sock").exists()
    assert Mailbox().status()["search_server"] == {"running": False}
    assert "minutes without a search" in (home / background.LOG_NAME).read_text()


def test_two_first_searches_at_once_start_one_server(home: Path) -> None:
    code = f"from oaken.cli import main; raise SystemExit(main(['search', '--json', {QUERY!r}]))"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for _ in range(2):
        procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  env=env, cwd=ROOT, text=True) for _ in range(3)]
        answers = [(json.loads(p.communicate(timeout=120)[0]), p.returncode) for p in procs]
        # each is answered from keywords while the server starts, or, on a machine slow enough
        # that a process starts after the server is ready, by the server: never anything else
        said = [(rc, a["degraded_reason"], len(a["hits"])) for a, rc in answers]
        assert all(rc == 0 and reason in ("vector_starting", None) and hits for rc, reason, hits in said), said
        assert any(reason == "vector_starting" for _, reason, _ in said), said  # the first ones found none
        wait_until("the background server", lambda: ready(home), timeout=60)
        assert len(servers(home)) == 1
        stop_server(home)


def test_a_killed_server_is_replaced_and_its_socket_cleaned_up(home: Path) -> None:
    search(QUERY)
    wait_until("the background server", lambda: ready(home), timeout=60)
    old = record(home)["pid"]
    os.kill(old, signal.SIGKILL)
    wait_until("the server to die", lambda: not servers(home), timeout=20)
    assert (home / "search.sock").exists() and record(home)["pid"] == old  # stale, both
    again, err, _ = search(QUERY)
    # its stderr says why when not (seen once in a loaded full run: None, from a search that did
    # not start a server; not reproduced alone)
    assert again["degraded_reason"] == "vector_starting", (again["mode"], again["warnings"], err)
    wait_until("a new server", lambda: ready(home), timeout=60)
    assert record(home)["pid"] != old and search(QUERY)[0]["mode"] == "hybrid"


def test_it_does_not_outlive_its_data_directory(home: Path) -> None:
    search(QUERY)
    wait_until("the background server", lambda: ready(home), timeout=60)
    shutil.rmtree(home)
    wait_until("the server to exit", lambda: not servers(home), timeout=30)


def test_autostart_off_and_no_daemon_search_here_as_before(home: Path, oaken_home: Path) -> None:
    answer, err, loaded = search("--no-daemon", QUERY)
    assert (answer["mode"], answer["degraded"]) == ("hybrid", False) and err == "" and "numpy" in loaded
    write_config(oaken_home, home, idle_minutes=0)
    answer, err, _ = search(QUERY)
    assert (answer["mode"], answer["degraded"]) == ("hybrid", False)
    assert "no search daemon is running, so this process loaded the model itself" in err
    assert not servers(home) and not record(home)


def test_the_api_starts_a_server_only_when_asked(home: Path) -> None:
    assert Mailbox().search(QUERY).mode == "hybrid" and not servers(home)
    box = Mailbox(autostart=True)
    response = box.search(QUERY)
    assert (response.mode, response.degraded_reason) == ("keyword", "vector_starting")
    wait_until("the background server", lambda: ready(home), timeout=60)
    assert box.search(QUERY).mode == "hybrid"


def test_the_daemon_takes_over_from_a_background_server(imap_box, real_mail, tmp_path: Path) -> None:
    imap_box.fill("INBOX", real_mail[:4])
    data = imap_box.config_dict()
    data["embedder"] = {"model": "concept"}
    imap_box.write_config(data)
    box = Mailbox()
    box.sync()
    box.reindex()
    data_dir = box.data_dir
    try:
        search("meeting")
        wait_until("the background server", lambda: ready(data_dir), timeout=60)
        background_pid = record(data_dir)["pid"]
        log = tmp_path / "daemon.log"
        with open(log, "w") as out:
            daemon = subprocess.Popen([sys.executable, "-m", "oaken.cli", "sync", "--daemon"], stdout=out,
                                      stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=ROOT)
        try:
            wait_until("the daemon to hold the data directory", lambda: record(data_dir).get("role") == "daemon",
                       timeout=60)
            assert not background.alive(background_pid) and not servers(data_dir)
            wait_until("the daemon's socket", lambda: client.ask_at(str(data_dir / "search.sock"), "", {}) is not None,
                       timeout=60)
            answer, err, _ = search("meeting")
            assert not answer["degraded"] and "starting" not in err
            assert not servers(data_dir)  # no search starts a server beside the daemon
            status = Mailbox().status()["search_server"]
            assert status["role"] == "daemon" and status["pid"] == daemon.pid
            assert "stopping the background search server" in log.read_text()
        finally:
            daemon.send_signal(signal.SIGTERM)
            assert daemon.wait(timeout=30) == 0
        assert record(data_dir) == {}
    finally:
        stop_server(data_dir)


# ---- the client's quick look at the config file --------------------------------------------------


@pytest.mark.parametrize("text", [
    "",
    '[paths]\ndata_dir = "/srv/mail"\n',
    "[paths]\ndata_dir = '/srv/mail' # mine\n",
    '[ paths ]\ndata_dir="~/mail"\n[embedder]\nmodel = "none"\n',
    '[embedder]\nmodel = "none"\n# data_dir is not set here\n',
    '[paths]\ndata_dir = "/srv/m#ail"\n',
])
def test_a_plain_data_dir_is_read_as_toml_reads_it(text: str) -> None:
    expected = tomllib.loads(text).get("paths", {}).get("data_dir", "")
    assert paths.plain_data_dir(text) == (expected if "data_dir =" in text or "data_dir=" in text else None)


@pytest.mark.parametrize("text", [
    'paths.data_dir = "/x"\n',
    '[paths]\ndata_dir = "C:\\\\mail"\n',
    '[paths]\ndata_dir = """/x"""\n',
    '[other]\ndata_dir = "/x"\n',
    '[[paths]]\ndata_dir = "/x"\n',
    '[paths]\ndata_dir = 3\n',
    '[paths]\ndata_dir = "/x"\ndata_dir = "/y"\n',
    'paths = { data_dir = "/x" }\n',
    '[paths\ndata_dir = "x"',
    '[paths]\ndata_dir = "/x" trailing\n',
])
def test_anything_else_is_left_to_the_toml_reader(text: str) -> None:
    assert paths.plain_data_dir(text) is None


# ---- Mailbox.thread ----------------------------------------------------------------------------------


def test_thread_is_oldest_first_in_the_messages_own_account(tmp_path: Path) -> None:
    mail = tmp_path / "two-accounts"
    cfg = Config(paths=PathsConfig(data_dir=str(mail)), embedder=EmbedderConfig(model="none"))
    notmuch = Path(__file__).parent / "data" / "foundation" / "notmuch-default"
    api.import_mail([notmuch], account="lists", config=cfg)
    api.import_mail([Path(__file__).parent / "data" / "search" / "INBOX"], account="enron", config=cfg)
    box = Mailbox(config=dataclasses.replace(cfg, default_account="enron"))
    box.reindex(keyword_only=True)
    with open_store(mail, readonly=True) as store:
        metas = store.metas(store.all_message_ids())
    by_thread: dict[int, list] = {}
    for m in metas.values():
        if m.account == "lists":
            by_thread.setdefault(m.thread, []).append(m)
    longest = max(by_thread.values(), key=len)
    assert len(longest) > 1
    thread = box.thread(longest[-1].id)
    assert [h.date for h in thread.hits] == sorted(h.date for h in thread.hits)
    assert {h.id for h in thread.hits} == {m.id for m in longest} and thread.account == "lists"
