"""The use cases over in-memory adapters: the same Sandesh that `bootstrap()` builds over
PostgreSQL, with eventsourcing's in-memory store for the log and plain dicts for the read models
the use cases ask (or the log's aggregates, where a read model holds no more than their state).
The store's guards (docs/design.md, "Decisions: event store and security") are kept here as they
are in PostgreSQL: an append that would take a balance below zero, reuse an
Idempotency-Key, a SIM's name or ICCID, or overfill an OTP window is refused whole."""
from __future__ import annotations

import copy
import hashlib
import secrets
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

import orjson
from eventsourcing.persistence import StoredEvent
from eventsourcing.popo import POPOApplicationRecorder, POPOFactory

from sandesh.api.answers import batch_answer
from sandesh.domain.application import Sandesh
from sandesh.domain.batch import Batch
from sandesh.domain.campaign import Campaign
from sandesh.domain.clock import Clock
from sandesh.domain.contacts import ContactList, Template
from sandesh.domain.errors import IdempotencyKeyTaken, InsufficientBalance, NameTaken, OtpLimited
from sandesh.domain.message import QUEUED, SCHEDULED, Message, accepted_reply
from sandesh.domain.optout import OptOut
from sandesh.domain.otp import Otp
from sandesh.domain.ports import Claim, Contact, KeptList, KeptTemplate, Prior, SendingState
from sandesh.domain.promo_hours import parse as parse_promo_hours
from sandesh.domain.settings import Settings
from sandesh.domain.signin import PACE, Turn, TryKeys
from sandesh.domain.sim import SMS_SWITCH_ID, Sim, SmsSwitch
from sandesh.domain.usecases.log import Log
from sandesh.domain.webhook import HISTORY, WebhookDelivery
from sandesh.domain.workspace import Workspace
from sandesh.projections.storage.drafts import KEPT_SECONDS
from sandesh.projections.idempotency import IDEMPOTENCY_RETENTION
from sandesh.projections.otp_limits import (CALLER_IP_LIMIT, CALLER_IP_WINDOW, END_USER_IP_LIMIT, END_USER_IP_WINDOW,
                                            NUMBER_LIMIT, NUMBER_WINDOW, wait_seconds)

ROUTE_WINDOW = Settings.route_window  # a SIM is a route this long after its last healthy heartbeat


@dataclass
class Tables:
    """What the store keeps beside the log, changed in the append that records the events."""
    balances: dict[str, int] = field(default_factory=dict)
    idempotency: dict[tuple[str, str], tuple[Prior, float]] = field(default_factory=dict)
    sim_names: dict[str, str] = field(default_factory=dict)
    iccids: dict[str, str] = field(default_factory=dict)
    otp_issues: list[tuple[str, str, str | None, float]] = field(default_factory=list)  # number, client, ip, at
    opted_out: set[tuple[str, str]] = field(default_factory=set)
    deliveries: dict[str, tuple[str, float]] = field(default_factory=dict)  # webhook delivery -> client, created at
    contact_lists: dict[str, tuple[str, str]] = field(default_factory=dict)  # list -> workspace, name
    contacts: dict[str, dict[str, tuple[str, float]]] = field(default_factory=dict)  # list -> number -> fields, added at
    templates: dict[str, tuple[str, str, str]] = field(default_factory=dict)  # template -> workspace, name, text


def inline_writer(events: list[Any]) -> Callable[[Tables], None]:
    """The in-memory twin of projections/registry.inline_writer: the guards and read models of one append."""
    def write(tables: Tables) -> None:
        for e in events:
            _apply(tables, e)
    return write


