#!/usr/bin/env python3
"""Score notmuch and mu on Oaken's real-mail question set, with Oaken's own scoring functions.

Why: the README shows Oaken's retrievers on evals/questions/*.jsonl; this puts the two tools a
user would otherwise reach for next to them, on the same questions, the same mailbox and the
same dev/test halves (oaken.evals.questions.split, over the union of the question files, as
`python -m oaken.evals retrieval --real --split ...` does).

The mailbox is the union of the corpora, laid out once under --work as one Maildir tree (mu
reads Maildirs only; a folder of .eml files becomes a Maildir of the same name, loose files of a
Maildir go to its cur/), copied so that neither tool follows symlinks or touches the originals.
One notmuch database (own config via NOTMUCH_CONFIG) and one mu database (--muhome) are built
over it; ~/.notmuch-config and ~/.cache/mu are never read or written. TZ=UTC, as Oaken's dates.

Each question is read by Oaken's own parser (oaken.search.query.parse) and translated into what
a user of each tool would type; see translate_notmuch / translate_mu and the printed notes. Both
tools AND every word and sort by date (neither ranks by relevance), so two variants are scored:

- "as typed": the translation as it is, newest first, as the tool returns it;
- "best effort": the same, but when it finds nothing, OUR fallback (not the tool's) asks again
  with the content words ORed (a small stop-word list below), operators still applied.

Scores: recall_at / reciprocal_rank / ndcg_at from oaken.evals.retrieval on the first 10 hits
(via retrieval.score, so MRR is over the top 10 and "hits" for unanswerable questions is the
number of hits in that top 10, as Oaken's limit=10), plus R@50 and, for unanswerable ones, the
mean number of messages the tool matched in all.

    .venv/bin/python scripts/eval_peers.py [--work DIR] [--questions FILE...] [--corpora DIR...]
        [--split dev|test|all] [--out FILE]

Needs /work/shared/corpora (not part of a clone) and Debian's notmuch (0.37) and mu (1.8).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Callable, Sequence

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from oaken.evals import retrieval  # noqa: E402
from oaken.evals.questions import Question, load_jsonl, split  # noqa: E402
from oaken import importer  # noqa: E402
from oaken.search.query import ParsedQuery, Term, parse  # noqa: E402

CORPORA_ROOT = Path(os.environ.get("OAKEN_CORPORA") or ROOT.parent / "shared" / "corpora")
DEFAULT_CORPORA = [CORPORA_ROOT / n for n in ("enron-lay-skilling", "notmuch-lkml", "notmuch-default")]
DEFAULT_WORK = Path("/work/peers-work")
TOP = 10  # scored: R@1/5/10, MRR@10, nDCG@10, hits
FETCH = 50  # kept, for R@50
# Files Oaken's importer reads outside cur/new, mbox left out: none of the corpora holds one, and
# neither peer reads mbox.
MESSAGE_SUFFIXES = importer.MESSAGE_SUFFIXES - {".mbox", ".mbx"}

# Ours, for the best-effort fallback only: question words that carry no content. Neither tool
# drops stop words itself (checked: `the` alone matches nearly every message in both), so the
# "as typed" variant keeps every word.
STOP_WORDS = frozenset("""
a about after again all also am an and any are as at be been before being between both but by can
could did do does doing done for from had has have having he her here him his how i if in into is it
its just me my no not now of off on once only or other our out over own please same she should so
some such than that the their them then there these they this those through to too under up very
was we were what when where which while who whom why will with would you your yours
""".split())

# Words each tool would read as operators whatever their case (notmuch sets Xapian's
# FLAG_BOOLEAN_ANY_CASE; mu's parser reads and/or/not/xor in any case): quoted so they stay words.
NOTMUCH_KEYWORDS = frozenset({"and", "or", "not", "xor", "near", "adj"})
MU_KEYWORDS = frozenset({"and", "or", "not", "xor"})


# ---- the mailbox ---------------------------------------------------------------------------------

@dataclass
class Mailbox:
    root: Path
    files: int
    # Oaken's label of a folder (as its importer names it, lower-cased) -> the folder under root
    folders: dict[str, list[str]] = field(default_factory=dict)


# the folder rules are the importer's own, so each tool's folders are the ones Oaken labels
_oaken_folder_name = importer._folder_name
_is_maildir = importer._is_maildir


def layout(corpora: Sequence[Path], dest: Path) -> Mailbox:
    """Copy every message of every corpus into dest/<corpus name>/<folder>/{cur,new}: one Maildir
    tree both tools read alike. Maildir files keep their names; others get ":2," appended."""
    if dest.exists():
        shutil.rmtree(dest)
    box = Mailbox(dest, 0)
    names: set[str] = set()
    for corpus in corpora:
        name = corpus.resolve().name
        while name in names:
            name += "_"
        names.add(name)
        for dirpath, dirnames, filenames in os.walk(corpus):
            here = Path(dirpath)
            dirnames.sort()
            if here.name in ("cur", "new", "tmp") and _is_maildir(here.parent):
                dirnames[:] = []
                continue
            target = dest / name / here.relative_to(corpus)
            label = _oaken_folder_name(corpus, here).lower()
            found = 0
            if _is_maildir(here):
                dirnames[:] = [d for d in dirnames if d not in ("cur", "new", "tmp")]
                for sub in ("cur", "new"):
                    if (here / sub).is_dir():
                        for f in sorted((here / sub).iterdir()):
                            if f.is_file() and not f.name.startswith("."):
                                (target / sub).mkdir(parents=True, exist_ok=True)
                                shutil.copyfile(f, target / sub / f.name)
                                found += 1
            for fname in sorted(filenames):
                p = here / fname
                if fname.startswith(".") or p.suffix.lower() not in MESSAGE_SUFFIXES:
                    continue
                out = target / "cur" / (fname if ":2," in fname else fname + ":2,")
                while out.exists():
                    out = out.with_name("dup-" + out.name)
                out.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(p, out)
                found += 1
            if found:
                for sub in ("cur", "new", "tmp"):
                    (target / sub).mkdir(parents=True, exist_ok=True)
                box.files += found
                box.folders.setdefault(label, []).append(target.relative_to(dest).as_posix())
    return box


# ---- the tools -----------------------------------------------------------------------------------

def _env() -> dict[str, str]:
    return {**os.environ, "TZ": "UTC", "LC_ALL": "C.UTF-8"}


class Tool:
    """One peer: how to build its index, ask a query (top N Message-IDs) and count matches."""

    name = ""

    def __init__(self, work: Path, box: Mailbox):
        self.work, self.box = work, box

    def build(self) -> float:
        raise NotImplementedError

    def ids(self, query: str, limit: int) -> list[str]:
        raise NotImplementedError

    def count(self, query: str) -> int:
        raise NotImplementedError

    def version(self) -> str:
        raise NotImplementedError

    def translate(self, q: ParsedQuery) -> Translation:
        raise NotImplementedError

    def all_ids(self) -> set[str]:
        raise NotImplementedError


def _run(cmd: list[str], env: dict[str, str], ok: Sequence[int] = (0,)) -> str:
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if proc.returncode not in ok:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): "
                           f"{proc.stderr.decode(errors='replace')[-1000:]}")
    return proc.stdout.decode("utf-8", errors="replace")


def _clean_id(mid: str) -> str:
    mid = mid.strip()
    if mid.startswith("id:"):
        mid = mid[3:]
    return mid.strip().strip("<>")


class Notmuch(Tool):
    name = "notmuch"

    def __init__(self, work: Path, box: Mailbox):
        super().__init__(work, box)
        self.config = work / "notmuch-config"
        self.env = {**_env(), "NOTMUCH_CONFIG": str(self.config)}

    def build(self) -> float:
        """A private config (no new-mail tags, no excluded tags, flags not synced): `notmuch new`."""
        self.config.write_text(f"[database]\npath={self.box.root}\n[new]\ntags=\nignore=\n[search]\n"
                               "exclude_tags=\n[user]\nname=Eval\nprimary_email=eval@example.com\n"
                               "[maildir]\nsynchronize_flags=false\n", encoding="utf-8")
        shutil.rmtree(self.box.root / ".notmuch", ignore_errors=True)
        t = time.perf_counter()
        _run(["notmuch", "new", "--quiet"], self.env)
        return time.perf_counter() - t

    def ids(self, query: str, limit: int) -> list[str]:
        out = _run(["notmuch", "search", "--format=json", "--output=messages", "--sort=newest-first",
                    f"--limit={limit}", "--", query], self.env)
        return [_clean_id(m) for m in json.loads(out or "[]")]

    def count(self, query: str) -> int:
        return int(_run(["notmuch", "count", "--", query], self.env).strip() or 0)

    def all_ids(self) -> set[str]:
        return {_clean_id(m) for m in _run(["notmuch", "search", "--output=messages", "*"], self.env).split()}

    def version(self) -> str:
        return _run(["notmuch", "--version"], self.env).strip()

    def translate(self, q: ParsedQuery) -> Translation:
        return translate(q, NOTMUCH_SYNTAX, self.box)


class Mu(Tool):
    name = "mu"

    def __init__(self, work: Path, box: Mailbox):
        super().__init__(work, box)
        self.home = work / "mu"
        self.env = {**_env(), "XDG_CACHE_HOME": str(work / "xdg-cache"), "XDG_CONFIG_HOME": str(work / "xdg-config")}

    def _mu(self, *args: str, ok: Sequence[int] = (0,)) -> str:
        return _run(["mu", args[0], f"--muhome={self.home}", *args[1:]], self.env, ok)

    def build(self) -> float:
        """`mu init` (not timed: it only writes the settings) then `mu index`."""
        shutil.rmtree(self.home, ignore_errors=True)
        self._mu("init", f"--maildir={self.box.root}", "--quiet")
        t = time.perf_counter()
        self._mu("index", "--quiet")
        return time.perf_counter() - t

    def ids(self, query: str, limit: int) -> list[str]:
        # newest first, as notmuch and as mu4e show it (mu find's own default is oldest first);
        # exit code 2 (mu 1.8: 4 in older ones) is "no matches"
        out = self._mu("find", "--fields=i", "--sortfield=date", "--reverse", "--skip-dups", f"--maxnum={limit}",
                       "--", query, ok=(0, 2, 4))
        return [_clean_id(m) for m in out.splitlines() if m.strip()]

    def count(self, query: str) -> int:
        out = self._mu("find", "--fields=i", "--skip-dups", "--", query, ok=(0, 2, 4))
        return len({m for m in out.splitlines() if m.strip()})

    def all_ids(self) -> set[str]:
        out = self._mu("find", "--fields=i", "--", "date:19700101..21000101", ok=(0, 2, 4))
        return {_clean_id(m) for m in out.splitlines() if m.strip()}

    def version(self) -> str:
        return _run(["mu", "--version"], self.env).splitlines()[0].strip()

    def translate(self, q: ParsedQuery) -> Translation:
        return translate(q, MU_SYNTAX, self.box)


# ---- translating Oaken's query language ----------------------------------------------------------

@dataclass(frozen=True)
class Syntax:
    """How one tool spells each of Oaken's operators."""

    tool: str
    keywords: frozenset[str]  # free words the tool reads as operators
    special: str  # characters that make a free word need quoting
    date: Callable[[int | None, int | None], str]  # after (inclusive), before (exclusive), Unix s UTC
    cc_field: str  # notmuch has no cc: (its to: covers To, Cc and Bcc)
    label: Callable[[str], str]  # one folder of the tree
    address: Callable[[str, str], str]  # from:/to:/cc: and a value Oaken matches as a substring
    no: str = "NOT "


