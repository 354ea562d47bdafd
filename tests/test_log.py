from __future__ import annotations

import io
import json

from oaken import log
from oaken.config import LogConfig


def test_secrets_never_reach_a_log_line() -> None:
    out = io.StringIO()
    log.configure(LogConfig(format="json", level="debug"), stream=out)
    secret = "s3cr3t-from-password-command"
    log.register_secret(secret + "\n")  # as a password_command prints it
    logger = log.get("test")
    logger.info("login", user="me", password=secret)
    logger.info("login.failed", error=f"server said: bad credentials for {secret}")
    logger.debug("command", argv=["imap", "LOGIN", "me", secret], token="abc123")
    try:
        raise RuntimeError(f"cannot log in with {secret}")
    except RuntimeError:
        logger.exception("crash")
    text = out.getvalue()
    assert secret not in text
    assert "abc123" not in text
    lines = [json.loads(line) for line in text.splitlines()]
    assert lines[0]["password"] == log.MASK and lines[0]["user"] == "me"
    assert log.MASK in lines[1]["error"]
    assert "crash" in text and "RuntimeError" in text


def test_console_format() -> None:
    out = io.StringIO()
    log.configure(LogConfig(format="console"), stream=out)
    log.get().info("import.done", added=3)
    assert "import.done" in out.getvalue() and "added=3" in out.getvalue()


def test_a_library_caller_that_never_configured_logging_gets_it_on_stderr() -> None:
    """structlog unconfigured prints to stdout: `python -m oaken.evals` had log lines between its
    results."""
    import subprocess
    import sys

    code = "from oaken import log; log.get('oaken.test').info('a line for stderr'); print('result')"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "result\n" and "a line for stderr" in proc.stderr


def test_eval_results_go_to_the_data_folder_by_default(tmp_path, monkeypatch) -> None:
    from oaken.evals.__main__ import default_out

    monkeypatch.setenv("OAKEN_HOME", str(tmp_path))
    assert default_out() == tmp_path / "evals"


def test_threads_logging_first_at_once_all_write(tmp_path) -> None:
    """structlog is imported on the first line written (a cold command that logs nothing never
    pays for it): threads writing their first lines at once must each wait for it whole."""
    import subprocess
    import sys

    code = (
        "import sys, threading\n"
        "from oaken import log\n"
        "log.configure()\n"
        "sys.setswitchinterval(1e-6)\n"  # threads switch mid-import: without the lock most fail
        "go = threading.Barrier(32)\n"
        "def run(i):\n"
        "    go.wait()\n"
        "    log.get('t').warning('hello', n=i)\n"
        "ts = [threading.Thread(target=run, args=(i,)) for i in range(32)]\n"
        "[t.start() for t in ts]\n"
        "[t.join() for t in ts]\n"
    )
    for _ in range(3):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
        assert out.stderr.count("hello") == 32, out.stderr
