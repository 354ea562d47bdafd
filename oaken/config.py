"""TOML configuration: typed, frozen settings with a default for every key.

Every invalid value is refused with the file, the key, the value and what was expected,
because a setting silently ignored is worse than one refused: each table's keys and value types
by oaken.config_tables, what holds across keys and tables here.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping

from oaken import paths
from oaken.config_checks import check_account, check_config, check_secret_file_mode
from oaken.config_tables import build, check_keys, convert
from oaken.errors import ConfigError

DEFAULT_CATEGORIES = (
    "work",
    "personal",
    "finance",
    "travel",
    "shopping",
    "newsletters",
    "notifications",
    "social",
)
DISPOSITIONS = ("inbox", "archived", "discarded")


def _choice(*values: str) -> dict[str, Any]:
    return {"choices": values}


@dataclass(frozen=True)
class AccountConfig:
    """One IMAP account; the table name under [accounts] is its name."""

    name: str = ""
    host: str = ""
    port: int = 0  # 0: 993 for implicit TLS, 143 otherwise
    tls: str = field(default="implicit", metadata=_choice("implicit", "starttls", "none"))
    allow_plaintext: bool = False
    ca_file: str | None = None  # extra CA bundle, e.g. a self-signed test server
    username: str = ""
    auth: str = field(default="password", metadata=_choice("password", "xoauth2", "oauthbearer"))
    password: str | None = None  # plaintext: refused unless the file is private (chmod 600)
    password_command: str | None = None
    password_env: str | None = None
    password_file: str | None = None
    oauth2_token_command: str | None = None
    folders: tuple[str, ...] = ("*",)
    exclude: tuple[str, ...] = ()  # besides the \Junk and \Trash special-use folders
    batch_size: int = 500
    timeout_seconds: float = 60.0

    @property
    def effective_port(self) -> int:
        if self.port:
            return self.port
        return 993 if self.tls == "implicit" else 143


@dataclass(frozen=True)
class PathsConfig:
    data_dir: str | None = None  # default: $OAKEN_HOME, else $XDG_DATA_HOME/oaken


@dataclass(frozen=True)
class SearchConfig:
    rrf_k: int = 60
    keyword_weight: float = 1.0
    vector_weight: float = 1.0
    exact_boost: float = 3.0
    keyword_min_match: float = 0.5
    # For a question no keyword hit holds whole: the keyword list's RRF weight is multiplied by this.
    # Tuned on the real dev half (docs/meaning-at-scale.md): 1.0 -> 0.1 took hybrid MRR@10 from
    # 0.591 to 0.637, paraphrase MRR from 0.181 to 0.291, every kind's R@10 kept or better.
    keyword_partial_weight: float = 0.1
    overfetch: int = 5
    max_candidates: int = 500
    # Messages each retriever lists for a fused search or a question's graded order, whatever the
    # page: pages within it are slices of one order; a page reaching past it reads the next multiple.
    # 50 against 500: 0.74-0.85x the time of a hybrid search at 1M messages; on the real dev half,
    # with fusion that measures a cut list's shares from the rank past its cut, the same R@10 and
    # MRR 0.641 against 0.634 (docs/scale.md).
    fused_depth: int = 50
    vector_timeout_seconds: float = 10.0
    llm_rewrite: bool = False
    rewrite_command: str | None = None
    rewrite_timeout_seconds: float = 5.0
    # the zone dates of a query are read in (after:2024-03-01 starts at that day's midnight there)
    # and `show` prints dates in: an IANA name ("Europe/Paris", "UTC"); "": the system's
    time_zone: str = ""
    # `oaken search` with vectors and no daemon answering starts a background search server (the
    # daemon's SearchServer, model loaded) that exits after this many minutes without a search;
    # 0: never started (each such search loads the model in its own process).
    server_idle_minutes: float = 30.0
    # Best cosine similarity under which a search with no strong keyword hit is low_confidence,
    # per embedder model. all-MiniLM-L6-v2 and all-mpnet-base-v2: `python -m oaken.evals calibrate
    # --real --live [--model M]` (real mail, tuned on the dev half so that at most 10 % of
    # answerable questions are flagged); concept: `calibrate` on the synthetic mailbox (tuned on
    # seed 1, held out seed 2).
    low_confidence_cosine: Mapping[str, float] = field(
        default_factory=lambda: {"all-MiniLM-L6-v2": 0.36, "all-mpnet-base-v2": 0.38, "concept": 0.648}
    )
    # A hit found by meaning alone (not by the keyword side) in a lookup over the whole mailbox is
    # returned only when its cosine similarity is at least this, per embedder model; below it, the
    # unrelated tail that would pad a list to the limit (questions and queries narrowed by
    # operators have no floor: oaken.search.weighing.meaning_floor). all-MiniLM-L6-v2: the lowest
    # round floor that keeps the seven unrelated memos out of `virus` on real mail (README "Hybrid
    # search"); on the real dev questions it costs nothing now that it holds for lookups only
    # (hybrid R@10 0.702 at 0.26 and at 0.36). all-mpnet-base-v2: the same 0.36, above the best
    # cosine of words no message holds on the real eval mailbox (0.31-0.32 for both models;
    # docs/meaning-at-scale.md). A model not named here has no floor.
    vector_min_cosine: Mapping[str, float] = field(
        default_factory=lambda: {"all-MiniLM-L6-v2": 0.36, "all-mpnet-base-v2": 0.36, "concept": 0.45}
    )


@dataclass(frozen=True)
class IndexConfig:
    chunk_target_tokens: int = 128
    chunk_max_tokens: int = 256
    batch_size: int = 500
    # the words inside PDF, office, HTML and text attachments (oaken.attachment_text); false: only
    # their names, as before (a change takes effect as messages are indexed again: reindex --rebuild)
    attachment_text: bool = True
    # bm25 column weights: subject, sender, recipients, body (the author's words), quoted text,
    # attachment names and the words inside attachments.
    weight_subject: float = 4.0
    weight_sender: float = 2.0
    weight_recipients: float = 1.0
    weight_body: float = 1.0
    weight_quoted: float = 0.2
    weight_attachments: float = 1.0
    # what ranks word searches: "tantivy", a text index beside index.db (oaken/index/keyword/text),
    # built by the next keyword pass and kept level after each, 3-6x faster at a million messages
    # (FTS5 ranks while it is not level); or "fts5": index.db alone.
    keyword_engine: str = field(default="tantivy", metadata=_choice("fts5", "tantivy"))
    # vectors/ (LanceDB): brute force below this many chunks, an IVF_RQ index from here on;
    # and how long a superseded version is kept for readers still on it before cleanup.
    vector_ann_min_rows: int = 10_000  # at 10k chunks: brute force ~20 ms a query, the index ~4 ms
    vector_retention_seconds: float = 60.0


@functools.cache
def _default_model() -> str:
    from oaken import extras

    return "none" if extras.vectors_missing("all-MiniLM-L6-v2") else "all-MiniLM-L6-v2"


@dataclass(frozen=True)
class EmbedderConfig:
    # the real model where the vectors extra is installed; "none" (keyword search) where it is not,
    # so a keyword-only install is not told on every search that it lacks what it never asked for
    model: str = field(
        default_factory=_default_model, metadata=_choice("all-MiniLM-L6-v2", "all-mpnet-base-v2", "concept", "none")
    )
    # oaken.index.backends: "auto" takes the first that runs here and passes its fidelity check
    backend: str = field(
        default="auto",
        metadata=_choice(
            "auto", "torch", "torch-fp32", "torch-bf16", "onnx-fp32", "onnx-int8", "openvino", "openvino-int8"
        ),
    )
    threads: int = 0  # 0: every core
    batch_size: int = 64


@dataclass(frozen=True)
class TriageConfig:
    categories: tuple[str, ...] = DEFAULT_CATEGORIES


@dataclass(frozen=True)
class DaemonConfig:
    idle_folders: tuple[str, ...] = ("INBOX",)
    poll_seconds: float = 300.0
    no_idle_poll_seconds: float = 60.0  # how often idle_folders are polled on a server without IDLE
    max_backoff_seconds: float = 300.0


@dataclass(frozen=True)
class McpConfig:
    """`oaken mcp`: read-only unless the user turns triage on (an agent then sets category,
    priority and disposition; nothing reachable from MCP sends, deletes or moves mail)."""

    allow_triage: bool = False


@dataclass(frozen=True)
class LogConfig:
    format: str = field(default="console", metadata=_choice("console", "json"))
    level: str = field(default="info", metadata=_choice("debug", "info", "warning", "error"))
    file: str | None = None


@dataclass(frozen=True)
class Config:
    default_account: str | None = None
    accounts: Mapping[str, AccountConfig] = field(default_factory=dict)
    paths: PathsConfig = PathsConfig()
    search: SearchConfig = SearchConfig()
    index: IndexConfig = IndexConfig()
    embedder: EmbedderConfig = EmbedderConfig()
    triage: TriageConfig = TriageConfig()
    daemon: DaemonConfig = DaemonConfig()
    mcp: McpConfig = McpConfig()
    log: LogConfig = LogConfig()
    source: str | None = None  # the file this was read from, if any

    @property
    def data_dir(self) -> Path:
        return resolve_data_dir(self)

    def account(self, name: str | None = None) -> str | None:
        """The account a command covers: the one named, else default_account, else the only one."""
        if name:
            return name
        if self.default_account:
            return self.default_account
        if len(self.accounts) == 1:
            return next(iter(self.accounts))
        return None


_SECTIONS: dict[str, type] = {
    "paths": PathsConfig,
    "search": SearchConfig,
    "index": IndexConfig,
    "embedder": EmbedderConfig,
    "triage": TriageConfig,
    "daemon": DaemonConfig,
    "mcp": McpConfig,
    "log": LogConfig,
}
_TOP_KEYS = ("default_account", "accounts", *_SECTIONS)


def config_path() -> Path:
    """$OAKEN_HOME/config.toml, else the XDG config home's oaken/config.toml."""
    return Path(paths.config_file())


