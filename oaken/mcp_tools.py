"""What each `oaken mcp` tool does, on an oaken.Mailbox: plain data in, plain data out.

The SDK glue (oaken.mcp_server) only checks arguments and wraps what these return. Every tool goes
through the same Mailbox the command line uses, so a search is answered by the warm daemon when
one runs and in this process otherwise. Read-only unless the config turns triage on, and even
then nothing here sends, deletes or moves mail: show marks read only when asked (mark_read),
triage writes Oaken's own records.
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING, Any, Callable

from oaken.errors import NotFound, OakenError
from oaken.mcp_args import ToolArgumentError
from oaken.mcp_pack import fit_text, pack
from oaken.mcp_schemas import DEFAULT_LIMIT, DEFAULT_MAX_BYTES

if TYPE_CHECKING:
    from oaken.mailbox import Mailbox
    from oaken.store import MessageMeta

# search fields passed to Mailbox.search as they are (the engine's keyword arguments)
FILTERS = ("sender", "after", "before", "labels", "disposition", "unread", "categories", "min_priority", "account")


class ToolError(OakenError):
    """A call whose arguments were sound but that cannot be answered (a message that does not exist)."""


class Tools:
    """The tools of one server, on one mailbox; `allow_triage` as [mcp] allow_triage says."""

    def __init__(self, box: Mailbox, *, allow_triage: bool = False):
        self.box = box
        self.allow_triage = allow_triage
        self._calls: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "search": self.search,
            "show": self.show,
            "thread": self.thread,
            "status": self.status,
        }
        if allow_triage:
            self._calls["triage"] = self.triage

    def call(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        """Run tool `name` on arguments already checked against its schema (oaken.mcp_args)."""
        return self._calls[name](args)

    # ---- the tools --------------------------------------------------------------------------------

    def search(self, args: dict[str, Any]) -> dict[str, Any]:
        limit, offset = args.get("limit", DEFAULT_LIMIT), args.get("offset", 0)
        filters = {k: args[k] for k in FILTERS if k in args}
        return self._hits(
            args.get("query", ""), filters, limit, offset, args.get("sort", "relevance"), args.get("max_bytes")
        )

    def thread(self, args: dict[str, Any]) -> dict[str, Any]:
        meta = self._meta(args["id"])
        filters = {"thread": meta.thread, "account": meta.account}  # the message's own account, whichever
        return self._hits("", filters, args.get("limit", 50), args.get("offset", 0), "date", args.get("max_bytes"))

    def show(self, args: dict[str, Any]) -> dict[str, Any]:
        id = args["id"]
        self._meta(id)  # an unknown id said as the agent's fault, in its words
        message = self.box.show(id, peek=not args.get("mark_read", False))
        result = {
            "id": message.id,
            "account": message.account,
            "headers": dict(message.headers),
            "folders": list(message.folders),
            "labels": list(message.labels),
            "unread": message.unread,
        }
        max_bytes = args.get("max_bytes", DEFAULT_MAX_BYTES)
        return fit_text(result, message.text, text_offset=args.get("text_offset", 0), max_bytes=max_bytes)

    def status(self, args: dict[str, Any]) -> dict[str, Any]:
        data = self.box.status()
        index = data.get("index", {})
        vectors = data.get("vectors", {})
        return {
            "messages": data.get("messages", 0),
            "accounts": {
                name: {
                    "messages": account["messages"],
                    "unread": account["unread"],
                    "folders": {folder: f["messages"] for folder, f in account["folders"].items()},
                }
                for name, account in data.get("accounts", {}).items()
            },
            "keyword_index": _some(index, ("state", "messages", "chunks", "problem")),
            "vectors": _some(vectors, ("model", "state", "coverage", "problem")),
            "daemon": self.daemon_listening(),
            "triage_tool": self.allow_triage,
        }

    def triage(self, args: dict[str, Any]) -> dict[str, Any]:
        given = {k: args[k] for k in ("category", "priority", "disposition") if k in args}
        if not given:
            raise ToolArgumentError("triage: give at least one of category, priority, disposition")
        self._meta(args["id"])
        done = self.box.triage(args["id"], **given)
        return {"id": args["id"], "category": done.category, "priority": done.priority, "disposition": done.disposition}

    # ---- helpers ----------------------------------------------------------------------------------

    def _hits(
        self, query: str, filters: dict[str, Any], limit: int, offset: int, sort: str, max_bytes: int | None
    ) -> dict[str, Any]:
        warned: list[str] = []  # why the daemon did not answer, when this process searched instead
        data, by_daemon = self.box.search_json(
            query, warn=warned.append, limit=limit, offset=offset, sort=sort, **filters
        )
        data["warnings"] = [*warned, *(data.get("warnings") or ())]
        return pack(
            data,
            limit=limit,
            offset=offset,
            max_bytes=max_bytes or DEFAULT_MAX_BYTES,
            served_by="daemon" if by_daemon else "in-process",
        )

    def _meta(self, id: int) -> MessageMeta:
        """The stored message `id`; ToolError naming the id (and where ids come from) when there is none."""
        from oaken.store import no_mail, open_store

        data_dir = self.box.data_dir
        if not (data_dir / "raw.db").exists():
            raise ToolError(f"id {id}: {no_mail(data_dir / 'raw.db')}")
        try:
            with open_store(data_dir, create=False) as store:
                return store.meta(id)
        except NotFound:
            raise ToolError(f"id: no message has id {id}; ids are those of search and thread hits") from None

    def daemon_listening(self) -> bool:
        """Whether a search daemon accepts connections on this data directory's socket."""
        from oaken.search.client import socket_path

        if not self.box.daemon:
            return False
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(1.0)
            try:
                sock.connect(str(socket_path(self.box.config)))
            except OSError:
                return False
        return True


def _some(values: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: values[k] for k in keys if k in values}
