"""One eval run end to end: mail in, indexes built, questions asked, scores out."""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from oaken import config as config_mod
from oaken.config import Config
from oaken.evals import ingest, mailbox, questions, retrieval
from oaken.evals.ingest import EvalError
from oaken.evals.questions import Question
from oaken.evals.retrieval import Ranking, Score

LIVE_MODEL = "all-MiniLM-L6-v2"
OFFLINE_MODEL = "concept"


@dataclass(frozen=True)
class EvalRun:
    name: str
    config: Config
    questions: tuple[Question, ...]
    rankings: tuple[Ranking, ...]
    scores: tuple[Score, ...]
    meta: dict


def make_config(
    data_dir: Path, *, live: bool | str, search: dict | None = None, backend: str = "auto", index: dict | None = None
) -> dict:
    """The default config but for the data dir and the model (`live`: True for LIVE_MODEL, or a
    model's name; False for the offline stand-in). `backend`: the live model's
    [embedder] backend ("auto": the one Oaken picks here). `index`: tests lower
    vector_ann_min_rows here to reach the ANN path on small mail; a reported run leaves it."""
    return {
        "paths": {"data_dir": str(data_dir)},
        "embedder": {"model": live_model(live), "backend": backend} if live else {"model": OFFLINE_MODEL},
        **({"search": search} if search else {}),
        **({"index": index} if index else {}),
    }


def live_model(live: bool | str) -> str:
    return live if isinstance(live, str) else LIVE_MODEL


def run_tag(live: bool | str) -> str:
    """The result files' tag: "concept", "live" (LIVE_MODEL) or "live-<model>"."""
    if not live:
        return "concept"
    return "live" if live_model(live) == LIVE_MODEL else f"live-{live_model(live)}"


def vector_path(config: Config) -> dict:
    """Which path the vector side's answers took: "ann" once the store holds
    vector_ann_min_rows and its index is built (as a user's mailbox of that size would),
    "exact" below. Every result file says it: a figure from the exact path alone is not a
    figure for a real mailbox."""
    from oaken.index.vectors import VectorStore

    if config.embedder.model == "none":
        return {"path": "none"}
    store = VectorStore(config.data_dir)
    rows, indexed = store.count(), store.has_index()
    return {"path": "ann" if indexed else "exact", "rows": rows, "ann_min_rows": config.index.vector_ann_min_rows}


def prepare_synthetic(
    workdir: Path,
    *,
    messages: int,
    seed: int,
    live: bool | str = False,
    imap: bool = False,
    backend: str = "auto",
    distractors: Sequence[Path] = (),
    index: dict | None = None,
) -> tuple[Config, list[Question], dict]:
    """Generate, ingest and index a synthetic mailbox; its questions. `distractors`: folders of
    real mail imported into the same account, so the planted facts sit among real messages."""
    t = time.perf_counter()
    box = mailbox.generate(messages, seed)
    cfg_dict = make_config(workdir / "data", live=live, backend=backend, index=index)
    if imap:
        config = ingest.from_imap(box, cfg_dict, workdir)
    else:
        config = config_mod.from_dict(cfg_dict, source="eval")
        ingest.from_maildir(box, config, workdir)
    real = ingest.from_corpus(distractors, config) if distractors else 0
    t_raw = time.perf_counter() - t
    t = time.perf_counter()
    done = ingest.build_indexes(config)
    meta = {
        "source": "imap" if imap else "maildir",
        "messages": messages,
        "seed": seed,
        "distractors": [str(d) for d in distractors],
        "distractor_messages": real,
        "model": config.embedder.model,
        "backend": _backend(config),
        "indexed": done.indexed,
        "vector_coverage": done.vector_coverage,
        "vectors": vector_path(config),
        "text": text_state(config),
        "seconds_store": round(t_raw, 1),
        "seconds_index": round(time.perf_counter() - t, 1),
    }
    return config, questions.build(box), meta


def prepare_corpus(
    workdir: Path,
    corpora: Sequence[Path],
    question_files: Sequence[Path],
    *,
    live: bool | str = False,
    backend: str = "auto",
    index: dict | None = None,
) -> tuple[Config, list[Question], dict]:
    """Import folders of real mail into one account (one mailbox, as a user holding all of
    them would have) and read their question files."""
    by_file = {Path(f): questions.load_jsonl(f) for f in question_files}
    seen: dict[str, Path] = {}
    for f, fqs in by_file.items():
        for q in fqs:
            if q.id in seen:
                raise EvalError(f"{f}: question id {q.id!r} is also in {seen[q.id]}; ids must be unique")
            seen[q.id] = f
    qs = [q for fqs in by_file.values() for q in fqs]
    config = config_mod.from_dict(make_config(workdir / "data", live=live, backend=backend, index=index), source="eval")
    t = time.perf_counter()
    messages = ingest.from_corpus(corpora, config)
    done = ingest.build_indexes(config)
    _check_relevant(config, by_file)
    return (
        config,
        qs,
        {
            "source": [str(c) for c in corpora],
            "questions_file": [str(f) for f in question_files],
            "messages": messages,  # imported by this run: 0 when --keep's data directory held them
            "reused": messages == 0,  # then seconds_index is a no-change pass, not a build
            "model": config.embedder.model,
            "backend": _backend(config),
            "indexed": done.indexed,
            "vector_coverage": done.vector_coverage,
            "vectors": vector_path(config),
            "text": text_state(config),
            "seconds_index": round(time.perf_counter() - t, 1),
        },
    )


