"""The daemon as a systemd user service: `oaken sync --print-unit` writes the unit for this install.

The unit names the `oaken` that printed it (a venv's, pipx's, ~/.local/bin's), so it runs the same
install the user tried by hand; a fixed path in a shipped file would be wrong for most of them.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys

UNIT = """\
# systemd user unit: keeps raw.db mirrored and the indexes current, and answers searches warm.
# Install:  oaken sync --print-unit > ~/.config/systemd/user/oaken-sync.service
#           systemctl --user daemon-reload && systemctl --user enable --now oaken-sync
# Logs:     journalctl --user -u oaken-sync -f
[Unit]
Description=Oaken mail sync daemon (IMAP mirror, indexing, search socket)
After=network-online.target
Wants=network-online.target

[Service]
Type=simple
ExecStart={exec_start}
# SIGTERM lets the running batch commit; the daemon exits 0.
KillSignal=SIGTERM
TimeoutStopSec=60
Restart=on-failure
RestartSec=30
# A second daemon on the same data directory, a bad config or a refused login exit 1 or 2:
# restarting would not mend them
RestartPreventExitStatus=1 2
Nice=10
IOSchedulingClass=idle
PrivateTmp=yes
NoNewPrivileges=yes
{environment}
[Install]
WantedBy=default.target
"""


def executable() -> str:
    """The absolute path of the `oaken` command this process runs as."""
    argv0 = sys.argv[0] if sys.argv and sys.argv[0] else ""
    if os.path.basename(argv0) == "oaken" and os.path.exists(argv0):
        return os.path.abspath(argv0)
    found = shutil.which("oaken")
    if found:
        return os.path.abspath(found)
    return f"{sys.executable} -m oaken.cli"  # run as `python -m oaken.cli`: the same interpreter


def unit(config: str | None = None, account: str | None = None) -> str:
    command = executable()
    args = [
        *(["--config", os.path.abspath(config)] if config else []),
        "sync",
        "--daemon",
        *(["--account", account] if account else []),
    ]
    exec_start = command + " " + " ".join(shlex.quote(a) for a in args)
    home = os.environ.get("OAKEN_HOME")
    environment = f"Environment=OAKEN_HOME={os.path.abspath(home)}\n" if home else ""
    return UNIT.format(exec_start=exec_start, environment=environment)
