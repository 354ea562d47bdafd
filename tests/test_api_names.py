"""`oaken.search(...)` and `oaken.sync(...)` share their names with the packages oaken.search and
oaken.sync: whatever a process imported first, both names must stay callable."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.search_fixtures import build_mailbox

SCRIPT = """
import oaken
from oaken.config import ConfigError
first = oaken.search("stock option", limit=3)
second = oaken.search("stock option", limit=3)  # the package oaken.search is loaded by now
assert [h.id for h in first.hits] == [h.id for h in second.hits] and first.hits, first
import oaken.api, oaken.search.engine, oaken.sync.runner
assert oaken.search("stock option", limit=3).hits == second.hits
try:
    oaken.sync()  # reaches oaken.sync.runner.sync, which finds no account in this config
except ConfigError as e:
    print("sync:", e)
else:
    raise SystemExit("oaken.sync() returned without an account")
"""


def test_search_and_sync_stay_callable_once_their_packages_are_imported(tmp_path: Path) -> None:
    home = build_mailbox(tmp_path / "home")
    (home / "config.toml").write_text('[embedder]\nmodel = "none"\n')
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                         env={"OAKEN_HOME": str(home), "PATH": "/usr/bin:/bin"}, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "sync:" in out.stdout and "account" in out.stdout
