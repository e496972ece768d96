"""Replies from recipients (docs/design.md, "Decisions: SIMs, modems and replies"; docs/api.md, "Events").

Each part read from a SIM is recorded before it is deleted from the SIM.  Parts of one
concatenated message are gathered on (SIM, sender, reference, total), duplicates dropped,
and the reply completes when every part arrived, or after 10 minutes with what arrived.

A reply whose first word is a client's keyword is that client's, answered nothing to: its
service is asked (ServiceAsked, before the client's reply URL is called) and answered
(ServiceAnswered, in the append of the SMS sent back, if any), once (docs/api.md, "Keyword services").
"""
from __future__ import annotations

import hashlib

from eventsourcing.domain import event

from .aggregate import Aggregate
from .client import SERVICES_FROM
from .credentials import new_id
from .errors import InvalidTransition

FLUSH_AFTER = 10 * 60
ATTRIBUTION_WINDOW = 7 * 24 * 3600


def sender_number(sender: str) -> str:
    """`+977…` for a Nepal number in national form, other senders as they came (docs/design.md,
    "Decisions: SIMs, modems and replies")."""
    if sender.isdigit() and len(sender) == 10 and sender.startswith("9"):
        return "+977" + sender
    if sender.isdigit() and sender.startswith("977") and len(sender) == 13:
        return "+" + sender
    return sender


def reply_owner(reply_id: str) -> str:
    """Who a reply's parts' key belongs to, until the reply is finished (domain/ports.py Texts)."""
    return f"reply:{reply_id}"


def keyed_reply_id(sim_id: str, key: str) -> str:
    """The id of the whole reply a device names by `key` (its inbox index and time, a phone's
    message id): read twice, it is the same reply, which the log records once."""
    return "in_" + hashlib.sha256(f"{sim_id}/{key}".encode()).hexdigest()[:32]


class Reply(Aggregate):
    @staticmethod
    def create_id(**_: object) -> str:
        return new_id("in")

    @event("Opened")
    def __init__(self, sim_id: str, sender: str, reference: int | None, total: int, at: float):
        self.sim_id = sim_id
        self.sender = sender
        self.reference = reference
        self.total = total
        self.parts: dict[int, str] = {}
        self.opened_at = at
        self.text: str | None = None
        self.client_id: str | None = None
        self.in_reply_to: str | None = None
        self.complete = False

    def store_part(self, sequence: int, text: str, at: float) -> bool:
        """Keep one part; False for a duplicate (parts arrive out of order and twice)."""
        if self.complete or sequence in self.parts:
            return False
        self._part_stored(sequence=sequence, text=text, at=at)
        return True

    @event("PartStored")
    def _part_stored(self, sequence: int, text: str, at: float) -> None:
        self.parts[sequence] = text

    @property
    def all_parts(self) -> bool:
        return len(self.parts) == self.total

    def finish(self, text: str, client_id: str | None, in_reply_to: str | None, at: float) -> None:
        """The reply as it arrived (`text`, its parts joined and sealed by the application),
        attributed to a client when one is known."""
        missing = [s for s in range(1, self.total + 1) if s not in self.parts]
        self._received(sim_id=self.sim_id, sender=self.sender, text=text, missing=missing,
                       client_id=client_id, in_reply_to=in_reply_to, at=at)

    @event("Received")
    def _received(self, sim_id: str, sender: str, text: str, missing: list[int], client_id: str | None,
                  in_reply_to: str | None, at: float) -> None:
        self.text, self.client_id, self.in_reply_to, self.complete = text, client_id, in_reply_to, True

    @property
    def for_service(self) -> bool:
        """A keyword's SMS: attributed to a client, answering no message of it."""
        return self.complete and self.client_id is not None and self.in_reply_to is None

    class ServiceAsked(Aggregate.Event):
        """The client's reply URL is about to be called for this keyword SMS."""
        written_from = SERVICES_FROM

        keyword: str
        at: float

    service_asked_at: float | None = None
    service_answered = False

    def ask_service(self, keyword: str, at: float) -> None:
        if not self.for_service or self.service_asked_at is not None:
            raise InvalidTransition(f"reply {self.id}'s service was asked already, or it has none")
        self._service_asked(keyword=keyword, at=at)

    @event(ServiceAsked)
    def _service_asked(self, keyword: str, at: float) -> None:
        self.service_asked_at = at

    class ServiceAnswered(Aggregate.Event):
        """What went back to the sender: the reply URL's text (`answer` "service"), the client's
        default reply ("default") or nothing ("none"); `message_id` the SMS that carries it, and
        `outcome` what the URL did, or why nothing was sent."""
        written_from = SERVICES_FROM

        message_id: str | None
        answer: str
        outcome: str
        at: float

    def answer_service(self, message_id: str | None, answer: str, outcome: str, at: float) -> None:
        if not self.for_service or self.service_answered:
            raise InvalidTransition(f"reply {self.id} was answered already, or it has no service")
        self._service_answered(message_id=message_id, answer=answer, outcome=outcome, at=at)

    @event(ServiceAnswered)
    def _service_answered(self, message_id: str | None, answer: str, outcome: str, at: float) -> None:
        self.service_answered = True
