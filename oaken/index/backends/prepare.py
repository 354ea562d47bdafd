"""Export and check a backend in a child process: `python -m oaken.index.backends.prepare NAME DATA_DIR THREADS BATCH`.

The first use of a fast backend exports the model and measures it against torch fp32 (about a
minute of torch, ONNX, OpenVINO and NNCF native code). Done in the daemon's own threads, a SIGTERM
meanwhile ended the process in SIGABRT: Python finalised while native threads still ran. In a
child, the parent's threads only wait on a pipe, so the daemon stops cleanly at any moment; the
child is killed when its parent is gone (oaken.processes.die_with_parent), and the export's lock
and temporary folder
(oaken.index.backends.artifacts) make an interrupted export harmless to the next one.

Prints one JSON line: {"ok": true} or {"ok": false, "error": "..."}.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    from oaken import log, processes
    from oaken.errors import OakenError
    from oaken.index import backends

    name, data_dir, threads, batch_size, parent = argv[0], Path(argv[1]), int(argv[2]), int(argv[3]), int(argv[4])
    processes.die_with_parent()
    if os.getppid() != parent:  # the parent died before that took effect: nobody waits for this export
        return 3
    os.environ[backends.IN_CHILD] = "1"  # load_backend below exports here, not in yet another child
    log.configure()  # stderr, shared with the parent; stdout carries the answer
    try:
        backends.load_backend(name, data_dir, threads=threads, batch_size=batch_size)
    except OakenError as e:
        print(json.dumps({"ok": False, "error": str(e)}), flush=True)
        return 1
    print(json.dumps({"ok": True}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
