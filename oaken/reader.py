"""Opening a message: its headers and text, and the one action that marks mail read.

Search never changes a flag; opening does, in raw.db at once and on the server through the flag
queue that the next sync pushes (before it pulls, so the mirror never reverts it).
"""

from __future__ import annotations

from dataclasses import dataclass
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser

from oaken import config as config_mod
from oaken.config import Config
from oaken.errors import NotFound
from oaken.store import no_mail, open_store

SHOWN_HEADERS = ("From", "To", "Cc", "Date", "Subject", "Message-ID")


@dataclass(frozen=True)
class OpenedMessage:
    id: int
    message_id: str | None
    account: str
    folders: tuple[str, ...]
    labels: tuple[str, ...]
    subject: str
    sender: str
    date: int
    headers: tuple[tuple[str, str], ...]  # the usual ones, in SHOWN_HEADERS order
    text: str
    was_unread: bool
    unread: bool  # after opening: False unless peek
    queued: int  # flag changes queued for the server
    raw: bytes


def _text_of(msg: EmailMessage) -> str:
    """The plain-text body; failing that, the HTML part's text with its tags stripped."""
    part = msg.get_body(preferencelist=("plain", "html"))
    if part is None:
        return ""
    try:
        content = part.get_content()
    except (LookupError, ValueError, AssertionError):
        payload = part.get_payload(decode=True) or b""
        content = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else str(payload)
    if part.get_content_subtype() == "html":
        import re

        content = re.sub(r"(?is)<(script|style).*?</\1>", " ", content)
        content = re.sub(r"<[^>]+>", " ", content)
    return content if isinstance(content, str) else str(content)


def open_message(id: int, *, peek: bool = False, config: Config | None = None) -> OpenedMessage:
    """Return message `id` with its headers and text, and mark it read unless `peek`."""
    cfg = config if config is not None else config_mod.load()
    data_dir = config_mod.resolve_data_dir(cfg)
    if not (data_dir / "raw.db").exists():  # say so, and make no data directory or empty raw.db
        raise NotFound(f"message {id}: {no_mail(data_dir / 'raw.db')}")
    with open_store(data_dir, create=False) as store:
        meta = store.meta(id)  # NotFound names the id and how to find one
        raw = store.raw(id)
        queued = 0
        if not peek and meta.unread:
            with store.transaction():
                queued = store.mark_read(id)
        after = store.meta(id)
    msg = BytesParser(policy=policy.default).parsebytes(raw)
    headers: list[tuple[str, str]] = []
    for name in SHOWN_HEADERS:
        try:
            value = msg.get(name)
        except Exception:  # noqa: BLE001 - a header the parser cannot read is shown raw below
            value = None
        if value is not None:
            headers.append((name, str(value)))
    try:
        text = _text_of(msg)
    except Exception:  # noqa: BLE001 - a broken message still shows what can be read
        text = raw.split(b"\r\n\r\n", 1)[-1].decode("utf-8", "replace")
    text = text.replace("\r\n", "\n")  # IMAP delivers CRLF; a terminal wants LF
    sender = f"{meta.sender_name} <{meta.sender_addr}>" if meta.sender_name else meta.sender_addr
    return OpenedMessage(
        id=id,
        message_id=meta.message_id,
        account=meta.account,
        folders=meta.folders,
        labels=after.labels,
        subject=meta.subject,
        sender=sender,
        date=meta.date,
        headers=tuple(headers),
        text=text,
        was_unread=meta.unread,
        unread=after.unread,
        queued=queued,
        raw=raw,
    )
