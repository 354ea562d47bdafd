"""The fault suite (scripts/fault_suite.py, docs/fault-suite.md) in its --quick form: kill -9 of a
syncing and indexing daemon, Dovecot stopped mid-sync, malformed requests on the search socket, a
full disk, a corrupted index.db and hostile mail, each compared with the truth. Every count of
messages lost, duplicated and searches wrong must be 0.

It runs real processes against a real Dovecot for about two minutes on an idle 2-core machine
(several on a busy one), more than the normal suite's budget of ~90 s for a test, and the suite
does not deselect `slow`: so it runs only when asked for, with `-m slow` (or any -m expression
naming `fault_suite`) or OAKEN_FAULT_SUITE=1:

    .venv/bin/python -m pytest tests/test_fault_suite.py -m slow
    OAKEN_FAULT_SUITE=1 scripts/test tests/test_fault_suite.py

Its two hostile-mail scenarios (about 10 s) run in every suite: the whole run being opt-in, its
checks had fallen behind the product unseen (attachment chunks embedded since, counted as stray
vectors), and a seed of hostile-sync found a long message that its own word ranked third.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "fault_suite.py"
SCENARIOS = ("kill9", "dovecot-stop", "socket", "disk-full", "corrupt-index", "hostile-sync", "hostile-import")
ROW = re.compile(r"^(?P<name>[a-z0-9-]+)\s+(?P<lost>\d+|-)\s+(?P<dup>\d+|-)\s+(?P<wrong>\d+|-)\s", re.M)

pytestmark = [pytest.mark.dovecot]


def _asked_for(config: pytest.Config) -> bool:
    if os.environ.get("OAKEN_FAULT_SUITE") == "1":
        return True
    expression = config.getoption("markexpr", "") or ""
    return bool(re.search(r"(?<!not )\b(slow|fault_suite)\b", expression))


def _table(work: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict[str, re.Match], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OAKEN_")}
    proc = subprocess.run([sys.executable, str(SCRIPT), *args, "--work", str(work)],
                          capture_output=True, text=True, timeout=1200, cwd=ROOT, env=env)
    return proc, {m["name"]: m for m in ROW.finditer(proc.stdout)}, proc.stdout + "\n" + proc.stderr[-3000:]


@pytest.mark.parametrize("seed", ["1", "6"])  # 6: a long message ranked third without PAST_ROUNDS
def test_hostile_mail_is_stored_once_and_found_by_its_word(tmp_path: Path, seed: str) -> None:
    proc, rows, report = _table(tmp_path / "faults", "--quick", "--seed", seed,
                                "--only", "hostile-sync", "--only", "hostile-import")
    for name in ("hostile-sync", "hostile-import"):
        assert name in rows, report
        assert (rows[name]["lost"], rows[name]["dup"], rows[name]["wrong"]) == ("0", "0", "0"), f"{name}:\n{report}"
    assert proc.returncode == 0, report


@pytest.mark.slow
def test_the_quick_fault_suite_loses_duplicates_and_misleads_nothing(request: pytest.FixtureRequest,
                                                                     tmp_path: Path) -> None:
    if not _asked_for(request.config):
        pytest.skip("about 2 minutes of real faults: run with -m slow or OAKEN_FAULT_SUITE=1")
    proc, rows, report = _table(tmp_path / "faults", "--quick", "--seed", "1")
    assert set(SCENARIOS) <= set(rows), f"scenarios missing from the table:\n{report}"
    for name in SCENARIOS:
        row = rows[name]
        if row["lost"] == "-":  # skipped (no root for the small disk): said in the table
            assert name == "disk-full" and os.geteuid() != 0, report
            continue
        assert (row["lost"], row["dup"], row["wrong"]) == ("0", "0", "0"), f"{name}:\n{report}"
    assert "TOTAL lost 0, duplicated 0, wrong 0; 0 scenarios failed to run" in proc.stdout, report
    assert proc.returncode == 0, report
