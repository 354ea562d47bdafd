"""The seeded synthetic mailbox the retrieval eval searches.

It looks like a person's inbox: work threads whose replies quote the message before, newsletters
and notifications, a dozen correspondents, folders and labels, read and unread mail, triage
values. Into it are planted the facts the questions ask about, each with look-alikes built to
defeat one retriever:

- identifier families: thirty messages that differ only in an invoice number, order number,
  version or code (meaning cannot tell them apart; keywords can);
- paraphrase facts: a sentence whose question shares no content word with it, only concepts,
  beside the same sentence about other places (keywords cannot find it; meaning can);
- filter groups: twelve copies of one message that only a sender, a date or a label tells apart;
- incident groups: a ticket's updates, each naming the ticket, each about another aspect (only
  the identifier and the meaning together pick one).

Same seed, same bytes: every choice comes from one `random.Random(seed)`. The words it is made
of are oaken.evals.mailbox_text's; each message and planted fact is made by
oaken.evals.mailbox_builder.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from oaken.evals.mailbox_builder import MailboxBuilder, Plant, SynthMessage
from oaken.evals.mailbox_text import (  # noqa: F401 - the eval's tests import these words from here
    FAMILY_SIZE,
    FILTER_GROUPS,
    IDENTIFIER_FAMILIES,
    INCIDENT_ASPECTS,
    PARAPHRASES,
    PLACES,
)


@dataclass(frozen=True)
class Mailbox:
    seed: int
    messages: tuple[SynthMessage, ...]
    plants: tuple[Plant, ...]


def generate(messages: int = 1000, seed: int = 0) -> Mailbox:
    """About `messages` messages (at least 150) with planted facts; same seed, same mailbox."""
    if messages < 150:
        raise ValueError(f"--messages {messages}: the planted families alone need at least 150 messages")
    b = MailboxBuilder(seed)
    scale = messages / 1000
    families = max(2, min(len(IDENTIFIER_FAMILIES), round(5 * scale)))
    for fam in b.rng.sample(IDENTIFIER_FAMILIES, families):
        b.identifier_family(fam, asked=8)
    b.paraphrase_facts(max(10, min(len(PARAPHRASES) * len(PLACES) // 3, round(40 * scale))))
    groups = max(3, min(len(FILTER_GROUPS), round(10 * scale)))
    by_kind = {k: [g for g in FILTER_GROUPS if g["by"] == k] for k in ("from", "after", "label")}
    order = [g for trio in zip(*by_kind.values()) for g in trio] + by_kind["from"][3:]
    for group in order[:groups]:
        b.filter_group(group)
    for _ in range(max(4, round(14 * scale))):
        b.incident_group(asked=2)
    while len(b.messages) < messages:
        r = b.rng.random()
        if r < 0.45:
            b.thread()
        elif r < 0.75:
            b.newsletter()
        else:
            b.notification()
    msgs = b.messages[:messages] if len(b.messages) > messages else b.messages
    kept = {m.message_id for m in msgs}
    plants = tuple(p for p in b.plants if all(r in kept for r in p.relevant))
    return Mailbox(seed, tuple(msgs), plants)


def write_maildir(mailbox: Mailbox, root: Path) -> Path:
    """Write the mailbox as a Maildir++ tree (INBOX at the root, `.Sub.Folder` beside it).

    Read mail goes to cur/ with the S flag, unread to new/; each file's mtime is its date, so the
    import's arrival time agrees with the Date header.
    """
    inbox = root / "INBOX"
    for i, m in enumerate(mailbox.messages):
        folder = inbox if m.folder == "INBOX" else inbox / ("." + m.folder.replace("/", "."))
        for sub in ("cur", "new", "tmp"):
            (folder / sub).mkdir(parents=True, exist_ok=True)
        flags = ("F" if m.flagged else "") + ("S" if m.seen else "")
        name = f"{int(m.date.timestamp())}.{i:05d}.synthetic"
        path = folder / "cur" / f"{name}:2,{flags}" if m.seen or m.flagged else folder / "new" / name
        path.write_bytes(m.raw)
        ts = m.date.timestamp()
        os.utime(path, (ts, ts))
    return inbox
