"""The daemon's search socket: started beside the sync, with the embedder warmed in the background."""

from __future__ import annotations

import threading
from typing import Any

from oaken import config as config_mod
from oaken import log
from oaken.config import Config


def start_search_server(
    config: Config,
    stop_event: threading.Event,
    *,
    warm_after: threading.Event | None = None,
    threads: list[threading.Thread] | None = None,
) -> Any:
    """Answer `oaken search` on the data directory's socket until `stop_event` is set, with the
    embedder loaded in the background (a search before that waits for it, outside its timeout).
    `warm_after`: the load waits for this event (the daemon sets it once its first login is
    done): loading the model beside the first sync starved it of the CPU on two cores.
    A socket that cannot be opened is logged: sync goes on, searches run in their own process.
    `threads` gets the warming thread, for the daemon to wait for before it exits: a model half
    loaded when the interpreter shuts down aborted the process (a C++ runtime's threads torn
    down under it: "terminate called without an active exception", exit -6 on SIGTERM)."""
    from oaken.search.server import SearchServer

    try:
        server = SearchServer(config, stop_event).start()
    except OSError as e:
        log.get("oaken.daemon").error(
            "search socket not started; `oaken search` will search in its own process", error=f"{type(e).__name__}: {e}"
        )
        return None

    def warm() -> None:
        if warm_after is not None:
            while not warm_after.wait(0.5):
                if stop_event.is_set():
                    return
        if config.embedder.model != "none":  # loaded even before vectors exist: the first search is warm
            from oaken.search import vector_side

            try:
                vector_side.retriever(config, config_mod.resolve_data_dir(config)).load()
            except Exception as e:  # noqa: BLE001 - searches report it as no_embedder
                log.get("oaken.daemon").warning("embedder not loaded", error=f"{type(e).__name__}: {e}")
        server.warm()

    warming = threading.Thread(target=warm, name="oaken-search-warm", daemon=True)
    warming.start()
    if threads is not None:
        threads.append(warming)
    log.get("oaken.daemon").info("search socket listening", path=str(server.path))
    return server