def text_state(config: Config) -> dict | None:
    """The text index's state when Tantivy is asked to rank ([index] keyword_engine), else None."""
    if config.index.keyword_engine == "fts5":
        return None
    from oaken import api

    return api.status(config=config)["index"].get("text")


def _backend(config: Config) -> str | None:
    """The backend that embedded (the live model's, loaded once per process), or None."""
    if config.embedder.model in (OFFLINE_MODEL, "none"):
        return None
    from oaken.index.embedders import backend_of, load_embedder

    embedder = load_embedder(config)
    return backend_of(embedder) if embedder is not None else None


def _name(kind: str, live: bool | str, backend: str) -> str:
    """Result file stem: "synthetic-live", or "synthetic-live-torch" for a backend named explicitly."""
    return f"{kind}-{run_tag(live)}" + (f"-{backend}" if live and backend != "auto" else "")


def _check_relevant(config: Config, by_file: dict[Path, list[Question]]) -> None:
    from oaken.store import open_store

    with open_store(config.data_dir, readonly=True) as store:
        known = {store.meta(i).message_id for i in store.all_message_ids()}
    for question_file, qs in by_file.items():
        missing = sorted({r for q in qs for r in q.relevant} - known)
        if missing:
            raise EvalError(
                f"{question_file}: {len(missing)} relevant Message-IDs are not in the corpus, "
                f"e.g. <{missing[0]}>; fix the question file or the corpus folder"
            )


def score_run(
    name: str, config: Config, qs: Sequence[Question], meta: dict, retrievers: Sequence[str] = retrieval.RETRIEVERS
) -> EvalRun:
    t = time.perf_counter()
    rankings = retrieval.run(qs, config, retrievers)
    meta = {
        **meta,
        "questions": len(qs),
        "seconds_search": round(time.perf_counter() - t, 1),
        "low_confidence_cosine": dict(config.search.low_confidence_cosine),
    }
    return EvalRun(name, config, tuple(qs), tuple(rankings), tuple(retrieval.score(rankings)), meta)


def synthetic(
    *,
    messages: int = 1000,
    seed: int = 0,
    live: bool | str = False,
    imap: bool = False,
    workdir: Path | None = None,
    backend: str = "auto",
    distractors: Sequence[Path] = (),
    index: dict | None = None,
) -> EvalRun:
    with tempfile.TemporaryDirectory(prefix="oaken-eval-") as tmp:
        wd = workdir or Path(tmp)
        config, qs, meta = prepare_synthetic(
            wd,
            messages=messages,
            seed=seed,
            live=live,
            imap=imap,
            backend=backend,
            distractors=distractors,
            index=index,
        )
        return score_run(_name("synthetic", live, backend), config, qs, meta)


def corpus(
    corpora: Path | Sequence[Path],
    question_files: Path | Sequence[Path],
    *,
    live: bool | str = False,
    workdir: Path | None = None,
    backend: str = "auto",
    name: str | None = None,
    split: str = "all",
    index: dict | None = None,
) -> EvalRun:
    """`split`: "all", or "dev" / "test" (questions.split) to ask only that half."""
    dirs = [Path(corpora)] if isinstance(corpora, (str, Path)) else [Path(c) for c in corpora]
    files = [Path(question_files)] if isinstance(question_files, (str, Path)) else [Path(f) for f in question_files]
    with tempfile.TemporaryDirectory(prefix="oaken-eval-") as tmp:
        wd = workdir or Path(tmp)
        config, qs, meta = prepare_corpus(wd, dirs, files, live=live, backend=backend, index=index)
        qs = choose(qs, split)
        stem = _name(name or "-".join(d.name for d in dirs), live, backend)
        return score_run(stem + ("" if split == "all" else f"-{split}"), config, qs, {**meta, "split": split})


def choose(qs: Sequence[Question], split: str) -> list[Question]:
    """The questions of one half (dev tunes, test reports), or all of them."""
    if split == "all":
        return list(qs)
    dev, test = questions.split(qs)
    if split == "dev":
        return dev
    if split == "test":
        return test
    raise EvalError(f"--split {split!r}: expected all, dev or test")


__all__ = ["EvalRun", "EvalError", "synthetic", "corpus", "prepare_synthetic", "prepare_corpus", "score_run"]
