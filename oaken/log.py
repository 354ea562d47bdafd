"""structlog set-up. Secrets never reach a log line: keys that name one are masked, and every
password or token Oaken reads is registered here so that it is masked wherever it appears."""

from __future__ import annotations

import logging
import sys
import threading
from types import ModuleType
from typing import Any

from oaken.config import LogConfig


def _import_structlog() -> ModuleType:
    """structlog.dev imports rich when it is installed (it is, for sentence-transformers' tools),
    which costs a cold `oaken sync` or `oaken search` ~30 ms for tracebacks we render plainly.
    Hide rich while structlog loads; anything importing rich later still gets it."""
    if "structlog" in sys.modules:
        return sys.modules["structlog"]
    hidden = "rich" not in sys.modules
    if hidden:
        # None in sys.modules makes `import rich` fail (the import system's documented way to block a
        # module); typeshed types the values as ModuleType only
        sys.modules["rich"] = None  # type: ignore[assignment]
    try:
        import structlog
    finally:
        if hidden:
            del sys.modules["rich"]
    return structlog


_LEVELS = {"debug": 10, "info": 20, "warning": 30, "warn": 30, "error": 40, "exception": 40, "critical": 50}
_settings: tuple[Any, Any] | None = None  # (config, stream) of the last configure(), applied on first use
_level = 20  # nothing below it is ever written
_LOCK = threading.RLock()
_applied = False  # whether structlog was configured by us (another library may import it first)


def __getattr__(name: str) -> Any:  # `log.structlog`, imported on first use
    if name == "structlog":
        return _real()
    raise AttributeError(name)


def _real() -> ModuleType:
    """structlog, configured as the last configure() asked, imported here on first use: a cold
    `oaken sync` or `oaken search` that writes no line never pays for it (~53 ms of CPU)."""
    with _LOCK:  # threads log at once: none may see structlog half imported or unconfigured
        mod = _import_structlog()
        if not _applied:
            _apply(*(_settings or (None, None)))
        return mod


class _Lazy:
    """A logger that imports structlog only when it writes a line at an enabled level."""

    __slots__ = ("_name", "_context")

    def __init__(self, name: str, context: dict[str, Any]):
        self._name, self._context = name, context

    def bind(self, **kw: Any) -> _Lazy:
        return _Lazy(self._name, {**self._context, **kw})

    def _emit(self, method: str, event: Any, *args: Any, **kw: Any) -> Any:
        if _LEVELS[method] < _level:
            return None
        real = _real().get_logger(self._name).bind(**self._context)
        return getattr(real, method)(event, *args, **kw)

    def debug(self, event: Any = None, *a: Any, **kw: Any) -> Any:
        return self._emit("debug", event, *a, **kw)

    def info(self, event: Any = None, *a: Any, **kw: Any) -> Any:
        return self._emit("info", event, *a, **kw)

    def warning(self, event: Any = None, *a: Any, **kw: Any) -> Any:
        return self._emit("warning", event, *a, **kw)

    warn = warning

    def error(self, event: Any = None, *a: Any, **kw: Any) -> Any:
        return self._emit("error", event, *a, **kw)

    def exception(self, event: Any = None, *a: Any, **kw: Any) -> Any:
        return self._emit("exception", event, *a, **kw)

    def critical(self, event: Any = None, *a: Any, **kw: Any) -> Any:
        return self._emit("critical", event, *a, **kw)


_SECRET_KEYS = ("password", "passwd", "secret", "token", "authorization", "credential")
_secrets: set[str] = set()
MASK = "[redacted]"


def register_secret(value: str | None) -> None:
    """Mask this value in every later log line (a password, an OAuth token)."""
    if value and len(value) >= 3:
        _secrets.add(value)
        stripped = value.strip()
        if len(stripped) >= 3:
            _secrets.add(stripped)


def _scrub(value: Any) -> Any:
    if isinstance(value, str):
        for secret in _secrets:
            if secret in value:
                value = value.replace(secret, MASK)
        return value
    if isinstance(value, bytes):
        return _scrub(value.decode("utf-8", "replace"))
    if isinstance(value, dict):
        return {k: _scrub(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_scrub(v) for v in value)
    if isinstance(value, BaseException):
        return _scrub(repr(value))
    return value


def redact(_logger: Any, _method: str, event: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in event.items():
        if any(s in key.lower() for s in _SECRET_KEYS) and value is not None:
            out[key] = MASK
        else:
            out[key] = _scrub(value)
    return out


def _scrub_rendered(_logger: Any, _method: str, line: Any) -> Any:
    """Last line of defence: tracebacks are rendered from frames, after `redact` ran."""
    return _scrub(line) if isinstance(line, str) else line


class _CurrentStderr:
    """sys.stderr as it is when a line is written, not when logging was configured: a caller that
    swaps stderr later (a test's capture, a library user's redirect) gets the lines, and a closed
    old stream is never written to."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def configure(config: LogConfig | None = None, stream: Any = None) -> None:
    global _settings, _level
    with _LOCK:
        _settings = (config, stream)
        _level = getattr(logging, (config or LogConfig()).level.upper())
        if _applied:
            _apply(config, stream)


def _apply(config: LogConfig | None = None, stream: Any = None) -> None:
    global _applied
    _applied = True
    structlog = _import_structlog()
    config = config or LogConfig()
    level = getattr(logging, config.level.upper())
    out = stream
    if out is None and config.file:
        out = open(config.file, "a", encoding="utf-8")  # noqa: SIM115 - lives as long as the process
    out = out or _CurrentStderr()
    renderer: Any
    if config.format == "json":
        renderer = structlog.processors.JSONRenderer()
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=False)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            redact,
            renderer,
            _scrub_rendered,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=out),
        cache_logger_on_first_use=False,
    )


def get(name: str = "oaken") -> Any:
    return _Lazy(name, {})
