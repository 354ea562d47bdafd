"""The derived, disposable indexes: index.db (FTS5) and vectors/ (LanceDB)."""
