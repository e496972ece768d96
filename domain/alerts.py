"""Alerts that reach a person (docs/operations.md, "Alerts"): the conditions the notifier
watches, an alert raised when one starts to hold and cleared when it ends, and the operators'
destinations.

A condition holds of a subject (a SIM, or the pool); it must hold for its delay before an alert
is raised: one message when it starts, one when it ends ("recovered", with how long it lasted),
none between, and no second alert for the same condition and subject within the interval after
the last one ended.  An alert and each message of it are events: the history survives a replay.
Every text is one SMS and names its subject."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from eventsourcing.domain import event

from .aggregate import Aggregate
from .bs import bs_day_text
from .credentials import new_id
from .errors import InvalidInput
from .phone import normalise
from .said import Said, _
from .segments import segment

ALERTS_FROM = "0.4.0"  # the release whose finalized log every process reads these events in
INTERVAL = 10 * 60  # seconds after an alert ended in which the same one is not raised again (a setting)
INTERVAL_KEY = "interval"  # the tuning's row of the interval, beside the conditions' rows
# The daily digest: the tuning's row of its time (seconds after a Nepal midnight; none: off), and
# what a destination names in --only to get it among its conditions.
DIGEST = "digest"
POOL = "pool"  # the subject of a condition of the whole pool
# An alert's SMS belongs to this client of this workspace, neither of which exists: it is
# charged nothing, and no workspace's lists, balance or webhooks see it.
SMS_CLIENT, SMS_WORKSPACE = "alerts", "operators"
TEST_ALERT = "Sandesh: a test alert"
SMS_PER_HOUR = 20  # alert SMS to one number in an hour, at most; the rest are recorded as not sent


SIM, WORKSPACE, CLIENT = "sim", "workspace", "client"  # what a condition holds of, besides the pool


@dataclass(frozen=True)
class Condition:
    name: str
    delay: float  # seconds it must hold before an alert is raised
    text: str     # the alert's words, with {subject} and {detail}
    of: str = POOL  # its subject: the pool, a SIM (by name), a workspace or a client (by id)

    @property
    def per_workspace(self) -> bool:
        """Told to the workspace's owners by e-mail; to operators only when they ask by name."""
        return self.of == WORKSPACE


CONDITIONS = {c.name: c for c in (
    Condition("sim_unusable", 300, "Sandesh: SIM {subject} unusable: {detail}", SIM),
    Condition("sim_credit_low", 0, "Sandesh: SIM {subject} credit low: {detail}", SIM),
    Condition("sim_validity_ending", 0, "Sandesh: SIM {subject} validity ends {detail}", SIM),
    Condition("sim_cap_reached", 0, "Sandesh: SIM {subject} at its plan's cap: {detail}", SIM),
    Condition("no_route", 60, "Sandesh: no usable SIM in the pool: messages wait"),
    Condition("otp_waiting", 0, "Sandesh: an OTP has waited {detail} for a SIM"),
    Condition("queue_stuck", 0, "Sandesh: a message has waited {detail} for a SIM"),
    Condition("webhooks_failing", 1800, "Sandesh: webhooks of client {detail}", CLIENT),
    Condition("webhooks_dead", 0, "Sandesh: webhooks of client {detail}", CLIENT),
    Condition("projections_lag", 60, "Sandesh: the read models lag the log by {detail}"),
    Condition("balance_low", 0, "Sandesh: low balance: workspace {detail}", WORKSPACE),
)}
OTP_WAIT, QUEUE_WAIT = 60, 30 * 60  # seconds the oldest waiting OTP, and any message, may wait
VALIDITY_DAYS = 3  # a SIM whose validity ends within this many days alerts
DEAD_WITHIN = 3600  # a client's deliveries given up within this many seconds hold webhooks_dead


def check_condition(name: str) -> str:
    if name not in CONDITIONS:
        raise InvalidInput(f"unknown condition {name!r}; the conditions are {', '.join(CONDITIONS)}")
    return name


def check_conditions(names: list[str]) -> list[str]:
    """What a destination's --only names: conditions, and the daily digest."""
    return [n.strip() if n.strip() == DIGEST else check_condition(n.strip()) for n in names if n.strip()]


def digest_time(written: str) -> float | None:
    """`08:00` (Nepal time) as seconds after midnight; None for `off`."""
    if written.strip().lower() == "off":
        return None
    hours, colon, minutes = written.strip().partition(":")
    if not (colon and hours.isdigit() and minutes.isdigit() and len(minutes) == 2
            and int(hours) < 24 and int(minutes) < 60):
        raise InvalidInput(f"{written!r} is not a time of day: write HH:MM (Nepal time), or off")
    return int(hours) * 3600 + int(minutes) * 60


