"""`oaken search` through the entry point's fast path (oaken.fastpath) prints what the full command
prints for the same answer, byte for byte, and leaves to the full command everything it cannot do.

The daemon here is the real search server on real messages (tests/data/search); its search is the
real engine with its timings pinned, so that two searches give the same answer to compare."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oaken import cli, fastpath
from oaken.search import engine
from tests.search_fixtures import build_mailbox, config_for
from tests.test_search_protocol import _serve as serve

ROOT = Path(__file__).resolve().parent.parent


def pinned_search(query: str, **kwargs: Any) -> Any:
    """engine.search with its clock readings fixed: the same request gets the same bytes back."""
    response = engine.search(query, **kwargs)
    explain = response.explain
    if explain is not None:
        explain = dataclasses.replace(
            explain, retrievers=tuple(dataclasses.replace(r, ms=1.0) for r in explain.retrievers)
        )
    return dataclasses.replace(response, timings={"total": 1.0}, explain=explain)


@pytest.fixture
def daemon(oaken_home: Path, monkeypatch: pytest.MonkeyPatch):
    """A search server on the eleven real messages, in $OAKEN_HOME with no config file."""
    build_mailbox(oaken_home)
    cfg = config_for(oaken_home)
    asked: list[str] = []

    def search(query: str, **kwargs: Any) -> Any:
        asked.append(query)
        return pinned_search(query, **kwargs)

    with serve(cfg, search):
        yield asked


def run_fast(argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> tuple[int, str, str]:
    """fastpath.main with `oaken ARGV`; the full command must not run."""

    def refuse(argv: list[str] | None = None) -> int:
        raise AssertionError(f"the fast path handed {argv} to the full command")

    monkeypatch.setattr(sys, "argv", ["oaken", *argv])
    with monkeypatch.context() as m:
        m.setattr(cli, "main", refuse)
        code = fastpath.main()
    out = capsys.readouterr()
    return code, out.out, out.err


def run_full(argv: list[str], capsys: pytest.CaptureFixture) -> tuple[int, str, str]:
    code = cli.main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


CASES = [
    ["search", "enron"],
    ["search", "--format", "json", "enron", "power"],
    ["search", "--json", "--limit", "3", "enron"],
    ["search", "--format=jsonl", "--sort", "date", "enron"],
    ["search", "--format", "ids", "--offset=1", "--limit", "4", "enron"],
    ["search", "--color", "always", "power"],
    ["search", "--color=never", "--explain", "from:karen.denne"],
    ["search", "is:unread"],
    ["search", "--limit", "2", "--", "enron", "-power"],
    ["search", "nothing-matches-this-xyzzy"],
    ["search", "--account", "nobody", "enron"],  # no such account: rc 1, the warning names those there are
    ["search", "enron", "--format", "json"],  # options after the words
]


@pytest.mark.parametrize("argv", CASES, ids=[" ".join(c[1:]) for c in CASES])
def test_the_fast_path_prints_what_the_full_command_prints(
    argv: list[str], daemon: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    fast = run_fast(argv, monkeypatch, capsys)
    full = run_full(argv, capsys)
    assert fast == full
    assert len(daemon) == 2 and daemon[0] == daemon[1]  # both asked the daemon, the same query
    if "nobody" not in argv and "xyzzy" not in argv[-1]:
        assert fast[0] == 0 and fast[1].strip() and "no messages found" not in fast[1]  # real hits


@pytest.mark.parametrize(
    "argv",
    [
        ["search", "--no-daemon", "enron"],  # searches here: the full command
        ["search", "--lim", "3", "enron"],  # argparse's abbreviation
        ["search", "enron", "-draft"],  # an exclusion taken for an option: the full command's hint
        ["search", "--limit", "-1", "enron"],  # refused with rc 2
        ["search", "--format", "yaml", "enron"],
        ["search", "enron", "--", "-draft"],
        ["search", "enron", "--json", "more"],  # argparse refuses the second run of words
        ["search", "-h"],
        ["--config", "/nonexistent/oaken.toml", "search", "enron"],
        ["status"],
    ],
)
def test_what_it_does_not_know_goes_to_the_full_command(
    argv: list[str], daemon: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    handed: list[tuple[list[str] | None, int]] = []
    real = cli.main

    def full(args: list[str] | None = None) -> int:
        handed.append((args, len(daemon)))  # how many searches the daemon had run by then
        return real(args)

    monkeypatch.setattr(sys, "argv", ["oaken", *argv])
    monkeypatch.setattr(cli, "main", full)
    try:
        code: int | None = fastpath.main()
    except SystemExit as e:  # -h exits in argparse, as it does today
        code = e.code  # type: ignore[assignment]
    fast = code, *capsys.readouterr()
    assert handed == [(argv, 0)]  # the fast path sent nothing
    del daemon[:]
    try:
        expected: int | None = real(argv)
    except SystemExit as e:
        expected = e.code  # type: ignore[assignment]
    assert fast == (expected, *capsys.readouterr())
    assert len(set(daemon)) <= 1  # the full command asked the daemon both times, or neither


def test_no_daemon_means_the_full_command_searching_here(
    oaken_home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    build_mailbox(oaken_home)
    (oaken_home / "config.toml").write_text('[embedder]\nmodel = "none"\n')
    handed: list[list[str] | None] = []
    real = cli.main
    monkeypatch.setattr(cli, "main", lambda args=None: handed.append(args) or real(args))
    monkeypatch.setattr(sys, "argv", ["oaken", "search", "--format", "ids", "enron"])
    assert fastpath.main() == 0
    assert handed == [["search", "--format", "ids", "enron"]] and capsys.readouterr().out.split()


def test_a_daemon_of_another_protocol_is_left_to_the_full_command(
    daemon: list[str], oaken_home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    from oaken import protocol

    monkeypatch.setattr(protocol, "PROTOCOL", 99)  # this client speaks 99, the daemon 1: it refuses
    handed: list[list[str] | None] = []
    real = cli.main
    monkeypatch.setattr(cli, "main", lambda args=None: handed.append(args) or real(args))
    monkeypatch.setattr(sys, "argv", ["oaken", "search", "--format", "ids", "enron"])
    assert fastpath.main() == 0  # the full command searched here, and said why
    # asked once: a daemon that timed out is not waited for twice (found by review)
    assert handed == [["search", "--no-daemon", "--format", "ids", "enron"]] and daemon == []
    err = capsys.readouterr().err
    assert "protocol" in err and err.count("searching in this process instead") == 1


def test_a_fresh_process_loads_only_the_client(daemon: list[str], oaken_home: Path) -> None:
    """What a warm search imports: no argparse, no full command, no typed config, store or engine;
    not even json (it loads re) or the table renderer: the daemon renders (oaken.protocol)."""
    code = (
        "import sys\n"
        "before = set(sys.modules)  # what the interpreter's start loaded (here: an editable install's finder)\n"
        "sys.argv = ['oaken', 'search', '--format', 'json', 'enron']\n"
        "from oaken.fastpath import main\n"
        "rc = main()\n"
        "mods = sorted(m for m in set(sys.modules) - before if m.startswith('oaken') or m in ('argparse',"
        " 'dataclasses', 'apsw', 'structlog', 'tomllib', 'socket', 'typing', 'json', 're', 'unicodedata'))\n"
        "print('LOADED', ','.join(mods), file=sys.stderr)\n"
        "sys.exit(rc)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    loaded = proc.stderr.split("LOADED ", 1)[1].strip().split(",")
    assert loaded == [
        "oaken",
        "oaken.errors",
        "oaken.fastpath",
        "oaken.paths",
        "oaken.protocol",
        "oaken.quick_search",
        "oaken.terminal",
    ]
    assert json.loads(proc.stdout)["hits"] and daemon == ["enron"]


# ---- the arguments: the fast reader agrees with argparse whenever it answers ---------------------

TOKENS = [
    "--limit",
    "--offset",
    "--thread",
    "--account",
    "--sort",
    "--format",
    "--color",
    "--json",
    "--explain",
    "--",
    "-",
    "-x",
    "--lim",
    "--limit=3",
    "--format=ids",
    "--format=",
    "--color=always",
    "3",
    "0",
    "-1",
    "007",
    "date",
    "json",
    "text",
    "jsonl",
    "always",
    "never",
    "word",
    "from:alex",
    "a b",
    "--no-daemon",
]


def argparse_reading(args: list[str]) -> dict[str, Any] | None:
    try:
        ns, extra = cli.build_parser("search").parse_known_args(["search", *args])
    except Exception:  # UsageError, or SystemExit for -h
        return None
    if extra or (ns.limit is not None and ns.limit < 0) or (ns.offset is not None and ns.offset < 0):
        return None
    return {
        k: getattr(ns, k)
        for k in ("query", "limit", "offset", "thread", "account", "sort", "format", "color", "json", "explain")
    }


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(TOKENS), max_size=7))
def test_the_reader_agrees_with_argparse(args: list[str]) -> None:
    fast = fastpath.parse_search(args)
    if fast is not None:
        assert argparse_reading(args) == fast


@pytest.mark.parametrize(
    "args",
    [
        ["enron", "meeting"],
        ["--limit", "5", "enron"],
        ["--format=json", "--sort", "date", "invoice", "from:alex"],
        ["enron", "--json"],
        ["--", "invoice", "-draft"],
        [],
        ["--account", "work", "--thread", "12", "--explain", "--color", "never", "x"],
    ],
)
def test_the_usual_forms_are_read_here(args: list[str]) -> None:
    fast = fastpath.parse_search(args)
    assert fast is not None and fast == argparse_reading(args)


# ---- the fast client's JSON: the C scanner and a small encoder, held to the json module -------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)
REQUEST_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES, st.booleans())
def test_the_fast_clients_reader_reads_what_json_reads(value: Any, ascii_only: bool) -> None:
    from oaken import quick_search

    line = (json.dumps(value, ensure_ascii=ascii_only) + "\n").encode()
    assert quick_search.loads(line) == json.loads(line)


@pytest.mark.parametrize("line", [b"", b"\n", b"{", b'{"a": 1} {', b"[1,]", b'"\\ud800', b"nope", b"\xff"])
def test_the_fast_clients_reader_refuses_what_json_refuses(line: bytes) -> None:
    from oaken import quick_search

    with pytest.raises(ValueError):
        json.loads(line)
    with pytest.raises(ValueError):
        quick_search.loads(line)


@settings(max_examples=300, deadline=None)
@given(REQUEST_VALUES)
def test_the_fast_clients_writer_writes_what_json_reads_back(value: Any) -> None:
    from oaken import quick_search

    text = quick_search.dumps(value)
    assert json.loads(text) == value and "\n" not in text
