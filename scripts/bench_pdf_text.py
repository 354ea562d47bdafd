#!/usr/bin/env python3
"""Which PDF library reads attachments (issue #17 item 4): pypdf against pdfminer.six on real PDFs.

Over every PDF of a folder (default: pypdf's own test resources, real files from many producers,
fetched into /work/.mirror/py-pdf+pypdf; a `git archive` of any PDF collection works), each library
extracts the text of each file in a fresh call: seconds per file (median, total), files that raise
or give no text, and, where the folder holds the expected text beside a PDF (`name.txt`), the share
of its words found. pdfminer.six must be installed for its column (it is not a dependency of Oaken).
Asserts nothing.

    .venv/bin/python scripts/bench_pdf_text.py [--folder DIR]
"""

from __future__ import annotations

import argparse
import io
import logging
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MIRROR = Path("/work/.mirror/py-pdf+pypdf/repo")
WORD = re.compile(r"[A-Za-z]{3,}")


def pypdf_text(data: bytes) -> str:
    from pypdf import PdfReader

    reader = PdfReader(io.BytesIO(data), strict=False)
    if reader.is_encrypted:
        reader.decrypt("")
    return "\n".join(page.extract_text() or "" for page in reader.pages)


def pdfminer_text(data: bytes) -> str:
    from pdfminer.high_level import extract_text

    return extract_text(io.BytesIO(data))


def words(text: str) -> set[str]:
    return {w.lower() for w in WORD.findall(text)}


def folder_from_mirror() -> Path:
    """The mirror's resources/ PDFs and reference texts (a snapshot may lack its largest files)."""
    out = Path(tempfile.mkdtemp(prefix="oaken-pdfs-"))
    names = subprocess.run(["git", "-C", str(MIRROR), "ls-tree", "-r", "--name-only", "HEAD", "resources"],
                           capture_output=True, text=True, check=True).stdout.split("\n")
    for name in (n for n in names if n.endswith((".pdf", ".txt"))):
        blob = subprocess.run(["git", "-C", str(MIRROR), "show", f"HEAD:{name}"], capture_output=True)
        if blob.returncode == 0:
            target = out / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(blob.stdout)
    return out / "resources"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--folder", type=Path)
    args = ap.parse_args(argv)
    folder = args.folder or folder_from_mirror()
    pdfs = sorted(p for p in folder.rglob("*.pdf") if p.stat().st_size < 20 * 1024 * 1024)
    logging.disable(logging.CRITICAL)
    print(f"{len(pdfs)} PDFs in {folder}; load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    libs = {"pypdf": pypdf_text, "pdfminer.six": pdfminer_text}
    for name, fn in libs.items():
        seconds, failed, empty, recall = [], 0, 0, []
        for p in pdfs:
            data = p.read_bytes()
            t = time.perf_counter()
            try:
                text = fn(data)
            except Exception:
                failed += 1
                text = ""
            seconds.append(time.perf_counter() - t)
            empty += not text.strip()
            ref = p.with_suffix(".txt")
            if ref.exists() and words(ref.read_text(errors="replace")):
                want = words(ref.read_text(errors="replace"))
                recall.append(len(want & words(text)) / len(want))
        print(f"{name:13} total {sum(seconds):6.1f} s, median {statistics.median(seconds) * 1000:7.1f} ms a file, "
              f"max {max(seconds):5.1f} s; raised {failed}, no text {empty}; words of the {len(recall)} "
              f"reference texts found: {statistics.mean(recall) if recall else float('nan'):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
