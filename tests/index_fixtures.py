"""Fixtures for the parsing and index tests: real messages from tests/data/index imported into a
raw.db of the test's own OAKEN_HOME, and helpers to index and open it."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Iterator

import pytest

from oaken import config as config_mod
from oaken.api import import_mail
from oaken.config import Config
from oaken.index import indexer
from oaken.index.keyword import KeywordIndex
from oaken.store import open_store

INDEX_DATA = Path(__file__).parent / "data" / "index"


def raw(name: str) -> bytes:
    return (INDEX_DATA / name).read_bytes()


@pytest.fixture
def index_cfg(oaken_home: Path) -> Config:
    # torch: the real model without the fast backends' first-use export (tests/test_backends.py has it)
    return config_mod.Config(embedder=config_mod.EmbedderConfig(backend="torch"))


@pytest.fixture
def mailbox(tmp_path: Path, index_cfg: Config) -> Config:
    """Every message of tests/data/index imported into raw.db (folder 'INBOX'), not yet indexed."""
    inbox = tmp_path / "mail" / "INBOX"
    inbox.mkdir(parents=True)
    for path in sorted(INDEX_DATA.glob("*.eml")):
        shutil.copyfile(path, inbox / path.name)
    report = import_mail([inbox], account="work", config=index_cfg)
    assert report.added == len(list(INDEX_DATA.glob("*.eml")))
    return index_cfg


@pytest.fixture
def indexed(mailbox: Config) -> Config:
    indexer.update(mailbox, keyword_only=True)
    return mailbox


def message_id_of(cfg: Config, file_name: str) -> int:
    """Oaken's id of the message imported from tests/data/index/<file_name>."""
    from oaken import envelope

    data = raw(file_name)
    with open_store(config_mod.resolve_data_dir(cfg)) as store:
        found = store.find_message(store.account_id("work"), envelope.read(data).message_id,
                                   envelope.content_hash(data))
    assert found is not None, file_name
    return found


def open_index(cfg: Config) -> KeywordIndex:
    return KeywordIndex(config_mod.resolve_data_dir(cfg), cfg.index)


@pytest.fixture
def cli_log() -> Iterator[None]:
    """`oaken` commands bind the log to the stderr of the moment (pytest's capture, closed after the
    test): point it back at the real stderr afterwards so later tests can log."""
    yield
    from oaken import log
    from oaken.config import LogConfig

    log.configure(LogConfig(), stream=sys.__stderr__)
