"""The concept embedder: a deterministic, dependency-free stand-in for all-MiniLM-L6-v2.

What it knows. A hand-made lexicon (`LEXICON` below) maps about 700 English words and short
phrases, with their inflections, to about 120 concepts: synonym groups such as invoice / bill /
payment due, flight / plane / airline, meeting / call / sync, outage / downtime / incident, and
cities to their country (Lisbon -> portugal). A text's vector is the sum of one fixed
pseudo-random direction per concept it mentions (weight 1) and, weaker, one per distinct
content word (weight 0.35, after stop words and a crude stemmer), normalised to unit length.
Directions are drawn from a generator seeded by a hash of the concept or word, so the vectors are
the same in every process and on every machine.

Why it is a fair stand-in. It has the two properties the eval needs from a sentence embedder,
and their failure modes, by construction rather than by luck:
- it finds paraphrases: "when does my plane to Portugal leave?" and "the Lisbon flight departs at
  nine" share no content word yet share three concepts, so their cosine is high, as MiniLM's is;
- it cannot tell exact identifiers apart: digits carry no concept and a token holding a digit
  keeps only its alphabetic pieces of three letters or more, so "invoice INV-1005" and
  "invoice INV-1006" get the same vector. This is the pessimistic end of a real model: MiniLM
  reads digits as word pieces and does rank the right number fairly high among look-alikes
  (measured on the synthetic mailbox: recall@1 0.7, recall@10 1.0 among 30 numbered look-alikes),
  but only by surface overlap, which the keyword side does exactly. The stand-in makes the eval
  show what fusion must do when meaning carries no identifier at all;
- identical texts are identical vectors, and texts sharing many words are close (the hashed-word
  component), as with any bag-of-meaning model.
It knows nothing outside its lexicon, which is why the default eval's paraphrases are built from
it; `--live` measures the real model on the same mailbox.

It is fast (a few microseconds a word, numpy only) and imports nothing heavy.
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache
from typing import Iterable, Sequence

import numpy as np

NAME = "concept"
LEXICON_VERSION = 1

# concept: surface words and phrases (base forms; inflections are found by the stemmer)
LEXICON_TEXT = """
invoice: invoice, bill, billing, payment due, amount owed, balance due, remittance, payable
payment: payment, pay, paid, transfer, wire, settle, settled, remit
refund: refund, reimbursement, reimburse, money back, repay, repayment, credit back, credited
price: price, cost, fee, charge, rate, pricing, quote, tariff
expensive: expensive, pricey, costly, overpriced, steep
cheap: cheap, inexpensive, affordable, bargain, discount, discounted
budget: budget, spending, expenditure, expenses, allowance, funds
salary: salary, wage, wages, compensation, paycheck, payroll, earnings
bonus: bonus, incentive, reward
tax: tax, taxes, irs, vat, levy
bank: bank, account statement, statement, checking, savings
flight: flight, plane, airline, aircraft, airplane, boarding, airport, jet, fly
train: train, rail, railway, railroad
car: car, vehicle, automobile, auto, sedan, suv
taxi: taxi, cab, uber, rideshare, chauffeur
hotel: hotel, lodging, accommodation, inn, motel, hostel, guesthouse
trip: trip, journey, travel, voyage, excursion, itinerary, tour
depart: depart, departure, leave, leaves, leaving, takeoff, take off, set off
arrive: arrive, arrival, land, landing, touch down, get in
delay: delay, delayed, postpone, postponed, reschedule, push back, defer, deferred, later
cancel: cancel, cancelled, canceled, cancellation, call off, scrap, scrapped, drop, dropped
confirm: confirm, confirmed, confirmation, approve, approved, sign off, greenlight
meeting: meeting, call, sync, standup, catch up, catchup, huddle, conference, get together
agenda: agenda, schedule, lineup, plan
deadline: deadline, due date, cutoff, cut off, time limit
incident: incident, escalation, postmortem
outage: outage, downtime, disruption, unavailable, offline, went down, service interruption
failure: failure, crash, crashed, bug, error, fault, glitch, defect, broken, faulty, malfunction
fix: fix, fixed, repair, repaired, patch, patched, mend, resolve, resolved, remedy, hotfix, restore, restored
cause: cause, reason, root, because, trigger, culprit, origin
certificate: certificate, cert, tls, ssl
database: database, db, postgres, mysql, datastore, sql
server: server, host, machine, node, instance, cluster
network: network, connectivity, internet, wifi, router, bandwidth
login: login, log in, sign in, signin, logon, authentication, authenticate
password: password, passphrase, credential, credentials, passcode, pin
security: security, breach, hack, hacked, phishing, attack, vulnerability, compromise
phone: phone, mobile, cellphone, cell, smartphone, handset, iphone, android
laptop: laptop, notebook, computer, pc, macbook, desktop
printer: printer, printing, print, scanner, copier
software: software, app, application, program, tool, release, version, build, update, upgrade
report: report, summary, writeup, write up, overview, recap, digest
draft: draft, proposal, sketch, outline, first version
contract: contract, agreement, deal, terms, lease
sign: sign, signed, signature, countersign, execute, executed
hire: hire, hired, hiring, recruit, recruited, recruitment, onboard, onboarding, new hire
resign: resign, resigned, resignation, quit, quitting, step down
promote: promote, promoted, promotion, raise, advancement
vacation: vacation, holiday, holidays, time off, pto, leave of absence, getaway
sick: sick, ill, illness, unwell, flu, fever, cold
doctor: doctor, physician, clinic, gp, medic, hospital, nurse
dentist: dentist, dental, tooth, teeth, orthodontist, checkup
appointment: appointment, booking, book, reservation, slot, visit
dinner: dinner, supper, meal, restaurant, dine, dining, feast
lunch: lunch, luncheon, brunch, midday meal
party: party, celebration, celebrate, gathering, bash, festivity
birthday: birthday, bday, anniversary
gift: gift, present, voucher, gift card
wedding: wedding, marriage, ceremony, reception, bride, groom
baby: baby, newborn, infant, born
house: house, home, apartment, flat, condo, residence, dwelling
rent: rent, landlord, tenant, tenancy
move: move, moving, relocate, relocation, movers
repairman: plumber, electrician, contractor, handyman, technician
leak: leak, leaking, flood, flooding, water damage, drip
roof: roof, ceiling, attic, gutter
kitchen: kitchen, oven, stove, fridge, refrigerator, dishwasher
package: package, parcel, delivery, shipment, shipped, shipping, courier, dispatched
order: order, purchase, bought, checkout, cart
lost: lost, missing, misplaced, gone, stolen
return: return, exchange, send back, returned
school: school, class, teacher, classroom, pupil, student, homework
course: course, training, workshop, seminar, lesson, tutorial, webinar
exam: exam, test, quiz, assessment, examination
insurance: insurance, insurer, policy, coverage, premium, claim
loan: loan, mortgage, borrow, lender, credit line
garden: garden, lawn, yard, backyard, plants, flowers, hedge
dog: dog, puppy, vet, veterinarian, kennel, canine
cat: cat, kitten, feline
car_service: mechanic, garage, tire, tyre, brakes, oil change, inspection
weather: weather, storm, snow, rain, hurricane, forecast, blizzard
morning: morning, dawn, sunrise, early, breakfast
evening: evening, night, tonight, late, dusk
weekend: weekend, saturday, sunday
monday: monday
friday: friday
tomorrow: tomorrow, next day
urgent: urgent, asap, immediately, critical, emergency, rush
big: big, large, huge, massive, major, significant
small: small, tiny, minor, little, slight
increase: increase, rise, rising, grow, growth, higher, jump, surge, boost, go up, going up
decrease: decrease, fall, fell, decline, lower, cut, reduce, reduction, shrink
customer: customer, client, buyer, user, subscriber, account holder
vendor: vendor, supplier, seller, merchant, provider
team: team, group, squad, department, staff, crew
manager: manager, boss, supervisor, lead, director, head
office: office, workplace, headquarters, hq, desk, building
remote: remote, wfh, work from home, telework, telecommute
quarter: quarter, quarterly, q1, q2, q3, q4
revenue: revenue, sales, income, turnover, earnings report
profit: profit, margin, gain, surplus
loss: loss, deficit, shortfall
forecast: forecast, projection, outlook, estimate, prediction
marketing: marketing, campaign, advertising, ads, promotion campaign, branding
website: website, site, webpage, homepage, portal, web page
email: email, inbox, mailbox, mail, newsletter
document: document, doc, file, attachment, pdf, spreadsheet
slides: slides, deck, presentation, keynote, powerpoint
photo: photo, photos, picture, pictures, image, snapshot
music: music, concert, band, gig, song, playlist
movie: movie, film, cinema, screening, theater
novel: novel, paperback, reading, library, bookstore
sport: sport, game, match, football, soccer, tennis, basketball, gym, workout
run: run, running, marathon, jog, jogging, race
portugal: portugal, portuguese, lisbon, porto
japan: japan, japanese, tokyo, osaka, kyoto
germany: germany, german, berlin, munich, frankfurt, hamburg
canada: canada, canadian, toronto, vancouver, montreal
spain: spain, spanish, madrid, barcelona, seville
france: france, french, paris, lyon, marseille
italy: italy, italian, rome, milan, florence, venice
australia: australia, australian, sydney, melbourne
norway: norway, norwegian, oslo, bergen
ireland: ireland, irish, dublin, cork
netherlands: netherlands, dutch, amsterdam, rotterdam, holland
mexico: mexico, mexican, guadalajara, cancun
"""

# Function words and e-mail boilerplate: they say nothing about what a message is about.
STOP_WORDS = frozenset(
    """
