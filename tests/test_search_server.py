"""The daemon's search socket answers exactly what an in-process search answers."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from oaken import api, paths
from oaken import config as config_mod
from oaken.config import Config, EmbedderConfig
from oaken.index import indexer
from oaken.search import engine, server

DATA = Path(__file__).parent / "data" / "foundation" / "notmuch-default"


def comparable(response) -> dict:
    d = asdict(response)
    d.pop("timings")
    if d.get("explain"):
        for r in d["explain"]["retrievers"]:
            r.pop("ms")
    return d


@pytest.fixture
def cfg(oaken_home: Path) -> Config:
    c = replace(Config(), embedder=EmbedderConfig(model="none"))
    api.import_mail([DATA], config=c)
    indexer.update(c)
    return c


def test_socket_answers_like_the_engine(cfg: Config) -> None:
    assert server.ask(cfg, "notmuch", {}) is None  # no daemon yet: the caller searches itself
    stop = threading.Event()
    srv = server.SearchServer(cfg, stop).start()
    try:
        path = server.socket_path(cfg)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        for query, params in (("notmuch", {"limit": 5}), ("from:cworth", {"explain": True}),
                              ('"tag" -search', {"sort": "date"}), ("priority:9 nonsense:x", {})):
            via_socket = server.ask(cfg, query, params)
            direct = engine.search(query, config=cfg, **params)
            assert via_socket is not None
            assert comparable(via_socket) == comparable(direct)
        assert server.ask(cfg, "notmuch", {"limit": 3}).hits  # real hits came through
    finally:
        stop.set()
        srv.thread.join(5)
    assert not server.socket_path(cfg).exists()
    assert server.ask(cfg, "notmuch", {}) is None


def test_a_dead_socket_means_search_here(cfg: Config) -> None:
    path = server.socket_path(cfg)
    path.write_text("")  # a stale file where the socket was
    assert server.ask(cfg, "notmuch", {}) is None


def _command_in_a_new_process(home: Path, *args: str) -> tuple[dict, list[str]]:
    """`oaken search --json ARGS` in a fresh interpreter: its answer and which heavy modules it loaded."""
    code = ("import sys\n"
            "from oaken.cli import main\n"
            f"rc = main(['search', '--json', *{list(args)!r}])\n"
            "loaded = [m for m in ('oaken.config', 'oaken.store', 'oaken.search.engine', 'apsw', 'dataclasses')"
            " if m in sys.modules]\n"
            "print('LOADED', ','.join(loaded), file=sys.stderr)\n"
            "sys.exit(rc)\n")
    env = {**os.environ, "OAKEN_HOME": str(home), "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    loaded = proc.stderr.split("LOADED ", 1)[1].strip()
    return json.loads(proc.stdout), [m for m in loaded.split(",") if m]


@pytest.mark.parametrize("elsewhere", [False, True])
def test_the_command_asks_the_daemon_without_loading_the_engine(oaken_home: Path, tmp_path: Path,
                                                                elsewhere: bool) -> None:
    data_dir = tmp_path / "mail-data" if elsewhere else oaken_home
    data_dir.mkdir(parents=True, exist_ok=True)
    oaken_home.mkdir(parents=True, exist_ok=True)
    # with data_dir set in config.toml, the client must read it to find the socket
    (oaken_home / "config.toml").write_text(
        '[embedder]\nmodel = "none"\n' + (f'[paths]\ndata_dir = "{data_dir}"\n' if elsewhere else ""))
    cfg = config_mod.load()
    assert cfg.data_dir == data_dir
    api.import_mail([DATA], config=cfg)
    indexer.update(cfg)
    alone, loaded = _command_in_a_new_process(oaken_home, "notmuch")
    assert "oaken.search.engine" in loaded  # no daemon: the command searched in its own process
    stop = threading.Event()
    srv = server.SearchServer(cfg, stop).start()
    try:
        answer, loaded = _command_in_a_new_process(oaken_home, "notmuch")
    finally:
        stop.set()
        srv.thread.join(5)
    assert loaded == []  # the daemon answered: no typed config, no store, no engine, no SQLite here
    for d in (alone, answer):
        d.pop("timings")
    assert answer == alone and answer["hits"]


def test_the_socket_is_found_from_the_config_file(oaken_home: Path, tmp_path: Path) -> None:
    oaken_home.mkdir(parents=True)
    config = oaken_home / "config.toml"
    assert paths.socket_file() == str(oaken_home / "search.sock")  # no config file: the default place
    config.write_text('[paths]\ndata_dir = "~/mail"\n')
    assert paths.socket_file() == os.path.expanduser("~/mail/search.sock")
    config.write_text('[index]\nchunk_words = 100\n# data_dir is not set here\n')
    assert paths.socket_file() == str(oaken_home / "search.sock")
    for broken in ('[paths\ndata_dir = "x"', '[paths]\ndata_dir = 3\n', 'paths = "data_dir"\n'):
        config.write_text(broken)  # the caller then loads the config itself and reports the fault
        assert paths.socket_file() is None
    assert paths.socket_file(str(tmp_path / "missing.toml")) is None


def test_a_config_named_on_the_command_line_is_read_even_with_a_daemon(cfg: Config, oaken_home: Path,
                                                                      tmp_path: Path, capsys) -> None:
    """`oaken --config FILE search` means FILE: a bad one is refused as without a daemon (rc 2), and
    the daemon of another data directory does not answer for it."""
    from oaken.cli import main

    asked: list[str] = []

    def daemon_search(query: str, **kwargs):
        asked.append(query)
        return engine.search(query, **kwargs)

    stop = threading.Event()
    srv = server.SearchServer(cfg, stop, search=daemon_search).start()
    try:
        assert main(["search", "--json", "notmuch"]) == 0  # no --config: the daemon answers
        assert asked == ["notmuch"] and json.loads(capsys.readouterr().out)["hits"]
        for text, fault in (('[search\nrrf_k = 3\n', "not valid TOML"),
                            ('[search]\nrrf_k = "sixty"\n', "[search] rrf_k: expected an integer"),
                            (f'[path]\ndata_dir = "{oaken_home}"\n', "unknown key 'path'")):
            bad = tmp_path / "bad.toml"
            bad.write_text(text)
            for daemon in ([], ["--no-daemon"]):
                assert main(["--config", str(bad), "search", *daemon, "notmuch"]) == 2
                assert fault in capsys.readouterr().err
        elsewhere = tmp_path / "elsewhere"
        other = tmp_path / "other.toml"
        other.write_text(f'[embedder]\nmodel = "none"\n[paths]\ndata_dir = "{elsewhere}"\n')
        assert main(["--config", str(other), "search", "--json", "notmuch"]) == 1  # no mail there: an error
        answer = json.loads(capsys.readouterr().out)
        assert answer["hits"] == [] and any("no mail yet" in w for w in answer["warnings"])
        assert asked == ["notmuch"]  # the daemon answered none of these
    finally:
        stop.set()
        srv.thread.join(5)
