"""The background search server: what `oaken search` starts when no daemon answers, as gpg-agent
and `emacs --daemon` do, so that only the first search of a session pays for the model.

A cold process that loads LanceDB and the model takes seconds; answering from keywords takes a
tenth of that. So the first search with vectors present and nothing answering on the socket starts
this module as a detached process (the daemon's SearchServer, on the same socket) and answers
itself from keywords, degraded with `vector_starting`; the next searches go through the socket,
warm and hybrid. The server exits after `[search] server_idle_minutes` without a search (0: never
started), when its data directory is deleted, or when another server takes its socket.

One file, DATA_DIR/search-server.lock, keeps the servers apart: whoever holds an exclusive flock
on it serves the data directory's searches (a background server, or `oaken sync --daemon`, which
stops a background server it finds there and holds the lock itself). The kernel drops the lock
when its holder dies, so a `kill -9` leaves nothing stale: the next search takes the lock and
starts a server, which replaces the dead socket. The first search takes the lock and hands it to
the process it starts (an inherited descriptor), so two searches at once start one server. The
file holds a JSON record of the holder (pid, role, state, idle minutes) for `oaken status` and for
the daemon taking over; it is information, the lock is the truth.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing on the search path
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from oaken.config import Config
    from oaken.search.types import SearchResponse

LOCK_NAME = "search-server.lock"
LOG_NAME = "search-server.log"  # the background server's stderr: its log lines, a traceback if it fails
CHECK_SECONDS = 2.0  # how often the server looks at its idle time, its data directory and its socket
RETRY_FAILED_SECONDS = 300.0  # a server that failed to start is not started again for this long
TAKEOVER_SECONDS = 10.0  # how long the daemon waits for a background server to stop before SIGKILL


# ---- the record in the lock file -------------------------------------------------------------------


def lock_path(data_dir: str | os.PathLike[str]) -> str:
    return os.path.join(data_dir, LOCK_NAME)


def _read(fd: int) -> dict[str, Any] | None:
    """The holder's record; None when there is none (never written, cleared, or half written)."""
    try:
        text = os.pread(fd, 4096, 0)
        record = json.loads(text) if text.strip() else None
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def _write(fd: int, record: dict[str, Any] | None) -> None:
    os.ftruncate(fd, 0)
    if record is not None:
        os.pwrite(fd, (json.dumps(record) + "\n").encode(), 0)


