"""Named crash points, armed only by environment variables, so tests can prove a `kill -9`
landed in the middle of the work rather than before or after it.

OAKEN_CRASH_AT="name" (or "name:N" for its N-th pass) kills the process with SIGKILL at that
point; OAKEN_CRASH_LOG, if set, names a file that receives one line per pass, written before
the kill, so the test can see exactly where the process died.
"""

from __future__ import annotations

import os
import signal

_passes: dict[str, int] = {}


def reached(name: str, **facts: object) -> None:
    target = os.environ.get("OAKEN_CRASH_AT")
    if not target:
        return
    want, _, nth = target.partition(":")
    if want != name:
        return
    _passes[name] = _passes.get(name, 0) + 1
    count = _passes[name]
    log = os.environ.get("OAKEN_CRASH_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as f:
            detail = " ".join(f"{k}={v}" for k, v in facts.items())
            f.write(f"{name} pass={count} {detail}\n")
            f.flush()
            os.fsync(f.fileno())
    if count >= int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)
