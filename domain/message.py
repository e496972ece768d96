"""Message: an aggregate per send, whose events are the only truth about it (docs/api.md, "Message statuses").

queued -> submitted (handed to a modem) -> sent (every part accepted, +CMGS) -> delivered /
undelivered (status reports); failed (could not be sent), rejected (refused for good); any
state may return to queued.  A send with `sendAt` starts `scheduled` and is released to
`queued` at that time; a scheduled or queued message not yet handed to a modem may be
`canceled`, refunded in full (docs/api.md, "Scheduled sends").  The text lives only in the
(encrypted) events.
"""
from __future__ import annotations

from eventsourcing.domain import event

from .aggregate import Aggregate
from .clock import iso
from .credentials import new_id
from .errors import InvalidTransition, NotCancelable
from .pdu import validity_minutes

SCHEDULED, QUEUED, SUBMITTED, SENT = "scheduled", "queued", "submitted", "sent"
DELIVERED, UNDELIVERED, FAILED, REJECTED, CANCELED = "delivered", "undelivered", "failed", "rejected", "canceled"
STATUSES = (SCHEDULED, QUEUED, SUBMITTED, SENT, DELIVERED, UNDELIVERED, FAILED, REJECTED, CANCELED)
FINAL = (DELIVERED, UNDELIVERED, FAILED, REJECTED, CANCELED)
CANCELABLE = (SCHEDULED, QUEUED)
ROUTE = "device"
TEXT_ERASED = "text_erased"  # the workspace's texts were erased before the message went out
DEFAULT_VALIDITY_MINUTES = 24 * 60


