"""Search: the query parser, the two retrievers, fusion and the engine that runs them.
Calling the package is `oaken.search(...)` (oaken.search.engine.search): see oaken.callable_package."""

from oaken.callable_package import make_callable

make_callable(__name__, "oaken.search.engine", "search")
