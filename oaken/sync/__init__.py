"""IMAP sync: knows only IMAP and the store (the daemon adds indexing around it).
Calling the package is `oaken.sync(...)` (oaken.sync.runner.sync): see oaken.callable_package."""

from oaken.callable_package import make_callable

make_callable(__name__, "oaken.sync.runner", "sync")
