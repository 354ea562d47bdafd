"""Experiment (issue #13): three levers on the real eval's hybrid search, each put in place by
wrapping one function of the engine for the run, then `python -m oaken.evals retrieval` as is.

    .venv/bin/python scripts/eval_levers.py wordnet --top 2 --cap 6 [--min-match 0.34] -- \\
        --real --live --split dev --keep /work/evkeep --out /tmp/levers
    .venv/bin/python scripts/eval_levers.py thread --beta 0.2 -- --real --live --split dev --keep /work/evkeep
    .venv/bin/python scripts/eval_levers.py recency --gain 0.03 -- --real --live --split dev --keep /work/evkeep

- wordnet: each content word of a question (its possessive and punctuation removed) becomes an
  OR of itself and the WordNet 3.0 lemmas of its first --top senses as noun, verb and adjective
  (and of the word with the next one, "saint nick"), at most --cap of them, stop words left out;
  on the keyword side only (the vector side embeds the question as typed). The files are
  Debian's wordnet-base (`apt-get download wordnet-base; dpkg-deb -x ...`), read here directly.
- thread: after fusion a message's score gains --beta x the best score of another message of
  its thread in the fused list (reorders; adds nothing).
- recency: after fusion a message's score is multiplied by 1 + --gain x its date's percentile
  among the fused messages (a re-ranker that never adds a hit).

Measured and not kept (2026-12-04, dev half; docs/meaning-at-scale.md "Query expansion,
threads, recency").
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import runpy
import sqlite3
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from oaken.search import matching, weighing  # noqa: E402
from oaken.search.grammar import Term  # noqa: E402
from oaken.search.query import STOP_WORDS  # noqa: E402

POS = {"n": "noun", "v": "verb", "a": "adj"}
# WordNet's morphology rules (the detachments of morphy(7WN)), per part of speech.
RULES = {
    "n": [
        ("s", ""),
        ("ses", "s"),
        ("xes", "x"),
        ("zes", "z"),
        ("ches", "ch"),
        ("shes", "sh"),
        ("men", "man"),
        ("ies", "y"),
    ],
    "v": [("s", ""), ("ies", "y"), ("es", "e"), ("es", ""), ("ed", "e"), ("ed", ""), ("ing", "e"), ("ing", "")],
    "a": [("er", ""), ("est", ""), ("er", "e"), ("est", "e")],
}


class WordNet:
    """index.<pos> (lemma -> synset offsets, most frequent sense first) and data.<pos> (a
    synset's words) of a WordNet 3.0 database directory."""

    def __init__(self, root: Path) -> None:
        self.index: dict[str, dict[str, list[str]]] = {p: {} for p in POS}
        self.data: dict[tuple[str, str], str] = {}
        self.exc: dict[str, dict[str, list[str]]] = {p: {} for p in POS}
        for p, name in POS.items():
            for line in (root / f"index.{name}").read_text("latin-1").splitlines():
                if line.startswith(" "):
                    continue
                parts = line.split()
                n_syn, n_ptr = int(parts[2]), int(parts[3])
                self.index[p][parts[0]] = parts[4 + n_ptr + 2 :][:n_syn]
            for line in (root / f"data.{name}").read_text("latin-1").splitlines():
                if not line.startswith(" "):
                    self.data[(p, line[:8])] = line
            exc = root / f"{name}.exc"
            if exc.exists():
                for line in exc.read_text("latin-1").splitlines():
                    inflected, *bases = line.split()
                    self.exc[p][inflected] = bases

    def bases(self, word: str, p: str) -> list[str]:
        out = [word] if word in self.index[p] else []
        out += [b for b in self.exc[p].get(word, []) if b in self.index[p]]
        for suffix, repl in RULES[p]:
            if word.endswith(suffix) and (b := word[: len(word) - len(suffix)] + repl) in self.index[p]:
                out.append(b)
        return list(dict.fromkeys(out))

    def lemmas(self, word: str, top: int) -> list[str]:
        out: list[str] = []
        for p in POS:
            for base in self.bases(word.lower().replace(" ", "_"), p):
                for offset in self.index[p][base][:top]:
                    line = self.data.get((p, offset)) or self.data.get(("a", offset)) or ""
                    t = line.split("|")[0].split()
                    if len(t) > 4:
                        out += [t[4 + 2 * i].split("(")[0].replace("_", " ").lower() for i in range(int(t[3], 16))]
        return list(dict.fromkeys(out))


def _bare(word: str) -> str:
    word = word.lower().strip("?!.,;:'\"")
    return word[:-2] if word.endswith("'s") else word


def wordnet(args: argparse.Namespace) -> None:
    wn = WordNet(Path(args.wordnet))
    original = matching.plan

    def expanded(word: str, following: str | None) -> list[Term]:
        found = (wn.lemmas(f"{word}_{following}", args.top) if following else []) + wn.lemmas(word, args.top)
        kept = [w for w in dict.fromkeys(found) if w != word and w not in STOP_WORDS and len(w) > 2]
        return [Term(w, phrase=" " in w) for w in kept[: args.cap]]

    def plan(q, min_match):  # type: ignore[no-untyped-def]
        if q.question and q.clauses:
            words = [_bare(c[0].text) if len(c) == 1 and not c[0].phrase else None for c in q.clauses]
            clauses = []
            for i, clause in enumerate(q.clauses):
                w = words[i]
                if w is None or w in STOP_WORDS or len(w) < 3 or any(ch.isdigit() for ch in w):
                    clauses.append(clause)
                    continue
                clauses.append((*clause, *expanded(w, words[i + 1] if i + 1 < len(words) else None)))
            q = dataclasses.replace(q, clauses=tuple(clauses))
        return original(q, args.min_match if args.min_match is not None else min_match)

    matching.plan = plan


def _reorder(score) -> None:  # type: ignore[no-untyped-def]
    original = weighing.fuse

    def fuse(lists, weights, rrf_k, cut):  # type: ignore[no-untyped-def]
        fused = original(lists, weights, rrf_k, cut)
        if len(lists) < 2:
            return fused
        return sorted((dataclasses.replace(f, score=score(f, fused)) for f in fused), key=lambda f: -f.score)

    weighing.fuse = fuse


def _column(data: Path, name: str) -> dict[int, int]:
    with sqlite3.connect(f"file:{data / 'index.db'}?mode=ro", uri=True) as db:
        return dict(db.execute(f"SELECT id, {name} FROM messages"))


def thread(args: argparse.Namespace) -> None:
    threads = _column(Path(args.keep) / "data", "thread")

    def score(f, fused):  # type: ignore[no-untyped-def]
        mates = [g.score for g in fused if g.id != f.id and threads.get(g.id) == threads.get(f.id)]
        return f.score + args.beta * max(mates, default=0.0)

    _reorder(score)


def recency(args: argparse.Namespace) -> None:
    dates = _column(Path(args.keep) / "data", "date")

    def score(f, fused):  # type: ignore[no-untyped-def]
        older = sum(dates.get(g.id, 0) < dates.get(f.id, 0) for g in fused)
        return f.score * (1 + args.gain * older / max(1, len(fused) - 1))

    _reorder(score)


def main() -> None:
    argv = sys.argv[1:]
    eval_args = argv[argv.index("--") + 1 :] if "--" in argv else []
    ours = argv[: argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="lever", required=True)
    w = sub.add_parser("wordnet")
    w.add_argument("--wordnet", default=os.environ.get("WNHOME", "/usr/share/wordnet"), help="WordNet 3.0 dict dir")
    w.add_argument("--top", type=int, default=2, help="senses per part of speech")
    w.add_argument("--cap", type=int, default=6, help="terms added per word")
    w.add_argument("--min-match", type=float, help="keyword_min_match for the run (default: the config's)")
    t = sub.add_parser("thread")
    t.add_argument("--beta", type=float, default=0.2)
    r = sub.add_parser("recency")
    r.add_argument("--gain", type=float, default=0.03)
    args = p.parse_args(ours)
    if args.lever != "wordnet":
        if "--keep" not in eval_args:
            p.error("thread and recency read the kept data dir: pass --keep DIR after --")
        args.keep = eval_args[eval_args.index("--keep") + 1]
    {"wordnet": wordnet, "thread": thread, "recency": recency}[args.lever](args)
    sys.argv = ["oaken.evals", "retrieval", *eval_args]
    runpy.run_module("oaken.evals", run_name="__main__")


if __name__ == "__main__":
    main()