def _apply(tables: Tables, e: Any) -> None:
    if isinstance(e, Workspace.Created):
        tables.balances[e.originator_id] = 0
    elif isinstance(e, Workspace.Credited):
        tables.balances[e.originator_id] += e.amount
    elif isinstance(e, Message.Accepted):
        balance = tables.balances.get(e.workspace_id, 0) - e.cost
        if balance < 0:
            raise InsufficientBalance()
        tables.balances[e.workspace_id] = balance
        if e.idempotency_key is not None:
            reply = accepted_reply(e.originator_id, e.message_type, e.segments, e.encoding, e.cost,
                                   e.expires_at, e.send_at)
            _remember(tables, e.client_id, e.idempotency_key, Prior(e.request_hash, orjson.dumps(reply).decode()), e.at)
    elif isinstance(e, Batch.Accepted):
        _remember(tables, e.client_id, e.idempotency_key, Prior(e.request_hash, e.response), e.at)
    elif isinstance(e, (Message.Failed, Message.Rejected, Message.Canceled)) and e.refund:
        tables.balances[e.workspace_id] += e.refund
    elif isinstance(e, Sim.Added):
        if e.name in tables.sim_names:
            raise NameTaken("a SIM with this name exists already")
        tables.sim_names[e.name] = e.originator_id
    elif isinstance(e, Sim.Identified):
        if e.iccid is not None and tables.iccids.get(e.iccid, e.originator_id) != e.originator_id:
            raise NameTaken("another SIM is registered with this ICCID")
        tables.iccids = {iccid: sim for iccid, sim in tables.iccids.items() if sim != e.originator_id}
        if e.iccid is not None:
            tables.iccids[e.iccid] = e.originator_id
    elif isinstance(e, Otp.Issued):
        recent = [i for i in tables.otp_issues if i[3] > e.at - max(NUMBER_WINDOW, END_USER_IP_WINDOW)]
        if sum(1 for number, _, _, at in recent if number == e.to and at > e.at - NUMBER_WINDOW) >= NUMBER_LIMIT:
            raise OtpLimited("otp_number_limit")
        if e.ip is not None and sum(1 for _, client, ip, at in recent if (client, ip) == (e.client_id, e.ip)
                                    and at > e.at - END_USER_IP_WINDOW) >= END_USER_IP_LIMIT:
            raise OtpLimited("otp_ip_limit")
        tables.otp_issues = [*recent, (e.to, e.client_id, e.ip, e.at)]
    elif isinstance(e, OptOut.OptedOut):
        tables.opted_out.add((e.workspace_id, e.number))
    elif isinstance(e, OptOut.OptedIn):
        tables.opted_out.discard((e.workspace_id, e.number))
    elif isinstance(e, WebhookDelivery.Created):
        tables.deliveries.setdefault(e.originator_id, (e.client_id, e.at))
    elif isinstance(e, ContactList.Created):
        tables.contact_lists[e.originator_id] = (e.workspace_id, e.name)
        tables.contacts[e.originator_id] = {}
    elif isinstance(e, ContactList.Added):
        tables.contacts[e.originator_id].update({number: (fields, e.at) for number, fields in e.contacts})
    elif isinstance(e, ContactList.Removed):
        tables.contacts[e.originator_id].pop(e.number, None)
    elif isinstance(e, ContactList.Deleted):
        del tables.contact_lists[e.originator_id], tables.contacts[e.originator_id]
    elif isinstance(e, (Template.Saved, Template.Changed)):
        tables.templates[e.originator_id] = (e.workspace_id, e.name, e.text)
    elif isinstance(e, Template.Deleted):
        tables.templates.pop(e.originator_id, None)


def _remember(tables: Tables, client_id: str, key: str, prior: Prior, at: float) -> None:
    held = tables.idempotency.get((client_id, key))
    if held is not None and held[1] > at - IDEMPOTENCY_RETENTION:
        raise IdempotencyKeyTaken()
    tables.idempotency[(client_id, key)] = (prior, at)


