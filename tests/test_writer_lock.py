"""One writer at a time (issue #19): two `oaken reindex` runs at once used to embed everything
twice and store every chunk twice in vectors/. Real processes, real index.db and LanceDB, real
mail (tests/data/index), the concept embedder."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from pathlib import Path

from oaken import config as config_mod
from oaken.config import Config
from oaken.index import indexer
from oaken.index.embedding import embed_pending
from oaken.index.vectors import VectorStore
from tests.index_fixtures import open_index

# a reindex in its own process, started at the moment the test gives (so that two overlap), with
# the modules and Lance imported before it
_REINDEX = """
import sys, time
from oaken import config as c, log
from oaken.index import indexer
import lance  # noqa: F401
log.configure()
cfg = c.Config(paths=c.PathsConfig(data_dir=sys.argv[1]), embedder=c.EmbedderConfig(model="concept"))
time.sleep(max(0.0, float(sys.argv[2]) - time.time()))
print("start", time.time(), flush=True)
report = indexer.reindex(cfg, keyword_only=sys.argv[3] == "keyword")
print("done", report.indexed, (report.vectors or {}).get("embedded"), flush=True)
"""


def _concept(cfg: Config) -> Config:
    return dataclasses.replace(cfg, embedder=config_mod.EmbedderConfig(model="concept"))


def _start(data_dir: Path, at: float, what: str = "all") -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", _REINDEX, str(data_dir), str(at), what],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_two_reindexes_at_once_store_every_chunk_once(indexed: Config) -> None:
    cfg = _concept(indexed)
    data_dir = config_mod.resolve_data_dir(cfg)
    embed_pending(cfg, limit=0)  # the table exists and is empty: both runs find every chunk missing
    at = time.time() + 4.0  # both processes have started and imported everything (~2 s) by then
    runs = [_start(data_dir, at) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in runs]
    for p, (out, err) in zip(runs, outs):
        assert p.returncode == 0, err
    with open_index(cfg) as idx:
        chunks = {c: m for c, m in idx._run("SELECT id, message FROM chunks WHERE kind IN ('body', 'attachment')", [])}
        assert idx.counts()[0] == 14
    store = VectorStore(data_dir)
    assert store.count() == len(chunks), f"{store.count()} vector rows for {len(chunks)} chunks"
    assert store.chunk_messages() == chunks
    lines = [dict((ln.split(" ", 1) for ln in out.splitlines())) for out, _ in outs]
    embedded = sorted(int(ln["done"].split()[1]) for ln in lines)
    assert embedded == [0, len(chunks)]  # the second found the first's work done
    if abs(float(lines[0]["start"]) - float(lines[1]["start"])) < 0.3:  # not late for the start (a busy machine)
        assert any("index.waiting_for_writer" in err for _, err in outs)  # and said it was waiting


def test_a_second_writer_waits_and_says_so(indexed: Config) -> None:
    from oaken.index import writelock

    cfg = _concept(indexed)
    data_dir = config_mod.resolve_data_dir(cfg)
    with writelock.held(data_dir, "the test"):
        run = _start(data_dir, 0.0, "keyword")
        assert run.stderr is not None
        waited = ""
        deadline = time.monotonic() + 60
        while "index.waiting_for_writer" not in waited and time.monotonic() < deadline:
            line = run.stderr.readline()
            if not line:
                break
            waited += line
        assert "index.waiting_for_writer" in waited and f"pid {os.getpid()}: the test" in waited
        time.sleep(0.5)
        assert run.poll() is None  # still waiting
    out, err = run.communicate(timeout=60)
    assert run.returncode == 0, err
    assert "done 0 None" in out  # index.db was up to date


def test_the_lock_is_reentrant_and_shared_by_the_passes_of_one_reindex(indexed: Config) -> None:
    """`reindex` holds it around the keyword and embedding passes, which take it again."""
    cfg = _concept(indexed)
    report = indexer.reindex(cfg, rebuild=True)
    assert report.rebuilt and report.vectors is not None and report.vectors["pending"] == 0
    assert (config_mod.resolve_data_dir(cfg) / "index.lock").stat().st_mode & 0o777 == 0o600
