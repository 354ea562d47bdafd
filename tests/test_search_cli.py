"""`oaken search`: the table, --json, paging and --explain, exit codes, and a cold keyword search
that never imports torch, sentence-transformers or LanceDB."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from oaken.cli import main
from oaken.search.engine import search
from tests.search_fixtures import build_mailbox, config_for

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def home(oaken_home: Path) -> Path:
    """The search mailbox in this test's OAKEN_HOME, keyword mode by choice in config.toml."""
    build_mailbox(oaken_home)
    (oaken_home / "config.toml").write_text('[embedder]\nmodel = "none"\n')
    return oaken_home


def test_table_shows_date_sender_subject_and_marked_snippet(home: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["search", "dabhol"]) == 0
    out = capsys.readouterr().out
    line, snippet = out.splitlines()[:2]
    assert "2001-02-16" in line and "sherri.sera@enron.com" in line and "Dabhol" in line
    assert "[[Dabhol]]" in snippet


def test_json_is_the_api_response(home: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["search", "--json", "stock", "option"]) == 0
    printed = json.loads(capsys.readouterr().out)
    expected = dataclasses.asdict(search("stock option", config=config_for(home)))
    for doc in (printed, expected):
        doc.pop("timings")
    assert printed.pop("format_version") == 1  # the CLI's JSON says which form it is (docs/cli.md)
    assert printed == json.loads(json.dumps(expected))
    assert {"id", "message_id", "account", "folders", "labels", "thread", "subject", "sender", "date", "unread",
            "score", "snippet", "why", "matched_chunks"} <= set(printed["hits"][0])
    assert printed["mode"] == "keyword" and printed["degraded"] is False


def test_limit_offset_and_date_order(home: Path, capsys: pytest.CaptureFixture) -> None:
    def ids(*args: str) -> list[int]:
        assert main(["search", "--json", *args]) == 0
        return [h["id"] for h in json.loads(capsys.readouterr().out)["hits"]]

    whole = ids("--limit", "4", "enron")
    assert len(whole) == 4
    assert ids("--limit", "2", "enron") + ids("--limit", "2", "--offset", "2", "enron") == whole
    assert main(["search", "--json", "--sort", "date", "--limit", "50", "enron"]) == 0
    dates = [h["date"] for h in json.loads(capsys.readouterr().out)["hits"]]
    assert dates == sorted(dates, reverse=True) and len(dates) == 8


def test_explain_shows_parse_ranks_and_contributions(home: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["search", "--explain", "--", '"stock option plan"', "-award"]) == 0
    out = capsys.readouterr().out
    assert "free_text=['\"stock option plan\"']" in out and "excluded=['award']" in out
    assert 'MATCH "stock option plan"' in out
    assert "keyword rank 1: 3 / (k + 1) = 0.04918" in out


def test_exit_codes(home: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["search", "nothing-matches-this-zzz"]) == 0
    assert "no messages found" in capsys.readouterr().out
    assert main(["search", "--limit", "-1", "x"]) == 2
    assert main(["search", "--sort", "best", "x"]) == 2
    assert main(["search", "priority:9", "dabhol"]) == 0
    assert "priority:9" in capsys.readouterr().err
    (home / "raw.db").write_bytes(b"not a database " * 500)
    for suffix in ("-wal", "-shm"):
        Path(str(home / "raw.db") + suffix).unlink(missing_ok=True)
    assert main(["search", "dabhol"]) == 1
    assert "raw.db" in capsys.readouterr().err


def test_degraded_is_said_on_stderr(home: Path, capsys: pytest.CaptureFixture) -> None:
    (home / "config.toml").unlink()  # the default model, and no vector store
    assert main(["search", "dabhol"]) == 0
    captured = capsys.readouterr()
    assert "Dabhol" in captured.out and "no_vector_store" in captured.err


