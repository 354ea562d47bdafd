"""Write oaken/index/backends/enron_sample.json: the fixed texts that fast embedding backends are
calibrated on and checked against torch fp32 with (see oaken/index/fidelity.py).

The texts come from ../shared/corpora/enron-lay-skilling (public record, see its README); the
selection is seeded, so running this again gives the same file. Three disjoint parts:
  calibration  chunks that OpenVINO's static int8 quantization measures activations on,
  documents    chunks of other messages, 20 to 230 words, some past the model's 256 word pieces,
  queries      subjects and first sentences of documents' messages (short, like a search).
Calibration and check never share a message, so a backend cannot pass by fitting the check.

    .venv/bin/python scripts/make_embed_sample.py [--corpus DIR]
"""

from __future__ import annotations

import argparse
import email
import email.policy
import json
import random
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "corpora" / "enron-lay-skilling"
OUT = ROOT / "oaken" / "index" / "backends" / "enron_sample.json"
SEED = 20261129

_QP_SOFT = re.compile(r"=\r?\n")
_QP_HEX = re.compile(r"=([0-9A-F]{2})")
_RE_PREFIX = re.compile(r"^((re|fw|fwd)\s*:\s*)+", re.I)
_QUOTED = re.compile(r"^(>|-----Original Message-----|From:|Sent:|To:|Cc:|Subject:).*", re.M)


def _unqp(text: str) -> str:
    """The corpus carries literal quoted-printable debris (`=20`, soft breaks) in 7bit bodies."""
    text = _QP_SOFT.sub("", text)
    return _QP_HEX.sub(lambda m: chr(int(m.group(1), 16)) if m.group(1) < "80" else " ", text)


def enron_messages(corpus: Path = CORPUS) -> list[tuple[str, str, str]]:
    """(path, subject, body words joined by spaces) of every message with some text of its own,
    sorted by path, at most two per subject: the 1,124 petition form letters differ in their first
    lines (names, addresses), and would otherwise fill a sample with near-copies."""
    out: list[tuple[str, str, str]] = []
    seen_bodies: set[str] = set()
    per_subject: dict[str, int] = {}
    for path in sorted(corpus.rglob("*.eml")):
        msg = email.message_from_bytes(path.read_bytes(), policy=email.policy.default)
        part = msg.get_body(preferencelist=("plain",))
        if part is None:
            continue
        try:
            body = part.get_content()
        except (LookupError, ValueError):
            continue
        own = _QUOTED.split(_unqp(body))[0]
        words = own.split()
        if len(words) < 20:
            continue
        key = " ".join(words[:40]).lower()
        if key in seen_bodies:
            continue
        seen_bodies.add(key)
        subject = " ".join(str(msg.get("subject", "")).split())
        topic = _RE_PREFIX.sub("", subject).lower()
        if topic:
            per_subject[topic] = per_subject.get(topic, 0) + 1
            if per_subject[topic] > 2:
                continue
        out.append((str(path.relative_to(corpus)), subject, " ".join(words)))
    return out


def chunk_text(subject: str, words: list[str], n: int) -> str:
    """The same shape as the embedding pass embeds: the subject, a newline, the chunk's words."""
    text = " ".join(words[:n])
    return f"{subject}\n{text}" if subject else text


def first_sentence(body: str) -> str:
    m = re.match(r"(.{20,200}?[.!?])(\s|$)", body)
    return m.group(1) if m else " ".join(body.split()[:16])


def build(corpus: Path, n_calibration: int = 200, n_documents: int = 300, n_queries: int = 60) -> dict:
    rng = random.Random(SEED)
    messages = enron_messages(corpus)
    rng.shuffle(messages)
    lengths = [20, 40, 60, 90, 130, 180, 230]
    calibration = [chunk_text(s, b.split(), rng.choice(lengths))
                   for _, s, b in messages[:n_calibration]]
    docs_msgs = messages[n_calibration:n_calibration + n_documents]
    documents = [chunk_text(s, b.split(), rng.choice(lengths)) for _, s, b in docs_msgs]
    queries: list[str] = []
    for i, (_, subject, body) in enumerate(docs_msgs):
        if len(queries) == n_queries:
            break
        q = subject if (i % 2 == 0 and len(subject.split()) >= 3) else first_sentence(body)
        if q and q not in queries:
            queries.append(q)
    return {
        "origin": "Enron corpus (public record), ../shared/corpora/enron-lay-skilling, "
                  f"selected by scripts/make_embed_sample.py with seed {SEED}",
        "calibration": calibration,
        "documents": documents,
        "queries": queries,
        "sources": {"calibration": [p for p, _, _ in messages[:n_calibration]],
                    "documents": [p for p, _, _ in docs_msgs]},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    sample = build(args.corpus)
    args.out.write_text(json.dumps(sample, indent=0, ensure_ascii=False) + "\n")
    print(f"{args.out}: {len(sample['calibration'])} calibration, {len(sample['documents'])} documents, "
          f"{len(sample['queries'])} queries, {args.out.stat().st_size // 1024} KiB")


if __name__ == "__main__":
    main()
