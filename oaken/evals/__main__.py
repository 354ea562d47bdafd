"""`python -m oaken.evals retrieval|calibrate`: score keyword, vector and hybrid retrieval.

    python -m oaken.evals retrieval [--messages N] [--seed S] [--live [--backend B]] [--imap] [--out DIR]
    python -m oaken.evals retrieval --corpus DIR --questions FILE.jsonl [--live [--backend B]] [--out DIR]
    python -m oaken.evals calibrate [--messages N] [--tune-seed S] [--report-seed S] [--live]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

from oaken.errors import OakenError
from oaken.evals import calibrate, harness, retrieval
from oaken.evals.ingest import EvalError

DEFAULT_OUT = Path("evals/results")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m oaken.evals", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("retrieval", help="score each retriever on a synthetic mailbox or a corpus")
    r.add_argument("--messages", type=int, default=1000, help="synthetic mailbox size (default 1000)")
    r.add_argument("--seed", type=int, default=2, help="synthetic mailbox seed (default 2; 1 tunes)")
    r.add_argument("--live", action="store_true", help="the real all-MiniLM-L6-v2, not the concept embedder")
    r.add_argument("--backend", default="auto", help="with --live: the [embedder] backend (default auto: the one "
                                                     "Oaken picks here; torch for fp32); named in the result files")
    r.add_argument("--imap", action="store_true", help="serve the mailbox from a private Dovecot and sync it")
    r.add_argument("--corpus", type=Path, help="a folder of real mail (Maildir, mbox or .eml files)")
    r.add_argument("--questions", type=Path, help="the corpus's question file (jsonl)")
    r.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where results go (default evals/results)")
    r.add_argument("--keep", type=Path, help="build the data here and keep it (default: a temp folder)")
    c = sub.add_parser("calibrate", help="tune low_confidence on one seed, report it on another")
    c.add_argument("--messages", type=int, default=1000)
    c.add_argument("--tune-seed", type=int, default=1)
    c.add_argument("--report-seed", type=int, default=2)
    c.add_argument("--live", action="store_true")
    c.add_argument("--out", type=Path, default=DEFAULT_OUT)
    return p


def _retrieval(args: argparse.Namespace) -> int:
    if (args.corpus is None) != (args.questions is None):
        raise EvalError("--corpus and --questions go together: a folder of mail and its question file")
    if args.corpus is not None:
        run = harness.corpus(args.corpus, args.questions, live=args.live, workdir=args.keep, backend=args.backend)
    else:
        run = harness.synthetic(messages=args.messages, seed=args.seed, live=args.live, imap=args.imap,
                                workdir=args.keep, backend=args.backend)
    print(retrieval.table(run.scores))
    paths = retrieval.write(run.scores, run.rankings, args.out, run.name, run.meta)
    print(f"\nwritten: {paths[0]} {paths[1]}", file=sys.stderr)
    return 0


def _calibrate(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="oaken-cal-") as a, tempfile.TemporaryDirectory(prefix="oaken-cal-") as b:
        cfg, qs, _ = harness.prepare_synthetic(Path(a), messages=args.messages, seed=args.tune_seed, live=args.live)
        tuned = calibrate.tune(qs, cfg)
        cfg2, qs2, _ = harness.prepare_synthetic(Path(b), messages=args.messages, seed=args.report_seed,
                                                 live=args.live)
        held_out = calibrate.report(qs2, cfg2, tuned.threshold)
    doc = {"tuned_on_seed": args.tune_seed, "tuned": asdict(tuned),
           "reported_on_seed": args.report_seed, "reported": asdict(held_out), "messages": args.messages}
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"calibration-{'live' if args.live else 'concept'}.json"
    path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(f"{tuned.model}: low_confidence_cosine = {tuned.threshold:.3f}\n"
          f"  tuned on seed {args.tune_seed}: unanswerable flagged {tuned.unanswerable_flagged:.0%}, "
          f"answerable flagged {tuned.answerable_flagged:.0%}\n"
          f"  held out seed {args.report_seed}: unanswerable flagged {held_out.unanswerable_flagged:.0%}, "
          f"answerable flagged {held_out.answerable_flagged:.0%}\nwritten: {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _retrieval(args) if args.command == "retrieval" else _calibrate(args)
    except (EvalError, OakenError, ValueError) as e:
        print(f"oaken.evals: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
