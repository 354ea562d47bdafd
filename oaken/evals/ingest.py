"""Put the eval's mail through the real pipeline: raw.db (import, or IMAP sync from a private
Dovecot), then the keyword index, then the vectors. Nothing is scored off a shortcut.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from oaken import api
from oaken.config import Config
from oaken.evals.mailbox import Mailbox, write_maildir
from oaken.store import open_store

ACCOUNT = "eval"


class EvalError(RuntimeError):
    """The eval cannot score what it was given (an empty index, a question file that names no
    message of the corpus...)."""


@dataclass(frozen=True)
class Ingested:
    messages: int  # in raw.db
    indexed: int  # in index.db
    vector_coverage: float  # share of chunks embedded


def apply_metadata(box: Mailbox, config: Config) -> None:
    """Labels set locally and triage values: an inbox has them, and filters read them."""
    with open_store(config.data_dir) as store, store.transaction():
        account_id = store.account_id(ACCOUNT)
        # by Message-ID: a server may rewrite line ends, so the content hash need not match
        by_mid = {store.meta(i).message_id: i for i in store.message_ids_in(account_id)}
        for m in box.messages:
            oid = by_mid.get(m.message_id)
            if oid is None:
                raise EvalError(f"message <{m.message_id}> did not reach raw.db; see the import or sync log")
            for label in m.labels:
                store.add_label(oid, label)
            store.set_triage(
                oid,
                categories=config.triage.categories,
                category=m.category,
                priority=m.priority,
                disposition=m.disposition,
            )


def from_maildir(box: Mailbox, config: Config, workdir: Path) -> None:
    root = write_maildir(box, workdir / "maildir")
    report = api.import_mail([root], account=ACCOUNT, config=config)
    if report.added != len(box.messages):
        raise EvalError(f"{root}: imported {report.added} of {len(box.messages)} messages: {report.skipped[:3]}")
    apply_metadata(box, config)


def from_imap(box: Mailbox, config_dict: dict, workdir: Path) -> Config:
    """Serve the mailbox from a private Dovecot (scripts/dovecot.py), then sync it."""
    import ssl

    from imapclient import IMAPClient

    from oaken import config as config_mod

    scripts = Path(__file__).resolve().parents[2] / "scripts"
    sys.path.insert(0, str(scripts))
    try:
        from dovecot import Dovecot
    except ImportError as e:
        raise EvalError(f"--imap needs {scripts}/dovecot.py (a source checkout): {e}") from None
    server = Dovecot().start()
    try:
        server.add_user("eval", "eval-password")
        ctx = ssl.create_default_context(cafile=server.ca_file)
        with IMAPClient("127.0.0.1", server.ssl_port, ssl=True, ssl_context=ctx, timeout=30) as c:
            c.login("eval", "eval-password")
            for folder in sorted({m.folder for m in box.messages}):
                if folder != "INBOX" and not c.folder_exists(folder):
                    c.create_folder(folder)
                c.subscribe_folder(folder)
                batch = [m for m in box.messages if m.folder == folder]
                for i in range(0, len(batch), 200):
                    c.multiappend(
                        folder,
                        [
                            {
                                "msg": m.raw.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"),
                                "flags": tuple(f for f, on in (("\\Seen", m.seen), ("\\Flagged", m.flagged)) if on),
                                "date": m.date,
                            }
                            for m in batch[i : i + 200]
                        ],
                    )
        account = {
            "host": "127.0.0.1",
            "port": server.ssl_port,
            "tls": "implicit",
            "ca_file": server.ca_file,
            "username": "eval",
            "password_command": "printf %s eval-password",
        }
        config = config_mod.from_dict(
            {**config_dict, "default_account": ACCOUNT, "accounts": {ACCOUNT: account}}, source="eval --imap"
        )
        from oaken.sync.runner import sync

        sync(config, ACCOUNT)
        apply_metadata(box, config)
        return config
    finally:
        server.stop(remove=True)


def from_corpus(corpora: Path | Sequence[Path], config: Config) -> int:
    """Import folders of real mail into the eval's account; the messages added."""
    dirs = [corpora] if isinstance(corpora, (str, Path)) else list(corpora)
    added = 0
    for corpus in dirs:
        report = api.import_mail([corpus], account=ACCOUNT, config=config)
        stored = report.added + report.new_locations + report.unchanged
        if stored == 0 and report.seen <= len(report.skipped):  # --keep: a second run finds them stored
            raise EvalError(f"{corpus}: no message could be imported ({report.seen} seen): {report.skipped[:3]}")
        added += report.added
    return added


def build_indexes(config: Config) -> Ingested:
    """The keyword index, then the vectors: as `oaken reindex` does. Fails loudly when empty."""
    from oaken.index import indexer
    from oaken.index.embedding import embed_pending

    indexer.update(config)
    if config.embedder.model != "none":
        embed_pending(config)
    status = api.status(config=config)
    indexed = int(status.get("index", {}).get("messages", 0) or 0)
    coverage = float(status.get("vectors", {}).get("coverage", 0.0) or 0.0)
    if not status.get("messages") or not indexed:
        raise EvalError(
            f"{config.data_dir}: the keyword index is empty after indexing "
            f"({status.get('messages', 0)} messages in raw.db); nothing to score"
        )
    if config.embedder.model != "none" and coverage <= 0.0:
        raise EvalError(
            f"{config.data_dir}: no chunk was embedded by {config.embedder.model!r}; "
            "the vector retriever would score nothing"
        )
    return Ingested(int(status["messages"]), indexed, coverage)
