"""A search's response in the making: warnings, timings and vector coverage, made at any exit."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

from oaken import extras, paths
from oaken.config import Config
from oaken.search import query as query_mod
from oaken.search.types import Explain, Hit, RetrieverTrace, SearchResponse


def ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 2)


_COVERAGE: dict[str, tuple[float, float | None]] = {}  # data dir and model -> (when, share embedded)
_COVERAGE_LOCK = threading.Lock()
_COVERAGE_AGE = 5.0


def _coverage(cfg: Config, data_dir: Path) -> float | None:
    """vector_coverage for the response. Counting index.db's chunks costs tens of milliseconds at
    10k messages, so a warm process answers with the figure it has and refreshes it in the
    background when it is older than a few seconds; only the first search of a process waits."""
    if cfg.embedder.model == "none" or extras.vectors_missing(cfg.embedder.model):
        return None
    if not os.path.isdir(paths.vectors_dir(data_dir)):
        return 0.0  # nothing embedded yet: no need to count what is not
    key = f"{data_dir}\0{cfg.embedder.model}"
    with _COVERAGE_LOCK:
        known = _COVERAGE.get(key)
        stale = known is None or time.monotonic() - known[0] > _COVERAGE_AGE
        if known is not None and stale:
            _COVERAGE[key] = (time.monotonic(), known[1])  # one refresh at a time
    if known is None:
        return _count_coverage(cfg, key)
    if stale:
        threading.Thread(target=_count_coverage, args=(cfg, key), name="oaken-coverage", daemon=True).start()
    return known[1]


def _count_coverage(cfg: Config, key: str) -> float | None:
    from oaken.index.coverage import vector_coverage

    try:
        value = vector_coverage(cfg, max_age=0.0)
    except Exception:  # noqa: BLE001 - a figure for the response; never a reason to fail a search
        value = None
    with _COVERAGE_LOCK:
        _COVERAGE[key] = (time.monotonic(), value)
    return value


class PendingResponse:
    """Collects warnings and timings while a search runs, and makes the response at any exit."""

    def __init__(self, cfg: Config, data_dir: Path, explain: bool):
        self.started = time.perf_counter()
        self.cfg = cfg
        self.explain = explain
        self.warnings: list[str] = []
        self.timings: dict[str, float] = {}
        self.parsed: query_mod.ParsedQuery | None = None
        self.fields: dict[str, Any] = dict(
            mode="keyword", degraded=False, degraded_reason=None, vector_coverage=_coverage(cfg, data_dir)
        )

    def __call__(
        self,
        hits: tuple[Hit, ...] = (),
        *,
        low_confidence: bool = False,
        traces: tuple[RetrieverTrace, ...] = (),
        weights: dict[str, float] | None = None,
        **fields: Any,
    ) -> SearchResponse:
        self.timings["total"] = ms(self.started)
        info = None
        if self.explain and self.parsed is not None:
            info = Explain(query_mod.describe(self.parsed), traces, self.cfg.search.rrf_k, weights or {})
        return SearchResponse(
            hits=hits,
            low_confidence=low_confidence,
            warnings=tuple(dict.fromkeys(self.warnings)),
            timings=self.timings,
            explain=info,
            **{**self.fields, **fields},
        )

    def degrade(self, reason: str, *, over: bool = False) -> None:
        """The first reason stands, unless `over` (index.db unavailable outranks the vector side's)."""
        if over or not self.fields["degraded"]:
            self.fields.update(degraded=True, degraded_reason=reason)
