"""`python -m oaken.evals retrieval|calibrate`: score keyword, vector and hybrid retrieval.

python -m oaken.evals retrieval [--messages N] [--seed S] [--live [--backend B]] [--imap] [--out DIR]
python -m oaken.evals retrieval --corpus DIR [--corpus DIR...] --questions FILE.jsonl [...] [--split dev|test|all]
python -m oaken.evals retrieval --real [--corpora DIR] [--split dev|test|all] [--live]
python -m oaken.evals calibrate [--messages N] [--tune-seed S] [--report-seed S] [--live]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

from oaken.errors import OakenError
from oaken.evals import calibrate, harness, retrieval
from oaken.evals.ingest import EvalError


def default_out() -> Path:
    """The user's data folder, not the current directory (a clone's evals/results holds the
    figures the README quotes: pass --out evals/results to write there)."""
    from oaken import config as config_mod

    return config_mod.resolve_data_dir(config_mod.load()) / "evals"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m oaken.evals", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("retrieval", help="score each retriever on a synthetic mailbox or a corpus")
    r.add_argument("--messages", type=int, default=1000, help="synthetic mailbox size (default 1000)")
    r.add_argument("--seed", type=int, default=2, help="synthetic mailbox seed (default 2; 1 tunes)")
    r.add_argument("--live", action="store_true", help="the real all-MiniLM-L6-v2, not the concept embedder")
    r.add_argument("--model", default=None, help="with --live: another real model (all-mpnet-base-v2)")
    r.add_argument(
        "--backend",
        default="auto",
        help="with --live: the [embedder] backend (default auto: the one "
        "Oaken picks here; torch for fp32); named in the result files",
    )
    r.add_argument("--imap", action="store_true", help="serve the mailbox from a private Dovecot and sync it")
    r.add_argument(
        "--distractors",
        type=Path,
        action="append",
        default=[],
        help="with the synthetic mailbox: a folder of real mail imported beside it (repeatable)",
    )
    r.add_argument(
        "--corpus",
        type=Path,
        action="append",
        default=[],
        help="a folder of real mail (Maildir, mbox or .eml files); repeated: one mailbox of all",
    )
    r.add_argument(
        "--questions",
        type=Path,
        action="append",
        default=[],
        help="a question file (jsonl) over the corpus; repeatable",
    )
    r.add_argument(
        "--real",
        action="store_true",
        help=f"the real-mail question set ({', '.join(REAL_CORPORA)} from --corpora, "
        "evals/questions/*.jsonl): one mailbox of all, the default config",
    )
    r.add_argument(
        "--corpora",
        type=Path,
        default=None,
        help="with --real: the folder holding the corpora (default ../shared/corpora beside the repo, "
        "or $OAKEN_CORPORA)",
    )
    r.add_argument(
        "--split",
        choices=("all", "dev", "test"),
        default="all",
        help="with a question file: ask one half (dev tunes, test reports; a fixed seed) or all",
    )
    r.add_argument("--out", type=Path, default=None, help="where results go (default: <data dir>/evals)")
    r.add_argument("--keep", type=Path, help="build the data here and keep it (default: a temp folder)")
    r.add_argument(
        "--keyword-engine",
        choices=("fts5", "tantivy"),
        default="tantivy",
        help="what ranks word searches ([index] keyword_engine); named in the result files when not the default",
    )
    q = sub.add_parser("questions", help="check the real-mail question set: paraphrase overlap, the dev/test split")
    q.add_argument("--corpora", type=Path, default=None, help="the folder holding the corpora (as with --real)")
    c = sub.add_parser("calibrate", help="tune low_confidence on one seed, report it on another")
    c.add_argument("--messages", type=int, default=1000)
    c.add_argument("--tune-seed", type=int, default=1)
    c.add_argument("--report-seed", type=int, default=2)
    c.add_argument("--live", action="store_true")
    c.add_argument("--model", default=None, help="with --live: another real model (all-mpnet-base-v2)")
    c.add_argument(
        "--real",
        action="store_true",
        help="calibrate on the real-mail question set instead: the meaning floor (vector_min_cosine) "
        "and low_confidence_cosine tuned on its dev half, reported on its test half",
    )
    c.add_argument("--corpora", type=Path, default=None, help="with --real: the folder holding the corpora")
    c.add_argument("--keep", type=Path, help="build the data here and keep it (a second run reuses it)")
    c.add_argument("--out", type=Path, default=None, help="where results go (default: <data dir>/evals)")
    return p


REAL_CORPORA = ("enron-lay-skilling", "notmuch-lkml", "notmuch-default")
REPO = Path(__file__).resolve().parents[2]


def real_set(corpora: Path | None) -> tuple[list[Path], list[Path]]:
    """The real corpora and the question files written over them (kept in the repo's evals/)."""
    root = corpora or Path(os.environ.get("OAKEN_CORPORA") or REPO.parent / "shared" / "corpora")
    dirs = [root / name for name in REAL_CORPORA]
    missing = [str(d) for d in dirs if not d.is_dir()]
    if missing:
        raise EvalError(
            f"--real needs the real corpora; not found: {', '.join(missing)} (give --corpora DIR or set OAKEN_CORPORA)"
        )
    files = sorted((REPO / "evals" / "questions").glob("*.jsonl"))
    if not files:
        raise EvalError(f"{REPO / 'evals' / 'questions'}: holds no question file (*.jsonl)")
    return dirs, files


def _retrieval(args: argparse.Namespace) -> int:
    if args.real:
        if args.corpus or args.questions:
            raise EvalError("--real names its corpora and questions itself; leave out --corpus and --questions")
        args.corpus, args.questions = real_set(args.corpora)
    if bool(args.corpus) != bool(args.questions):
        raise EvalError("--corpus and --questions go together: folders of mail and their question files")
    index = None if args.keyword_engine == "tantivy" else {"keyword_engine": args.keyword_engine}
    if args.corpus:
        run = harness.corpus(
            args.corpus,
            args.questions,
            live=args.live,
            workdir=args.keep,
            backend=args.backend,
            split=args.split,
            name=_run_name(args, index),
            index=index,
        )
    else:
        if args.split != "all":
            raise EvalError("--split halves a question file; the synthetic mailbox has its own seeds")
        run = harness.synthetic(
            messages=args.messages,
            seed=args.seed,
            live=args.live,
            imap=args.imap,
            workdir=args.keep,
            backend=args.backend,
            distractors=args.distractors,
            index=index,
        )
    print(retrieval.answered_by(run.meta))
    print(retrieval.ranked_by(run.meta) + "\n")
    print(retrieval.table(run.scores))
    paths = retrieval.write(run.scores, run.rankings, args.out or default_out(), run.name, run.meta)
    print(f"\nwritten: {paths[0]} {paths[1]}", file=sys.stderr)
    return 0


def _run_name(args: argparse.Namespace, index: dict | None) -> str:
    """The result files' stem before the model's tag: the engine named when it is not the default."""
    base = "real" if args.real else "-".join(Path(d).name for d in args.corpus)
    return base if index is None else f"{base}-{args.keyword_engine}"


def _questions(args: argparse.Namespace) -> int:
    from oaken.evals import overlap
    from oaken.evals.questions import load_jsonl

    dirs, files = real_set(args.corpora)
    qs = [q for f in files for q in load_jsonl(f)]
    found = overlap.check(qs, dirs)
    print(overlap.report(qs, found))
    over = [o for o in found if len(o.shared) > overlap.MAX_SHARED]
    if over:
        print(
            f"{len(over)} paraphrases share more than {overlap.MAX_SHARED} content word with their mail",
            file=sys.stderr,
        )
        return 1
    return 0


def _save(out: Path, name: str, doc: dict) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / name
    path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return path


def _calibrate_real(args: argparse.Namespace) -> int:
    from oaken.evals.questions import split

    dirs, files = real_set(args.corpora)
    with tempfile.TemporaryDirectory(prefix="oaken-cal-") as tmp:
        cfg, qs, meta = harness.prepare_corpus(args.keep or Path(tmp), dirs, files, live=args.live)
        dev, test = split(qs)
        floor = calibrate.tune_floor(dev, cfg)
        floor_test = calibrate.report_floor(test, cfg, floor.floor)
        cfg = calibrate.with_floor(cfg, floor.floor)
        tuned = calibrate.tune(dev, cfg)
        held_out = calibrate.report(test, cfg, tuned.threshold)
    doc = {
        "questions": [str(f) for f in files],
        "corpora": [str(d) for d in dirs],
        "vectors": meta["vectors"],
        "floor": {"tuned_on": "dev", "tuned": asdict(floor), "reported_on": "test", "reported": asdict(floor_test)},
        "low_confidence": {
            "tuned_on": "dev",
            "tuned": asdict(tuned),
            "reported_on": "test",
            "reported": asdict(held_out),
        },
    }
    path = _save(args.out or default_out(), f"calibration-real-{harness.run_tag(args.live)}.json", doc)
    print(
        f"{tuned.model} ({retrieval.answered_by(meta)})\n"
        f"vector_min_cosine = {floor.floor:.2f}: right answers lost on dev {floor.answer_lost:.0%}, "
        f"test {floor_test.answer_lost:.0%} of paraphrases; hits for unanswerable dev {floor.unanswerable_hits:.1f}, "
        f"test {floor_test.unanswerable_hits:.1f}\n"
        f"low_confidence_cosine = {tuned.threshold:.3f}: dev unanswerable flagged {tuned.unanswerable_flagged:.0%}, "
        f"answerable {tuned.answerable_flagged:.0%}; test unanswerable {held_out.unanswerable_flagged:.0%}, "
        f"answerable {held_out.answerable_flagged:.0%}\nwritten: {path}"
    )
    return 0


def _calibrate(args: argparse.Namespace) -> int:
    if args.real:
        return _calibrate_real(args)
    with tempfile.TemporaryDirectory(prefix="oaken-cal-") as a, tempfile.TemporaryDirectory(prefix="oaken-cal-") as b:
        cfg, qs, _ = harness.prepare_synthetic(Path(a), messages=args.messages, seed=args.tune_seed, live=args.live)
        tuned = calibrate.tune(qs, cfg)
        cfg2, qs2, _ = harness.prepare_synthetic(Path(b), messages=args.messages, seed=args.report_seed, live=args.live)
        held_out = calibrate.report(qs2, cfg2, tuned.threshold)
    doc = {
        "tuned_on_seed": args.tune_seed,
        "tuned": asdict(tuned),
        "reported_on_seed": args.report_seed,
        "reported": asdict(held_out),
        "messages": args.messages,
    }
    path = _save(args.out or default_out(), f"calibration-{harness.run_tag(args.live)}.json", doc)
    print(
        f"{tuned.model}: low_confidence_cosine = {tuned.threshold:.3f}\n"
        f"  tuned on seed {args.tune_seed}: unanswerable flagged {tuned.unanswerable_flagged:.0%}, "
        f"answerable flagged {tuned.answerable_flagged:.0%}\n"
        f"  held out seed {args.report_seed}: unanswerable flagged {held_out.unanswerable_flagged:.0%}, "
        f"answerable flagged {held_out.answerable_flagged:.0%}\nwritten: {path}"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if getattr(args, "model", None):
        if not args.live:
            print("oaken.evals: --model names the real model of --live; add --live", file=sys.stderr)
            return 2
        args.live = args.model
    try:
        if args.command == "questions":
            return _questions(args)
        return _retrieval(args) if args.command == "retrieval" else _calibrate(args)
    except (EvalError, OakenError, ValueError) as e:
        print(f"oaken.evals: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