def _day(ts: int) -> datetime:
    return datetime.fromtimestamp(ts, tz=timezone.utc)


def _notmuch_date(after: int | None, before: int | None) -> str:
    """date:A..B, both ends whole days, inclusive: before: (exclusive) ends the day before."""
    a = _day(after).strftime("%Y-%m-%d") if after is not None else ""
    b = (_day(before) - timedelta(days=1)).strftime("%Y-%m-%d") if before is not None else ""
    return f"date:{a}..{b}"


def _mu_date(after: int | None, before: int | None) -> str:
    a = _day(after).strftime("%Y%m%d") if after is not None else ""
    b = (_day(before) - timedelta(days=1)).strftime("%Y%m%d") if before is not None else ""
    return f"date:{a}..{b}"


def _mu_address(name: str, value: str) -> str:
    """mu's plain from:X matches a whole address or a word of the name only (from:kudlow misses
    svarga@kudlow.com); its regex form is Oaken's substring: from:/kudlow/ ('.' as [.])."""
    if any(c in value for c in ' ()"/'):
        return _field(name, value)
    return f"{name}:/" + "".join(f"[{c}]" if c in ".+*?^$|{}[]\\" else c for c in value.lower()) + "/"


NOTMUCH_SYNTAX = Syntax("notmuch", NOTMUCH_KEYWORDS, '():"*{}', _notmuch_date, "to",
                        lambda folder: f'folder:"{folder}"', lambda name, value: _field(name, value))
