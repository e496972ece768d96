"""Sending from the dashboard (docs/dashboard.md, "Sending"): a plan of what a list of recipients
and a text would send and cost, then one campaign of it, accepted whole or not at all.

The rules are a send's (domain/sending.py): the workspace's types, the SMS switch, a route,
opt-outs for promotional messages, promotional hours, at most 6 segments, the rates.  Sends go
through the workspace's Dashboard client, made at its first campaign: messages belong to a
client, and an API key never sees a message it did not send."""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import AbstractSet as Set, Sequence

from eventsourcing.persistence import IntegrityError

from ..campaign import Campaign, campaign_id, create as create_campaign
from ..client import Client
from ..clock import Clock
from ..credentials import new_webhook_secret, sha256_hex
from ..errors import InsufficientBalance, InvalidRequest, InvalidTransition, NotCancelable, NotFound, Refused
from ..message import Message
from ..optout import held_back
from ..ports import Caller, OptOuts, Sealer, Texts
from ..promo_hours import scheduled
from ..recipients import OPTED_OUT, Recipient, Refusal, render, without_duplicates
from ..segments import MAX_SEGMENTS, segment
from ..sending import SendRequest, cost as send_cost, refusal as send_refusal
from ..steps import run
from .log import Log
from .sending import Sending, text_key

SHOWN = 10  # messages shown in a preview, exactly as they will be sent
CANCEL_BATCH = 500  # messages canceled in one append
DASHBOARD_BRAND = "Dashboard"


def dashboard_client_id(workspace_id: str) -> str:
    return "cl_" + uuid.uuid5(uuid.NAMESPACE_URL, f"sandesh:dashboard-client:{workspace_id}").hex


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


