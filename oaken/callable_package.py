"""`oaken.search(...)` and `oaken.sync(...)` are the library's two main calls, and `oaken.search`
and `oaken.sync` are also packages. Once a package is imported (any search or sync imports it),
Python binds its name in `oaken` to the package, so the package itself must answer the call, or a
second `oaken.search(...)` in one process would raise "'module' object is not callable"."""

from __future__ import annotations

import sys
from importlib import import_module
from types import ModuleType


class _CallablePackage(ModuleType):
    _target: tuple[str, str]

    def __call__(self, *args: object, **kwargs: object) -> object:
        module, function = self._target
        return getattr(import_module(module), function)(*args, **kwargs)


def make_callable(package: str, module: str, function: str) -> None:
    """Calling `package` calls `module.function` (imported at the first call, not before)."""
    mod = sys.modules[package]
    mod.__class__ = _CallablePackage
    mod._target = (module, function)  # type: ignore[attr-defined]
