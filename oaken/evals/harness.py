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


def make_config(data_dir: Path, *, live: bool, search: dict | None = None, backend: str = "auto") -> dict:
    """`backend`: the live model's [embedder] backend ("auto": the one Oaken picks here)."""
    return {"paths": {"data_dir": str(data_dir)},
            "embedder": {"model": LIVE_MODEL, "backend": backend} if live else {"model": OFFLINE_MODEL},
            **({"search": search} if search else {})}


def prepare_synthetic(workdir: Path, *, messages: int, seed: int, live: bool = False,
                      imap: bool = False, backend: str = "auto") -> tuple[Config, list[Question], dict]:
    """Generate, ingest and index a synthetic mailbox; its questions."""
    t = time.perf_counter()
    box = mailbox.generate(messages, seed)
    cfg_dict = make_config(workdir / "data", live=live, backend=backend)
    if imap:
        config = ingest.from_imap(box, cfg_dict, workdir)
    else:
        config = config_mod.from_dict(cfg_dict, source="eval")
        ingest.from_maildir(box, config, workdir)
    t_raw = time.perf_counter() - t
    t = time.perf_counter()
    done = ingest.build_indexes(config)
    meta = {"source": "imap" if imap else "maildir", "messages": messages, "seed": seed,
            "model": config.embedder.model, "backend": _backend(config), "indexed": done.indexed,
            "vector_coverage": done.vector_coverage, "seconds_store": round(t_raw, 1), "seconds_index": round(time.perf_counter() - t, 1)}
    return config, questions.build(box), meta


def prepare_corpus(workdir: Path, corpus: Path, question_file: Path, *,
                   live: bool = False, backend: str = "auto") -> tuple[Config, list[Question], dict]:
    """Import a folder of real mail and read its question file."""
    qs = questions.load_jsonl(question_file)
    config = config_mod.from_dict(make_config(workdir / "data", live=live, backend=backend), source="eval")
    t = time.perf_counter()
    ingest.from_corpus(corpus, config)
    done = ingest.build_indexes(config)
    _check_relevant(config, qs, question_file)
    return config, qs, {"source": str(corpus), "questions_file": str(question_file),
                        "model": config.embedder.model, "backend": _backend(config), "indexed": done.indexed,
                        "vector_coverage": done.vector_coverage,
                        "seconds_index": round(time.perf_counter() - t, 1)}


def _backend(config: Config) -> str | None:
    """The backend that embedded (the live model's, loaded once per process), or None."""
    if config.embedder.model != LIVE_MODEL:
        return None
    from oaken.index.embedders import backend_of, load_embedder

    embedder = load_embedder(config)
    return backend_of(embedder) if embedder is not None else None


def _name(kind: str, live: bool, backend: str) -> str:
    """Result file stem: "synthetic-live", or "synthetic-live-torch" for a backend named explicitly."""
    return f"{kind}-{'live' if live else 'concept'}" + (f"-{backend}" if live and backend != "auto" else "")


def _check_relevant(config: Config, qs: Sequence[Question], question_file: Path) -> None:
    from oaken.store import open_store

    with open_store(config.data_dir, readonly=True) as store:
        known = {store.meta(i).message_id for i in store.all_message_ids()}
    missing = sorted({r for q in qs for r in q.relevant} - known)
    if missing:
        raise EvalError(f"{question_file}: {len(missing)} relevant Message-IDs are not in the corpus, "
                        f"e.g. <{missing[0]}>; fix the question file or the corpus folder")


def score_run(name: str, config: Config, qs: Sequence[Question], meta: dict,
              retrievers: Sequence[str] = retrieval.RETRIEVERS) -> EvalRun:
    t = time.perf_counter()
    rankings = retrieval.run(qs, config, retrievers)
    meta = {**meta, "questions": len(qs), "seconds_search": round(time.perf_counter() - t, 1),
            "low_confidence_cosine": dict(config.search.low_confidence_cosine)}
    return EvalRun(name, config, tuple(qs), tuple(rankings), tuple(retrieval.score(rankings)), meta)


def synthetic(*, messages: int = 1000, seed: int = 0, live: bool = False, imap: bool = False,
              workdir: Path | None = None, backend: str = "auto") -> EvalRun:
    with tempfile.TemporaryDirectory(prefix="oaken-eval-") as tmp:
        wd = workdir or Path(tmp)
        config, qs, meta = prepare_synthetic(wd, messages=messages, seed=seed, live=live, imap=imap,
                                             backend=backend)
        return score_run(_name("synthetic", live, backend), config, qs, meta)


def corpus(corpus_dir: Path, question_file: Path, *, live: bool = False, workdir: Path | None = None,
           backend: str = "auto") -> EvalRun:
    with tempfile.TemporaryDirectory(prefix="oaken-eval-") as tmp:
        wd = workdir or Path(tmp)
        config, qs, meta = prepare_corpus(wd, corpus_dir, question_file, live=live, backend=backend)
        return score_run(_name(Path(corpus_dir).name, live, backend), config, qs, meta)


__all__ = ["EvalRun", "EvalError", "synthetic", "corpus", "prepare_synthetic", "prepare_corpus", "score_run"]
