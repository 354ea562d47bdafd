"""The vector retriever: the meaning side of a search, as DESIGN.md "Precise rules" order it.

Embed the free text (rewritten first by the local `rewrite_command` when llm_rewrite is on), ask
vectors/ for the nearest chunks with the prefilters pushed into LanceDB, let the engine bind the
rest (phrases, exclusions, raw.db filters) through `admit`, collapse chunks to messages, count
ranks from 1, and widen with a doubled candidate count while too few messages survive.
`vector_timeout_seconds` bounds all of it, every round together; loading the model does not
count (the daemon has it loaded; a one-off process pays it before the clock starts).

It never raises: every failure comes back as a state holding one of DESIGN.md's degraded codes,
and the engine answers from the keyword side.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from oaken import config as config_mod
from oaken.config import Config
from oaken.errors import VectorUnavailable
from oaken.index.embedders import Embedder, backend_of, load_embedder
from oaken.index.vectors import VectorChunkHit, VectorFilters, VectorStore

OK, OFF, SKIPPED = "ok", "off", "skipped"
CHUNKS_PER_MESSAGE = 3  # first round: this many chunks per message wanted, since chunks collapse
# Rounds past max_candidates that leave out the messages already read: one long message's chunks
# can fill a whole round (as on the keyword side: oaken.search.retrievers.PAST_ROUNDS).
PAST_ROUNDS = 3
Admit = Callable[[Sequence[int]], Sequence[int]]


@dataclass(frozen=True)
class VectorMessageHit:
    message: int
    rank: int  # from 1, after filtering and collapsing
    score: float  # cosine similarity of its best chunk
    chunk: int  # the best chunk: it stands for the message
    matched_chunks: tuple[int, ...] = ()  # the message's other chunks that came back, best first


@dataclass(frozen=True)
class VectorResult:
    hits: tuple[VectorMessageHit, ...]
    state: str  # "ok"; "off" ([embedder] model = "none"); "skipped" (no free text); or a degraded code
    warnings: tuple[str, ...] = ()
    best_cosine: float | None = None  # of the best hit that survived the filters
    rounds: int = 0
    candidates: int = 0  # chunks asked for in the last round
    embedded_text: str = ""  # what was embedded, after any rewrite
    timings: Mapping[str, float] = field(default_factory=dict)  # milliseconds
    cut: bool = False  # more lay past the hits: the `want` asked for were found, or widening stopped

    @property
    def degraded_reason(self) -> str | None:
        return None if self.state in (OK, OFF, SKIPPED) else self.state


def prefilters(index_filters: Any) -> VectorFilters:
    """The part of the keyword side's filters (oaken.index.keyword.KeywordFilters) that LanceDB
    can apply; subject, attachment and filename terms are left to `admit`."""
    return VectorFilters(
        account=index_filters.account,
        senders=tuple(index_filters.senders),
        to=tuple(index_filters.to),
        cc=tuple(index_filters.cc),
        after=index_filters.after,
        before=index_filters.before,
        labels=tuple(index_filters.labels),
        folders=tuple(index_filters.folders),
        dispositions=tuple(index_filters.dispositions),
        thread=index_filters.thread,
        include_ids=index_filters.include_ids,
        exclude_ids=frozenset(index_filters.exclude_ids),
    )


def needs_admit_for(index_filters: Any) -> bool:
    """True when `prefilters` left part of these filters to the caller's `admit`."""
    return bool(index_filters.subject_terms or index_filters.filename_terms or index_filters.has_attachment is not None)


