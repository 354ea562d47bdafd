"""The words and people of the synthetic mailbox (oaken.evals.mailbox): correspondents, places,
the planted facts with the questions that ask for them, and the filler of an ordinary inbox."""

from __future__ import annotations

from datetime import UTC, datetime

YEAR_START = datetime(2024, 1, 1, 8, 0, tzinfo=UTC)
ME = ("Sam Taylor", "sam.taylor@oakmail.example")

PEOPLE = (
    ("Maria Lopez", "maria.lopez@northwind.example"),
    ("Priya Raman", "priya.raman@northwind.example"),
    ("Tom Becker", "tom.becker@northwind.example"),
    ("Aiko Sato", "aiko.sato@kestrel.example"),
    ("Lars Nilsen", "lars.nilsen@kestrel.example"),
    ("Grace Okafor", "grace.okafor@kestrel.example"),
    ("Diego Alvarez", "diego.alvarez@harbor.example"),
    ("Hannah Weiss", "hannah.weiss@harbor.example"),
    ("Omar Haddad", "omar.haddad@harbor.example"),
    ("Chloe Martin", "chloe.martin@fieldstone.example"),
    ("Ravi Menon", "ravi.menon@fieldstone.example"),
    ("Nina Petrova", "nina.petrova@fieldstone.example"),
    ("Ben Carter", "ben.carter@quarry.example"),
    ("Elena Rossi", "elena.rossi@quarry.example"),
)

# (city used in mail, country used in questions): both belong to one concept of the lexicon
PLACES = (
    ("Lisbon", "Portugal"),
    ("Tokyo", "Japan"),
    ("Berlin", "Germany"),
    ("Toronto", "Canada"),
    ("Madrid", "Spain"),
    ("Paris", "France"),
    ("Rome", "Italy"),
    ("Sydney", "Australia"),
    ("Oslo", "Norway"),
    ("Dublin", "Ireland"),
    ("Amsterdam", "Netherlands"),
    ("Guadalajara", "Mexico"),
)

# Paraphrase scenarios: the fact as mail says it, and the question as a person asks it, with no
# content word in common (checked by questions.check_paraphrase) but the same concepts.
PARAPHRASES: tuple[tuple[str, str], ...] = (
    ("Our flight to {city} was postponed until the evening.", "Was the plane to {country} delayed to tonight?"),
    (
        "The {city} office had an outage this morning after the database crashed.",
        "Was there downtime at the {country} workplace early today because of a db failure?",
    ),
    ("We hired a new accountant for the {city} team.", "Did the {country} department recruit someone?"),
    ("The {city} apartment lease is signed.", "Is the agreement for our {country} flat executed?"),
    (
        "Dinner with the {city} clients was rescheduled to Friday.",
        "Was the supper with our {country} customers postponed?",
    ),
    (
        "The laptop I left at the {city} airport is still missing.",
        "Did anyone find the notebook I lost on the {country} plane?",
    ),
    (
        "The {city} vendor announced a huge price increase.",
        "Will our {country} supplier's charge rise by a major amount?",
    ),
    (
        "Quarterly revenue for the {city} branch fell sharply.",
        "Did sales in {country} decline over the last three months?",
    ),
    (
        "The dentist appointment in {city} is confirmed for Monday morning.",
        "Was my dental visit in {country} approved for early in the week?",
    ),
    ("The {city} shipment was lost by the courier.", "Did the delivery firm misplace our {country} parcel?"),
    (
        "Heavy snow closed the {city} airport and all departures are cancelled.",
        "Did a blizzard in {country} scrap every plane taking off?",
    ),
    ("Our {city} manager resigned last week.", "Did the boss in {country} quit?"),
    (
        "The refund for the cancelled {city} train tickets has been approved.",
        "Will I be reimbursed for the scrapped {country} railway fare?",
    ),
    ("I booked a hotel in {city} for the workshop.", "Where is my lodging for the {country} seminar?"),
)

# Identifier families: subject, body and the form of the code; all members share the text.
IDENTIFIER_FAMILIES: tuple[dict[str, str], ...] = (
    {
        "name": "invoice",
        "code": "INV-{n4}",
        "subject": "Invoice {code} from Brightline Supplies",
        "body": "Please find attached invoice {code}. Payment is due within 30 days of receipt.",
        "category": "finance",
        "sender": "Brightline Billing <billing@brightline.example>",
        "question": "invoice {code}",
    },
    {
        "name": "order",
        "code": "{n6}",
        "subject": "Your order {code} has shipped",
        "body": "Good news: order {code} is on its way. You can follow it from your account page.",
        "category": "shopping",
        "sender": "Parcelpoint Shop <orders@parcelpoint.example>",
        "question": "order {code} shipped",
    },
    {
        "name": "release",
        "code": "{v}",
        "subject": "Atlas client {code} is available",
        "body": "Version {code} of the Atlas client is now available for download. See the changelog.",
        "category": "notifications",
        "sender": "Atlas Releases <releases@atlas.example>",
        "question": "Atlas {code}",
    },
    {
        "name": "support",
        "code": "HELP-{n4}",
        "subject": "[{code}] Your request was received",
        "body": "Your support request {code} has been received and assigned to an agent.",
        "category": "notifications",
        "sender": "Helpdesk <helpdesk@northwind.example>",
        "question": "support request {code}",
    },
    {
        "name": "booking",
        "code": "{alnum}",
        "subject": "Reservation confirmed",
        "body": "Your reservation is confirmed. Reference: {code}. Keep it for check-in.",
        "category": "travel",
        "sender": "Skyway Reservations <noreply@skyway.example>",
        "question": "reservation reference {code}",
    },
)
FAMILY_SIZE = 30

