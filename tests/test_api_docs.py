"""docs/api.md's examples run as written, in order, on real mail (tests/data/search)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAIL = Path(__file__).parent / "data" / "search"


def test_the_api_examples_run(tmp_path: Path, monkeypatch, capsys) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('[embedder]\nmodel = "none"\n')
    monkeypatch.setenv("OAKEN_HOME", str(home))
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "api.md").read_text(), re.S)
    assert len(blocks) >= 3
    namespace = {"HOME": str(home), "MAILDIR": str(MAIL)}
    for block in blocks:
        exec(compile(block, "docs/api.md", "exec"), namespace)  # noqa: S102 - our own documentation
    out = capsys.readouterr().out
    assert "12 new; 12 indexed" in out
    assert "in its thread" in out and "finance 2" in out and "12 messages" in out
    assert namespace["message"].unread == namespace["message"].was_unread  # peek changed nothing
    assert [h.subject for h in namespace["from_him"].hits] == ["California"]
