"""`oaken sync --print-unit`: a systemd user unit that runs the daemon of the oaken that printed it."""

from __future__ import annotations

import configparser
import os
import shlex
import subprocess
import sys
from pathlib import Path


def test_the_unit_runs_this_install_with_this_home(tmp_path: Path) -> None:
    env = {**os.environ, "OAKEN_HOME": str(tmp_path)}
    oaken = Path(sys.executable).parent / "oaken"
    proc = subprocess.run([str(oaken), "sync", "--print-unit", "--account", "work"], env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.read_string(proc.stdout)
    command = shlex.split(unit["Service"]["ExecStart"])
    assert command[0] == str(oaken) and os.access(command[0], os.X_OK)
    assert command[1:] == ["sync", "--daemon", "--account", "work"]
    assert unit["Service"]["Environment"] == f"OAKEN_HOME={tmp_path}"
    assert unit["Service"]["KillSignal"] == "SIGTERM" and unit["Install"]["WantedBy"] == "default.target"
    # the unit's own command is one oaken accepts: --help of the same arguments parses
    check = subprocess.run([*command, "--help"], env=env, capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stderr