def rewrite(command: str, text: str, timeout: float) -> tuple[str, str | None]:
    """Run the local rewrite command on `text` (stdin to stdout): (text to embed, warning).
    A failing, silent or slow command leaves the original text, with a warning."""
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        return text, f"llm_rewrite: rewrite_command {command!r} cannot be read ({exc}); embedded the query as typed"
    try:
        proc = subprocess.run(argv, input=text, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return text, (
            f"llm_rewrite: {argv[0]} took longer than {timeout:g} s "
            "(rewrite_timeout_seconds); embedded the query as typed"
        )
    except OSError as exc:
        return (
            text,
            f"llm_rewrite: {argv[0] if argv else command!r} cannot run ({exc.strerror or exc}); embedded the query as typed",
        )
    if proc.returncode != 0:
        detail = (proc.stderr.strip().splitlines() or [""])[-1][:200]
        return text, (
            f"llm_rewrite: {argv[0]} exited with status {proc.returncode}"
            f"{': ' + detail if detail else ''}; embedded the query as typed"
        )
    out = proc.stdout.strip()
    if not out:
        return text, f"llm_rewrite: {argv[0]} printed nothing; embedded the query as typed"
    return out, None


def collapse(chunks: Sequence[VectorChunkHit]) -> list[tuple[int, VectorChunkHit, list[int]]]:
    """Chunks (best first) to messages: (message, its best chunk, its other chunks)."""
    out: dict[int, tuple[int, VectorChunkHit, list[int]]] = {}
    for hit in chunks:
        if hit.message in out:
            out[hit.message][2].append(hit.chunk_id)
        else:
            out[hit.message] = (hit.message, hit, [])
    return list(out.values())


def low_cosine(config: Config, best: float | None) -> bool:
    """True when no vector hit is a strong match for the model in use ([search] low_confidence_cosine)."""
    threshold = config.search.low_confidence_cosine.get(config.embedder.model)
    if threshold is None:
        return False
    return best is None or best < threshold


def min_cosine(config: Config) -> float | None:
    """The cosine a hit found by meaning alone must reach to be returned, for the model in use
    ([search] vector_min_cosine); None when the model has no floor."""
    return config.search.vector_min_cosine.get(config.embedder.model)


class _Timeout(Exception):
    pass


class VectorRetriever:
    """One per process: holds the embedder and the open store between searches (the daemon)."""

    def __init__(self, config: Config, *, embedder: Embedder | None = None, data_dir: Path | None = None):
        self.config = config
        self.data_dir = Path(data_dir) if data_dir is not None else config_mod.resolve_data_dir(config)
        self._embedder = embedder
        self._store: VectorStore | None = None
        self._backend_verdicts: dict[tuple[tuple[str, ...], str], tuple[str, ...]] = {}
        self._generation: tuple[tuple[str, int], str] | None = None  # (index.db's file, its generation)

    @property
    def enabled(self) -> bool:
        return self.config.embedder.model != "none"

    def load(self) -> Embedder:
        """Load the embedder now (outside any search's clock); VectorUnavailable("no_embedder")."""
        if self._embedder is None:
            embedder = load_embedder(self.config)
            if embedder is None:
                raise VectorUnavailable("no_embedder", '[embedder] model = "none": no embedder is configured')
            self._embedder = embedder
        return self._embedder

    def retrieve(
        self,
        text: str,
        filters: VectorFilters,
        *,
        want: int,
        admit: Admit | None = None,
        loose: VectorFilters | None = None,
    ) -> VectorResult:
        """The messages nearest in meaning to `text`, at most `want`, best first.

        `loose`: filters to search with first, leaving out some of `filters` that `admit` judges
        as well; when too few candidates pass `admit` even at max_candidates, `filters` are given
        to LanceDB after all."""
        if not self.enabled:
            return VectorResult((), OFF)
        if not text.strip():
            return VectorResult((), SKIPPED)
        try:
            embedder = self.load()
        except VectorUnavailable as exc:
            return VectorResult((), exc.code, (str(exc),))
        except Exception as exc:  # a broken install surfaces here as anything at all
            return VectorResult((), "no_embedder", (f"embedder {self.config.embedder.model}: {exc}",))
        timeout = self.config.search.vector_timeout_seconds
        deadline = time.monotonic() + timeout
        box: dict[str, Any] = {}

        def work() -> None:
            try:
                box["result"] = self._search(embedder, text, filters, want, admit, deadline, loose)
            except BaseException as exc:  # handed to the waiting thread
                box["error"] = exc

        thread = threading.Thread(target=work, name="oaken-vector-search", daemon=True)
        thread.start()
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive() or isinstance(box.get("error"), _Timeout):
            return VectorResult(
                (),
                "timeout",
                (f"vector search gave up after {timeout:g} s (vector_timeout_seconds); keyword results only",),
            )
        error = box.get("error")
        if isinstance(error, VectorUnavailable):
            if error.code in ("no_vector_store", "model_mismatch"):
                self._store = None
            return VectorResult((), error.code, (str(error),))
        if error is not None:
            self._store = None
            return VectorResult((), "error", (f"vector search failed: {type(error).__name__}: {error}",))
        return box["result"]

    def _open(self, embedder: Embedder) -> VectorStore:
        from oaken.index.embedding import fingerprint_of

        if self._store is None:
            self._store = VectorStore(self.data_dir)
        self._store.check(fingerprint_of(embedder))
        self._check_backends(self._store, embedder)
        if self._store.count() == 0:
            raise VectorUnavailable(
                "no_vectors",
                f"{self._store.path}: no vectors yet; embedding runs behind "
                "keyword indexing (`oaken reindex` or the daemon)",
            )
        self._check_generation(self._store)
        return self._store

    def _index_generation(self) -> str | None:
        """index.db's generation, read once per file: a rebuild puts a new file behind the
        index.db link, so the file's real path and inode name the generation (opening index.db for
        it on every search cost 0.5 ms). None when index.db cannot be opened."""
        from oaken.errors import IndexUnavailable
        from oaken.index.keyword import KeywordIndex, index_path

        path = index_path(self.data_dir)
        try:
            key = (os.path.realpath(path), os.stat(path).st_ino)
        except OSError:
            return None
        if self._generation is None or self._generation[0] != key:
            try:
                with KeywordIndex(self.data_dir) as index:
                    self._generation = (key, index.generation())
            except IndexUnavailable:
                return None
        return self._generation[1]

    def _check_generation(self, store: VectorStore) -> None:
        """VectorUnavailable("model_mismatch") when the rows carry the chunk ids of an index.db
        since rebuilt (which numbers chunks again): their chunks, snippets and matched chunks would
        be other text. Stale until the embedding pass follows (from the cache: seconds)."""
        current = self._index_generation()
        if current is None:
            return  # the keyword side says so itself; the vectors can still answer
        if store.generation() != current:
            raise VectorUnavailable(
                "model_mismatch",
                f"{store.path}: vectors made for an index.db since rebuilt; "
                "not searched until the embedding pass catches up "
                "(`oaken reindex`, or the daemon)",
            )

    def _check_backends(self, store: VectorStore, embedder: Embedder) -> None:
        """VectorUnavailable("model_mismatch") when vectors/ holds rows of a backend whose
        documents the fidelity checks do not allow to be searched with this embedder's queries.
        Decided once per set of stored backends (state.json is re-read: a reindex may add one)."""
        from oaken.index.backend_record import incompatible_with, stored_backends

        query = backend_of(embedder)
        stored = tuple(stored_backends(store))
        key = (stored, query)
        if key not in self._backend_verdicts:
            self._backend_verdicts[key] = tuple(incompatible_with(stored, query, self.data_dir))
        bad = self._backend_verdicts[key]
        if bad:
            raise VectorUnavailable(
                "model_mismatch",
                f"{store.path}: vectors built by backend {', '.join(bad)}, "
                f"which the fidelity checks do not allow to be searched "
                f"with [embedder] backend {query!r}; they are not searched "
                "until `oaken reindex` rebuilds them",
            )

    def _search(
        self,
        embedder: Embedder,
        text: str,
        filters: VectorFilters,
        want: int,
        admit: Admit | None,
        deadline: float,
        loose: VectorFilters | None = None,
    ) -> VectorResult:
        timings: dict[str, float] = {}
        warnings: list[str] = []
        t0 = time.monotonic()
        s = self.config.search
        if s.llm_rewrite and s.rewrite_command:
            text, warning = rewrite(
                s.rewrite_command, text, min(s.rewrite_timeout_seconds, max(0.0, deadline - time.monotonic()))
            )
            if warning:
                warnings.append(warning)
            timings["rewrite"] = _ms(t0)
        store = self._open(embedder)
        t1 = time.monotonic()
        query = embedder.embed_query(text)
        timings["embed"] = _ms(t1)
        want = max(1, want)
        # chunks, several per message; widening doubles this up to max_candidates
        candidates = max(want, min(want * CHUNKS_PER_MESSAGE, s.max_candidates))
        rounds = 0
        t2 = time.monotonic()
        searched = loose if loose is not None and admit is not None else filters
        while True:
            if rounds and time.monotonic() > deadline:
                raise _Timeout()
            rounds += 1
            chunks = store.search(query, searched, candidates)
            messages = collapse(chunks)
            allowed = set(admit([m for m, _, _ in messages])) if admit else None
            kept = [x for x in messages if allowed is None or x[0] in allowed]
            exhausted = len(chunks) < candidates
            if len(kept) >= want or exhausted or candidates >= s.max_candidates:
                if searched is filters or len(kept) >= want or exhausted:
                    break
                searched = filters  # too few passed what `loose` left out: LanceDB applies it
                continue
            candidates = min(candidates * 2, s.max_candidates)
        # The chunks read held fewer than `want` messages (a few long ones): past the cap, read
        # the other messages; their best chunks come after every chunk read.
        seen = {m for m, _, _ in messages}
        for _ in range(PAST_ROUNDS):
            if len(kept) >= want or exhausted or len(seen) >= want:
                break
            if time.monotonic() > deadline:
                raise _Timeout()
            rounds += 1
            chunks = store.search(query, replace(searched, exclude_ids=searched.exclude_ids | seen), candidates)
            found = collapse(chunks)
            seen |= {m for m, _, _ in found}
            allowed = set(admit([m for m, _, _ in found])) if admit else None
            kept += [x for x in found if allowed is None or x[0] in allowed]
            exhausted = len(chunks) < candidates
        timings["search"] = _ms(t2)
        # a rebuild that began after _open's check may have emptied the table meanwhile: asked
        # again after the search, so a partial list is never given as the whole one
        store.check_whole()
        hits = tuple(
            VectorMessageHit(m, rank, best.score, best.chunk_id, tuple(others))
            for rank, (m, best, others) in enumerate(kept[:want], start=1)
        )
        return VectorResult(
            hits,
            OK,
            tuple(warnings),
            hits[0].score if hits else None,
            rounds,
            candidates,
            text,
            timings,
            cut=len(kept) >= want or not exhausted,
        )


def _ms(since: float) -> float:
    return round((time.monotonic() - since) * 1000, 3)