class Message(Aggregate):
    @staticmethod
    def create_id(**_: object) -> str:
        return new_id("msg")

    @event("Accepted")
    def __init__(
        self, client_id: str, workspace_id: str, to: str, text: str, message_type: str, segments: int,
        encoding: str, cost: int, idempotency_key: str | None, request_hash: str | None, at: float,
        expires_at: float | None = None, send_at: float | None = None,
    ):
        self.client_id = client_id
        self.workspace_id = workspace_id
        self.to = to
        self.text = text
        self.message_type = message_type
        self.segments = segments
        self.encoding = encoding
        self.cost = cost
        self.send_at = send_at               # released to the queue at this time (scheduled until then)
        self.status = SCHEDULED if send_at is not None else QUEUED
        self.error: str | None = None
        self.created_at = at
        self.updated_at = at
        self.expires_at = expires_at         # not handed to a modem after this (docs/design.md, "Validity")
        self.sim_id: str | None = None
        self.parts: int = segments
        self.accepted: dict[int, int] = {}   # part -> TP-MR from +CMGS
        self.reports: dict[int, int] = {}    # part -> TP-ST of its latest status report
        self.ever_accepted = False           # any part accepted by the network, ever: no refund
        self.report_known = True
        self.failed_on: list[str] = []       # SIMs that proved they could not send it
        self.unknown_since: float | None = None  # outcome of a submission unknown since
        self.attempts = 0                    # submissions that ended back in the queue

    def release(self, at: float) -> None:
        """Its `sendAt` came: it joins the queue.  One canceled meanwhile stays canceled."""
        if self.status == SCHEDULED:
            self._released(client_id=self.client_id, message_type=self.message_type, to=self.to,
                           segments=self.segments, expires_at=self.expires_at, at=at)

    @event("Released")
    def _released(self, client_id: str, message_type: str, to: str, segments: int, expires_at: float | None,
                  at: float) -> None:
        self.status, self.updated_at = QUEUED, at

    def cancel(self, at: float) -> None:
        """The caller takes back a message no modem has been handed yet: refunded in full."""
        if self.status not in CANCELABLE:
            raise NotCancelable(self.status)
        self._canceled(refund=self.cost, workspace_id=self.workspace_id, at=at)

    @event("Canceled")
    def _canceled(self, refund: int, workspace_id: str, at: float) -> None:
        self.status, self.updated_at = CANCELED, at

    def submit(self, sim_id: str, at: float) -> None:
        if self.status != QUEUED:
            raise InvalidTransition(f"message is {self.status}; only a queued message is submitted")
        self._submitted(sim_id=sim_id, at=at)

    @event("Submitted")
    def _submitted(self, sim_id: str, at: float) -> None:
        self.status, self.sim_id, self.updated_at = SUBMITTED, sim_id, at
        self.accepted, self.reports = {}, {}

    def part_accepted(self, part: int, mr: int, at: float) -> None:
        """+CMGS for one part; the last one makes the message `sent`."""
        self._part_accepted(sim_id=self.sim_id, part=part, mr=mr, to=self.to, at=at)
        if len(self.accepted) == self.parts:
            self._sent(at=at)

    @event("PartAccepted")
    def _part_accepted(self, sim_id: str, part: int, mr: int, to: str, at: float) -> None:
        self.accepted[part] = mr
        self.ever_accepted = True

    @event("Sent")
    def _sent(self, at: float) -> None:
        self.status, self.updated_at = SENT, at

    def outcome_unknown(self, at: float) -> None:
        """Its SIM's dispatcher stopped between writing a part and recording the modem's answer:
        the network may have it.  It is never resent; it waits for a status report (matched on
        SIM and recipient) until its validity period ends (docs/reliability.md)."""
        if self.status == SUBMITTED and not self.unknown_since:
            self._outcome_unknown(sim_id=self.sim_id, at=at)

    @event("OutcomeUnknown")
    def _outcome_unknown(self, sim_id: str, at: float) -> None:
        self.unknown_since = at

    def report_after_unknown(self, mr: int, status: int, at: float) -> None:
        """A status report for a message whose +CMGS was never recorded: the network had its part."""
        part = next(p for p in range(1, self.parts + 1) if p not in self.accepted)
        self._part_accepted(sim_id=self.sim_id, part=part, mr=mr, to=self.to, at=at)
        if len(self.accepted) == self.parts:
            self._sent(at=at)
        self.report(part, status, at=at)

    def never_reported(self, at: float) -> None:
        """No status report came for it within its validity period: failed, and not refunded,
        since the network may have delivered it.  One whose report came meanwhile is left as it is."""
        if self.status != SUBMITTED:
            return
        self._failed(error="outcome unknown: its dispatcher stopped while the modem was sending it and no status "
                           "report came within its validity period; not resent, so the recipient never gets it twice",
                     refund=0, workspace_id=self.workspace_id, at=at)

    def report(self, part: int, status: int, at: float) -> None:
        """A status report (TP-ST, TS 23.040 §9.2.3.15) for one part: any permanent failure makes
        the message undelivered; all parts delivered make it delivered; 0x20-0x3F keeps it sent."""
        if self.status not in (SENT, SUBMITTED):
            return
        self._part_reported(part=part, status=status, at=at)
        if status >= 0x40:
            self._undelivered(error=f"status report TP-ST 0x{status:02X} for part {part}", at=at)
        elif len(self.reports) == self.parts and all(s < 0x20 for s in self.reports.values()):
            self._delivered(at=at)

    def report_next(self, status: int, at: float) -> None:
        """A status report that names no part (a device that matches none): the first part
        accepted and not reported yet."""
        part = next((p for p in sorted(self.accepted) if p not in self.reports), None)
        if part is not None:
            self.report(part, status, at=at)

    def report_whole(self, status: int, at: float) -> None:
        """A device's word on the whole message (it names no part): every part not reported yet."""
        for _ in range(self.parts):
            self.report_next(status, at=at)

    def report_unknown(self, at: float) -> None:
        """No final report within the validity period: some networks never send one. The
        message stays `sent`; the missing report is recorded."""
        if self.status == SENT:
            self._report_unknown(at=at)

    @event("ReportUnknown")
    def _report_unknown(self, at: float) -> None:
        self.report_known = False

    @event("PartReported")
    def _part_reported(self, part: int, status: int, at: float) -> None:
        self.reports[part] = status

    @event("Delivered")
    def _delivered(self, at: float) -> None:
        self.status, self.error, self.updated_at = DELIVERED, None, at

    @event("Undelivered")
    def _undelivered(self, error: str, at: float) -> None:
        self.status, self.error, self.updated_at = UNDELIVERED, error, at

    def requeue(self, reason: str, not_before: float, at: float) -> None:
        """Back to waiting after its SIM proved it did not send it: on to another SIM at once,
        back to this one (`sim_id`) not before `not_before`."""
        if self.status in FINAL:
            raise InvalidTransition(f"message is {self.status}")
        self._requeued(error=reason, not_before=not_before, sim_id=self.sim_id, at=at)

    @event("Requeued")
    def _requeued(self, error: str, not_before: float, at: float, sim_id: str | None = None) -> None:
        self.status, self.error, self.updated_at, self.sim_id = QUEUED, error, at, None
        self.attempts += 1
        if sim_id is not None and sim_id not in self.failed_on:
            self.failed_on.append(sim_id)

    def validity_minutes(self, now: float) -> int:
        """The TP-VP its SUBMIT asks for: what is left of its life (an OTP's: no more than its
        code's), else 24 hours (docs/design.md, "Validity")."""
        if self.expires_at is None:
            return DEFAULT_VALIDITY_MINUTES
        return validity_minutes(self.expires_at - now, at_most=self.message_type == "otp")

    def expired(self, now: float) -> bool:
        return self.expires_at is not None and now >= self.expires_at

    def expire(self, at: float) -> None:
        """Its validity ended before a modem took it: failed, and refunded since nothing reached
        the network (docs/design.md, "Decisions: money").  One a SIM took meanwhile was in time: nothing changes."""
        if self.status != QUEUED:
            return
        what = "its code expired" if self.message_type == "otp" else "its validity period ended"
        self.fail(f"expired before it could be sent: {what}", at=at)

    def fail(self, error: str, at: float) -> None:
        self._end(FAILED, error, at)

    def reject(self, error: str, at: float) -> None:
        self._end(REJECTED, error, at)

    def _end(self, status: str, error: str, at: float) -> None:
        """Failed or rejected; refunded when no segment was ever accepted by the network
        (docs/design.md, "Decisions: money")."""
        if self.status in FINAL:
            raise InvalidTransition(f"message is {self.status}")
        refund = 0 if self.ever_accepted else self.cost
        (self._failed if status == FAILED else self._rejected)(error=error, refund=refund,
                                                               workspace_id=self.workspace_id, at=at)

    @event("Failed")
    def _failed(self, error: str, refund: int, workspace_id: str, at: float) -> None:
        self.status, self.error, self.updated_at = FAILED, error, at

    @event("Rejected")
    def _rejected(self, error: str, refund: int, workspace_id: str, at: float) -> None:
        self.status, self.error, self.updated_at = REJECTED, error, at


