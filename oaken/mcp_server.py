"""`oaken mcp`: Oaken's search served to AI agents over the Model Context Protocol, on stdio.

Built on the official SDK's low-level server, so each tool's JSON schema is exactly the one
oaken.mcp_schemas writes (with its descriptions) and every argument is checked against it before a
tool runs. A fault of the agent's (an unknown field, a negative limit, an id that does not exist)
comes back as a tool error the agent reads and acts on, and the server goes on serving. The tools'
work (oaken.mcp_tools) runs in worker threads: a slow search does not stop the protocol.
"""

from __future__ import annotations

import sys
import threading
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from oaken import __version__, log
from oaken.errors import OakenError
from oaken.mcp_args import Checker
from oaken.mcp_pack import dumps
from oaken.mcp_schemas import ToolSpec, tools
from oaken.mcp_tools import Tools

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

    from oaken.mailbox import Mailbox

WORKERS = 4  # tool calls at once, as the daemon's search workers; more wait their turn

INSTRUCTIONS = (
    "Oaken searches the user's own mail, kept on this machine, by words and by meaning. Start with "
    "search (its description has the query language); each hit is a reference with an id. Cite hits "
    "by id, date, sender and subject; read one with show (it stays unread unless mark_read is true) "
    "and its conversation with thread. When a response says low_confidence, say the hits are guesses; "
    "when it says degraded, only keyword search answered. status says what the mailbox holds."
)


def build(box: Mailbox, *, allow_triage: bool) -> Server[Any]:
    """The MCP server for one mailbox: its tools listed from their specs, each call checked and run."""
    specs = {spec.name: spec for spec in tools(box.config.triage.categories, allow_triage=allow_triage)}
    checks = {name: Checker(spec) for name, spec in specs.items()}
    work = Tools(box, allow_triage=allow_triage)
    limiter = anyio.CapacityLimiter(WORKERS)
    listed = types.ListToolsResult(tools=[_tool(spec) for spec in specs.values()])

    async def list_tools(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None) -> Any:
        return listed

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> Any:
        spec = specs.get(params.name)
        if spec is None:
            raise MCPError(code=types.INVALID_PARAMS, message=_unknown_tool(params.name, specs))
        try:
            args = checks[spec.name](params.arguments)
            result = await anyio.to_thread.run_sync(work.call, spec.name, args, limiter=limiter)
        except OakenError as e:  # the agent's arguments, or what they named, at fault: said to it
            said = str(e)
            return _error(said if said.startswith(f"{spec.name}: ") else f"{spec.name}: {said}")
        except Exception as e:  # noqa: BLE001 - the agent is told in one line; the server goes on
            damaged = _sqlite_failure(e)
            if damaged is not None:  # a damaged or unreadable raw.db: its path and the fix, as the CLI says it
                return _error(f"{spec.name}: {damaged}")
            log.get("oaken.mcp").exception("mcp.internal_error", tool=spec.name)  # a bug: logged whole
            return _error(f"{spec.name}: internal error ({type(e).__name__}: {e}); the server's log has the details")
        return types.CallToolResult(content=[types.TextContent(text=dumps(result))], structured_content=result)

    return Server(
        "oaken",
        version=__version__,
        title="Oaken mail search",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def _tool(spec: ToolSpec) -> types.Tool:
    return types.Tool(
        name=spec.name,
        title=spec.title,
        description=spec.description,
        input_schema=spec.input_schema,
        output_schema=spec.output_schema,
        annotations=types.ToolAnnotations(
            title=spec.title,
            read_only_hint=spec.read_only,
            destructive_hint=False,  # nothing here sends, deletes or moves mail
            idempotent_hint=True,
            open_world_hint=False,  # the user's own mail on this machine
        ),
    )


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)


def _sqlite_failure(e: Exception) -> str | None:
    """One line for SQLite failing under a tool (raw.db named when it was raw.db's); None otherwise."""
    if type(e).__module__ != "apsw":
        return None
    from oaken.store import store_error

    error = store_error(e)
    return str(error) if error is not None else f"SQLite: {type(e).__name__}: {e}"


def _unknown_tool(name: str, specs: dict[str, ToolSpec]) -> str:
    known = ", ".join(specs)
    if name == "triage":
        return f"no tool 'triage': it is off; the user turns it on with [mcp] allow_triage = true (tools: {known})"
    return f"no tool {name!r}; the tools are {known}"


def _warm(box: Mailbox) -> None:
    """Load the embedder and open the indexes in the background when no daemon will answer, so the
    agent's first search does not pay for it all (the daemon's own warm-up does the same)."""

    def run() -> None:
        from oaken.search import engine

        try:
            engine.search("warm up", limit=1, config=box.config)
        except Exception:  # noqa: BLE001 - a failing warm-up shows again, as degraded, on real searches
            pass

    threading.Thread(target=run, name="oaken-mcp-warm", daemon=True).start()


def serve(box: Mailbox) -> int:
    """Serve `box` over stdin and stdout until the client closes stdin; 0 then."""
    allow_triage = box.config.mcp.allow_triage
    server = build(box, allow_triage=allow_triage)
    if not Tools(box).daemon_listening() and box.loads_model():
        _warm(box)
    log.get("oaken.mcp").info("mcp.serving", data_dir=str(box.data_dir), daemon=box.daemon, triage=allow_triage)

    if sys.stdin.isatty():  # a person, not a client: say what this is rather than wait in silence
        print(
            "oaken mcp: an MCP server on stdin/stdout, for an agent's MCP client to start "
            "(docs/mcp.md says how to register it); Ctrl-C stops it",
            file=sys.stderr,
        )

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)
    return 0