class MemoryRecorder(POPOApplicationRecorder):
    """eventsourcing's in-memory recorder, with the tables its appends keep and guard."""

    def __init__(self) -> None:
        super().__init__()
        self.tables = Tables()

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        inline: Callable[[Tables], None] | None = kwargs.pop("inline", None)
        with self._database_lock:
            staged = copy.deepcopy(self.tables)
            if inline is not None:
                inline(staged)  # a refused guard raises here: nothing is recorded
            result = super().insert_events(stored_events, **kwargs)  # a version conflict raises here
            self.tables = staged
            return result

    def select_events_of(self, originator_ids: Sequence[str]) -> list[StoredEvent]:
        return [e for i in originator_ids for e in self.select_events(i)]


class MemoryFactory(POPOFactory):
    def application_recorder(self) -> MemoryRecorder:
        return MemoryRecorder()


class Keys:
    """IdempotencyKeys: a key held while its request runs, and what a committed request left."""

    def __init__(self, recorder: MemoryRecorder):
        self.recorder = recorder
        self.running: set[tuple[str, str]] = set()
        self.lock = threading.Lock()

    @contextmanager
    def claim(self, client_id: str, key: str, now: float) -> Iterator[Claim]:
        with self.lock:
            elsewhere = (client_id, key) in self.running
            if not elsewhere:
                self.running.add((client_id, key))
        try:
            yield Claim(running_elsewhere=elsewhere, prior=None if elsewhere else self.prior(client_id, key, now))
        finally:
            if not elsewhere:
                with self.lock:
                    self.running.discard((client_id, key))

    def prior(self, client_id: str, key: str, now: float) -> Prior | None:
        held = self.recorder.tables.idempotency.get((client_id, key))
        return held[0] if held is not None and held[1] > now - IDEMPOTENCY_RETENTION else None


class Windows:
    """OtpWindows over the issued codes the appends kept, and a hit log per calling IP."""

    def __init__(self, recorder: MemoryRecorder):
        self.recorder = recorder
        self.hits: dict[tuple[str, str], list[float]] = {}

    def hit_caller_ip(self, client_id: str, ip: str, now: float) -> int | None:
        hits = [at for at in self.hits.get((client_id, ip), []) if at > now - CALLER_IP_WINDOW]
        if len(hits) >= CALLER_IP_LIMIT:
            return wait_seconds(min(hits), CALLER_IP_WINDOW, now)
        self.hits[(client_id, ip)] = [*hits, now]
        return None

    def retry_after_number(self, number: str, now: float) -> int:
        times = [at for n, _, _, at in self.recorder.tables.otp_issues if n == number and at > now - NUMBER_WINDOW]
        return wait_seconds(min(times, default=None), NUMBER_WINDOW, now)

    def retry_after_ip(self, client_id: str, ip: str, now: float) -> int:
        times = [at for _, c, i, at in self.recorder.tables.otp_issues
                 if (c, i) == (client_id, ip) and at > now - END_USER_IP_WINDOW]
        return wait_seconds(min(times, default=None), END_USER_IP_WINDOW, now)


class OptOuts:
    def __init__(self, recorder: MemoryRecorder):
        self.recorder = recorder

    def opted_out(self, workspace_id: str, numbers: list[str]) -> set[str]:
        return {n for n in numbers if (workspace_id, n) in self.recorder.tables.opted_out}


class WebhookHistory:
    """Every delivery of the client in the span, whatever its state (the use case checks each one's)."""

    def __init__(self, recorder: MemoryRecorder):
        self.recorder = recorder

    def of_client(self, client_id: str, states: tuple[str, ...], since: float, until: float, now: float) -> list[str]:
        found = [(at, delivery_id) for delivery_id, (client, at) in self.recorder.tables.deliveries.items()
                 if client == client_id and max(since, now - HISTORY) <= at <= until]
        return [delivery_id for _, delivery_id in sorted(found)]