# The status events that carry a reason (`error`); the others say none.
WITH_ERROR = (Message.Undelivered, Message.Requeued, Message.Failed, Message.Rejected)


def error_of(event: Message.Event) -> str | None:
    """The reason a status event gives: a failure's, an undelivered report's, or why the
    message went back to the queue; None for the other events."""
    return event.error if isinstance(event, WITH_ERROR) else None


def accept(**accepted: object) -> Message:
    """A new Message.  Same as `Message(**accepted)` without the library's per-call signature
    introspection (about a fifth of a millisecond, on the send path)."""
    accepted.setdefault("expires_at", None)
    accepted.setdefault("send_at", None)
    return Message._create(Message.Accepted, **accepted)


def accepted_reply(message_id: str, message_type: str, segments: int, encoding: str, cost: int,
                   expires_at: float | None = None, send_at: float | None = None) -> dict:
    """The 202 body of POST /v1/sms/send (docs/design.md, "Decisions: send"), also what an idempotent replay returns;
    `expiresAt` when the send asked for a validity (`validFor`), `sendAt` when it was scheduled."""
    reply = {"messageId": message_id, "status": SCHEDULED if send_at is not None else QUEUED,
             "messageType": message_type, "segments": segments, "encoding": encoding, "cost": cost}
    if expires_at is not None:
        reply["expiresAt"] = iso(expires_at)
    if send_at is not None:
        reply["sendAt"] = iso(send_at)
    return reply
