"""`oaken mcp` driven by the MCP SDK's own stdio client, as an agent's client drives it: the
command runs as a subprocess on a home of real mail (tests/data/search and the petition copies,
keyword-indexed and embedded by the stand-in concept embedder), and every tool is called, with
good arguments and bad ones."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import shutil
import sys
import threading
from pathlib import Path
from typing import Any, AsyncIterator

import pytest

pytest.importorskip("mcp")

from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

from oaken import api  # noqa: E402
from oaken import config as config_mod  # noqa: E402
from oaken.index import embedding, indexer  # noqa: E402
from oaken.mcp_pack import fit_text, pack, size  # noqa: E402
from oaken.search import server  # noqa: E402
from oaken.store import Store  # noqa: E402
from tests.search_fixtures import DATA, config_for  # noqa: E402

COPIES = Path(__file__).parent / "data" / "copies"
OAKEN = Path(sys.executable).with_name("oaken")
PETITION = "donate proceeds stock"  # three copies of one form letter: one hit, copies 2


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Fourteen real messages in one account, both indexes built; its config names the concept model."""
    home = tmp_path_factory.mktemp("mcp")
    mail = home / "import"
    shutil.copytree(DATA / "INBOX", mail / "INBOX")
    shutil.copytree(COPIES, mail / "petitions", ignore=shutil.ignore_patterns("*.md"))
    cfg = config_for(home)
    api.import_mail([mail / "INBOX", mail / "petitions"], account="main", config=cfg)
    indexer.update(cfg)
    assert embedding.embed_pending(config_for(home, model="concept")).embedded > 0
    (home / "config.toml").write_text('[embedder]\nmodel = "concept"\n')
    return home


@pytest.fixture
def home(built: Path, tmp_path: Path) -> Path:
    """A copy this test may change."""
    return Path(shutil.copytree(built, tmp_path / "home", ignore=shutil.ignore_patterns("import")))


