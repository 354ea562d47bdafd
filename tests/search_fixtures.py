"""Mailboxes for the search tests: real messages from tests/data/search imported with
`oaken.api.import_mail` and indexed by the real indexer, each in its own data directory."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from oaken import api
from oaken.config import Config, EmbedderConfig, PathsConfig, SearchConfig
from oaken.index import indexer
from oaken.store import Store

DATA = Path(__file__).parent / "data" / "search"
ACCOUNT = "main"


def config_for(home: Path, *, model: str = "none", **search: object) -> Config:
    """Keyword mode by choice unless a model is named; search settings may be overridden."""
    # torch: the real model without the fast backends' first-use export (tests/test_backends.py has it)
    return Config(paths=PathsConfig(data_dir=str(home)), embedder=EmbedderConfig(model=model, backend="torch"),
                  search=dataclasses.replace(SearchConfig(), **search))


def build_mailbox(home: Path, *, account: str = ACCOUNT) -> Path:
    """The eleven messages of tests/data/search (INBOX, Finance, Lists), imported and indexed."""
    home.mkdir(parents=True, exist_ok=True)
    cfg = config_for(home)
    api.import_mail([DATA / "INBOX"], account=account, config=cfg)
    indexer.update(cfg)
    return home


def ids_by_subject(home: Path) -> dict[str, int]:
    with Store(home / "raw.db", readonly=True) as store:
        metas = store.metas(store.all_message_ids())
    return {m.subject: m.id for m in metas.values()}


def token_message(token: str, n: int = 0) -> bytes:
    """A real Enron message's headers with `token` added to its words (UTF-8, 8bit)."""
    base = (DATA / "INBOX" / "cur" / "enron-lay-inbox-78!2,S").read_bytes().replace(b"\r\n", b"\n")
    head, _, body = base.partition(b"\n\n")
    lines = [ln for ln in head.split(b"\n") if not ln.lower().startswith((b"message-id:", b"content-type:",
                                                                         b"content-transfer-encoding:"))]
    lines += [f"Message-ID: <token-{n}@oaken.test>".encode(), b"Content-Type: text/plain; charset=utf-8",
              b"Content-Transfer-Encoding: 8bit"]
    text = body + f"\nReference: {token}\n".encode("utf-8")
    return b"\n".join(lines) + b"\n\n" + text


def mailbox_with_token(home: Path, token: str) -> tuple[Path, int]:
    """A mailbox of two real messages and one holding `token`; returns (data dir, that message's id)."""
    folder = home / "import"
    folder.mkdir(parents=True)
    (folder / "token.eml").write_bytes(token_message(token))
    other = DATA / "INBOX" / "cur" / "enron-skilling-inbox-13!2,"
    (folder / "other.eml").write_bytes(other.read_bytes())
    cfg = config_for(home)
    api.import_mail([folder], account=ACCOUNT, config=cfg)
    indexer.update(cfg)
    with Store(home / "raw.db", readonly=True) as store:
        ids = store.all_message_ids()
        metas = store.metas(ids)
    return home, next(m for m in ids if metas[m].message_id == "token-0@oaken.test")


@pytest.fixture(scope="module")
def search_mailbox(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Shared by a module's read-only tests: do not change its mail."""
    return build_mailbox(tmp_path_factory.mktemp("search-mailbox"))


@pytest.fixture
def own_search_mailbox(tmp_path: Path) -> Path:
    """A mailbox a test may change (triage, flags, deletions)."""
    return build_mailbox(tmp_path / "own")


NOTMUCH = Path(__file__).parent / "data" / "foundation" / "notmuch-default"


@pytest.fixture(name="keyword_home")
def _keyword_home(oaken_home: Path) -> Config:
    """The notmuch list's 52 real messages in the test's OAKEN_HOME, keyword-indexed, no model:
    what the socket tests search through a server."""
    c = dataclasses.replace(Config(), embedder=EmbedderConfig(model="none"))
    api.import_mail([NOTMUCH], config=c)
    indexer.update(c, keyword_only=True)
    return c
