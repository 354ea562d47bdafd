"""Worker processes beside this one: how they start, and that they end with their parent.

Sync reads headers and the indexer parses mail in one worker process each. A worker forked while
another thread holds a lock (the daemon loads its model meanwhile; LanceDB and OpenVINO run
threads of their own) may wait for that lock for ever, and a worker that outlives a `kill -9` of
its parent holds the parent's pipes open and sleeps for ever.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import ctypes

# Native runtimes that run threads of their own once loaded.
THREADED_RUNTIMES = ("lance", "openvino", "onnxruntime", "torch")


def start_method() -> str:
    """fork (quick: the worker starts with this process's modules imported), unless this process
    runs native threads by now; then forkserver, whose server has none."""
    return "forkserver" if any(m in sys.modules for m in THREADED_RUNTIMES) else "fork"


def libc() -> ctypes.CDLL | None:
    """libc, opened in the parent before a fork: a child forked while another thread was in
    dlopen would wait for the loader's lock for ever."""
    try:
        import ctypes

        return ctypes.CDLL("libc.so.6", use_errno=True)
    except OSError:
        return None


def die_with_parent(lib: ctypes.CDLL | None = None) -> None:
    """A worker's initializer: SIGKILL when the parent dies (PR_SET_PDEATHSIG). `lib` is libc
    opened before a fork; None (forkserver: arguments are pickled) opens it here."""
    lib = lib or libc()
    try:
        if lib is not None:  # None: no libc here
            lib.prctl(1, signal.SIGKILL)
    except AttributeError:  # a libc without prctl
        pass
    if os.getppid() == 1:  # the parent died before prctl took effect
        os._exit(0)
