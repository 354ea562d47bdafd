"""`oaken.Mailbox`: the session an email client (or a script) holds on one mail home.

It does what the `oaken` command does, in the same way, so the command can be a thin shell over
it: a search goes to the running daemon first (warm model, same answer) and falls back to this
process where that is safe, saying why; a dropped IMAP link is retried where the sync stopped;
imported and synced mail is keyword-indexed at once. Results are typed (oaken.search.types,
oaken.importer, ...), and `search_json` gives the JSON form without building them.

    import oaken
    box = oaken.Mailbox()                    # the user's config; Mailbox(home="~/mail") for another
    box.import_mail(["~/Maildir"])
    for hit in box.search("invoice", sender="alex", unread=True).hits:
        print(hit.id, hit.subject)
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing on the cold search path
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any, Callable, Sequence

    from oaken.config import Config
    from oaken.importer import ImportReport
    from oaken.index.indexer import IndexReport
    from oaken.reader import OpenedMessage
    from oaken.search.types import SearchResponse
    from oaken.store import Triage
    from oaken.sync.runner import SyncReport

SYNC_ATTEMPTS = 3  # a dropped link is resumed where it stopped, twice, before the error stands


class Indexed:
    """What an import or a sync stored (`stored`: an ImportReport or SyncReport), and what the
    index pass after it did (`index`: an IndexReport; None when nothing changed or indexing was
    not asked for); `index_error` says why the mail, stored, is not yet searchable (a full disk,
    a locked index). A plain class: the command's cold search path imports no dataclasses."""

    __slots__ = ("stored", "index", "index_error")

    def __init__(self, stored: Any, index: Any = None, index_error: str | None = None):
        self.stored = stored
        self.index = index
        self.index_error = index_error

    def __repr__(self) -> str:
        return f"Indexed(stored={self.stored!r}, index={self.index!r}, index_error={self.index_error!r})"


