"""What a lost link looks like, and the one error it becomes.

Errors are sorted into two kinds: `SyncError` (a bad password, an untrusted certificate: retrying
will not help, so it is reported once) and `ConnectionLost` (the link or the server went away:
what was stored stays stored, and the next attempt resumes).
"""

from __future__ import annotations

import ssl

from imapclient import IMAPClient

from oaken.errors import SyncError

# What a dropped link, a killed server process, a silent network or a broken TLS record raises.
TRANSIENT: tuple[type[BaseException], ...] = (IMAPClient.AbortError, OSError, TimeoutError, ssl.SSLError, EOFError)


class ConnectionLost(SyncError):
    """The connection failed mid-sync; everything committed is kept and a retry resumes."""