MU_SYNTAX = Syntax("mu", MU_KEYWORDS, '():"*', _mu_date, "cc", lambda folder: f'maildir:"/{folder}"',
                   _mu_address)


@dataclass
class Translation:
    typed: str  # variant (a): what the user types
    fallback: str | None  # variant (b), ours: content words ORed, operators kept; None if no different
    notes: list[str]  # what could not be said faithfully


def _quote(text: str) -> str:
    return '"' + text.replace('"', " ").strip() + '"'


# Xapian's term generator (both tools index with it): word characters, with '.' or ',' kept
# between digits (713.731.9233, 2.6.38) and an apostrophe inside a word; anything else splits.
_XAPIAN_TERM = re.compile(r"(?:\w*?\d[.,](?=\d))*\w+(?:'\w+)*")
_EDGE = "?!.,;:'\"()[]{}<>"


def _word(t: Term, s: Syntax) -> str:
    """A free word or phrase. Punctuation around a word goes (Oaken ignores it; mu would look for
    "race?" and find nothing). notmuch's parser turns 10/19/2001 into a phrase itself; mu looks
    for one term "10/19/2001" and finds nothing, so for mu such a word is the phrase of its
    terms, "10 19 2001", which is what mu indexed."""
    if t.phrase:
        text = t.text if s.tool == "notmuch" else " ".join(_XAPIAN_TERM.findall(t.text))
        return _quote(text)
    text = t.text.strip(_EDGE) or t.text
    if s.tool == "mu":
        terms = _XAPIAN_TERM.findall(text)
        if len(terms) > 1:
            return _quote(" ".join(terms))
        text = terms[0] if terms else text
    if text.lower() in s.keywords or any(c in s.special for c in text) or text.startswith(("-", "+")):
        return _quote(text)
    return text


