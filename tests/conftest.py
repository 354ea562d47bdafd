"""Every test runs with its own OAKEN_HOME and XDG folders in a temp dir: no test touches the
user's mail or another test's data."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"

# Fixtures of each area live in their own module; list them here.
pytest_plugins: list[str] = ["tests.dovecot_fixtures", "tests.search_fixtures", "tests.index_fixtures"]


@pytest.fixture(autouse=True)
def oaken_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "oaken-home"
    monkeypatch.setenv("OAKEN_HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("OAKEN_CRASH_AT", raising=False)
    return home