class SendingStates:
    """A workspace as the Send page decides on it, from the log's aggregates and the balances the
    appends kept; the SIMs' heartbeats, which the dispatcher records outside the log, are given
    by `heartbeat`."""

    def __init__(self, log: Log, recorder: MemoryRecorder, clock: Clock, route_window: float = ROUTE_WINDOW):
        self.log, self.recorder, self.clock, self.route_window = log, recorder, clock, route_window
        self.heartbeats: dict[str, float] = {}  # SIM -> its last healthy heartbeat

    def heartbeat(self, sim_id: str) -> None:
        self.heartbeats[sim_id] = self.clock.now()

    def of(self, workspace_id: str) -> SendingState | None:
        workspace = self.log.find(workspace_id, Workspace)
        if workspace is None:
            return None
        switch = self.log.find(SMS_SWITCH_ID, SmsSwitch)
        usable = [at for sim_id, at in self.heartbeats.items()
                  if (sim := self.log.find(sim_id, Sim)) is not None and sim.enabled and sim.quarantine is None]
        return SendingState(workspace_id, workspace.status, self.recorder.tables.balances[workspace_id],
                            workspace.rates, workspace.types, parse_promo_hours(workspace.promo_hours),
                            switch is None or switch.enabled, max(usable) + self.route_window if usable else None)


class Drafts:
    def __init__(self) -> None:
        self.kept: dict[str, tuple[str, str, str, float]] = {}  # token -> workspace, person, sealed, kept at

    def keep(self, token: str, workspace_id: str, person_id: str, sealed: str, now: float) -> None:
        self.kept = {t: d for t, d in self.kept.items() if d[3] >= now - KEPT_SECONDS}
        self.kept.setdefault(token, (workspace_id, person_id, sealed, now))

    def find(self, token: str, workspace_id: str, person_id: str, now: float) -> str | None:
        workspace, person, sealed, at = self.kept.get(token, ("", "", "", 0.0))
        return sealed if (workspace, person) == (workspace_id, person_id) and at >= now - KEPT_SECONDS else None


class ContactBook:
    def __init__(self, recorder: MemoryRecorder):
        self.recorder = recorder

    def contact_list(self, workspace_id: str, list_id: str) -> KeptList | None:
        workspace, name = self.recorder.tables.contact_lists.get(list_id, ("", ""))
        if workspace != workspace_id:
            return None
        kept = sorted(self.recorder.tables.contacts[list_id].items(), key=lambda c: (c[1][1], c[0]))
        return KeptList(name, [Contact(number, fields) for number, (fields, _) in kept])

    def template(self, workspace_id: str, template_id: str) -> KeptTemplate | None:
        workspace, name, text = self.recorder.tables.templates.get(template_id, ("", "", ""))
        return KeptTemplate(name, text) if workspace == workspace_id else None


class CampaignProgress:
    """The campaign's messages past scheduled and queued, read from the log (the followed read
    model, caught up)."""

    def __init__(self, log: Log):
        self.log = log

    def gone(self, campaign_id: str) -> set[str]:
        campaign = self.log.find(campaign_id, Campaign)
        messages = self.log.aggregates_of(campaign.message_ids if campaign else [], Message)
        return {m.id for m in messages.values() if m.status not in (SCHEDULED, QUEUED)}


class Texts:
    """Texts sealed under a key of their owner; a shredded key opens nothing."""

    def __init__(self) -> None:
        self.current: dict[str, str] = {}   # owner -> key id
        self.alive: set[str] = set()
        self.count = 0

    def key(self, owner: str) -> str:
        if owner not in self.current:
            self.count += 1
            self.current[owner] = f"{owner}#{self.count}"
            self.alive.add(self.current[owner])
        return self.current[owner]

    def cached_key(self, owner: str) -> str | None:
        return self.current.get(owner)

    def seal(self, owner: str, text: str) -> str:
        return self.seal_with(self.key(owner), text)

    def seal_with(self, key: str, text: str) -> str:
        return f"sealed|{key}|{text}"

    def open(self, sealed: str | None) -> str | None:
        if sealed is None or not sealed.startswith("sealed|"):
            return sealed
        key, _, text = sealed[len("sealed|"):].partition("|")
        return text if key in self.alive else None

    def shred(self, owner: str) -> int:
        keys = {k for k in self.alive if k.rpartition("#")[0] == owner}
        self.alive -= keys
        self.current.pop(owner, None)
        return len(keys)