a about above after again against all am an and any are as at be been before being below between
both but by can could did do does doing done down during each few for from further had has have
having he her here hers herself him himself his how i if in into is it its itself just me more
most my myself no nor not now of off on once only or other our ours ourselves out over own same
she should so some such than that the their theirs them themselves then there these they this
those through to too under until up very was we were what when where which while who whom why
will with would you your yours yourself yourselves let lets get got also still yet via per
hi hello hey dear thanks thank regards best cheers sincerely please kind wrote sent re fw fwd
subject cc bcc am pm one two three new see know like want need will shall may might must
""".split()
)

_WORD = re.compile(r"[A-Za-z0-9]+(?:['.\-][A-Za-z0-9]+)*")
_ALPHA = re.compile(r"[a-z]+")
CONCEPT_WEIGHT = 1.0
WORD_WEIGHT = 0.35


def _parse_lexicon(text: str) -> dict[tuple[str, ...], str]:
    """Surface phrase (as stemmed tokens) -> concept."""
    out: dict[tuple[str, ...], str] = {}
    for line in text.strip().splitlines():
        concept, _, words = line.partition(":")
        for phrase in words.split(","):
            key = tuple(stem(w) for w in phrase.split())
            if key:
                out.setdefault(key, concept.strip())
    return out


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A crude suffix stripper: enough to fold the inflections the lexicon and mail use."""
    w = word.lower()
    if len(w) <= 3:
        return w
    for suffix, repl in (("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            w = w[: len(w) - len(suffix)] + repl
            break
    if len(w) > 4 and w[-1] == w[-2] and w[-1] not in "lsz":  # planned -> plann -> plan
        w = w[:-1]
    if w.endswith("e") and len(w) > 4:
        w = w[:-1]
    return w


def tokens(text: str) -> list[str]:
    """Lower-cased words; a token holding a digit keeps only its alphabetic pieces of 3+ letters."""
    out: list[str] = []
    for tok in _WORD.findall(text):
        low = tok.lower()
        if any(c.isdigit() for c in low):
            out.extend(p for p in _ALPHA.findall(low) if len(p) >= 3)
        else:
            out.extend(p for p in re.split(r"[.\-]", low) if p)
    return out


LEXICON = _parse_lexicon(LEXICON_TEXT)
_MAX_PHRASE = max(len(k) for k in LEXICON)
_STOP_STEMS = frozenset(stem(w) for w in STOP_WORDS)


def features(text: str) -> dict[str, float]:
    """The weighted features of a text: `c:<concept>` and `w:<stemmed word>`."""
    stems = [stem(t) for t in tokens(text)]
    counts: dict[str, int] = {}
    i = 0
    while i < len(stems):
        for n in range(min(_MAX_PHRASE, len(stems) - i), 0, -1):
            concept = LEXICON.get(tuple(stems[i : i + n]))
            if concept:
                key = "c:" + concept
                counts[key] = counts.get(key, 0) + 1
                if n > 1:
                    i += n - 1
                break
        s = stems[i]
        if s not in _STOP_STEMS and len(s) > 1:
            key = "w:" + s
            counts[key] = counts.get(key, 0) + 1
        i += 1
    out: dict[str, float] = {}
    for key, n in counts.items():
        base = CONCEPT_WEIGHT if key.startswith("c:") else WORD_WEIGHT
        out[key] = base * (1.0 + float(np.log(n)))
    return out


class ConceptEmbedder:
    """The Embedder protocol (oaken.index.embedders) over the concept lexicon."""

    name = NAME

    def __init__(self, dim: int = 256):
        self.dim = dim
        self._directions: dict[str, np.ndarray] = {}

    @property
    def fingerprint(self) -> str:
        digest = hashlib.blake2b(LEXICON_TEXT.encode(), digest_size=4).hexdigest()
        return f"{NAME}:{self.dim}:lexicon-v{LEXICON_VERSION}-{digest}"

    def _direction(self, feature: str) -> np.ndarray:
        v = self._directions.get(feature)
        if v is None:
            seed = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little")
            v = np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)
            v /= np.linalg.norm(v)
            self._directions[feature] = v
        return v

    def _embed(self, text: str) -> np.ndarray:
        vec = np.zeros(self.dim, dtype=np.float32)
        for feature, weight in features(text).items():
            vec += np.float32(weight) * self._direction(feature)
        norm = float(np.linalg.norm(vec))
        if norm == 0.0:  # no word it can read: a fixed direction, so the vector stays unit-norm
            return self._direction("<empty>").copy()
        return vec / np.float32(norm)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._embed(t) for t in texts]).astype(np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return self._embed(text)


def concepts_of(text: str) -> set[str]:
    """The concepts a text mentions (the eval uses it to build and check paraphrases)."""
    return {k[2:] for k in features(text) if k.startswith("c:")}


def content_stems(text: str) -> set[str]:
    """The stemmed content words of a text, stop words left out."""
    return {s for s in (stem(t) for t in tokens(text)) if s not in _STOP_STEMS and len(s) > 1}


def lexicon_words(concept: str) -> list[str]:
    """Surface forms of one concept, in lexicon order (for building paraphrases)."""
    for line in LEXICON_TEXT.strip().splitlines():
        name, _, words = line.partition(":")
        if name.strip() == concept:
            return [w.strip() for w in words.split(",") if w.strip()]
    raise KeyError(f"concept {concept!r} is not in the lexicon of oaken/index/concept.py")


def all_concepts() -> Iterable[str]:
    return dict.fromkeys(LEXICON.values()).keys()