class Mailbox:
    """One mail home: its config, raw.db, indexes and daemon. `home` is a data directory (as
    $OAKEN_HOME); `config` a Config or the path of a config file; neither: the user's config.
    `daemon=False` never asks a running daemon (as `oaken search --no-daemon`). `autostart=True`
    does what `oaken search` does when no daemon answers and vectors are present: starts the
    background search server (oaken.search.background) and answers that search from keywords,
    degraded `vector_starting`; by default a search here loads the model once and keeps it, as a
    long-lived process should."""

    def __init__(
        self,
        home: str | Path | None = None,
        *,
        config: Config | str | Path | None = None,
        daemon: bool = True,
        autostart: bool = False,
    ):
        self._given = config
        self._home: Path | None = None
        if home is not None:  # pathlib only then: a search a daemon answers needs none (~9 ms)
            from pathlib import Path

            self._home = Path(home).expanduser()
        self._config: Config | None = None
        self.daemon = daemon
        self.autostart = autostart

    # ---- configuration ---------------------------------------------------------------------------

    @property
    def config(self) -> Config:
        """The typed config, read on first use (a search a daemon answers never needs it)."""
        if self._config is None:
            import dataclasses

            from oaken import config as config_mod

            given = self._given
            cfg = given if isinstance(given, config_mod.Config) else config_mod.load(given)
            if self._home is not None:
                cfg = dataclasses.replace(cfg, paths=dataclasses.replace(cfg.paths, data_dir=str(self._home)))
            self._config = cfg
        return self._config

    @property
    def data_dir(self) -> Path:
        from oaken import config as config_mod

        return config_mod.resolve_data_dir(self.config)

    # ---- search ----------------------------------------------------------------------------------

    def search(self, query: str = "", *, warn: Callable[[str], None] | None = None, **filters: Any) -> SearchResponse:
        """oaken.search's keyword arguments (limit, offset, account, thread, sender, after, before,
        labels, disposition, unread, categories, min_priority, sort, explain, retrievers). A running
        daemon answers when it can; `warn` hears why it did not when this process searched instead
        (default: a line on stderr)."""
        answer, unanswered = self._ask_daemon(query, filters, warn)
        if answer is not None:
            from oaken.search.responses import response_from_dict

            return response_from_dict(answer)
        return self._search_here(query, filters, warn, start_server=unanswered)

    def search_json(
        self, query: str = "", *, warn: Callable[[str], None] | None = None, **filters: Any
    ) -> tuple[dict[str, Any], bool]:
        """(the response as JSON-ready data, whether a daemon answered): the daemon's answer as it
        came, without building typed hits (the command's cold path), else this process's search."""
        answer, unanswered = self._ask_daemon(query, filters, warn)
        if answer is not None:
            return answer, True
        import json

        response = self._search_here(query, filters, warn, start_server=unanswered)
        return json.loads(_to_json(response)), False

    def _search_here(
        self, query: str, filters: dict[str, Any], warn: Callable[[str], None] | None, *, start_server: bool
    ) -> SearchResponse:
        """This process's search: from keywords alone while a background server starts (autostart),
        else both retrievers, loading the model here."""
        from oaken.search import engine

        if start_server and self.autostart:
            meaning = self._uses_meaning(query)
            outcome = self._start_server(warn, say=meaning)
            if outcome is not None and meaning:
                import dataclasses

                from oaken.search import background

                # keyword mode for this one answer: nor does it count the vectors' coverage (index.db's
                # chunks, 10-30 ms); vector_coverage is null, the server's answers carry it
                cfg = self.config
                keywords = dataclasses.replace(cfg, embedder=dataclasses.replace(cfg.embedder, model="none"))
                response = engine.search(query, config=keywords, **filters)
                return background.keyword_answer(response, outcome, cfg.search.server_idle_minutes)
        return engine.search(query, config=self.config, **filters)

    def _uses_meaning(self, query: str) -> bool:
        """Whether the query has free text for the vector side (a listing such as `is:unread` has
        none: its keyword answer is whole, not degraded)."""
        from oaken.search import matching
        from oaken.search import query as query_mod

        parsed = query_mod.parse(query, categories=self.config.triage.categories)
        return matching.plan(parsed, self.config.search.keyword_min_match) is not None

    def _start_server(self, warn: Callable[[str], None] | None, *, say: bool) -> Any:
        """The background server's Outcome when one starts (or is starting) for this search, else
        None: autostart is off (`[search] server_idle_minutes = 0`), this search would load no model
        anyway, the daemon holds the data directory but does not answer yet, or a server failed
        (`say`: told to `warn`, for a search that now loads the model here)."""
        cfg = self.config
        if cfg.search.server_idle_minutes <= 0 or not self.loads_model():
            return None
        from oaken.search import background

        outcome = background.ensure(cfg, self.data_dir)
        if outcome.kind in ("started", "starting"):
            return outcome
        if outcome.kind == "daemon":
            why = f"the daemon (pid {outcome.pid}) does not answer searches yet, so this process loads the model itself"
        else:
            log_file = self.data_dir / background.LOG_NAME
            why = (
                f"the background search server failed to start ({outcome.detail}; see {log_file}), "
                "so this process loads the model itself"
            )
        if say:
            _say(warn, why)
        return None

    def loads_model(self) -> bool:
        """Whether a search in this process would load the embedding model (the daemon would not)."""
        import os

        from oaken import extras, paths

        model = self.config.embedder.model
        if model == "none" or extras.vectors_missing(model):
            return False
        return os.path.isdir(paths.vectors_dir(self.data_dir))

    def _ask_daemon(
        self, query: str, filters: dict[str, Any], warn: Callable[[str], None] | None
    ) -> tuple[dict[str, Any] | None, bool]:
        """(the daemon's answer or None, whether no daemon answered at all: no socket, or no one on
        it; not a daemon that failed, nor a search the socket cannot carry)."""
        if not self.daemon:
            return None, False
        from oaken.search import client

        if any(k not in client.PARAMS for k in filters):
            return None, False  # e.g. retrievers=: the daemon's protocol does not carry it
        params = {k: _wire(v) for k, v in filters.items()}
        # with no config or home given, the daemon is found without reading the config file
        config = self.config if (self._given is not None or self._home is not None) else None
        said: list[str] = []

        def heard(why: str) -> None:
            said.append(why)
            _say(warn, why)

        answer = client.ask_for(config, query, params, warn=heard)
        return answer, answer is None and not said

    # ---- messages ----------------------------------------------------------------------------------

    def show(self, id: int, *, peek: bool = False) -> OpenedMessage:
        """Message `id` with its headers and text; marked read (every copy, here and, at the next
        sync, on the server) unless `peek`."""
        from oaken import reader

        return reader.open_message(id, peek=peek, config=self.config)

    def thread(self, id: int, *, limit: int = 1000) -> SearchResponse:
        """The messages of `id`'s thread, oldest first (the newest `limit` of a longer one), in the
        message's own account: a search covers one account, and the default one may be another."""
        import dataclasses

        from oaken.store import open_store

        with open_store(self.data_dir, create=False) as store:
            meta = store.meta(id)  # NotFound names the id
        newest_first = self.search("", thread=meta.thread, account=meta.account, sort="date", limit=limit)
        return dataclasses.replace(newest_first, hits=tuple(reversed(newest_first.hits)))

    def triage(
        self, id: int, *, category: str | None = None, priority: int | None = None, disposition: str | None = None
    ) -> Triage:
        from oaken import api

        return api.set_triage(id, category=category, priority=priority, disposition=disposition, config=self.config)

    def status(self) -> dict[str, Any]:
        """api.status, and who answers searches ("search_server": oaken.search.background.describe)."""
        from oaken import api
        from oaken.search import background

        out = api.status(config=self.config)
        out["search_server"] = background.describe(self.data_dir)
        return out

    # ---- bringing mail in ------------------------------------------------------------------------

    def import_mail(
        self,
        paths: Sequence[str | Path],
        *,
        account: str | None = None,
        index: bool = True,
        progress: Callable[[int], None] | None = None,
        index_progress: Callable[[int], None] | None = None,
    ) -> Indexed:
        """Import Maildir folders, mbox files or folders of message files; keyword-index what is new."""
        from oaken import api

        report: ImportReport = api.import_mail(paths, account=account, config=self.config, progress=progress)
        if not index or not (report.added or report.new_locations):
            return Indexed(report)
        return self._keyword_index(report, index_progress)

    def sync(
        self,
        account: str | None = None,
        *,
        index: bool = True,
        progress: Any = None,
        retried: Callable[[str], None] | None = None,
    ) -> Indexed:
        """One pass over an account's folders (`oaken sync --once`): a dropped link is resumed
        where it stopped (SYNC_ATTEMPTS in all; `retried` hears each); what changed is indexed."""
        from oaken.sync import runner

        for attempt in range(SYNC_ATTEMPTS):
            try:
                report: SyncReport = runner.sync(self.config, account, progress)
                break
            except runner.ConnectionLost as e:
                if attempt == SYNC_ATTEMPTS - 1:
                    raise
                if retried is not None:
                    retried(f"{e}; retrying")
                import time

                time.sleep(1 + attempt)
        if not index or not report.changed:
            return Indexed(report)
        return self._keyword_index(report, None, vectors=True)

    def reindex(
        self,
        *,
        rebuild: bool = False,
        keyword_only: bool = False,
        progress: Callable[[int], None] | None = None,
        vector_progress: Callable[[int], None] | None = None,
    ) -> IndexReport:
        """Bring both indexes up to date with raw.db; `rebuild` builds them again from it."""
        from oaken.index import indexer

        return indexer.reindex(
            self.config, rebuild=rebuild, keyword_only=keyword_only, progress=progress, vector_progress=vector_progress
        )

    def _keyword_index(self, stored: Any, progress: Callable[[int], None] | None, *, vectors: bool = False) -> Indexed:
        from oaken.errors import IndexUnavailable

        try:
            from oaken.index import indexer
        except ImportError:  # pragma: no cover - the index package is part of the core
            return Indexed(stored)
        try:
            return Indexed(stored, indexer.update(self.config, keyword_only=not vectors, progress=progress))
        except IndexUnavailable as e:  # a full disk, a locked index: the mail is stored all the same
            return Indexed(stored, index_error=str(e))


def _say(warn: Callable[[str], None] | None, why: str) -> None:
    """A warning to `warn`, else a line on stderr (as oaken.search.client says its own)."""
    if warn is not None:
        warn(why)
    else:
        import sys

        print(f"oaken: warning: {why}", file=sys.stderr)


def _wire(value: Any) -> Any:
    """A filter as the daemon's JSON carries it (dates as ISO text, sequences as lists)."""
    if hasattr(value, "isoformat"):  # a date or datetime, without importing datetime to ask
        return value.isoformat()
    if isinstance(value, (tuple, set, frozenset)):
        return list(value)
    return value


def _to_json(obj: Any) -> str:
    import dataclasses
    import json
    import os

    def default(o: Any) -> Any:
        if dataclasses.is_dataclass(o):
            return dataclasses.asdict(o)  # type: ignore[arg-type]
        if isinstance(o, (set, frozenset, tuple)):
            return list(o)
        if isinstance(o, os.PathLike):
            return os.fspath(o)
        raise TypeError(f"not JSON: {type(o).__name__}")

    return json.dumps(obj, default=default, ensure_ascii=False)