def alive(pid: Any) -> bool:
    """Whether process `pid` runs (a zombie, dead but not yet reaped, does not)."""
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rpartition(b")")[2].split()[0] != b"Z"
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def describe(data_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """For `oaken status`: who serves the data directory's searches ({"running": False} when no one
    does): "pid", "role" (background or daemon), "state" (starting or ready), "idle_exit_minutes"
    (a background server's), "log". Read without taking the lock, so a search starting a server at
    this moment is never told that one is already starting."""
    try:
        fd = os.open(lock_path(data_dir), os.O_RDONLY)
    except OSError:
        return {"running": False}
    try:
        record = _read(fd)
    finally:
        os.close(fd)
    if record is None or not alive(record.get("pid")):
        return {"running": False}
    out = {"running": True, "pid": record["pid"], "role": record.get("role"), "state": record.get("state")}
    if record.get("role") == "background":
        out["idle_exit_minutes"] = record.get("idle_minutes")
        out["log"] = os.path.join(data_dir, LOG_NAME)
    return out


# ---- the search that starts a server ------------------------------------------------------------------


class Outcome:
    """What `ensure` found or did. kind: "started" (this call started a server, `pid`), "starting"
    (another search started one, or one runs whose socket did not answer), "daemon" (`oaken sync
    --daemon` holds the data directory and will answer once its socket is up), "failed" (a server
    failed to start lately, or could not be started: `detail` says why)."""

    __slots__ = ("kind", "pid", "detail")

    def __init__(self, kind: str, pid: int | None = None, detail: str = ""):
        self.kind = kind
        self.pid = pid
        self.detail = detail

    def __repr__(self) -> str:
        return f"Outcome({self.kind!r}, pid={self.pid!r}, detail={self.detail!r})"


def ensure(config: Config, data_dir: Path) -> Outcome:
    """Start a background server for `data_dir` unless one runs or is starting. The lock decides:
    the search that takes it starts the server and passes the lock on to it."""
    path = lock_path(data_dir)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as e:
        return Outcome("failed", detail=f"{path}: cannot be opened ({e.strerror or e})")
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            record = _read(fd) or {}
            pid = record.get("pid") if isinstance(record.get("pid"), int) else None
            return Outcome("daemon" if record.get("role") == "daemon" else "starting", pid)
        record = _read(fd) or {}
        at = record.get("at")
        since = time.time() - at if isinstance(at, (int, float)) else RETRY_FAILED_SECONDS
        if record.get("state") == "failed" and since < RETRY_FAILED_SECONDS:
            return Outcome("failed", detail=str(record.get("error") or "it exited"))
        try:
            pid = _spawn(config, data_dir, fd)
        except OSError as e:
            _write(fd, {"state": "failed", "error": f"not started: {e}", "at": time.time()})
            return Outcome("failed", detail=f"{sys.executable}: cannot be started ({e.strerror or e})")
        idle = config.search.server_idle_minutes
        # the server writes its own record as it starts; this one covers the moments before
        _write(fd, {"pid": pid, "role": "background", "state": "starting", "idle_minutes": idle, "at": time.time()})
        return Outcome("started", pid)
    finally:
        os.close(fd)  # the server's inherited descriptor holds the lock now (or no one does)


def _spawn(config: Config, data_dir: Path, lock_fd: int) -> int:
    """Start `python -m oaken.search.background` in a session of its own, holding the lock, with the
    config as JSON on its stdin (a Config given in code reaches it too, and nothing shows in ps)."""
    from oaken import config as config_mod

    payload = json.dumps({"config": config_mod.to_dict(config), "source": config.source}).encode()
    read_end, write_end = os.pipe()
    log_file = os.path.join(data_dir, LOG_NAME)
    # -P: not the current directory first on sys.path (it may hold anything)
    argv = [sys.executable, "-P", "-m", "oaken.search.background", "--lock-fd", str(lock_fd)]
    os.set_inheritable(lock_fd, True)
    try:
        pid = os.posix_spawn(
            sys.executable,
            argv,
            os.environ,
            file_actions=[
                (os.POSIX_SPAWN_DUP2, read_end, 0),
                (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                (os.POSIX_SPAWN_OPEN, 2, log_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600),
            ],
            setsid=True,  # not in the terminal's process group: Ctrl-C in the shell leaves it running
        )
    finally:
        os.set_inheritable(lock_fd, False)
        os.close(read_end)
    with open(write_end, "wb") as pipe:
        pipe.write(payload)
    if "threading" in sys.modules:  # a long-lived process (the API): reap it when it exits
        import threading

        threading.Thread(target=os.waitpid, args=(pid, 0), name="oaken-search-reaper", daemon=True).start()
    return pid


def starting_message(outcome: Outcome, idle_minutes: float) -> str:
    who = f"the search server, pid {outcome.pid}" if outcome.pid else "the search server"
    return (
        f"meaning search is starting in the background ({who}; it exits after {idle_minutes:g} idle "
        "minutes): these are keyword results, the next search uses it"
    )


def keyword_answer(response: SearchResponse, outcome: Outcome, idle_minutes: float) -> SearchResponse:
    """A keyword-only response marked as DESIGN.md's degraded answers are: `vector_starting`, and a
    warning that says the meaning side is on its way. A keyword side that could not answer either
    (keyword_index_unavailable) keeps its own reason."""
    from dataclasses import replace

    warnings = (*response.warnings, starting_message(outcome, idle_minutes))
    if response.degraded:
        return replace(response, warnings=warnings)
    return replace(response, degraded=True, degraded_reason="vector_starting", warnings=warnings)


# ---- the daemon ------------------------------------------------------------------------------------


def take_over(data_dir: Path, log: Any, wait: float = TAKEOVER_SECONDS) -> int | None:
    """The lock for `oaken sync --daemon`: a background server holding it is stopped (SIGTERM, then
    SIGKILL after `wait` seconds), and the daemon holds it while it runs, so no search starts
    another. Returns the descriptor to pass to `release`; None when the lock could not be had (the
    daemon serves all the same: its socket replaces the other's, which then exits)."""
    import signal

    path = lock_path(data_dir)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    deadline = time.monotonic() + wait
    signalled: set[int] = set()
    killed = False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            pass
        record = _read(fd) or {}
        pid = record.get("pid")
        if record.get("role") == "background" and isinstance(pid, int) and pid not in signalled and alive(pid):
            log.info("stopping the background search server; the daemon answers searches now", pid=pid)
            _signal(pid, signal.SIGTERM)
            signalled.add(pid)
        if time.monotonic() > deadline:
            if signalled and not killed:
                for pid in signalled:
                    _signal(pid, signal.SIGKILL)
                killed = True
                deadline = time.monotonic() + wait
                continue
            log.warning("the search server lock is still held; answering searches all the same", lock=path)
            os.close(fd)
            return None
        time.sleep(0.05)
    _write(fd, {"pid": os.getpid(), "role": "daemon", "state": "ready", "at": time.time()})
    return fd


def release(fd: int | None) -> None:
    if fd is not None:
        try:
            _write(fd, None)
        except OSError:
            pass
        os.close(fd)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


# ---- the server process ----------------------------------------------------------------------------


def _answering(path: str) -> bool:
    """Whether a server accepts connections on the socket (a stale file refuses them)."""
    import socket

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        try:
            sock.connect(path)
        except OSError:
            return False
    return True


def _where(data_dir: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(data_dir)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def serve(config: Config, lock_fd: int) -> int:
    """Run the search server until it has been idle for `[search] server_idle_minutes`, its data
    directory is gone, its socket was taken or removed, or a signal. The socket is bound once the
    model is loaded: until then searches find none and answer from keywords themselves, rather
    than waiting on this one."""
    import signal
    import threading

    from oaken import config as config_mod
    from oaken import log
    from oaken.search import vector_side
    from oaken.search.server import SearchServer

    logger = log.get("oaken.search.background")
    data_dir = config_mod.resolve_data_dir(config)
    home = _where(data_dir)
    idle_minutes = config.search.server_idle_minutes
    idle = idle_minutes * 60.0
    check = min(CHECK_SECONDS, max(0.05, idle / 4))
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda _signum, _frame: stop.set())
    record = {"pid": os.getpid(), "role": "background", "state": "starting", "idle_minutes": idle_minutes}
    _write(lock_fd, {**record, "at": time.time()})
    server = SearchServer(config, stop)
    ready = threading.Event()

    def warm() -> None:
        try:
            vector_side.retriever(config, data_dir).load()
        except Exception as e:  # noqa: BLE001 - searches report it as no_embedder, as the daemon's do
            logger.warning("embedder not loaded", error=f"{type(e).__name__}: {e}")
        server.warm()
        ready.set()

    started = time.monotonic()
    logger.info("background search server starting", pid=os.getpid(), data_dir=str(data_dir))
    threading.Thread(target=warm, name="oaken-search-warm", daemon=True).start()
    reason = "a signal"
    while not ready.wait(check):
        if stop.is_set() or _where(data_dir) != home:
            reason = "a signal" if stop.is_set() else "the data directory is gone"
            break
    else:
        if _answering(str(server.path)):  # e.g. a SearchServer a program runs without the lock
            reason = "another server answers on the socket"
        elif not stop.is_set():
            server.start()
            _write(lock_fd, {**record, "state": "ready", "at": time.time()})
            logger.info("search socket listening", path=str(server.path), warm_s=round(time.monotonic() - started, 2))
            while not stop.wait(check):
                if server.idle_seconds() >= idle:
                    reason = f"{idle_minutes:g} minutes without a search"
                    break
                if _where(data_dir) != home:
                    reason = "the data directory is gone"
                    break
                if not server.owns_socket():
                    reason = "its socket was taken over or removed"
                    break
    stop.set()
    if server.thread is not None:
        server.thread.join(5)  # closes the socket (only if it is still this server's)
    if _where(data_dir) == home:
        _write(lock_fd, None)
    logger.info("background search server stopped", reason=reason)
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python -m oaken.search.background --lock-fd N`, the config as JSON on stdin: what `ensure`
    starts; not a command for people."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m oaken.search.background")
    p.add_argument("--lock-fd", type=int, required=True, help="the inherited, locked search-server.lock")
    args = p.parse_args(argv)
    os.chdir("/")  # hold no directory of the user's
    lock_fd = args.lock_fd
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # ours already, through the inherited descriptor
        from oaken import config as config_mod
        from oaken import log

        given = json.loads(sys.stdin.buffer.read())
        config = config_mod.from_dict(given["config"], source=given.get("source") or "<config>")
        log.configure(config.log)
        code = serve(config, lock_fd)
    except BaseException as e:  # noqa: BLE001 - recorded so that searches stop starting a failing server
        import traceback

        traceback.print_exc()
        try:
            _write(lock_fd, {"state": "failed", "error": f"{type(e).__name__}: {e}", "at": time.time()})
        except OSError:
            pass
        code = 1
    sys.stderr.flush()
    # threads of the native runtimes (LanceDB, torch) may still run: leave without waiting for them
    os._exit(code)


if __name__ == "__main__":
    main()