class Sealer:
    def seal(self, plaintext: str) -> str:
        return "secret:" + plaintext

    def open(self, sealed: str) -> str:
        return sealed.removeprefix("secret:")

    def compromised(self, sealed: str | None) -> bool:
        return False


class SignInTries:
    """The throttle's tries per key, under one lock (as PostgreSQL's per-key locks)."""

    def __init__(self) -> None:
        self.times: dict[str, list[tuple[str, float]]] = {}
        self.next_turn: dict[str, float] = {}
        self.lock = threading.Lock()

    def take(self, keys: TryKeys, now: float, turn: Callable[..., Turn]) -> tuple[str, Turn]:
        with self.lock:
            tries = {key: [at for _, at in self.times.get(key, [])] for key in keys.all()}
            taken = turn(tries, self.next_turn.get(keys.account))
            try_id = secrets.token_hex(8)
            for key in keys.all():
                self.times.setdefault(key, []).append((try_id, now))
            if taken.paced:
                self.next_turn[keys.account] = taken.at + PACE
            return try_id, taken

    def succeeded(self, try_id: str) -> None:
        with self.lock:
            for key, tries in self.times.items():
                self.times[key] = [(i, at) for i, at in tries if i != try_id]

    def recent(self, key: str) -> list[float]:
        with self.lock:
            return [at for _, at in self.times.get(key, [])]


class Sessions:
    """The dashboard's sessions of each person, as a count the use cases end."""

    def __init__(self) -> None:
        self.of: dict[str, int] = {}

    def end_all(self, person_id: str) -> int:
        return self.of.pop(person_id, 0)


class Hasher:
    """The PasswordHasher port in microseconds: a salted SHA-256, for the fast tests alone (argon2id
    and its child process are the PostgreSQL half's: projections/storage/passwords.py)."""

    def hash(self, password: str) -> str:
        salt = secrets.token_hex(8)
        return f"test-sha256${salt}${hashlib.sha256((salt + password).encode()).hexdigest()}"

    def verify(self, password_hash: str, password: str) -> bool:
        kind, salt, digest = (password_hash.split("$") + ["", ""])[:3]
        return kind == "test-sha256" and secrets.compare_digest(
            digest, hashlib.sha256((salt + password).encode()).hexdigest())


def in_memory(clock: Clock, webhook_guard: Callable[[str], None] = lambda url: None) -> Sandesh:
    """Every use case over in-memory adapters: no database, no network."""
    log = Log({"PERSISTENCE_MODULE": "tests.memory:MemoryFactory",
               "TRANSCODER_TOPIC": "sandesh.projections.storage.store:OrjsonTranscoder"}, inline=inline_writer)
    recorder: MemoryRecorder = log.recorder  # type: ignore[assignment]
    return Sandesh.build(log, clock=clock, sealer=Sealer(), texts=Texts(), idempotency=Keys(recorder),
                         otp_windows=Windows(recorder), opt_outs=OptOuts(recorder), otp_keys=lambda: (b"k" * 32,),
                         append=log.save, batch_answer=batch_answer, webhook_guard=webhook_guard,
                         hasher=Hasher(), sign_in_tries=SignInTries(), sessions=Sessions(),
                         webhook_history=WebhookHistory(recorder),
                         sending_states=SendingStates(log, recorder, clock), drafts=Drafts(),
                         contact_book=ContactBook(recorder), campaign_progress=CampaignProgress(log))


def balance(app: Sandesh, workspace_id: str) -> int:
    return app.log.recorder.tables.balances[workspace_id]  # type: ignore[attr-defined]


def heartbeat(app: Sandesh, sim_id: str) -> None:
    """A SIM's healthy heartbeat, now, as its dispatcher records it."""
    app.campaigns.states.heartbeat(sim_id)  # type: ignore[attr-defined]
