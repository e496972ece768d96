"""Sending from the dashboard (docs/dashboard.md, "Sending"), one method for each request of its
pages: the hints as one types, Preview (what the form would send, domain/campaign_plan.py, kept
as a draft under the token of the form that confirms it), "Send N messages" (that draft sent as
one campaign, accepted whole or not at all) and "Cancel what has not left".

Sends go through the workspace's Dashboard client, made in its first campaign's append: messages
belong to a client, and an API key never sees a message it did not send."""
from __future__ import annotations

import secrets
import uuid
from dataclasses import dataclass, field
from typing import Any

from eventsourcing.persistence import IntegrityError

from ..campaign import Campaign, campaign_id, create as create_campaign
from ..campaign_plan import TYPES, Draft, Plan, SendForm, plan, problems
from ..client import Client
from ..clock import Clock
from ..credentials import new_webhook_secret, sha256_hex
from ..errors import InsufficientBalance, InvalidRequest, InvalidTransition, NotCancelable, NotFound, Refused
from ..message import Message
from ..optout import held_back
from ..ports import (CampaignProgress, ContactBook, Drafts, KeptTemplate, OptOuts, Sealer, SendingState, SendingStates,
                     Texts)
from ..preview import Preview as TextPreview, preview as text_preview
from ..recipients import Listed, Recipient, read_typed
from ..said import Said, _
from ..sending import SendRequest
from ..steps import Read, Steps, retried, run
from .contacts import open_fields
from .log import Log
from .sending import Sending, text_key

CANCEL_BATCH = 500  # messages canceled in one append
DASHBOARD_BRAND = "Dashboard"
# A send's refusal (domain/sending.py, `refusal`) by its code, as the Send page says it
REFUSED = {"forbidden": _("This workspace may not send %(type)s messages: ask the operators."),
           "sms_disabled": _("Sending is switched off for now by the operators. Try again later."),
           "unavailable": _("No SIM can send right now. Try again in a few minutes.")}


def dashboard_client_id(workspace_id: str) -> str:
    return "cl_" + uuid.uuid5(uuid.NAMESPACE_URL, f"sandesh:dashboard-client:{workspace_id}").hex


@dataclass(frozen=True)
class Preview:
    """What Preview shows: the plan and the token of the form that sends it, or the form's
    problems by field.  `text` is the message previewed: a template's, when the field was left
    empty."""
    text: str
    errors: dict[str, str] = field(default_factory=dict)
    plan: Plan | None = None
    token: str | None = None
    columns: list[str] = field(default_factory=list)  # of the list the recipients came from
    source: str = ""


@dataclass(frozen=True)
class Sent:
    campaign_id: str


@dataclass(frozen=True)
class NotSent:
    reason: str
    plan: Plan | None = None  # the balance was short: the plan it cannot pay, shown again


@dataclass(frozen=True)
class CanceledMessages:
    count: int
    refunded: int  # paisa


