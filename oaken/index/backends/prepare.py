"""Export and check a backend in a child process: `python -m oaken.index.backends.prepare NAME DATA_DIR THREADS BATCH`.

The first use of a fast backend exports the model and measures it against torch fp32 (about a
minute of torch, ONNX, OpenVINO and NNCF native code). Done in the daemon's own threads, a SIGTERM
meanwhile ended the process in SIGABRT: Python finalised while native threads still ran. In a
child, the parent's threads only wait on a pipe, so the daemon stops cleanly at any moment; the
child ends itself when its parent is gone, and the export's lock and temporary folder
(oaken.index.backends.artifacts) make an interrupted export harmless to the next one.

Prints one JSON line: {"ok": true} or {"ok": false, "error": "..."}.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

IN_CHILD = "OAKEN_BACKEND_PREPARE"  # set in the child: load_backend then works in-process


def _end_with_parent(parent: int) -> None:
    while True:
        if os.getppid() != parent:
            os._exit(3)  # the parent is gone: nobody waits for this export
        time.sleep(0.5)


def main(argv: list[str]) -> int:
    from oaken import log
    from oaken.errors import OakenError
    from oaken.index import backends

    log.configure()  # stderr, shared with the parent; stdout carries the answer

    name, data_dir, threads, batch_size, parent = argv[0], Path(argv[1]), int(argv[2]), int(argv[3]), int(argv[4])
    threading.Thread(target=_end_with_parent, args=(parent,), daemon=True).start()
    try:
        backends.load_backend(name, data_dir, threads=threads, batch_size=batch_size)
    except OakenError as e:
        print(json.dumps({"ok": False, "error": str(e)}), flush=True)
        return 1
    print(json.dumps({"ok": True}), flush=True)
    return 0


if __name__ == "__main__":
    os.environ[IN_CHILD] = "1"
    sys.exit(main(sys.argv[1:]))
