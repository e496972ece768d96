"""Keyword services (docs/api.md, "Keyword services"): an SMS whose first word is a client's
keyword is answered by the client's reply URL, or its default reply, once.

The service is asked (Reply.ServiceAsked) before the URL is called, so that a restart never
calls it twice; the answer is sent as a transactional message of the client, charged as a
send, in the same append as Reply.ServiceAnswered, so that it is sent at most once, and a
reply whose service was asked and never answered is given the default reply."""
from __future__ import annotations

from dataclasses import dataclass

from eventsourcing.persistence import IntegrityError

from ..client import first_word
from ..clock import Clock
from ..errors import InsufficientBalance
from ..inbound import Reply
from ..message import Message
from ..ports import Caller, Texts
from ..sending import refusal as send_refusal
from ..steps import Read, Steps, retried, run
from .log import Log
from .sending import Sending

# What went back to the sender (Reply.ServiceAnswered's `answer`)
SERVICE, DEFAULT, NOTHING = "service", "default", "none"


@dataclass(frozen=True)
class Asked:
    reply: Reply
    keyword: str
    text: str  # the SMS as it arrived


class KeywordServices:
    def __init__(self, log: Log, clock: Clock, texts: Texts, sending: Sending):
        self.log, self.clock, self.texts, self.sending = log, clock, texts, sending

    def ask(self, reply_id: str) -> Asked | None:
        """Record that the reply URL is about to be called; None when the reply's service was
        asked already (here or by another sender) or it has none."""
        reply = self.log.find(reply_id, Reply)
        if reply is None or not reply.for_service or reply.service_asked_at is not None:
            return None
        text = self.texts.open(reply.text) or ""
        keyword = first_word(text) or ""
        reply.ask_service(keyword, at=self.clock.now())
        try:
            self.log.save(reply)
        except IntegrityError:  # another sender asked it first
            return None
        return Asked(reply, keyword, text)

    def answer(self, reply_id: str, caller: Caller | None, text: str | None, answer: str, outcome: str) -> Reply:
        """Send `text` back to the reply's sender as a transactional message of `caller` (the
        keyword's client), charged as a send, and record the answer in the same append; with
        `text` None, or when the send is refused, record that nothing was sent and why."""
        try:
            return run(retried(lambda: self._answer(reply_id, caller, text, answer, outcome),
                               f"the answer to {reply_id}"), self.log.save)
        except InsufficientBalance:
            return run(retried(lambda: self._answer(reply_id, caller, None, NOTHING,
                                                    f"{outcome}; not sent: the workspace balance is too low"),
                               f"the answer to {reply_id}"), self.log.save)

    def _answer(self, reply_id: str, caller: Caller | None, text: str | None, answer: str,
                outcome: str) -> Steps[tuple[tuple[Reply | Message, ...], Reply]]:
        reply = yield Read(self.log.get, (reply_id, Reply, "reply"))
        if reply.service_answered:  # answered elsewhere
            return (), reply
        now = self.clock.now()
        message = None
        refused = self._refused(caller) if text is not None else None
        if refused:
            outcome = f"{outcome}; not sent: {refused}"
        elif text is not None:
            assert caller is not None
            message, problems = yield from self.sending.answer_steps(caller.client_id, caller.workspace_id,
                                                                     caller.rates, reply.sender.lstrip("+"), text, now)
            if message is None:
                outcome = f"{outcome}; not sent: " + ("; ".join(p.message for p in problems) or "not one SMS")
        reply.answer_service(message.id if message else None, answer if message else NOTHING, outcome, at=now)
        return ((message, reply) if message else (reply,)), reply

    @staticmethod
    def _refused(caller: Caller | None) -> str | None:
        """Why the client may not send the answer now (the refusals of a transactional send), or None."""
        if caller is None:
            return "the client is disabled"
        if caller.workspace_status != "active":
            return f"the workspace is {caller.workspace_status}"
        return send_refusal("transactional", caller.allowed_types, caller.sms_enabled, caller.has_route)