@contextlib.asynccontextmanager
async def connected(home: Path, *options: str) -> AsyncIterator[ClientSession]:
    command, args = (str(OAKEN), []) if OAKEN.exists() else (sys.executable, ["-m", "oaken.cli"])
    params = StdioServerParameters(
        command=command, args=[*args, "mcp", *options], env={"OAKEN_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def call(session: ClientSession, tool: str, args: dict[str, Any]) -> tuple[bool, Any]:
    """(is_error, the result's JSON, or the error's text); the JSON text is the structured content."""
    result = await session.call_tool(tool, args)
    text = result.content[0].text  # type: ignore[union-attr]
    if result.is_error:
        return True, text
    assert json.loads(text) == result.structured_content
    return False, result.structured_content


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def unread_id(home: Path) -> int:
    with Store(home / "raw.db", readonly=True) as store:
        metas = store.metas(store.all_message_ids())
    return next(m.id for m in metas.values() if m.unread)


def is_unread(home: Path, id: int) -> bool:
    with Store(home / "raw.db", readonly=True) as store:
        return store.meta(id).unread


# ---- every tool, through the real client -----------------------------------------------------------


def test_every_tool_answers_through_the_stdio_client(built: Path) -> None:
    async def session() -> None:
        async with connected(built) as s:
            listed = {t.name: t for t in (await s.list_tools()).tools}
            assert set(listed) == {"search", "show", "thread", "status"}  # no triage unless the config says so
            for tool in listed.values():
                assert tool.description and tool.input_schema["additionalProperties"] is False
                assert tool.annotations is not None and tool.annotations.destructive_hint is False
                for name, field in tool.input_schema["properties"].items():
                    assert field.get("description"), f"{tool.name}.{name} has no description"
            assert "from:" in listed["search"].description and "newer_than:" in listed["search"].description
            assert listed["search"].annotations.read_only_hint is True  # type: ignore[union-attr]

            error, found = await call(s, "search", {"query": PETITION, "limit": 5})
            assert not error and found["hits"] and found["omitted"] == 0
            petitions = [h for h in found["hits"] if h["subject"].startswith("Demand Ken Lay")]
            assert len(petitions) == 1 and petitions[0]["copies"] == 2  # three copies: one hit
            first = found["hits"][0]
            assert set(first) == {"id", "date", "from", "subject", "snippet", "found_by", "unread", "copies"}
            assert "keyword" in first["found_by"] and "[[" in first["snippet"]
            assert found["mode"] == "hybrid" and found["degraded"] is False and found["degraded_reason"] is None
            assert found["served_by"] == "in-process" and found["low_confidence"] is False

            error, filtered = await call(
                s, "search", {"query": "", "sender": "jimbrulte@aol.com", "after": "2001-01-01", "sort": "date"}
            )
            assert not error and [h["subject"] for h in filtered["hits"]] == ["California"]
            error, unread = await call(s, "search", {"query": "enron", "unread": True, "limit": 20})
            assert not error and unread["hits"] and all(h["unread"] for h in unread["hits"])

            error, shown = await call(s, "show", {"id": first["id"]})
            assert not error and shown["id"] == first["id"] and shown["headers"]["Subject"] == first["subject"]
            assert shown["text"] and shown["truncated"] is False and shown["next_text_offset"] is None

            error, thread = await call(s, "thread", {"id": first["id"]})
            assert not error and first["id"] in [h["id"] for h in thread["hits"]]

            error, status = await call(s, "status", {})
            assert not error and status["messages"] == 14 and status["accounts"]["main"]["messages"] == 14
            assert status["vectors"]["state"] == "ready" and status["daemon"] is False
            assert status["triage_tool"] is False

    run(session())


BAD = [
    ("search", {"query": "invoice", "sendr": "alex"}, 'search: unknown field "sendr" (did you mean "sender"?)', ""),
    ("search", {"query": "invoice", "limit": -1}, "search: limit: expected a whole number from 1 to 100, got -1", ""),
    ("search", {"query": "invoice", "max_bytes": 10**12}, "max_bytes: expected a whole number from 1024 to", ""),
    ("search", {"query": "invoice", "limit": "ten"}, 'limit: expected a whole number from 1 to 100, got "ten"', ""),
    ("search", {"query": 5}, "query: expected a string", ""),
    ("search", {"after": "2024-13-45"}, 'after: "2024-13-45" is not a day of the calendar', ""),
    ("search", {"before": "last week"}, 'before: expected a date YYYY-MM-DD, got "last week"', ""),
    ("search", {"categories": ["finances"]}, 'categories.0: expected one of "work"', ""),
    ("search", {"unread": "yes"}, 'unread: expected true or false, got "yes"', ""),
    ("show", {"id": 999_999}, "show: id: no message has id 999999", "search and thread hits"),
    ("show", {}, "show: id: required", ""),
    ("show", {"id": 1, "peek": True}, 'show: unknown field "peek"', "mark_read"),
    ("thread", {"id": 999_999}, "thread: id: no message has id 999999", ""),
    ("thread", {"id": -3}, "thread: id: expected a whole number from 1 to", ""),
    ("status", {"verbose": True}, 'status: unknown field "verbose"; status takes no fields', ""),
]


def test_bad_arguments_are_tool_errors_and_the_server_goes_on(built: Path) -> None:
    async def session() -> None:
        async with connected(built) as s:
            for tool, args, said, also in BAD:
                error, text = await call(s, tool, args)
                assert error, (tool, args)
                assert said in text and also in text, text
                ok, status = await call(s, "status", {})  # the server is still there, and answers
                assert not ok and status["messages"] == 14
            with pytest.raises(MCPError, match="no tool 'triage': it is off.*allow_triage = true"):
                await s.call_tool("triage", {"id": 1, "category": "finance"})
            with pytest.raises(MCPError, match="no tool 'send'"):
                await s.call_tool("send", {"to": "someone@example.com"})
            error, _ = await call(s, "search", {"query": "invoice"})
            assert not error

    run(session())


# ---- references packed within a byte budget ---------------------------------------------------------


def test_hits_are_packed_whole_within_max_bytes_and_the_rest_counted(built: Path) -> None:
    async def session() -> None:
        async with connected(built) as s:
            wide = {"query": "", "sort": "date", "limit": 14, "disposition": "anywhere"}
            _, everything = await call(s, "search", {**wide, "max_bytes": 262_144})
            assert len(everything["hits"]) == 14 and everything["omitted"] == 0 and everything["next_offset"] == 14
            result = await s.call_tool("search", {**wide, "max_bytes": 1024})
            text = result.content[0].text  # type: ignore[union-attr]
            packed = json.loads(text)
            assert len(text.encode()) <= 1024
            kept = len(packed["hits"])
            assert 0 < kept < 14 and packed["omitted"] == 14 - kept and packed["next_offset"] == kept
            assert packed["hits"] == everything["hits"][:kept]  # whole hits, dropped from the end
            _, rest = await call(s, "search", {**wide, "offset": packed["next_offset"]})
            assert rest["hits"][0] == everything["hits"][kept]

    run(session())


def test_pack_counts_the_json_text_and_never_cuts_a_hit() -> None:
    hit = {
        "id": 1,
        "date": "2001-05-31T22:04:34+00:00",
        "sender": "Zoë <z@example.com>",
        "subject": "Réunion",
        "snippet": "é" * 200,
        "unread": True,
        "why": [{"retriever": "vector"}, {"retriever": "keyword"}],
        "copies": [7, 8],
    }
    response = {"hits": [dict(hit, id=i) for i in range(1, 21)], "mode": "hybrid", "warnings": ["w" * 50] * 3}
    packed = pack(response, limit=20, offset=40, max_bytes=2048, served_by="daemon")
    assert size(packed) <= 2048 and packed["omitted"] == 20 - len(packed["hits"]) > 0
    assert packed["next_offset"] == 40 + len(packed["hits"])
    assert packed["hits"][0]["found_by"] == ["keyword", "vector"] and packed["hits"][0]["copies"] == 2
    assert all(h["snippet"] == "é" * 200 for h in packed["hits"])
    tight = pack(
        {**response, "warnings": ["a long warning " * 40] * 10}, limit=20, offset=0, max_bytes=1024, served_by="x"
    )
    assert size(tight) <= 1024 and tight["warnings"][-1].endswith("more warnings left out")
    last_page = pack({"hits": response["hits"][:3]}, limit=10, offset=0, max_bytes=8192, served_by="x")
    assert last_page["next_offset"] is None and last_page["omitted"] == 0


def test_a_long_body_is_cut_at_a_line_end_and_read_on_from_next_text_offset() -> None:
    text = "".join(f"line {i}: {'word ' * 12}\n" for i in range(200))
    base = {"id": 3, "headers": {"Subject": "long"}, "unread": False}
    first = fit_text(base, text, text_offset=0, max_bytes=2000)
    assert size(first) <= 2000 and first["truncated"] and first["text"].endswith("\n")
    second = fit_text(base, text, text_offset=first["next_text_offset"], max_bytes=262_144)
    assert first["text"] + second["text"] == text and second["truncated"] is False
    assert second["next_text_offset"] is None and second["text_chars"] == len(text)


# ---- read-only unless asked -------------------------------------------------------------------------


def test_show_peeks_and_marks_read_only_when_asked(home: Path) -> None:
    id = unread_id(home)

    async def session() -> None:
        async with connected(home) as s:
            error, peeked = await call(s, "show", {"id": id})
            assert not error and peeked["unread"] is True
            assert is_unread(home, id)  # the agent read it; the user still sees it unread
            error, _ = await call(s, "search", {"query": "is:unread"})
            assert is_unread(home, id)
            error, opened = await call(s, "show", {"id": id, "mark_read": True})
            assert not error and opened["unread"] is False

    run(session())
    assert not is_unread(home, id)


def test_triage_is_a_tool_only_when_the_config_allows_it(home: Path) -> None:
    (home / "config.toml").write_text('[embedder]\nmodel = "concept"\n\n[mcp]\nallow_triage = true\n')
    id = unread_id(home)

    async def session() -> None:
        async with connected(home) as s:
            listed = {t.name: t for t in (await s.list_tools()).tools}
            assert set(listed) == {"search", "show", "thread", "status", "triage"}
            assert listed["triage"].annotations.read_only_hint is False  # type: ignore[union-attr]
            error, done = await call(s, "triage", {"id": id, "category": "finance", "priority": 2})
            assert not error and done == {"id": id, "category": "finance", "priority": 2, "disposition": "inbox"}
            error, text = await call(s, "triage", {"id": id, "category": "money"})
            assert error and 'category: expected one of "work"' in text
            error, text = await call(s, "triage", {"id": id})
            assert error and "give at least one of category, priority, disposition" in text
            error, found = await call(s, "search", {"query": "", "categories": ["finance"]})
            assert not error and [h["id"] for h in found["hits"]] == [id]

    run(session())
    with Store(home / "raw.db", readonly=True) as store:
        assert store.meta(id).triage.category == "finance" and store.meta(id).unread  # triage reads nothing


def test_the_example_config_shows_mcp_and_a_bad_value_is_refused(tmp_path: Path) -> None:
    example = config_mod.load(Path(__file__).parent.parent / "config.example.toml")
    assert example.mcp.allow_triage is False and config_mod.Config().mcp.allow_triage is False
    bad = tmp_path / "config.toml"
    bad.write_text('[mcp]\nallow_triage = "yes"\n')
    with pytest.raises(config_mod.ConfigError, match=r"\[mcp\] allow_triage: expected true or false"):
        config_mod.load(bad)


# ---- the warm daemon -----------------------------------------------------------------------------------


def test_searches_are_answered_by_the_daemon_when_one_runs(home: Path) -> None:
    cfg = dataclasses.replace(config_for(home, model="concept"))
    stop = threading.Event()
    srv = server.SearchServer(cfg, stop).start()
    srv.warm()

    async def session(*options: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        async with connected(home, *options) as s:
            _, found = await call(s, "search", {"query": PETITION, "limit": 5})
            _, thread = await call(s, "thread", {"id": found["hits"][0]["id"]})
            _, status = await call(s, "status", {})
            return found, thread, status

    try:
        by_daemon, thread, status = run(session())
        in_process, _, alone = run(session("--no-daemon"))
    finally:
        stop.set()
        srv.thread.join(5)
    assert by_daemon["served_by"] == "daemon" and thread["served_by"] == "daemon" and status["daemon"] is True
    assert in_process["served_by"] == "in-process" and alone["daemon"] is False
    assert by_daemon["hits"] == in_process["hits"]  # the same answer either way


def test_a_damaged_raw_db_is_a_tool_error_naming_it(home: Path) -> None:
    data = bytearray((home / "raw.db").read_bytes())
    page = int.from_bytes(data[16:18], "big")
    data[page:] = b"\xff" * (len(data) - page)  # every page after the first torn: the mail does not read
    (home / "raw.db").write_bytes(bytes(data))

    async def session() -> None:
        async with connected(home) as s:
            for tool, args in (("show", {"id": 1}), ("status", {}), ("thread", {"id": 1})):
                error, text = await call(s, tool, args)
                assert error and text.startswith(f"{tool}: ") and str(home / "raw.db") in text, text
                assert "\n" not in text and "Traceback" not in text
            error, found = await call(s, "search", {"query": "invoice"})  # answered or refused, never a crash
            assert error or found["hits"] is not None

    run(session())


def test_without_the_sdk_it_says_which_extra_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from oaken.cli import main

    monkeypatch.setitem(sys.modules, "mcp", None)  # as if the mcp extra were not installed
    assert main(["mcp"]) == 1
    assert capsys.readouterr().err.strip() == "oaken: `oaken mcp` needs the MCP SDK: pip install 'oaken[mcp]'"
