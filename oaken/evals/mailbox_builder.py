"""How the synthetic mailbox is made, a message and a planted fact at a time, from one seeded random source."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from email.message import EmailMessage
from email.utils import format_datetime

from oaken.evals.mailbox_text import (
    FAMILY_SIZE,
    FILLER_SENTENCES,
    GROUP_LABELS,
    GROUP_SIZE,
    INCIDENT_ASPECTS,
    ME,
    NEWSLETTERS,
    NOTIFICATIONS,
    PARAPHRASES,
    PEOPLE,
    PLACES,
    REPLIES,
    THREAD_TOPICS,
    YEAR_START,
)


@dataclass(frozen=True)
class SynthMessage:
    """One generated message and where it lives."""

    message_id: str  # without angle brackets
    folder: str
    date: datetime
    raw: bytes
    seen: bool
    flagged: bool = False
    labels: tuple[str, ...] = ()  # set locally after import, beside the folder
    category: str | None = None
    priority: int | None = None
    disposition: str = "inbox"


@dataclass(frozen=True)
class Plant:
    """A planted fact: what a question will be built from, and the message(s) that answer it."""

    kind: str  # exact | paraphrase | filtered | mixed
    relevant: tuple[str, ...]  # Message-IDs
    slots: dict[str, str] = field(default_factory=dict)


class MailboxBuilder:
    """The messages and planted facts made so far; every choice comes from `rng`."""

    def __init__(self, seed: int):
        self.seed = seed
        self.rng = random.Random(seed)
        self.messages: list[SynthMessage] = []
        self.plants: list[Plant] = []
        self.codes: set[str] = set()

    # ---- primitives ---------------------------------------------------------------------------

    def date(self) -> datetime:
        return YEAR_START + timedelta(minutes=self.rng.randrange(0, 360 * 24 * 60))

    def add(
        self,
        *,
        sender: str,
        subject: str,
        body: str,
        date: datetime,
        folder: str = "INBOX",
        category: str | None = None,
        labels: tuple[str, ...] = (),
        reply_to: SynthMessage | None = None,
        to: str | None = None,
        list_id: str | None = None,
        disposition: str | None = None,
        seen: bool | None = None,
    ) -> SynthMessage:
        n = len(self.messages)
        mid = f"{self.seed}.{n:05d}.{self.rng.randrange(16**6):06x}@mail.example"
        msg = EmailMessage()
        msg["From"] = sender
        msg["To"] = to or f"{ME[0]} <{ME[1]}>"
        msg["Subject"] = subject
        msg["Date"] = format_datetime(date)
        msg["Message-ID"] = f"<{mid}>"
        if reply_to is not None:
            msg["In-Reply-To"] = f"<{reply_to.message_id}>"
            msg["References"] = f"<{reply_to.message_id}>"
        if list_id:
            msg["List-Id"] = list_id
            msg["List-Unsubscribe"] = f"<mailto:unsubscribe@{list_id.strip('<>')}>"
        msg.set_content(body)
        if disposition is None:
            disposition = "archived" if self.rng.random() < 0.15 else "inbox"
        out = SynthMessage(
            message_id=mid,
            folder=folder,
            date=date,
            raw=bytes(msg),
            labels=labels,
            seen=self.rng.random() < 0.7 if seen is None else seen,
            flagged=self.rng.random() < 0.05,
            category=category,
            priority=self.rng.choice((0, 0, 1, 1, 2, 3)),
            disposition=disposition,
        )
        self.messages.append(out)
        return out

    def person(self) -> tuple[str, str]:
        return self.rng.choice(PEOPLE)

    @staticmethod
    def addr(p: tuple[str, str]) -> str:
        return f"{p[0]} <{p[1]}>"

    def body(self, core: str, signer: str) -> str:
        parts = ["Hi Sam,", "", core]
        if self.rng.random() < 0.6:
            parts.append(self.rng.choice(FILLER_SENTENCES))
        parts += ["", "Best,", signer.split()[0]]
        return "\n".join(parts)

    def reply(self, to: SynthMessage, sender: tuple[str, str], text: str) -> SynthMessage:
        """A reply that quotes the whole message before it, as mail clients do."""
        import email

        old = email.message_from_bytes(to.raw, policy=email.policy.default)
        old_body = old.get_content().rstrip("\n")
        quoted = "\n".join("> " + line if line else ">" for line in old_body.split("\n"))
        body = f"{text}\n\nOn {format_datetime(to.date)}, {old['From']} wrote:\n{quoted}\n"
        subject = old["Subject"] if str(old["Subject"]).startswith("Re:") else f"Re: {old['Subject']}"
        date = to.date + timedelta(hours=self.rng.randrange(1, 48))
        return self.add(
            sender=self.addr(sender),
            subject=subject,
            body=body,
            date=date,
            folder=to.folder,
            category=to.category,
            reply_to=to,
        )

    def code(self, form: str) -> str:
        while True:
            r = self.rng
            c = form.format(
                n4=r.randrange(1000, 10000),
                n6=r.randrange(100000, 1000000),
                v=f"{r.randrange(2, 9)}.{r.randrange(0, 20)}.{r.randrange(0, 10)}",
                alnum="".join(r.choice("ABCDEFGHJKLMNPQRSTUVWXYZ") + r.choice("23456789") for _ in range(3)),
            )
            if c not in self.codes:
                self.codes.add(c)
                return c

    # ---- planted facts --------------------------------------------------------------------------

    def family_codes(self, form: str) -> list[str]:
        """FAMILY_SIZE codes in sequence, as invoices, orders, tickets and releases are numbered:
        look-alikes differ in a digit or two, not in their whole number."""
        r = self.rng
        n4, n6 = r.randrange(1000, 9000), r.randrange(100000, 900000)
        major, minor = r.randrange(2, 9), r.randrange(0, 10)
        out = []
        for i in range(FAMILY_SIZE):
            if form == "{alnum}":  # booking references are random, not numbered
                out.append(self.code(form))
                continue
            c = form.format(n4=n4 + i, n6=n6 + i, v=f"{major}.{minor + i // 10}.{i % 10}", alnum="")
            self.codes.add(c)
            out.append(c)
        r.shuffle(out)
        return out

    def identifier_family(self, fam: dict[str, str], asked: int) -> None:
        members: list[tuple[str, SynthMessage]] = []
        for code in self.family_codes(fam["code"]):
            m = self.add(
                sender=fam["sender"],
                subject=fam["subject"].format(code=code),
                body=fam["body"].format(code=code),
                date=self.date(),
                category=fam["category"],
                folder="INBOX",
            )
            members.append((code, m))
        for code, m in self.rng.sample(members, asked):
            self.plants.append(
                Plant(
                    "exact",
                    (m.message_id,),
                    {"family": fam["name"], "code": code, "question": fam["question"].format(code=code)},
                )
            )

    def paraphrase_facts(self, count: int) -> None:
        pairs = [(s, p) for s in range(len(PARAPHRASES)) for p in range(len(PLACES))]
        self.rng.shuffle(pairs)
        chosen = pairs[:count]
        written: set[tuple[int, int]] = set()

        def write(s: int, p: int) -> SynthMessage:
            sender = self.person()
            fact = PARAPHRASES[s][0].format(city=PLACES[p][0])
            subject = fact.split(" ")[0:5]
            m = self.add(
                sender=self.addr(sender),
                subject=" ".join(subject).rstrip(".,") + "...",
                body=self.body(fact, sender[0]),
                date=self.date(),
                category="work",
            )
            written.add((s, p))
            return m

        for s, p in chosen:
            target = write(s, p)
            if self.rng.random() < 0.3:  # a reply quotes the fact: it must rank below the original
                self.reply(target, ME, self.rng.choice(REPLIES))
            self.plants.append(
                Plant(
                    "paraphrase",
                    (target.message_id,),
                    {
                        "question": PARAPHRASES[s][1].format(country=PLACES[p][1]),
                        "fact": PARAPHRASES[s][0],
                        "city": PLACES[p][0],
                    },
                )
            )
        # look-alikes: the same sentence about other places, and other sentences about the place
        for s, p in chosen:
            for _ in range(2):
                other = self.rng.randrange(len(PLACES))
                if (s, other) not in written:
                    write(s, other)
            other_s = self.rng.randrange(len(PARAPHRASES))
            if (other_s, p) not in written:
                write(other_s, p)

    def filter_group(self, group: dict[str, str]) -> None:
        by = group["by"]
        people = self.rng.sample(PEOPLE, GROUP_SIZE)
        labels = self.rng.sample(GROUP_LABELS, GROUP_SIZE)
        start = self.date().replace(month=1, day=10)
        members = []
        for i in range(GROUP_SIZE):
            p = people[i]
            date = start + timedelta(days=28 * i) if by == "after" else self.date()
            m = self.add(
                sender=self.addr(p),
                subject=group["subject"],
                body=self.body(group["body"], p[0]),
                date=date,
                category="work",
                labels=(labels[i],) if by == "label" else (),
                disposition="inbox",
            )
            members.append((p, labels[i], m))
        if by == "after":  # the newest by after:, the oldest by before:
            picks = [(members[-1], "after", members[-1][2].date), (members[0], "before", members[1][2].date)]
        else:
            picks = [(m, by, m[2].date) for m in self.rng.sample(members, 3)]
        for (p, label, target), op, when in picks:
            slots = {
                "by": op,
                "subject": group["subject"],
                "sender": p[0].split()[1],
                "label": label,
                "date": when.strftime("%Y-%m-%d"),
            }
            self.plants.append(Plant("filtered", (target.message_id,), slots))

    def incident_group(self, asked: int) -> None:
        code = self.code("OPS-{n4}")
        start = self.date()
        members = []
        for i, (fact, _q) in enumerate(INCIDENT_ASPECTS):
            m = self.add(
                sender="Ops Status <status@northwind.example>",
                subject=f"[{code}] incident status",
                body=f"Status of incident {code}.\n\n{fact}\n\nThe status page has the timeline.",
                date=start + timedelta(hours=3 * i),
                category="notifications",
                disposition="inbox",
            )
            members.append(m)
        for i in self.rng.sample(range(len(INCIDENT_ASPECTS)), asked):
            self.plants.append(
                Plant(
                    "mixed",
                    (members[i].message_id,),
                    {"code": code, "question": INCIDENT_ASPECTS[i][1].format(code=code)},
                )
            )

    # ---- filler ---------------------------------------------------------------------------------

    def thread(self) -> None:
        subject, text = self.rng.choice(THREAD_TOPICS)
        first_sender = self.person()
        folder = self.rng.choice(("INBOX", "INBOX", "Work/Projects", "Archive"))
        m = self.add(
            sender=self.addr(first_sender),
            subject=subject,
            body=self.body(text, first_sender[0]),
            date=self.date(),
            folder=folder,
            category="work",
        )
        for _ in range(self.rng.randrange(1, 4)):
            m = self.reply(m, self.rng.choice((ME, self.person())), self.rng.choice(REPLIES))

    def newsletter(self) -> None:
        name, addr, subject, text = self.rng.choice(NEWSLETTERS)
        issue = self.rng.randrange(1, 300)
        self.add(
            sender=f"{name} <{addr}>",
            subject=f"{subject} #{issue}",
            body=text,
            date=self.date(),
            folder="Newsletters",
            category="newsletters",
            list_id=f"<{addr.split('@')[1]}>",
            disposition=self.rng.choice(("inbox", "archived", "discarded")),
        )

    def notification(self) -> None:
        name, addr, subject, text = self.rng.choice(NOTIFICATIONS)
        self.add(
            sender=f"{name} <{addr}>",
            subject=subject,
            body=text,
            date=self.date(),
            folder="Notifications",
            category="notifications",
        )