def _field(name: str, value: str, phrase: bool = False) -> str:
    """from:X, or from:"X Y" when the value holds a space, a quote or a colon."""
    if phrase or any(c in value for c in ' ():"'):
        return f"{name}:{_quote(value)}"
    return f"{name}:{value}"


def _any(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else "(" + " OR ".join(parts) + ")"


def _clause(clause: Sequence[Term], s: Syntax) -> str:
    return _any([_word(t, s) for t in clause])


def translate(q: ParsedQuery, s: Syntax, box: Mailbox) -> Translation:
    """Oaken's parsed query in the tool's language: free text and operators ANDed."""
    notes = [f"oaken: {w}" for w in q.warnings]
    ops: list[str] = []
    if q.senders:
        ops.append(_any([s.address("from", v) for v in q.senders]))
    if q.recipients:
        ops.append(_any([s.address("to", v) for v in q.recipients]))
    if q.cc:
        ops.append(_any([s.address(s.cc_field, v) for v in q.cc]))
        if s.cc_field != "cc":
            notes.append(f"cc: -> {s.cc_field}: ({s.tool} has no cc:; {s.cc_field}: also matches To)")
    for t in q.subjects:
        ops.append(_field("subject", t.text, t.phrase))
    if q.after is not None or q.before is not None:
        ops.append(s.date(q.after, q.before))
    for label in q.labels:
        folders = box.folders.get(label.lower(), [])
        if not folders:
            notes.append(f"label:{label}: no such folder in the mailbox; asked as a folder that matches nothing")
            folders = [label]
        ops.append(_any([s.label(f) for f in folders]))
    for name, t in q.excluded_fields:
        if name == "label":
            ops.append(s.no + _any([s.label(f) for f in box.folders.get(t.text.lower(), [t.text])]))
        elif name in ("from", "to", "cc") and not t.phrase:
            ops.append(s.no + s.address(s.cc_field if name == "cc" else name, t.text))
        elif name == "cc":
            ops.append(s.no + _field(s.cc_field, t.text, t.phrase))
        elif name == "filename":
            notes.append(f"-filename:{t.text}: not expressible; left out")
        else:
            ops.append(s.no + _field(name, t.text, t.phrase))
    for t in q.excluded:
        ops.append(s.no + _word(t, s))
    for name in ("filenames", "categories"):
        if getattr(q, name):
            notes.append(f"{name} {getattr(q, name)}: not expressible in {s.tool}; left out")
    if q.dispositions is not None or q.unread is not None or q.starred is not None or q.min_priority is not None:
        notes.append(f"in:/is:/priority: (Oaken's triage and read state): not expressible in {s.tool}; left out")
    if q.has_attachment is not None:
        ops.append(("" if q.has_attachment else s.no)
                   + ("tag:attachment" if s.tool == "notmuch" else "flag:attach"))
    text = [_clause(c, s) for c in q.clauses]
    typed = " ".join(text + ops).strip()
    content = []
    for c in q.clauses:
        for t in c:
            if t.phrase or t.text.strip(_EDGE).lower() not in STOP_WORDS:
                content.append(_word(t, s))
    content = list(dict.fromkeys(content))
    fallback = " ".join(([_any(content)] if content else []) + ops).strip()
    if not typed:
        notes.append("nothing to search for")
    return Translation(typed, fallback if content and fallback != typed else None, notes)


# ---- asking and scoring --------------------------------------------------------------------------

@dataclass
class Answer:
    question: str
    kind: str
    tool: str
    variant: str  # "as typed" or "best effort"
    query: str  # what was sent last
    fell_back: bool
    ranked: list[str]  # up to FETCH Message-IDs, newest first
    matched: int | None  # messages the final query matched in all (unanswerable questions only)
    seconds: float
    notes: list[str]


def ask(tool: Tool, q: Question) -> list[Answer]:
    """Both variants for one question: (a) as typed, (b) (a) or, when empty, our OR fallback."""
    tr = tool.translate(parse(q.query))
    t = time.perf_counter()
    typed = tool.ids(tr.typed, FETCH) if tr.typed else []
    typed_s = time.perf_counter() - t
    typed = list(dict.fromkeys(typed))
    a = Answer(q.id, q.kind, tool.name, "as typed", tr.typed, False, typed, None, typed_s, tr.notes)
    if typed or not tr.fallback:
        b = Answer(q.id, q.kind, tool.name, "best effort", tr.typed, False, typed, None, typed_s, tr.notes)
    else:
        t = time.perf_counter()
        more = list(dict.fromkeys(tool.ids(tr.fallback, FETCH)))
        b = Answer(q.id, q.kind, tool.name, "best effort", tr.fallback, True, more, None,
                   typed_s + time.perf_counter() - t, tr.notes)
    if not q.relevant:  # how much an unanswerable question drags in, beyond the top 10
        a.matched = tool.count(a.query) if a.query else 0
        b.matched = a.matched if b.query == a.query else tool.count(b.query)
    return [a, b]


def retriever_name(tool: str, variant: str) -> str:
    return f"{tool} ({variant}{'*' if variant == 'best effort' else ''})"


def score(answers: Sequence[Answer], qs: Sequence[Question]) -> list[dict]:
    """Oaken's retrieval.score on the top 10, plus R@50 and the matched count."""
    by_id = {q.id: q for q in qs}
    mine = [a for a in answers if a.question in by_id]
    rankings = [retrieval.Ranking(by_id[a.question], retriever_name(a.tool, a.variant), tuple(a.ranked[:TOP]), False)
                for a in mine]
    rows = []
    order = [retriever_name(t, v) for t in ("notmuch", "mu") for v in ("as typed", "best effort")]
    scored = sorted(retrieval.score(rankings),
                    key=lambda s: order.index(s.retriever) if s.retriever in order else len(order))
    for s in scored:
        group = [a for a in mine if retriever_name(a.tool, a.variant) == s.retriever
                 and (a.kind == s.kind or (s.kind == "overall" and by_id[a.question].relevant))]
        row = asdict(s)
        row.pop("low_confidence_rate")
        if s.kind != "unanswerable":
            row["recall_at_50"] = round(statistics.fmean(
                retrieval.recall_at(a.ranked, by_id[a.question].relevant, FETCH) for a in group), 4) if group else 0.0
        else:
            row["mean_matched"] = round(statistics.fmean(a.matched or 0 for a in group), 1) if group else 0.0
        row["fell_back"] = sum(a.fell_back for a in group)
        rows.append(row)
    return rows


def _cell(v: float | None, fmt: str = "{:.3f}") -> str:
    return "" if v is None else fmt.format(v)


def table(rows: Sequence[dict]) -> str:
    head = ("tool (variant)", "kind", "n", "R@1", "R@5", "R@10", "MRR@10", "nDCG@10", "R@50", "hits@10",
            "matched", "fallbacks")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = (r["retriever"], r["kind"], str(r["questions"]), _cell(r["recall_at_1"]), _cell(r["recall_at_5"]),
                 _cell(r["recall_at_10"]), _cell(r["mrr"]), _cell(r["ndcg_at_10"]), _cell(r.get("recall_at_50")),
                 _cell(r["mean_hits"], "{:.1f}"), _cell(r.get("mean_matched"), "{:.1f}"),
                 str(r["fell_back"]) if r["retriever"].endswith("*)") else "")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# ---- main ----------------------------------------------------------------------------------------

def load_questions(files: Sequence[Path]) -> list[Question]:
    """Every file's questions, ids unique across files (as the harness insists)."""
    out: list[Question] = []
    seen: dict[str, Path] = {}
    for f in files:
        for q in load_jsonl(f):
            if q.id in seen:
                raise SystemExit(f"{f}: question id {q.id!r} is also in {seen[q.id]}; ids must be unique")
            seen[q.id] = f
            out.append(q)
    return out


TRANSLATION_NOTES = [
    "free words: ANDed as typed (both tools AND by default), punctuation around a word dropped; and/or/not "
    "(and near/adj for notmuch) quoted so the tool reads them as words; a word holding ( ) : \" * quoted; "
    "for mu a word with punctuation inside (10/19/2001, night-time) is the phrase of its terms "
    "(\"10 19 2001\"): mu looks for it as one term and finds nothing, notmuch makes the phrase itself",
    '"phrase": "phrase" (both); a OR b: (a OR b)',
    "-word / -\"phrase\": NOT word (both)",
    "from:X / to:X (Oaken: a substring of name or address): notmuch from:X / to:X (words of the name or "
    "address: on this set's values within 3 messages of the substring; its regex form from:/X/ is "
    "case-sensitive, from:/janak/ misses Jan Janak, and to: has none); mu from:/X/ / to:/X/ (its regex form: mu's plain "
    "from:X matches only a whole address or a word of the name, from:kudlow misses svarga@kudlow.com)",
    "cc:X: mu cc:/X/; notmuch has no cc: -> to:X, which also matches To and Bcc",
    "subject:X / subject:\"p\": subject:X / subject:\"p\" (both)",
    "after:A before:B: notmuch date:A..(B-1 day), mu date:YYYYMMDD..YYYYMMDD (B-1 day), UTC days (TZ=UTC)",
    "label:F: notmuch folder:\"<corpus>/F\", mu maildir:\"/<corpus>/F\" (the folder Oaken labels F)",
    "has:attachment: notmuch tag:attachment, mu flag:attach; in:/is:/category:/priority:/filename: not expressible",
    "mu is asked --sortfield=date --reverse --skip-dups (newest first; its own default is oldest first)",
    "best effort (*): OUR fallback, not the tools': when 'as typed' finds nothing, the content words "
    "(stop words removed) ORed, operators still ANDed, newest first",
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(TRANSLATION_NOTES))
    ap.add_argument("--work", type=Path, default=DEFAULT_WORK,
                    help=f"where the mail copy, the databases and the default result go (default {DEFAULT_WORK})")
    ap.add_argument("--questions", type=Path, nargs="+", default=None,
                    help="question files (jsonl; default evals/questions/*.jsonl)")
    ap.add_argument("--corpora", type=Path, nargs="+", default=DEFAULT_CORPORA,
                    help="folders of mail, one mailbox of all (default the three real corpora)")
    ap.add_argument("--split", choices=("dev", "test", "all"), default=None,
                    help="report one half (or all questions); default: test, dev and all")
    ap.add_argument("--out", type=Path, default=None, help="JSON result (default WORK/eval_peers.json)")
    args = ap.parse_args(argv)

    files = args.questions or sorted((ROOT / "evals" / "questions").glob("*.jsonl"))
    if not files:
        print(f"{ROOT / 'evals' / 'questions'}: no question file; give --questions", file=sys.stderr)
        return 2
    missing = [str(c) for c in args.corpora if not c.is_dir()]
    if missing:
        print(f"no such corpus folder: {', '.join(missing)}", file=sys.stderr)
        return 2
    for exe in ("notmuch", "mu"):
        if shutil.which(exe) is None:
            print(f"{exe} not found (apt-get install notmuch maildir-utils)", file=sys.stderr)
            return 2
    qs = load_questions(files)
    dev, test = split(qs)
    halves = {"test": test, "dev": dev, "all": qs}
    shown = [args.split] if args.split else ["test", "dev", "all"]
    asked = qs if args.split in (None, "all") else halves[args.split]

    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    box = layout(args.corpora, work / "mail")
    print(f"mailbox: {box.files} files from {', '.join(str(c) for c in args.corpora)} copied to {box.root} "
          f"({time.perf_counter() - t:.1f} s)", file=sys.stderr)
    tools: list[Tool] = [Notmuch(work, box), Mu(work, box)]
    meta: dict = {"questions_files": [str(f) for f in files], "corpora": [str(c) for c in args.corpora],
                  "files": box.files, "questions": len(qs), "dev": len(dev), "test": len(test),
                  "machine": f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start",
                  "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                  "translation": TRANSLATION_NOTES, "tools": {}}
    answers: list[Answer] = []
    relevant = {r for q in qs for r in q.relevant}
    for tool in tools:
        seconds = tool.build()
        known = tool.all_ids()
        lost = sorted(relevant - known)
        meta["tools"][tool.name] = {"version": tool.version(), "index_seconds": round(seconds, 2),
                                    "messages": len(known), "relevant_not_indexed": lost}
        print(f"{tool.name}: indexed {len(known)} messages in {seconds:.1f} s", file=sys.stderr)
        if lost:
            print(f"  warning: {len(lost)} relevant Message-IDs are not in {tool.name}'s index, e.g. <{lost[0]}>",
                  file=sys.stderr)
        for q in asked:
            answers.extend(ask(tool, q))

    results: dict = {}
    print(f"# notmuch and mu on Oaken's questions ({', '.join(f.name for f in files)})\n")
    for name in shown:
        rows = score(answers, halves[name])
        results[name] = rows
        print(f"## {name}: {len(halves[name])} questions\n\n{table(rows)}\n")
    timing = {}
    for tool in tools:
        for variant in ("as typed", "best effort"):
            secs = [a.seconds for a in answers if a.tool == tool.name and a.variant == variant]
            timing[retriever_name(tool.name, variant)] = {"median_ms": round(statistics.median(secs) * 1000, 1),
                                                          "max_ms": round(max(secs) * 1000, 1), "queries": len(secs)}
    print("| tool | version | index build (s) | messages | median ms/query as typed | best effort* |")
    print("|---|---|---|---|---|---|")
    for tool in tools:
        m = meta["tools"][tool.name]
        print(f"| {tool.name} | {m['version']} | {m['index_seconds']:.1f} | {m['messages']} | "
              f"{timing[retriever_name(tool.name, 'as typed')]['median_ms']:.0f} | "
              f"{timing[retriever_name(tool.name, 'best effort')]['median_ms']:.0f} |")
    print("\nWall time per query: one process per query (as a user runs them), "
          f"{meta['machine']}.")
    print("\n* best effort: when the query as typed finds nothing, OUR fallback (not the tool's) asks again with "
          "the content words ORed and the operators kept; 'fallbacks' counts the questions it was used on.")
    print("hits@10: hits in the top 10 (Oaken's `hits`); matched: messages the query matched in all.")
    print("\nTranslation:\n" + "\n".join(f"- {n}" for n in TRANSLATION_NOTES))
    notes = sorted({f"{a.tool}: {a.question}: {n}" for a in answers for n in a.notes})
    if notes:
        print("\nNot expressed faithfully:\n" + "\n".join(f"- {n}" for n in notes))
    out = args.out or work / "eval_peers.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {"meta": meta, "timing": timing, "scores": results, "answers": [asdict(a) for a in answers]}
    out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(f"\nwritten: {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