class Campaigns:
    def __init__(self, log: Log, clock: Clock, texts: Texts, opt_outs: OptOuts, sending: Sending, sealer: Sealer):
        self.log, self.clock, self.texts, self.opt_outs = log, clock, texts, opt_outs
        self.sending, self.sealer = sending, sealer

    def ready(self) -> None:
        """InvalidTransition until every running process reads a campaign (the upgrade gate)."""
        if not self.log.writes(Campaign.Created):
            raise InvalidTransition("Sending from the dashboard starts once the upgrade to this release is "
                                    "finalized (`sandesh upgrade finalize`).")

    def plan(self, sender: Caller, balance: int, recipients: Sequence[Recipient], refused: Sequence[Refusal],
             text: str, message_type: str, send_at: float | None) -> Plan:
        """What sending `text` to `recipients` would send, to whom and at what cost, and which
        lines are refused and why; nothing is charged or stored.  Refused (a send's code) when
        no message of the type could be sent at all."""
        code = send_refusal(message_type, sender.allowed_types, sender.sms_enabled, sender.has_route)
        if code:
            raise Refused(code)
        if not text.strip():
            raise InvalidRequest(["text"], "Type the message.", "empty")
        now = self.clock.now()
        first = scheduled(SendRequest("", text, message_type, 1, "GSM-7", send_at=send_at), sender.promo_hours, now)
        kept, duplicates = without_duplicates(list(recipients))
        opted_out = (self.opt_outs.opted_out(sender.workspace_id, [r.number for r in kept])
                     if held_back(message_type) else set())
        planned: list[Planned] = []
        declined = list(refused) + duplicates
        for recipient in kept:
            if recipient.number in opted_out:
                declined.append(Refusal(recipient.line, recipient.number, OPTED_OUT))
                continue
            body, empty = render(text, recipient.fields)
            if empty:
                declined.append(Refusal(recipient.line, recipient.number,
                                        "empty placeholder " + ", ".join("{" + name + "}" for name in empty)))
                continue
            parts = segment(body)
            if parts.segments > MAX_SEGMENTS:
                declined.append(Refusal(recipient.line, recipient.number,
                                        f"over {MAX_SEGMENTS} segments ({parts.segments})"))
                continue
            planned.append(Planned(recipient.line, recipient.number, body, parts.segments, parts.encoding,
                                   send_cost(sender.rates, message_type, parts.segments)))
        return Plan(message_type, text, first.send_at, tuple(planned), tuple(sorted(declined, key=lambda r: r.line)),
                    balance)

    def sent(self, workspace_id: str, token: str) -> str | None:
        """The campaign a Send form's token made, if it made one."""
        found = self.log.find(campaign_id(workspace_id, token), Campaign)
        return found.id if found is not None else None

    def send(self, sender: Caller, by: str, plan: Plan, token: str,
             template: str | None = None) -> tuple[Campaign, bool]:
        """The plan's messages and their campaign in one append: all accepted and charged, or
        InsufficientBalance and nothing.  The same token again (a form posted twice) answers the
        campaign it made, with False.  `template`: the name of the template the text is."""
        self.ready()
        wanted = campaign_id(sender.workspace_id, token)
        found = self.log.find(wanted, Campaign)
        if found is not None:
            return found, False
        if not plan.messages:
            raise InvalidRequest(["recipients"], "No recipient is left to send to.", "empty")
        now = self.clock.now()
        key_of_texts = run(text_key(self.texts, sender.workspace_id), self.log.save)
        messages = [self.sending.message(sender.client_id, sender.workspace_id,
                                         SendRequest(m.to, m.text, plan.message_type, m.segments, m.encoding,
                                                     send_at=plan.send_at), m.cost, now, key_of_texts)
                    for m in plan.messages]
        campaign = create_campaign(id=wanted, workspace_id=sender.workspace_id, client_id=sender.client_id, actor=by,
                                   message_type=plan.message_type, text=self.texts.seal_with(key_of_texts, plan.text),
                                   template=template,
                                   send_at=plan.send_at, message_ids=[m.id for m in messages],
                                   refused=len(plan.refused), cost=plan.total, at=now)
        try:
            self.log.save(*messages, campaign)
        except IntegrityError:  # the same form, appended a moment before by another request
            found = self.log.find(wanted, Campaign)
            if found is None:
                raise
            return found, False
        except InsufficientBalance as short:
            raise InsufficientBalance(f"The balance is short of the campaign's cost by NPR "
                                      f"{(plan.total - plan.balance) / 100:,.2f}; nothing was sent.",
                                      cost=plan.total) from short
        return campaign, True

    def find(self, workspace_id: str, campaign_id_: str) -> Campaign | None:
        found = self.log.find(campaign_id_, Campaign)
        return found if found is not None and found.workspace_id == workspace_id else None

    def cancel(self, workspace_id: str, campaign_id_: str, gone: Set[str], by: str) -> tuple[int, int]:
        """Cancel the campaign's messages that have not left, each refunded in full.  `gone` are
        those the messages read model has seen leave or end, skipped without a look; of the
        others, what a SIM took meanwhile is left alone.  Returns how many were canceled and
        the paisa refunded."""
        self.ready()
        campaign = self.find(workspace_id, campaign_id_)
        if campaign is None:
            raise NotFound(f"no campaign {campaign_id_!r}")
        wanted = [m for m in campaign.message_ids if m not in gone]
        done: list[Message] = []
        for start in range(0, len(wanted), CANCEL_BATCH):
            done += self._cancel_some(wanted[start:start + CANCEL_BATCH])
        refunded = sum(m.cost for m in done)
        if done:
            campaign.cancel(len(done), refunded, by, self.clock.now())
            self.log.save(campaign)
        return len(done), refunded

    def _cancel_some(self, message_ids: list[str]) -> list[Message]:
        """These messages canceled in one append; should one have changed meanwhile (a SIM took
        it), each again on its own, and the one that left is left alone."""
        now = self.clock.now()
        changed = []
        for message_id in message_ids:
            message = self.log.find(message_id, Message)
            if message is None:
                continue
            try:
                message.cancel(at=now)
            except NotCancelable:
                continue
            changed.append(message)
        try:
            if changed:
                self.log.save(*changed)
            return changed
        except IntegrityError:
            done = []
            for message in changed:
                try:
                    done.append(self.sending.cancel_message(message.client_id, message.id))
                except (NotCancelable, IntegrityError):
                    continue
            return done

    def dashboard_client(self, workspace_id: str, actor: str) -> str:
        """The workspace's Dashboard client (its id), made at its first campaign: no one holds its
        key (only its hash is kept, of a key nobody was shown)."""
        client_id = dashboard_client_id(workspace_id)
        if self.log.find(client_id, Client) is None:
            secret = new_webhook_secret()
            client = Client._create(Client.Created, id=client_id, workspace_id=workspace_id, brand=DASHBOARD_BRAND,
                                    webhook_url=None, rate_limit=1, key_hash=sha256_hex(uuid.uuid4().hex),
                                    key_prefix="sk_live_none", secret_sealed=self.sealer.seal(secret),
                                    secret_hash=sha256_hex(secret), actor=actor, at=self.clock.now())
            try:
                self.log.save(client)
            except IntegrityError:  # made a moment before by another request
                pass
        return client_id