# Filter groups: a message repeated by several people, in several months or under several labels.
FILTER_GROUPS: tuple[dict[str, str], ...] = (
    {
        "by": "from",
        "subject": "Weekly status report",
        "body": "Here is my weekly status report: the migration is on track and nothing is blocked.",
    },
    {
        "by": "from",
        "subject": "Expense report submitted",
        "body": "I submitted my expense report for the workshop; receipts are attached in the tool.",
    },
    {
        "by": "from",
        "subject": "Code review request",
        "body": "Could you review my pull request for the importer? It is small and has tests.",
    },
    {
        "by": "from",
        "subject": "Timesheet reminder",
        "body": "Reminder to fill in your timesheet before the end of the month, thank you.",
    },
    {
        "by": "after",
        "subject": "Team offsite agenda",
        "body": "Attached is the agenda for the team offsite: strategy in the morning, games after.",
    },
    {
        "by": "after",
        "subject": "Monthly metrics digest",
        "body": "The monthly metrics digest is ready: signups, churn and support volume inside.",
    },
    {
        "by": "after",
        "subject": "Payroll processed",
        "body": "Payroll has been processed and payslips are available on the portal.",
    },
    {
        "by": "label",
        "subject": "Subscription renewed",
        "body": "Your annual subscription has been renewed. The receipt is attached for your records.",
    },
    {
        "by": "label",
        "subject": "Document shared with you",
        "body": "A document has been shared with you. Open it from your drive to view the contents.",
    },
    {
        "by": "label",
        "subject": "Membership card ready",
        "body": "Your membership card is ready to collect at the front desk with photo identification.",
    },
)
GROUP_SIZE = 12
GROUP_LABELS = (
    "Family",
    "Receipts",
    "Important",
    "Later",
    "Projects",
    "Taxes",
    "Health",
    "Home",
    "Car",
    "School",
    "Clients",
    "Archive2023",
)

# Incident groups: every update names the ticket; each says one thing (and is asked in other words).
INCIDENT_ASPECTS: tuple[tuple[str, str], ...] = (
    ("Root cause: an expired certificate on the load balancer stopped traffic.", "{code} incident: ssl lapsed?"),
    ("Affected clients will be refunded on their next invoice.", "{code} incident: customers reimbursed?"),
    ("Service was restored at 14:20 after a forty minute outage.", "{code} incident: when fixed?"),
    ("The review meeting with the vendor is planned for Thursday.", "{code} incident: retro call?"),
)

# Filler: what the rest of an inbox holds. Kept away from the concepts the unanswerable questions
# ask about (pets, weddings, gardens, concerts, mortgages...), so those stay unanswerable.
THREAD_TOPICS = (
    ("Importer refactor", "I pushed the importer refactor to a branch. The parser is split into smaller pieces now."),
    ("Q3 planning notes", "Sharing my notes from the planning session. We agreed to focus on search quality first."),
    ("Design review feedback", "Thanks for the design review. Two comments: simplify the settings page and add undo."),
    ("Customer interview summary", "Summary of the interview: they want faster search and fewer clicks to archive."),
    ("Slides for Thursday", "Here are the slides for Thursday. Feel free to edit the last section directly."),
    ("Onboarding checklist", "I drafted an onboarding checklist for new colleagues. Please add anything missing."),
    ("API rate limits", "We keep hitting the rate limits of the sync API. Maybe we should batch the requests."),
    ("Office move logistics", "The movers come on the second floor first. Label your boxes with your name."),
    ("Analytics dashboard", "The analytics dashboard now shows weekly active readers per folder."),
    ("Hiring loop for the editor role", "Three candidates left for the editor role; interviews are next week."),
)
REPLIES = (
    "Sounds good to me.",
    "Thanks, I will take a look this afternoon.",
    "Agreed, let us go with that.",
    "Can we discuss this tomorrow?",
    "Looks fine, one small question inline.",
    "Noted, thanks for the update.",
    "I added a few comments.",
    "Perfect, that works for me.",
)
NEWSLETTERS = (
    (
        "Tech Digest",
        "news@techdigest.example",
        "This week in tech",
        "Top stories: a new database engine, faster compilers, and a look at open source funding.",
    ),
    (
        "Deals Weekly",
        "deals@dealsweekly.example",
        "Deals you might like",
        "Save on headphones, desk lamps and standing desks this week only.",
    ),
    (
        "Product Notes",
        "notes@productnotes.example",
        "Product notes issue",
        "Essays on product design, onboarding flows and writing clear release notes.",
    ),
)
NOTIFICATIONS = (
    ("CI Bot", "ci@builds.example", "Build passed on main", "All checks passed on main. Duration 6 minutes."),
    ("Calendar", "calendar@northwind.example", "Reminder: team standup", "Team standup starts in 15 minutes."),
    ("Chatter", "notify@chatter.example", "You have new mentions", "Two people mentioned you in the design channel."),
    ("Drive", "drive@files.example", "Storage almost full", "You have used 90 percent of your storage quota."),
)
FILLER_SENTENCES = (
    "Let me know if anything changes.",
    "I am around all afternoon if you want to talk.",
    "Copying the others for visibility.",
    "More details to follow.",
    "No action needed from you.",
)
