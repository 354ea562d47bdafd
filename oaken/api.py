"""The library API: what `oaken` commands call, and what an email client calls directly.

Each function takes an optional Config (default: the user's config file) and returns plain
dataclasses or dicts. Heavy parts (sync, indexes, search) are imported only when used.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

from oaken import config as config_mod
from oaken.config import Config
from oaken.importer import ImportReport, import_paths
from oaken.store import Store, Triage, open_store


def load_config(path: str | Path | None = None) -> Config:
    return config_mod.load(path)


def _cfg(config: Config | None) -> Config:
    return config if config is not None else config_mod.load()


def open_raw(config: Config) -> Store:
    return open_store(config_mod.ensure_data_dir(config))


def import_mail(
    paths: Sequence[str | Path],
    *,
    account: str | None = None,
    config: Config | None = None,
    progress: Callable[[int], None] | None = None,
) -> ImportReport:
    """Import Maildir folders, mbox files or folders of message files into raw.db."""
    cfg = _cfg(config)
    name = cfg.account(account) or "local"
    with open_raw(cfg) as store:
        return import_paths(store, name, [Path(p).expanduser() for p in paths], progress=progress)


def import_count(paths: Sequence[str | Path], *, account: str | None = None, config: Config | None = None) -> int:
    """How many messages `import_mail` will see (its progress bar's total): the Maildir folders
    an earlier import listed whole and that are unchanged since are counted from raw.db's record,
    not listed (a million files: 7 s of listing before a 0.1 s import)."""
    from oaken import importer

    cfg = _cfg(config)
    name = cfg.account(account) or "local"
    given = [Path(p).expanduser() for p in paths]
    listed: dict[str, tuple[int, int]] = {}
    raw = config_mod.resolve_data_dir(cfg) / "raw.db"
    if raw.exists():
        with open_store(raw.parent, readonly=True) as store:
            if name in store.account_names():
                listed = store.import_dirs(store.account_id(name), importer.stored_under(given))
    return importer.count(given, listed)


def set_triage(
    message: int,
    *,
    category: str | None = None,
    priority: int | None = None,
    disposition: str | None = None,
    config: Config | None = None,
) -> Triage:
    """Write a message's triage (an external classifier calls this too). Only raw.db is written:
    the next search sees it at once (raw.db decides disposition, category and priority; what the
    indexes copied is trusted only for messages unchanged since), and a running daemon brings
    index.db and vectors/ up to it within about a second."""
    cfg = _cfg(config)
    with open_raw(cfg) as store, store.transaction():
        return store.set_triage(
            message, categories=cfg.triage.categories, category=category, priority=priority, disposition=disposition
        )


def status(*, config: Config | None = None) -> dict[str, Any]:
    """Counts per account and folder, messages stored with parse problems, sizes, and what the indexes hold."""
    cfg = _cfg(config)
    data_dir = config_mod.resolve_data_dir(cfg)
    if not (data_dir / "raw.db").exists():
        out: dict[str, Any] = {"messages": 0, "accounts": {}, "data_dir": str(data_dir)}
    else:
        with open_raw(cfg) as store:
            out = store.status()
            out["problem_messages"] = [{"id": i, "subject": s, "problem": p} for i, s, p in store.problem_messages()]
        out["data_dir"] = str(data_dir)
    out["index"] = _index_status(cfg)
    out["vectors"] = _vector_status(cfg)
    return out


def _index_status(cfg: Config) -> dict[str, Any]:
    try:
        from oaken.index import keyword
    except ImportError:
        return {"state": "not built"}
    data_dir = config_mod.resolve_data_dir(cfg)
    out = keyword.status(data_dir)
    if cfg.index.keyword_engine == "tantivy" and out.get("state") == "ok":  # what ranks word searches
        from oaken import extras
        from oaken.index.keyword.text import schema
        from oaken.index.keyword.whole import published

        if extras.tantivy_missing():
            out["text"] = {"state": "not installed", "problem": extras.TANTIVY_INSTALL + "; FTS5 ranks meanwhile"}
        else:
            live = published(data_dir)
            generation = live.stem.removeprefix("index-") if live is not None else ""
            weights = keyword.KeywordIndex.weights_of(cfg.index)
            out["text"] = schema.state(data_dir, int(out["seq"]), generation, schema.repeats(weights))
    return out


def _vector_status(cfg: Config) -> dict[str, Any]:
    from oaken import extras

    problem = extras.vectors_problem(cfg.embedder.model)
    if problem is not None:
        return {"model": cfg.embedder.model, "coverage": 0.0, "state": "not installed", "problem": problem}
    if cfg.embedder.model == "none" and extras.vectors_missing("concept"):
        return {"model": "none", "coverage": 0.0, "state": "off"}  # keyword-only install: nothing to read
    from oaken.index import coverage

    return coverage.status(cfg)


def __getattr__(name: str) -> Any:
    """search, open, show, sync and reindex live with their parts; they are bound here lazily."""
    if name in ("search",):
        from oaken.search import engine

        return engine.search
    if name in ("open", "show"):
        from oaken import reader

        return reader.open_message
    if name == "sync":
        from oaken.sync import runner

        return runner.sync
    if name == "reindex":
        from oaken.index import indexer

        return indexer.reindex
    raise AttributeError(f"module 'oaken.api' has no attribute {name!r}")
