"""IMAP sync: knows only IMAP and the store (the daemon adds indexing around it)."""
