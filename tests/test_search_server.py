"""The daemon's search socket answers exactly what an in-process search answers."""

from __future__ import annotations

import stat
import threading
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from oaken import api
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
