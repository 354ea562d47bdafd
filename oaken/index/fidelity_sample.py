"""The fixed sample the fidelity check embeds (oaken.index.fidelity), and the int8 calibration
text of the OpenVINO backend: Enron text shipped with Oaken in
oaken/index/backends/enron_sample.json. A leaf, so that a backend reads its calibration text
without importing the check that judges it."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

SAMPLE_FILE = Path(__file__).parent / "backends" / "enron_sample.json"


@dataclass(frozen=True)
class Sample:
    calibration: tuple[str, ...]
    documents: tuple[str, ...]
    queries: tuple[str, ...]

    def digest(self) -> str:
        blob = json.dumps([self.documents, self.queries], ensure_ascii=False).encode()
        return hashlib.sha256(blob).hexdigest()[:12]

    def subset(self, documents: int, queries: int) -> Sample:
        """A smaller check (tests): the first `documents` chunks and `queries` queries."""
        return Sample(self.calibration[:documents], self.documents[:documents], self.queries[:queries])


@lru_cache(maxsize=1)
def load_sample(path: Path = SAMPLE_FILE) -> Sample:
    d = json.loads(Path(path).read_text())
    return Sample(tuple(d["calibration"]), tuple(d["documents"]), tuple(d["queries"]))
