"""Oaken's exceptions: each names what is at fault and what to do about it."""

from __future__ import annotations


class OakenError(Exception):
    """Base of every error Oaken raises on purpose; the CLI prints it as one line."""


class ConfigError(OakenError):
    """The configuration file, a key in it, or a value is wrong."""


class StoreError(OakenError):
    """raw.db cannot be opened, migrated or written."""


class NotFound(OakenError):
    """A message, account or folder named by the caller does not exist."""


class TriageError(OakenError):
    """A triage value outside the vocabulary of [triage]."""


class ImportFailed(OakenError):
    """A path given to `oaken import` cannot be read as mail."""


class SyncError(OakenError):
    """IMAP sync failed in a way a retry will not fix (bad login, refused TLS)."""


class AlreadyRunning(OakenError):
    """Another Oaken daemon holds the lock on this data directory."""


class IndexUnavailable(OakenError):
    """index.db is missing, corrupt or locked; `oaken reindex --rebuild` repairs it."""

    # set by oaken.index.keyword.schema.unavailable (others raise it without: read them with getattr)
    code: str
    state: str  # missing, corrupt, locked, stale or full
    detail: str  # what was found (SQLite's error, the schema version)


class QueryError(OakenError):
    """A search request that cannot be run at all (not a bad operator: those are warnings)."""


class VectorUnavailable(OakenError):
    """The vector side cannot answer; `code` is one of DESIGN.md's degraded reasons
    (no_embedder, no_vector_store, no_vectors, model_mismatch, timeout, error)."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


class UsageError(OakenError):
    """A command line that cannot be run as given; `command` is the subcommand it was meant for."""

    def __init__(self, message: str, command: str | None = None):
        super().__init__(message)
        self.command = command