def resolve_data_dir(config: Config) -> Path:
    return Path(paths.data_dir_of(config.paths.data_dir))


def ensure_data_dir(config: Config) -> Path:
    """Create the data directory 0700: it holds every message of the user's mailbox."""
    path = resolve_data_dir(config)
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path, 0o700)
    return path


def load(path: str | Path | None = None) -> Config:
    """Read the config file; a missing file at the default place means every default."""
    explicit = path is not None
    p = Path(path) if path is not None else config_path()
    if not p.exists():
        if explicit:
            raise ConfigError(f"{p}: no such config file; `oaken init` writes one")
        return Config()
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{p}: not valid TOML: {e}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{p}: cannot be read: {e}") from None
    config = from_dict(data, source=str(p))
    check_secret_file_mode(p, config)
    return config


def from_dict(data: Mapping[str, Any], source: str = "<config>") -> Config:
    """Validate a parsed TOML document into a Config."""
    check_keys(source, "", data, _TOP_KEYS)
    kwargs: dict[str, Any] = {"source": source}
    if "default_account" in data:
        kwargs["default_account"] = convert(source, "default_account", data["default_account"], str)
    for name, cls in _SECTIONS.items():
        if name in data:
            kwargs[name] = build(source, f"[{name}]", cls, data[name])
    accounts: dict[str, AccountConfig] = {}
    raw_accounts = data.get("accounts", {})
    if not isinstance(raw_accounts, dict):
        raise ConfigError(f"{source}: accounts: expected tables [accounts.NAME], got {raw_accounts!r}")
    for name, table in raw_accounts.items():
        where = f"[accounts.{name}]"
        account = build(source, where, AccountConfig, table, extra={"name": name})
        check_account(source, where, account)
        accounts[name] = account
    kwargs["accounts"] = accounts
    config = Config(**kwargs)
    check_config(source, config)
    return config


def to_dict(config: Config) -> dict[str, Any]:
    """The config as plain TOML-ready data (None values left out: TOML has no null)."""

    def clean(obj: Any) -> Any:
        if dataclasses.is_dataclass(obj):
            return {
                f.name: clean(getattr(obj, f.name))
                for f in fields(obj)
                if getattr(obj, f.name) is not None and f.name not in ("name", "source")
            }
        if isinstance(obj, Mapping):
            return {k: clean(v) for k, v in obj.items() if v is not None}
        if isinstance(obj, tuple):
            return list(obj)
        return obj

    out = clean(config)
    if not out.get("accounts"):
        out.pop("accounts", None)
    return out
