"""scripts/bench_scale.py as the smoke run #16 asks for: a small generated mailbox through the
whole benchmark (import, the peers on the same Maildir, warm and cold searches, hybrid with the
stand-in embedder, the costs of a change), its correctness checks passing. The times it prints
are never asserted; what they stand on is (bench_scale.correctness)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).parent / "data"


def test_the_scale_benchmark_runs_and_its_checks_pass(tmp_path: Path) -> None:
    corpora = tmp_path / "corpora"  # the generator's three sources, from the real mail kept in tests/data
    corpora.mkdir()
    for name, source in {
        "enron-lay-skilling": DATA / "evals" / "enron",
        "notmuch-lkml": DATA / "foundation" / "notmuch-default",
        "notmuch-default": DATA / "search" / "INBOX",
    }.items():
        (corpora / name).symlink_to(source)
    peers = os.environ.get("OAKEN_PEERS", "1") != "0"  # scripts/setup.sh installs notmuch and mu unless told not to
    work = tmp_path / "work"
    done = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "python"), str(ROOT / "scripts" / "bench_scale.py"), "--work", str(work),
         "--sizes", "300", "--runs", "3", "--vectors", "--corpora", str(corpora), *([] if peers else ["--no-peers"])],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={k: v for k, v in os.environ.items() if k != "OAKEN_HOME"},
    )
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-3000:])
    result = json.loads((work / "results-300.json").read_text())
    assert result["checks"] == {"messages": 300, "searches_compared": 20, "passed": True}
    assert result["keyword_engine"] == "tantivy"
    for side in ("keyword", "hybrid"):
        assert {"one word", "three-word question", "quoted phrase", "filters only", "no words", "is:unread"} <= set(
            result[side]
        )
    assert result["oaken_import_index"]["msgs_per_s"] > 0
    if peers:
        assert result["notmuch"]["msgs_per_s"] > 0 and result["mu"]["msgs_per_s"] > 0
        assert set(result["cli_vs_peers"]["one word"]) >= {"oaken search", "notmuch search", "mu find"}
    assert "add100_import_and_index_s" in result["changes"] and "triage_to_indexes_s" in result["changes"]
