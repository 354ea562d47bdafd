#!/usr/bin/env bash
# Installs everything Oaken needs on a fresh Debian machine (root, Python 3.11, registries only):
# the Debian packages for the test IMAP server and the peers we compare with, then a venv.
# Idempotent and quick when nothing changed.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v dovecot >/dev/null 2>&1 || need_apt+=(dovecot-imapd)
command -v doveadm >/dev/null 2>&1 || need_apt+=(dovecot-core)
if [ "${OAKEN_PEERS:-1}" = 1 ]; then
  command -v notmuch >/dev/null 2>&1 || need_apt+=(notmuch)
  command -v mu >/dev/null 2>&1 || need_apt+=(maildir-utils)
  command -v mbsync >/dev/null 2>&1 || need_apt+=(isync)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: apt-get install ${need_apt[*]}" >&2
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
stamp=.venv/.oaken-installed
want=$(cat pyproject.toml constraints.txt | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "setup: installing Python packages into .venv (torch CPU build first)" >&2
  # torch first and pinned: a plain "torch" requirement would pull a CUDA build of several GB.
  .venv/bin/pip install -q --disable-pip-version-check torch==2.13.0 2>&1 | grep -v "^WARNING: Location" || true
  .venv/bin/pip install -q --disable-pip-version-check -c constraints.txt -e '.[dev,fast,vectors]' 2>&1 | grep -v "^WARNING: Location" || true
  .venv/bin/python -c "import oaken, apsw, lancedb, lance, sentence_transformers, imapclient, mailparser, structlog, tomli_w" 
  .venv/bin/python -c "import onnxruntime, onnx, openvino, nncf"  # the fast extra: its tests run in CI
  .venv/bin/python -c "import mcp, mypy, ruff, pymap"  # dev: the MCP client test, the gates, the second server
  .venv/bin/python -c "import tantivy"  # a core dependency: tests/test_text_index.py runs in CI
  echo "$want" > "$stamp"
fi
# Bytecode up front: where PYTHONDONTWRITEBYTECODE is set (as on these machines) every cold
# `oaken search` would otherwise compile Oaken's modules again.
.venv/bin/python -m compileall -q oaken >/dev/null