@pytest.mark.parametrize("model", ["none", "all-MiniLM-L6-v2"])
def test_a_keyword_search_imports_no_model_or_vector_store(home: Path, model: str) -> None:
    (home / "config.toml").write_text(f'[embedder]\nmodel = "{model}"\n')
    code = ("import sys\n"
            "from oaken.cli import main\n"
            "rc = main(['search', '--json', 'dabhol'])\n"
            "heavy = sorted(m for m in ('torch', 'sentence_transformers', 'lance', 'lancedb', 'transformers', 'numpy') if m in sys.modules)\n"
            "print('HEAVY', heavy, file=sys.stderr)\n"
            "sys.exit(rc)\n")
    env = {**os.environ, "OAKEN_HOME": str(home), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "HEAVY []" in proc.stderr
    assert json.loads(proc.stdout)["hits"][0]["subject"] == "Dabhol"


def test_the_installed_command(home: Path) -> None:
    env = {**os.environ, "OAKEN_HOME": str(home)}
    proc = subprocess.run([sys.executable, "-m", "oaken.cli", "search", "--limit", "1", "invoice"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0 and "Invoice" in proc.stdout


@pytest.fixture
def concept_home(oaken_home: Path) -> Path:
    """The search mailbox embedded by the concept embedder, which config.toml names."""
    from oaken.index import embedding

    build_mailbox(oaken_home)
    (oaken_home / "config.toml").write_text('[embedder]\nmodel = "concept"\n')
    assert embedding.embed_pending(config_for(oaken_home, model="concept")).embedded > 0
    return oaken_home


def test_hits_found_by_meaning_alone_are_marked(concept_home: Path, capsys: pytest.CaptureFixture) -> None:
    # "invoice 2001": Outstanding Invoices holds both words; Past Due is found by meaning alone
    assert main(["search", "--no-daemon", "invoice", "2001"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4 and not lines[0].startswith("low confidence")
    rows = {lines[i].split("  ")[-1]: lines[i + 1].strip() for i in (0, 2)}
    meaning = next(s for s in rows if s.startswith("Action Requested: Past Due"))
    words = next(s for s in rows if s.startswith("Outstanding Invoices"))
    assert rows[meaning].startswith("(by meaning) ") and not rows[words].startswith("(by meaning)")


def test_low_confidence_is_said_in_words(concept_home: Path, capsys: pytest.CaptureFixture) -> None:
    # no message holds "bill payment"; Past Due is near in meaning, under low_confidence_cosine
    assert main(["search", "--no-daemon", "bill", "payment"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("low confidence: no message holds every word of the query")
    assert "Past Due" in lines[1] and lines[2].strip().startswith("(by meaning)")
    assert len(lines) == 3  # the unrelated rest of the mailbox is not listed
    assert main(["search", "--no-daemon", "qwxzzy"]) == 0
    assert capsys.readouterr().out.splitlines() == ["no messages found"]


def test_formats_for_scripts(home: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["search", "--json", "stock", "option"]) == 0
    whole = json.loads(capsys.readouterr().out)
    ids = [h["id"] for h in whole["hits"]]
    assert ids
    assert main(["search", "--format", "ids", "stock", "option"]) == 0
    assert capsys.readouterr().out.split() == [str(i) for i in ids]
    assert main(["search", "--format", "jsonl", "stock", "option"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [h["id"] for h in lines] == ids and all(h["format_version"] == 1 for h in lines)
    assert lines[0]["subject"] == whole["hits"][0]["subject"]


def test_color_follows_no_color_and_the_option(home: Path, capsys: pytest.CaptureFixture,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    assert main(["search", "--color", "always", "stock"]) == 0
    assert "\x1b[1m" in capsys.readouterr().out
    monkeypatch.setattr("sys.stdout.isatty", lambda: True)
    monkeypatch.setenv("NO_COLOR", "1")
    assert main(["search", "stock"]) == 0
    assert "\x1b[" not in capsys.readouterr().out
    assert main(["search", "--color", "never", "stock"]) == 0
    assert "\x1b[" not in capsys.readouterr().out


def test_an_unknown_account_is_an_error_naming_those_there_are(home: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["search", "--account", "nobody", "stock"]) == 1
    err = capsys.readouterr().err
    assert "no mail in account 'nobody'" in err and "accounts with mail: main" in err


def test_columns_are_counted_as_a_terminal_shows_them() -> None:
    from oaken.search import render

    subject = "会議の議事録について確認お願いします"  # two columns a character
    assert render.width_of(subject) == 2 * len(subject)
    cut = render._cut(subject, 11)
    assert cut.endswith("…") and render.width_of(cut) <= 11
    assert render.width_of(render._pad("山田太郎", 24)) == 24
    assert render._cut("café", 4) == "café"  # an accent is one column
