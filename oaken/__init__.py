"""Oaken: local-first mail search. The library is the product; `oaken` the command is a thin layer.

    import oaken
    oaken.import_mail(["~/Maildir"])
    response = oaken.search("invoice from:alex after:2024-03-01")

Names are imported lazily so that a keyword search never pays for torch or LanceDB.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing on the cold search path
if TYPE_CHECKING:
    from typing import Any

__version__ = "0.1.0"

_API = {
    "import_mail",
    "set_triage",
    "status",
    "search",
    "open",
    "show",
    "sync",
    "reindex",
    "load_config",
}


def __getattr__(name: str) -> Any:
    if name == "Mailbox":
        from oaken.mailbox import Mailbox

        return Mailbox
    if name in _API:
        from oaken import api

        return getattr(api, name)
    raise AttributeError(f"module 'oaken' has no attribute {name!r}")
