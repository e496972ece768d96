"""What a campaign would send (docs/dashboard.md, "Sending"): the Send page's form checked, and
the plan of a text sent to a list of recipients, each message as it will leave with its
segments, encoding and cost, and each line refused with its reason.  Pure functions of the form,
the workspace's state and the time: domain/usecases/campaigns.py reads them and keeps the plan.

The rules are a send's (domain/sending.py): the workspace's types, the SMS switch, a route,
opt-outs for promotional messages, promotional hours, at most 6 segments, the rates."""
from __future__ import annotations

from dataclasses import dataclass
from typing import AbstractSet as Set, Sequence

import orjson

from .clock import nepal_moment
from .errors import InvalidRequest, Refused
from .ports import SendingState
from .promo_hours import scheduled
from .recipients import OPTED_OUT, Listed, Recipient, Refusal, placeholders, render, without_duplicates
from .said import _
from .segments import MAX_SEGMENTS, segment
from .sending import SCHEDULE_AHEAD_MAX, SendRequest, cost, refusal

TYPES = ("transactional", "promotional")  # what the Send page sends
TYPED, FILE, LIST = _("the numbers typed"), _("a file"), _("a contact list")  # where recipients come from


@dataclass(frozen=True)
class SendForm:
    """The Send page's form as the person filled it in, every field as typed."""
    recipients: str = ""          # the numbers typed
    text: str = ""
    message_type: str = ""
    send_at: str = ""             # Nepal time, as a datetime-local field gives it: 2026-12-01T09:30
    list_id: str = ""
    template_id: str = ""
    uploaded: bool = False        # a file came with the form
    file: Listed | None = None    # its recipients, read on a child process (api/uploads), when it is the one source

    @property
    def sources(self) -> list[str]:
        """Where the recipients come from; one at a time."""
        given = ((TYPED, self.recipients.strip()), (FILE, self.uploaded or self.file is not None), (LIST, self.list_id))
        return [name for name, present in given if present]

    @property
    def moment(self) -> float | None:
        """When the messages are asked to leave; None: at once (or not a time: `problems` says so)."""
        return nepal_moment(self.send_at) if self.send_at.strip() else None


def problems(form: SendForm, text: str, listed: Listed, now: float) -> dict[str, str]:
    """What is wrong with the form, by its field, before the workspace is asked; `text` is the
    message (a template's, when the field was left empty), `listed` its recipients."""
    errors = dict(listed.errors)
    if not form.sources:
        errors["recipients"] = _("Type or paste the numbers, upload a list, or choose a contact list.")
    if form.message_type not in TYPES:
        errors["type"] = _("Choose transactional or promotional.")
    missing = ", ".join("{" + name + "}" for name in placeholders(text) if name not in listed.columns)
    if missing and "file" not in errors:
        errors["text"] = (_("The list has no column %(missing)s: the columns are %(columns)s.", missing=missing,
                            columns=", ".join(listed.columns)) if listed.columns else
                          _("The list has no column %(missing)s: placeholders need an uploaded list with columns.",
                            missing=missing))
    if form.send_at.strip():
        if form.moment is None:
            errors["send_at"] = _("A date and time, Nepal time.")
        elif form.moment <= now or form.moment > now + SCHEDULE_AHEAD_MAX:
            errors["send_at"] = _("A time from now to 30 days ahead, Nepal time.")
    if not text.strip():
        errors["text"] = _("Type the message.")
    return errors


@dataclass(frozen=True)
class Planned:
    line: int
    to: str
    text: str
    segments: int
    encoding: str
    cost: int


@dataclass(frozen=True)
class Plan:
    message_type: str
    text: str                     # as typed, placeholders and all
    send_at: float | None         # when the messages leave, when later than now (asked, or promotional hours)
    messages: tuple[Planned, ...]
    refused: tuple[Refusal, ...]  # by line
    balance: int

    @property
    def total(self) -> int:
        return sum(m.cost for m in self.messages)


def plan(state: SendingState, recipients: Sequence[Recipient], refused: Sequence[Refusal], text: str,
         message_type: str, send_at: float | None, opted_out: Set[str], now: float) -> Plan:
    """What sending `text` to `recipients` would send, to whom and at what cost, and which lines
    are refused and why (`refused`: those refused already as they were read); `opted_out`: the
    numbers opted out of the workspace's promotional messages.  Refused (a send's code) when no
    message of the type could be sent at all."""
    has_route = state.route_until is not None and now < state.route_until
    code = refusal(message_type, state.allowed_types, state.sms_enabled, has_route)
    if code:
        raise Refused(code)
    if not text.strip():
        raise InvalidRequest(["text"], _("Type the message."), "empty")
    first = scheduled(SendRequest("", text, message_type, 1, "GSM-7", send_at=send_at), state.promo_hours, now)
    kept, duplicates = without_duplicates(list(recipients))
    planned: list[Planned] = []
    declined = list(refused) + duplicates
    for recipient in kept:
        if recipient.number in opted_out:
            declined.append(Refusal(recipient.line, recipient.number, OPTED_OUT))
            continue
        body, empty = render(text, recipient.fields)
        if empty:
            names = ", ".join("{" + name + "}" for name in empty)
            declined.append(Refusal(recipient.line, recipient.number, _("empty placeholder %(names)s", names=names)))
            continue
        parts = segment(body)
        if parts.segments > MAX_SEGMENTS:
            declined.append(Refusal(recipient.line, recipient.number, _("over %(most)s segments (%(segments)s)",
                                                                        most=MAX_SEGMENTS, segments=parts.segments)))
            continue
        planned.append(Planned(recipient.line, recipient.number, body, parts.segments, parts.encoding,
                               cost(state.rates, message_type, parts.segments)))
    return Plan(message_type, text, first.send_at, tuple(planned), tuple(sorted(declined, key=lambda r: r.line)),
                state.balance)


@dataclass(frozen=True)
class Draft:
    """A preview as it is kept until it is sent; its JSON is read by the releases before and after."""
    recipients: list[Recipient]
    refused: list[Refusal]
    text: str
    message_type: str
    send_at: float | None
    source: str
    template: str | None  # the name of the template the text is, unchanged

    def dumps(self) -> str:
        return orjson.dumps({"recipients": [[r.line, r.number, r.fields] for r in self.recipients],
                             "refused": [[r.line, r.given, r.reason] for r in self.refused],
                             "text": self.text, "type": self.message_type, "sendAt": self.send_at,
                             "source": self.source, "template": self.template}).decode()

    @staticmethod
    def loads(text: str) -> Draft:
        kept = orjson.loads(text)
        return Draft([Recipient(line, number, fields) for line, number, fields in kept["recipients"]],
                     [Refusal(line, given, reason) for line, given, reason in kept["refused"]], kept["text"],
                     kept["type"], kept["sendAt"], kept["source"], kept.get("template"))