def digest_text(day: str, counts: dict[str, int]) -> str:
    """The digest of a Nepal day (AD, then BS), one SMS: the messages accepted that day and what
    became of them, the alerts raised, and how the pool stands as it is sent."""
    return one_sms(f"Sandesh {day} ({bs_day_text(date.fromisoformat(day))}): {counts['accepted']} accepted, "
                   f"{counts['delivered']} delivered, {counts['undelivered']} undelivered, {counts['failed']} failed; {counts['alerts']} alerts. "
                   f"Now {counts['usable']} of {counts['enabled']} SIMs usable, {counts['waiting']} waiting")


def sms_number(url: str) -> str | None:
    """The number of an `sms:` destination (9779812345678), None for any other URL, or
    InvalidInput when it is not a Nepali mobile number."""
    if not url.strip().lower().startswith("sms:"):
        return None
    number = normalise(url.strip()[4:].strip())
    if number is None:
        raise InvalidInput(f"{url.strip()!r} is not an SMS destination: write sms:+977 and a Nepali mobile number")
    return number


def npr(paisa: int) -> Said:
    """'NPR 4.00', said in an owner's language where it is e-mailed."""
    return _("NPR %(rupees)d.%(paisa)02d", rupees=paisa // 100, paisa=paisa % 100)


def low_balance(name: str, balance: int, threshold: int) -> str:
    """The detail of a workspace's balance_low alert."""
    return f"{name}, {npr(balance)}, below {npr(threshold)}"


def lasted(seconds: float) -> Said:
    """'45 s', '12 min', '3 h 5 min'."""
    seconds = int(seconds)
    if seconds < 60:
        return _("%(seconds)d s", seconds=seconds)
    if seconds < 3600:
        return _("%(minutes)d min", minutes=seconds // 60)
    return _("%(hours)d h %(minutes)d min", hours=seconds // 3600, minutes=seconds % 3600 // 60)


# A workspace's balance alert as its owners are e-mailed it, each in the language they chose for
# the dashboard: the subject (the alert's own words, whole), then where to see and change it.
def balance_mail(name: str, balance: int, threshold: int) -> Said:
    return _("Sandesh: low balance: workspace %(name)s, %(balance)s, below %(threshold)s",
             name=name, balance=npr(balance), threshold=npr(threshold))


def balance_mail_cleared(name: str, seconds: float) -> Said:
    return _("Sandesh: recovered: balance low, %(name)s, after %(lasted)s", name=name, lasted=lasted(seconds))


BALANCE_MAIL_BODY = _("The workspace's balance, its top-ups and this alert's threshold are on its Overview:")


def one_sms(text: str) -> str:
    """The text cut to one SMS (160 GSM-7 characters, or 70 others), ending in an ellipsis where
    it was cut: "..." in GSM-7, since "…" is not in its alphabet and would make the SMS UCS-2,
    cut to 70."""
    whole = segment(text)
    if whole.segments <= 1:
        return text
    ellipsis = "..." if whole.encoding == "GSM-7" else "…"
    while text and segment(text + ellipsis).segments > 1:
        text = text[:-1]
    return text + ellipsis


def raised_text(condition: str, subject: str, detail: str) -> str:
    return one_sms(CONDITIONS[condition].text.format(subject=subject, detail=detail))


def cleared_text(condition: str, subject: str, seconds: float, about: str | None = None) -> str:
    """The end's words; `about` names the subject when its id would not (a workspace's or a
    client's name)."""
    if CONDITIONS[condition].of == SIM:
        what = f"SIM {subject} {condition.removeprefix('sim_').replace('_', ' ')}"
    else:
        what = condition.replace("_", " ") + (f", {about}" if about else "")
    return one_sms(f"Sandesh: recovered: {what}, after {lasted(seconds)}")


class Alert(Aggregate):
    """One occurrence of a condition of a subject: raised, each destination told, cleared."""

    class Raised(Aggregate.Created):
        written_from = ALERTS_FROM

        condition: str
        subject: str
        text: str
        at: float

    @staticmethod
    def create_id(**_: object) -> str:
        return new_id("al")

    @event(Raised)
    def __init__(self, condition: str, subject: str, text: str, at: float):
        self.condition, self.subject, self.text, self.raised_at = condition, subject, text, at
        self.cleared_at: float | None = None
        self.cleared_text: str | None = None

    class Cleared(Aggregate.Event):
        written_from = ALERTS_FROM

        text: str
        at: float

    def clear(self, at: float, about: str | None = None) -> None:
        if self.cleared_at is None:
            self._cleared(text=cleared_text(self.condition, self.subject, at - self.raised_at, about), at=at)

    @event(Cleared)
    def _cleared(self, text: str, at: float) -> None:
        self.cleared_at, self.cleared_text = at, text

    class Told(Aggregate.Event):
        """A destination was given the alert's message (`cleared`: the one of its end), or
        failed to be (`error`)."""
        written_from = ALERTS_FROM

        destination_id: str
        cleared: bool
        error: str | None
        at: float

    @event(Told)
    def tell(self, destination_id: str, cleared: bool, error: str | None, at: float) -> None:
        pass

    class Texted(Aggregate.Event):
        """An `sms:` destination's message was queued, in the same append, to go out through
        the pool; by another SIM than `avoid_sim` (the alert's subject) while another can send."""
        written_from = ALERTS_FROM

        destination_id: str
        cleared: bool
        message_id: str
        avoid_sim: str | None
        at: float

    @event(Texted)
    def texted(self, destination_id: str, cleared: bool, message_id: str, avoid_sim: str | None, at: float) -> None:
        pass


class Destination(Aggregate):
    """Where alerts go: an Apprise URL (mailto://, tgram://, json://…) or sms:+977…, kept
    sealed (it may hold a password); all conditions, or those named."""

    class Added(Aggregate.Created):
        written_from = ALERTS_FROM

        url_sealed: str
        shown: str  # the URL without its password, for `sandesh alerts list`
        conditions: list[str]
        actor: str
        at: float

    @staticmethod
    def create_id(**_: object) -> str:
        return new_id("ad")

    @event(Added)
    def __init__(self, url_sealed: str, shown: str, conditions: list[str], actor: str, at: float):
        self.url_sealed, self.shown, self.conditions = url_sealed, shown, list(conditions)
        self.removed = False

    class Removed(Aggregate.Event):
        written_from = ALERTS_FROM

        actor: str
        at: float

    @event(Removed)
    def remove(self, actor: str, at: float) -> None:
        self.removed = True


class Tuning(Aggregate):
    """The operators' tuning of the conditions: a delay of each, or off (one aggregate)."""
    ID = "alert_tuning"

    class Installed(Aggregate.Created):
        written_from = ALERTS_FROM

    @staticmethod
    def create_id(**_: object) -> str:
        return Tuning.ID

    @event(Installed)
    def __init__(self) -> None:
        self.delays: dict[str, float | None] = {}  # condition -> seconds; None: off

    class Tuned(Aggregate.Event):
        written_from = ALERTS_FROM

        condition: str
        delay: float | None  # None: off
        actor: str
        at: float

    @event(Tuned)
    def tune(self, condition: str, delay: float | None, actor: str, at: float) -> None:
        self.delays[condition] = delay

    class IntervalSet(Aggregate.Event):
        """How long after an alert ended the same one is not raised again (None: INTERVAL)."""
        written_from = ALERTS_FROM

        seconds: float | None
        actor: str
        at: float

    @event(IntervalSet)
    def set_interval(self, seconds: float | None, actor: str, at: float) -> None:
        pass  # read from the tuning's read model (projections/alerts.py)

    class DigestSet(Aggregate.Event):
        """When the daily digest is sent: seconds after a Nepal midnight (None: never)."""
        written_from = ALERTS_FROM

        seconds: float | None
        actor: str
        at: float

    @event(DigestSet)
    def set_digest(self, seconds: float | None, actor: str, at: float) -> None:
        pass  # read from the tuning's read model (projections/alerts.py)


class Digest(Aggregate):
    """The digest of one Nepal day, composed once: its id is the day's, so a second notifier
    (or one started again) finds it sent and sends nothing."""

    class Composed(Aggregate.Created):
        written_from = ALERTS_FROM

        day: str
        text: str
        at: float

    @staticmethod
    def create_id(day: str, **_: object) -> str:
        return f"digest-{day}"

    @event(Composed)
    def __init__(self, day: str, text: str, at: float):
        self.day, self.text, self.composed_at = day, text, at
        self.told: list[tuple[str, str | None]] = []  # (destination id, error or None), in order

    class Told(Aggregate.Event):
        """A destination was given the digest (`message_id`: its SMS), or failed to be (`error`)."""
        written_from = ALERTS_FROM

        destination_id: str
        message_id: str | None
        error: str | None
        at: float

    @event(Told)
    def tell(self, destination_id: str, message_id: str | None, error: str | None, at: float) -> None:
        self.told.append((destination_id, error))


def interval_of(tuning: dict[str, float | None]) -> float:
    """The interval as tuned, or its default."""
    interval = tuning.get(INTERVAL_KEY)
    return INTERVAL if interval is None else interval


def delay_of(tuning: dict[str, float | None], condition: str) -> float | None:
    """The condition's delay as tuned, or its default; None when it is off."""
    return tuning[condition] if condition in tuning else CONDITIONS[condition].delay
