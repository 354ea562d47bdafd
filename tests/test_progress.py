"""Long work is never silent when stderr is not a terminal (a log file, systemd, a pipe): before,
a first `reindex` of 6,200 messages printed nothing for four minutes there."""

from __future__ import annotations

from pathlib import Path

import pytest

from oaken import cli, cli_output

MAIL = Path(__file__).parent / "data" / "search"


def test_progress_lines_on_stderr_when_not_a_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('[embedder]\nmodel = "concept"\n')
    monkeypatch.setenv("OAKEN_HOME", str(home))
    monkeypatch.setattr(cli_output, "PROGRESS_EVERY", 0.0)  # a line for every step, instead of every 10 s
    assert cli.main(["import", "--no-index", str(MAIL)]) == 0
    err = capsys.readouterr().err
    assert "oaken: import: 12 msg" in err  # and stdout keeps only the summary
    assert cli.main(["reindex"]) == 0
    captured = capsys.readouterr()
    assert "oaken: keyword index: 12 msg" in captured.err and "oaken: embed: " in captured.err
    assert "oaken:" not in captured.out