class Campaigns:
    def __init__(self, log: Log, clock: Clock, texts: Texts, opt_outs: OptOuts, sending: Sending, sealer: Sealer,
                 states: SendingStates, drafts: Drafts, book: ContactBook, progress: CampaignProgress):
        self.log, self.clock, self.texts, self.opt_outs = log, clock, texts, opt_outs
        self.sending, self.sealer, self.states = sending, sealer, states
        self.drafts, self.book, self.progress = drafts, book, progress

    def hints(self, workspace_id: str, text: str, message_type: str) -> TextPreview:
        """As one types on the Send page: the segments, encoding and cost of the text for one
        recipient, at the workspace's rates, as POST /v1/sms/preview answers them."""
        state = self.states.of(workspace_id)
        if state is None:
            raise NotFound(_("no workspace %(id)s", id=repr(workspace_id)))
        return text_preview(text, state.rates, message_type if message_type in TYPES else TYPES[0])

    def preview(self, workspace_id: str, person_id: str, form: SendForm) -> Preview:
        """Preview: what the form would send, to whom, at what cost, and which lines are refused
        and why, kept sealed as a draft for an hour under the token its confirming form carries;
        else the form's problems.  Nothing is charged."""
        sources = form.sources
        if len(sources) > 1:
            return Preview(form.text, {"recipients": too_many_sources(sources)})
        text, template = form.text, None
        if form.template_id:
            template = self._template(workspace_id, form.template_id)
            if template is None:
                return Preview(text, {"template": _("That template is gone: choose another.")})
            text = text if text.strip() else template.text
        listed = self._listed(workspace_id, form)
        errors = problems(form, text, listed, self.clock.now())
        if errors:
            return Preview(text, errors, columns=listed.columns, source=listed.source)
        draft = Draft(listed.recipients, listed.refused, text, form.message_type, form.moment, listed.source,
                      template.name if template is not None and template.text == text else None)
        try:
            planned = self._plan(workspace_id, draft)
        except (InvalidTransition, InvalidRequest, Refused) as problem:
            return Preview(text, {"recipients": said(problem, form.message_type)}, columns=listed.columns,
                           source=listed.source)
        token = secrets.token_urlsafe(18)
        self.drafts.keep(token, workspace_id, person_id, self.texts.seal(workspace_id, draft.dumps()), self.clock.now())
        return Preview(text, plan=planned, token=token, columns=listed.columns, source=listed.source)

    def send(self, workspace_id: str, person_id: str, token: str, actor: str) -> Sent | NotSent:
        """"Send N messages": the person's draft kept under `token`, planned again on the
        workspace as it is now, sent as one campaign: its messages, its record and their charge in
        one append (with the workspace's Dashboard client at its first campaign), all accepted or
        none.  The same token again (a form posted twice) answers the campaign it made."""
        wanted = campaign_id(workspace_id, token)
        draft = self._draft(workspace_id, person_id, token)
        try:
            if draft is None:
                raise InvalidTransition(_("This preview is older than an hour: preview again."))
            self._ready()
            planned = self._plan(workspace_id, draft)
            if not planned.messages:
                raise InvalidRequest(["recipients"], _("No recipient is left to send to."), "empty")
        except (InvalidTransition, InvalidRequest, Refused) as problem:
            made = self.log.find(wanted, Campaign)  # sent by the same form before (its draft may be gone since)
            return Sent(made.id) if made is not None else NotSent(said(problem, draft.message_type if draft else ""))
        template = draft.template
        try:
            return run(retried(lambda: self._campaign(workspace_id, wanted, actor, planned, template),
                               f"the campaign {wanted}"), self.log.save)
        except InsufficientBalance:
            short = (planned.total - planned.balance) / 100
            return NotSent(_("The balance is short of the campaign's cost by NPR %(short)s; nothing was sent.",
                             short=format(short, ",.2f")), planned)

    def find(self, workspace_id: str, campaign_id_: str) -> Campaign | None:
        found = self.log.find(campaign_id_, Campaign)
        return found if found is not None and found.workspace_id == workspace_id else None

    def cancel(self, workspace_id: str, campaign_id_: str, actor: str) -> CanceledMessages:
        """Cancel the campaign's messages that have not left, each refunded in full.  Those the
        messages read model has seen leave or end are skipped without a look; of the others,
        what a SIM took meanwhile is left alone."""
        self._ready()
        campaign = self.find(workspace_id, campaign_id_)
        if campaign is None:
            raise NotFound(_("no campaign %(id)s", id=repr(campaign_id_)))
        gone = self.progress.gone(campaign.id)
        wanted = [m for m in campaign.message_ids if m not in gone]
        done: list[Message] = []
        for start in range(0, len(wanted), CANCEL_BATCH):
            done += self._cancel_some(wanted[start:start + CANCEL_BATCH])
        refunded = sum(m.cost for m in done)
        if done:
            campaign.cancel(len(done), refunded, actor, self.clock.now())
            self.log.save(campaign)
        return CanceledMessages(len(done), refunded)

    def _ready(self) -> None:
        """InvalidTransition until every running process reads a campaign (the upgrade gate)."""
        if not self.log.writes(Campaign.Created):
            raise InvalidTransition(_("Sending from the dashboard starts once the upgrade to this release is "
                                      "finalized (`sandesh upgrade finalize`)."))

    def _state(self, workspace_id: str) -> SendingState:
        state = self.states.of(workspace_id)
        if state is None:
            raise InvalidTransition(_("no such workspace"))
        if state.status != "active":  # the status said in the page's language: the catalog has its name
            raise InvalidTransition(_("The workspace is %(status)s: it sends once the operators activate it.",
                                      status=Said(state.status)))
        return state

    def _template(self, workspace_id: str, template_id: str) -> KeptTemplate | None:
        """The template with its text opened; None when it is gone or erased."""
        found = self.book.template(workspace_id, template_id)
        text = self.texts.open(found.text) if found is not None else None
        return KeptTemplate(found.name, text) if found is not None and text is not None else None

    def _listed(self, workspace_id: str, form: SendForm) -> Listed:
        if form.list_id:
            return self._contact_list(workspace_id, form.list_id)
        if form.file is not None:
            return form.file
        return read_typed(form.recipients) if form.recipients.strip() else Listed()

    def _contact_list(self, workspace_id: str, list_id: str) -> Listed:
        """The recipients of a contact list, numbered as the list shows them, with their columns."""
        found = self.book.contact_list(workspace_id, list_id)
        if found is None:
            return Listed(errors={"list": _("That contact list is gone: choose another.")})
        listed = Listed(source=_("the contact list %(name)s", name=repr(found.name)))
        columns: dict[str, None] = {}
        for n, contact in enumerate(found.contacts, start=1):
            fields = open_fields(self.texts, contact.fields)
            columns.update(dict.fromkeys(fields))
            listed.recipients.append(Recipient(n, contact.number, fields))
        listed.columns = list(columns)
        return listed

    def _plan(self, workspace_id: str, draft: Draft) -> Plan:
        """The draft's plan on the workspace as it is now."""
        state = self._state(workspace_id)
        numbers = sorted({r.number for r in draft.recipients})
        opted_out = self.opt_outs.opted_out(workspace_id, numbers) if held_back(draft.message_type) else set()
        return plan(state, draft.recipients, draft.refused, draft.text, draft.message_type, draft.send_at, opted_out,
                    self.clock.now())

    def _draft(self, workspace_id: str, person_id: str, token: str) -> Draft | None:
        sealed = self.drafts.find(token, workspace_id, person_id, self.clock.now())
        opened = self.texts.open(sealed) if sealed else None
        return Draft.loads(opened) if opened else None

    def _campaign(self, workspace_id: str, wanted: str, actor: str, planned: Plan,
                  template: str | None) -> Steps[tuple[tuple[Any, ...], Sent]]:
        """The planned messages and their campaign, to be appended together; none when the same
        form's campaign was appended a moment before by another request."""
        made = yield Read(self.log.find, (wanted, Campaign))
        if made is not None:
            return (), Sent(made.id)
        client_id = dashboard_client_id(workspace_id)
        client = yield Read(self.log.find, (client_id, Client))
        first = () if client is not None else (self._dashboard_client(client_id, workspace_id, actor),)
        key_of_texts = yield from text_key(self.texts, workspace_id)
        now = self.clock.now()
        messages = [self.sending.message(client_id, workspace_id,
                                         SendRequest(m.to, m.text, planned.message_type, m.segments, m.encoding,
                                                     send_at=planned.send_at), m.cost, now, key_of_texts)
                    for m in planned.messages]
        campaign = create_campaign(id=wanted, workspace_id=workspace_id, client_id=client_id, actor=actor,
                                   message_type=planned.message_type, text=self.texts.seal_with(key_of_texts, planned.text),
                                   template=template, send_at=planned.send_at, message_ids=[m.id for m in messages],
                                   refused=len(planned.refused), cost=planned.total, at=now)
        return (*first, *messages, campaign), Sent(campaign.id)

    def _dashboard_client(self, client_id: str, workspace_id: str, actor: str) -> Client:
        """The workspace's Dashboard client: no one holds its key (only its hash is kept, of a key
        nobody was shown)."""
        secret = new_webhook_secret()
        return Client._create(Client.Created, id=client_id, workspace_id=workspace_id, brand=DASHBOARD_BRAND,
                              webhook_url=None, rate_limit=1, key_hash=sha256_hex(uuid.uuid4().hex),
                              key_prefix="sk_live_none", secret_sealed=self.sealer.seal(secret),
                              secret_hash=sha256_hex(secret), actor=actor, at=self.clock.now())

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


def said(problem: InvalidTransition | InvalidRequest | Refused, message_type: str) -> str:
    """Why nothing is planned or sent, as the Send page says it (the type's name in the page's
    language too: the catalog has it)."""
    if isinstance(problem, Refused):
        found = REFUSED.get(problem.code)
        return Said(found.english, type=Said(message_type)) if found is not None else problem.code
    return problem.args[0]


def too_many_sources(sources: list[str]) -> Said:
    """The recipients come from one place at a time: the typed numbers, a file or a list."""
    if len(sources) == 2:
        return _("Send to one of %(first)s, %(second)s, not to 2 at once.", first=sources[0], second=sources[1])
    return _("Send to one of %(first)s, %(second)s, %(third)s, not to 3 at once.", first=sources[0],
             second=sources[1], third=sources[2])
