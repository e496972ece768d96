"""The use cases of Sandesh, as one eventsourcing Application over one log: each is one
method with typed inputs that raises typed domain errors (domain/errors.py), called alike by
the API, the `sandesh` command and the workers (docs/design.md, "Layers").

Storage is chosen by the environment given to the constructor; the clock, the sealer for
webhook secrets, the inline read-model writer and the ports of domain/ports.py are passed in
by the wiring (scripts/bootstrap.py): no globals, no psycopg here.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Literal, Protocol, TypeVar

import orjson

from eventsourcing.application import AggregateNotFoundError, Application, ProcessingEvent
from eventsourcing.persistence import IntegrityError

from . import history, phone
from .audit import ACTIONS, audit_line, operator_change
from .clock import Clock, iso
from .client import (DEFAULT_GRACE_HOURS, DEFAULT_RATE_LIMIT, Client, check_brand,
                     check_rate_limit, check_webhook_url)
from .credentials import new_api_key, new_webhook_secret, sha256_hex, shown_prefix
from .batch import record as record_batch
from .errors import (Contended, IdempotencyConflict, IdempotencyKeyTaken, InsufficientBalance, InvalidInput,
                     InvalidTransition, NameTaken, NotFound, OtpLimited, Refused)
from .inbound import Reply, reply_owner
from .message import SCHEDULED, TEXT_ERASED, Message, accept, accepted_reply
from .optout import RECIPIENT, REPLY, STOP, OptOut, held_back, optout_id, stop_word
from .otp import LIFETIME as OTP_LIFETIME, RESEND_COOLDOWN, Otp, Outcome, NO_ACTIVE_OTP, code_text, hash_code, new_code, otp_id
from .segments import segment
from .ports import Caller, IdempotencyKeys, OptOuts, OtpWindows, Prior, Texts
from .steps import Append, Blocks, Read, Steps, retried, run
from .sending import (OtpSendRequest, OtpVerifyRequest, Problem, SendRequest, cost as send_cost,
                      refusal as send_refusal)
from .sim import CLEAR, SMS_SWITCH_ID, Sim, SmsSwitch, check_pin, check_sim_name
from .topics import topics_of
from .types import MESSAGE_TYPES, default_rates
from .webhook import WEBHOOK_STATUS, WebhookDelivery, delivery_id, new_delivery
from .workspace import Workspace

A = TypeVar("A")


class Sealer(Protocol):
    def seal(self, plaintext: str) -> str: ...
    def open(self, sealed: str) -> str: ...


InlineWriter = Callable[[list[Any]], Callable[[Any], None]]


# The operator's changes of state, by the name the `sandesh` command gives them.
WorkspaceCommand = Literal["activate", "suspend", "reinstate", "credit", "set_rates", "set_types"]
WORKSPACE_COMMANDS: dict[str, Callable[..., None]] = {
    "activate": lambda w, **kw: w.activate(**kw), "suspend": lambda w, **kw: w.suspend(**kw),
    "reinstate": lambda w, **kw: w.reinstate(**kw), "credit": lambda w, **kw: w.credit(**kw),
    "set_rates": lambda w, **kw: w.set_rates(**kw), "set_types": lambda w, **kw: w.set_types(**kw)}
ClientCommand = Literal["enable", "disable"]
CLIENT_COMMANDS: dict[str, Callable[..., None]] = {"enable": lambda c, **kw: c.enable(**kw),
                                                   "disable": lambda c, **kw: c.disable(**kw)}
SimCommand = Literal["enable", "disable", "release"]
SIM_COMMANDS: dict[str, Callable[..., None]] = {"enable": lambda m, **kw: m.enable(**kw),
                                                "disable": lambda m, **kw: m.disable(**kw),
                                                "release": lambda m, **kw: m.release(**kw)}


@dataclass(frozen=True)
class Sent:
    """The 202 body of a send (JSON), and whether it replays an earlier request's."""
    body: bytes
    replayed: bool = False


SEND, RELEASE, SKIP = "send", "release", "skip"


@dataclass(frozen=True)
class Submission:
    """What a SIM does with a message it leased: SEND it (`message` is submitted to it),
    RELEASE the lease (the message is no longer queued), or SKIP it (it expired, recorded,
    or another SIM submitted it first)."""
    action: str
    message: Message | None = None
    text: str | None = None  # the message's text, opened (it is sealed in the log)


# How a refused batch item reads: (code, problems) -> its item in the 202 body (the API's error table).
ItemError = Callable[[str, list[Problem]], dict[str, Any]]


@dataclass(frozen=True)
class OtpSent:
    message: Message
    otp: Otp


class Sandesh(Application[str]):
    name = "Sandesh"

    def __init__(self, env: dict[str, str], *, clock: Clock, sealer: Sealer, otp_key: bytes,
                 inline: InlineWriter | None = None, append: Callable[..., None] | None = None,
                 webhook_guard: Callable[[str], None] | None = None):
        super().__init__(env)
        self.clock = clock
        self.sealer = sealer
        self.otp_key = otp_key  # keys the hash of OTP codes; no code is ever stored in clear
        self.inline = inline
        self.append = append or self.save  # how sends are appended: group commit in the API (projections/)
        self.webhook_guard = webhook_guard or (lambda url: None)  # the SSRF guard at configuration
        self.idempotency: IdempotencyKeys | None = None  # ports (domain/ports.py), set by the wiring
        self.otp_windows: OtpWindows | None = None
        self.texts: Texts | None = None
        self.opt_outs: OptOuts | None = None

    def append_events(self, events: list[Any]) -> Any:
        """Record events already collected from their aggregates (the group commit's batches),
        without `save()`'s per-object protocol checks."""
        processing_event: ProcessingEvent[str] = ProcessingEvent()
        processing_event.events.extend(events)
        return self._record(processing_event)

    def _record(self, processing_event: Any) -> Any:
        if self.inline is not None:
            processing_event.saved_kwargs["inline"] = self.inline(processing_event.events)
        return super()._record(processing_event)

    def _get(self, aggregate_id: str, kind: type, label: str) -> Any:
        aggregate = self._find(aggregate_id, kind)
        if aggregate is None:
            raise NotFound(f"no {label} {aggregate_id!r}")
        return aggregate

    def _change(self, aggregate_id: str, kind: type, label: str, command: Callable[..., None], **kwargs: Any) -> Any:
        """Run `command(aggregate, at=now, **kwargs)`, one of the aggregate's commands, and append its events."""
        aggregate = self._get(aggregate_id, kind, label)
        command(aggregate, at=self.clock.now(), **kwargs)
        self.save(aggregate)
        return aggregate

    # Workspaces
    def create_workspace(self, name: str, types: list[str] | None, rates: dict[str, int], actor: str) -> Workspace:
        if not name.strip():
            raise InvalidInput("workspace name must not be empty")
        workspace = Workspace(
            name=name.strip(), types=types or list(MESSAGE_TYPES), rates={**default_rates(), **rates},
            actor=actor, at=self.clock.now(),
        )
        self.save(workspace)
        return workspace

    def change_workspace(self, workspace_id: str, command: WorkspaceCommand, actor: str, **kwargs: Any) -> Workspace:
        """activate, suspend, reinstate, credit (amount, note), set_rates (rates) or set_types (types)."""
        return self._change(workspace_id, Workspace, "workspace", WORKSPACE_COMMANDS[command], actor=actor, **kwargs)

    # API clients
    def create_client(
        self, workspace_id: str, brand: str, webhook_url: str | None, rate_limit: int | None, actor: str
    ) -> tuple[Client, str, str]:
        self._get(workspace_id, Workspace, "workspace")
        key, secret = new_api_key(), new_webhook_secret()
        client = Client(
            workspace_id=workspace_id, brand=check_brand(brand), webhook_url=self._webhook_url(webhook_url),
            rate_limit=check_rate_limit(rate_limit or DEFAULT_RATE_LIMIT),
            key_hash=sha256_hex(key), key_prefix=shown_prefix(key),
            secret_sealed=self.sealer.seal(secret), secret_hash=sha256_hex(secret),
            actor=actor, at=self.clock.now(),
        )
        self.save(client)
        return client, key, secret

    def _webhook_url(self, url: str | None) -> str | None:
        checked = check_webhook_url(url)
        if checked is not None:
            self.webhook_guard(checked)
        return checked

    def rotate_key(self, client_id: str, actor: str) -> tuple[Client, str]:
        key = new_api_key()
        client = self._change(client_id, Client, "client", lambda c, **kw: c.rotate_key(**kw),
                              key_hash=sha256_hex(key), key_prefix=shown_prefix(key), actor=actor)
        return client, key

    def rotate_secret(self, client_id: str, grace_hours: float | None, actor: str) -> tuple[Client, str]:
        secret = new_webhook_secret()
        grace = DEFAULT_GRACE_HOURS if grace_hours is None else grace_hours
        client = self._change(client_id, Client, "client", lambda c, **kw: c.rotate_secret(**kw),
                              sealed=self.sealer.seal(secret), secret_hash=sha256_hex(secret), grace_hours=grace,
                              actor=actor)
        return client, secret

    def change_client(self, client_id: str, command: ClientCommand, actor: str) -> Client:
        """enable or disable."""
        return self._change(client_id, Client, "client", CLIENT_COMMANDS[command], actor=actor)

    def update_client(self, client_id: str, brand: str | None, webhook_url: str | None,
                      rate_limit: int | None, actor: str) -> Client:
        changes: dict[str, object] = {}
        if brand is not None:
            changes["brand"] = check_brand(brand)
        if webhook_url is not None:
            changes["webhook_url"] = self._webhook_url(webhook_url)
        if rate_limit is not None:
            changes["rate_limit"] = check_rate_limit(rate_limit)
        return self._change(client_id, Client, "client", lambda c, **kw: c.update(**kw), changes=changes, actor=actor)

    # SIMs and the SMS switch
    def add_sim(self, name: str, port: str, baud: int, host: str | None, actor: str,
                settings: dict[str, object] | None = None) -> Sim:
        """Register a modem port as a SIM, with its plan's limits and balance query (`settings`,
        domain/sim.py SETTINGS) when given."""
        if not port.strip():
            raise InvalidInput("--port must name a serial device or pyserial URL")
        sim = Sim(name=check_sim_name(name), port=port.strip(), baud=baud, host=host, actor=actor, at=self.clock.now())
        extra = {k: v for k, v in (settings or {}).items() if v is not None}
        if extra:
            sim.update(extra, actor=actor, at=self.clock.now())
        try:
            self.save(sim)
        except NameTaken as taken:
            raise NameTaken(f"a SIM named {name!r} exists already") from taken
        return sim

    def place_sim(self, sim_id: str | None, name: str, port: str, baud: int, host: str | None, actor: str) -> Sim:
        """Register a SIM, or record that a registered one (`sim_id`) is now on `port`."""
        if sim_id is None:
            return self.add_sim(name, port, baud, host, actor)
        return self._change(sim_id, Sim, "SIM", lambda m, **kw: m.move(**kw), port=port, actor=actor)

    def identify_sim(self, sim_id: str, iccid: str | None, imsi: str | None,
                     device: dict[str, str | None] | None = None) -> Sim:
        """What the modem says the SIM is, and what the device is with the modes chosen for it."""
        sim = self._get(sim_id, Sim, "SIM")
        sim.identify(iccid, imsi, at=self.clock.now())
        if device is not None:
            sim.learn(device, at=self.clock.now())
        try:
            self.save(sim)
        except NameTaken as taken:
            raise NameTaken(f"another SIM is registered with ICCID {iccid}") from taken
        return sim

    def change_sim(self, sim_id: str, command: SimCommand, actor: str) -> Sim:
        """enable, disable, or release (an operator lifts a quarantine)."""
        return self._change(sim_id, Sim, "SIM", SIM_COMMANDS[command], actor=actor)

    def update_sim(self, sim_id: str, port: str | None, actor: str, settings: dict[str, object] | None = None,
                   pin: str | None = None, clear_pin: bool = False) -> Sim:
        """A new port, settings (domain/sim.py SETTINGS; None leaves one as it is, a value of
        `CLEAR` removes it) or PIN for a registered SIM (`sandesh sim update`)."""
        sim = self._get(sim_id, Sim, "SIM")
        now = self.clock.now()
        if port is not None:
            sim.move(port.strip(), actor=actor, at=now)
        changes = {k: (None if v is CLEAR else v) for k, v in (settings or {}).items() if v is not None}
        if pin is not None or clear_pin:
            sim.set_pin(None if clear_pin else self.sealer.seal(check_pin(pin)), actor=actor, at=now)
        if changes or (port is None and pin is None and not clear_pin):
            sim.update(changes, actor=actor, at=now)
        self.save(sim)
        return sim

    def sim_pin(self, sealed: str | None) -> str | None:
        """The PIN a dispatcher enters, opened from the sealed form the registry keeps."""
        return self.sealer.open(sealed) if sealed else None

    def record_sim_credit(self, sim_id: str, amount: int | None, reply: str, actor: str) -> str | None:
        """A balance query's answer, with the quarantine for credit it starts or ends; returns the
        SIM's quarantine after it."""
        recorded: list[Sim] = []

        def record(sim: Sim, now: float) -> bool:
            sim.credit_checked(amount, reply, actor=actor, at=now)
            recorded[:] = [sim]
            return True

        self._sim_decision(sim_id, record)
        return recorded[0].quarantine

    def quarantine_sim(self, sim_id: str, kind: str, reason: str, actor: str) -> bool:
        """The dispatcher takes a SIM out of the pool; False when it was out already."""
        return self._sim_decision(sim_id, lambda sim, now: sim.quarantine_for(kind, reason, actor=actor, at=now))

    def recover_sim(self, sim_id: str, kind: str, reason: str, actor: str) -> bool:
        """The dispatcher found the cause of a self-healing quarantine gone."""
        return self._sim_decision(sim_id, lambda sim, now: sim.recover(kind, reason, actor=actor, at=now))

    def _sim_decision(self, sim_id: str, decide: Callable[[Sim, float], bool]) -> bool:
        def attempt() -> Steps[tuple[tuple[Any, ...], bool]]:
            sim = self._get(sim_id, Sim, "SIM")
            decided = decide(sim, self.clock.now())
            return ((sim,) if decided else ()), decided
            yield  # a generator: its reads are plain calls (the dispatcher and the CLI only)

        return run(retried(attempt, f"a decision on SIM {sim_id}"), self.save)

    def set_sms_switch(self, on: bool, reason: str | None, actor: str) -> SmsSwitch:
        try:
            switch = self.repository.get(SMS_SWITCH_ID)
        except AggregateNotFoundError:
            switch = SmsSwitch()
        if on:
            switch.enable(actor=actor, at=self.clock.now())
        else:
            switch.disable(reason=reason, actor=actor, at=self.clock.now())
        self.save(switch)
        return switch

    # Messages
    def send_sms(self, caller: Caller, request: SendRequest, idempotency_key: str | None = None,
                 request_hash: str | None = None) -> Sent:
        return run(self.send_sms_steps(caller, request, idempotency_key, request_hash), self.append)

    def send_sms_steps(self, caller: Caller, request: SendRequest, idempotency_key: str | None = None,
                       request_hash: str | None = None) -> Steps[Sent]:
        """POST /v1/sms/send after validation, in the order of docs/api.md, "Order of checks":
        the Idempotency-Key (a replay, or 409 while a twin runs or for another body), then the
        refusals (Refused), then the charge (InsufficientBalance).  `request_hash` is
        sending.request_hash of the body."""
        return (yield from self._idempotent(caller, idempotency_key, request_hash,
                                            lambda key, hash_: self._accept(caller, request, key, hash_)))

    def send_batch(self, caller: Caller, items: list[SendRequest | list[Problem]], item_error: ItemError,
                   idempotency_key: str | None = None, request_hash: str | None = None) -> Sent:
        return run(self.send_batch_steps(caller, items, item_error, idempotency_key, request_hash), self.append)

    def send_batch_steps(self, caller: Caller, items: list[SendRequest | list[Problem]], item_error: ItemError,
                         idempotency_key: str | None = None, request_hash: str | None = None) -> Steps[Sent]:
        """POST /v1/sms/send/batch after the body's own checks: each item (a request, or the
        problems that made it invalid) is judged alone by the rules of a single send; the
        accepted ones are charged together in one append, or none is (InsufficientBalance).
        One Idempotency-Key covers the batch (docs/api.md, "Batch sends")."""
        return (yield from self._idempotent(
            caller, idempotency_key, request_hash,
            lambda key, hash_: self._accept_batch(caller, items, item_error, key, hash_)))

    def _idempotent(self, caller: Caller, key: str | None, request_hash: str | None,
                    accept: Callable[[str | None, str | None], Steps[bytes]]) -> Steps[Sent]:
        if key is None:
            return Sent((yield from accept(None, None)))
        assert self.idempotency is not None, "the wiring gives the application its idempotency keys"
        yield Blocks()  # the key's lock is held on a connection until the send is decided
        with self.idempotency.claim(caller.client_id, key, self.clock.now()) as claim:
            if claim.running_elsewhere:
                raise IdempotencyConflict(IdempotencyConflict.RUNNING)
            if claim.prior is not None:
                return _replayed(claim.prior, request_hash)
            try:
                return Sent((yield from accept(key, request_hash)))
            except IdempotencyKeyTaken:  # a twin committed between our claim and our append
                taken = self.idempotency.prior(caller.client_id, key, self.clock.now())
                if taken is None:
                    raise
                return _replayed(taken, request_hash)

    def _accept_batch(self, caller: Caller, items: list[SendRequest | list[Problem]], item_error: ItemError,
                      key: str | None, request_hash: str | None) -> Steps[bytes]:
        now = self.clock.now()
        results: list[dict[str, Any]] = []
        messages: list[Message] = []
        promoted = sorted({i.to for i in items if isinstance(i, SendRequest) and held_back(i.message_type)})
        opted_out = (yield Read(self._opted_out, (caller.workspace_id, promoted))) if promoted else set()
        key_of_texts = yield from self._text_key(caller.workspace_id)
        for item in items:
            if isinstance(item, list):
                results.append(item_error("invalid_request", item))
                continue
            code = send_refusal(item.message_type, caller.allowed_types, caller.sms_enabled, caller.has_route)
            if not code and held_back(item.message_type) and item.to in opted_out:
                code = "recipient_opted_out"
            if code:
                results.append(item_error(code, []))
                continue
            message = self._message(caller.client_id, caller.workspace_id, item,
                                    send_cost(caller.rates, item.message_type, item.segments), None, None, now,
                                    key_of_texts)
            messages.append(message)
            results.append(_reply_of(message))
        body = orjson.dumps({"results": results})
        batch = [record_batch(client_id=caller.client_id, workspace_id=caller.workspace_id, idempotency_key=key,
                              request_hash=request_hash, response=body.decode(),
                              message_ids=[m.id for m in messages], at=now)] if key is not None else []
        if messages or batch:
            total = sum(m.cost for m in messages)
            try:
                yield Append((*messages, *batch))
            except InsufficientBalance as short:
                raise InsufficientBalance(f"The workspace balance is lower than the cost of the batch's "
                                          f"{len(messages)} accepted messages ({total} paisa); none was sent.",
                                          cost=total) from short
        return body

    def _accept(self, caller: Caller, request: SendRequest, key: str | None = None,
                request_hash: str | None = None) -> Steps[bytes]:
        code = send_refusal(request.message_type, caller.allowed_types, caller.sms_enabled, caller.has_route)
        if code:
            raise Refused(code)
        if held_back(request.message_type) and (yield Read(self._opted_out, (caller.workspace_id, [request.to]))):
            raise Refused("recipient_opted_out")
        cost = send_cost(caller.rates, request.message_type, request.segments)
        try:
            message = yield from self._send_steps(caller.client_id, caller.workspace_id, request, cost, key,
                                                  request_hash)
        except InsufficientBalance as short:
            raise InsufficientBalance(f"The workspace balance is lower than the message cost ({cost} paisa).",
                                      cost=cost) from short
        return orjson.dumps(_reply_of(message))

    def _opted_out(self, workspace_id: str, numbers: list[str]) -> set[str]:
        """Those of `numbers` that opted out of the workspace's promotional messages (docs/api.md,
        "Opt-out"), in one read for a whole batch."""
        assert self.opt_outs is not None, "the wiring gives the application its opt-outs"
        return self.opt_outs.opted_out(workspace_id, numbers)

    def send(self, client_id: str, workspace_id: str, request: SendRequest, cost: int,
             idempotency_key: str | None = None, request_hash: str | None = None) -> Message:
        """Accept a message at a known cost: its Accepted event, the debit and the idempotency
        record commit together (InsufficientBalance, IdempotencyKeyTaken from the store's guards)."""
        return run(self._send_steps(client_id, workspace_id, request, cost, idempotency_key, request_hash),
                   self.append)

    def _send_steps(self, client_id: str, workspace_id: str, request: SendRequest, cost: int,
                    idempotency_key: str | None, request_hash: str | None) -> Steps[Message]:
        key_of_texts = yield from self._text_key(workspace_id)
        message = self._message(client_id, workspace_id, request, cost, idempotency_key, request_hash,
                                self.clock.now(), key_of_texts)
        yield Append((message,))
        return message

    def _message(self, client_id: str, workspace_id: str, request: SendRequest, cost: int,
                 idempotency_key: str | None, request_hash: str | None, now: float, key_of_texts: Any) -> Message:
        """A new message, its text sealed under `key_of_texts` (`_text_key`); its validity
        (`validFor`) counts from its `sendAt` when it is scheduled."""
        start = request.send_at if request.send_at is not None else now
        return accept(
            client_id=client_id, workspace_id=workspace_id, to=request.to,
            text=self._sealed(key_of_texts, request.text),
            message_type=request.message_type, segments=request.segments, encoding=request.encoding,
            cost=cost, idempotency_key=idempotency_key, request_hash=request_hash, at=now,
            expires_at=start + request.valid_for if request.valid_for is not None else None,
            send_at=request.send_at,
        )

    def cancel_message(self, client_id: str, message_id: str) -> Message:
        return run(self.cancel_message_steps(client_id, message_id), self.save)

    def cancel_message_steps(self, client_id: str, message_id: str) -> Steps[Message]:
        """POST /v1/sms/messages/:id/cancel: a scheduled or queued message that no modem was
        handed yet is canceled and refunded in full; otherwise NotCancelable with its status.
        A SIM submitting it at the same moment races on its version: one of the two wins."""
        found = yield Read(self.message, (message_id,))
        if found is None or found.client_id != client_id:
            raise NotFound(f"no message {message_id!r}")
        return (yield from self.change_message_steps(message_id, lambda m: m.cancel(at=self.clock.now())))

    def release_scheduled(self, message_ids: list[str]) -> int:
        """Scheduled messages whose `sendAt` came join the queue; returns how many were released or failed
        (one canceled, or released by another dispatcher, meanwhile is left alone).  A promotional
        one whose recipient opted out meanwhile fails instead, refunded (docs/api.md, "Opt-out")."""
        released = 0
        for message_id in message_ids:
            message = self.message(message_id)
            if message is None:
                continue
            if (message.status == SCHEDULED and held_back(message.message_type)
                    and self._opted_out(message.workspace_id, [message.to])):
                message.fail("the recipient opted out of promotional messages before its sendAt", at=self.clock.now())
            else:
                message.release(at=self.clock.now())
            if not message.pending_events:
                continue
            try:
                self.save(message)
                released += 1
            except IntegrityError:
                continue  # canceled or released elsewhere meanwhile
        return released

    # One-time passwords
    def send_otp(self, caller: Caller, request: OtpSendRequest, calling_ip: str) -> OtpSent:
        return run(self.send_otp_steps(caller, request, calling_ip), self.append)

    def send_otp_steps(self, caller: Caller, request: OtpSendRequest, calling_ip: str) -> Steps[OtpSent]:
        """POST /v1/sms/otp/send after validation, in the order of docs/api.md, "OTP": the calling
        IP's limit, the refusals (Refused), the cooldown and the per-number and per-end-user-IP
        windows (OtpLimited, always with its retry_after), the charge (InsufficientBalance)."""
        yield Read(self._count_calling_ip, (caller, calling_ip))
        code = send_refusal("otp", caller.allowed_types, caller.sms_enabled, caller.has_route)
        if code:
            raise Refused(code)
        try:
            message, otp = yield from self._issue_otp(caller.client_id, caller.workspace_id, caller.brand,
                                                      request.to, request.purpose, request.ip, caller.rates["otp"])
        except OtpLimited as limit:
            if limit.retry_after is not None:
                raise
            assert self.otp_windows is not None
            now = self.clock.now()
            wait = yield (Read(self.otp_windows.retry_after_number, (request.to, now))
                          if limit.limit == "otp_number_limit"
                          else Read(self.otp_windows.retry_after_ip, (caller.client_id, request.ip or "", now)))
            raise OtpLimited(limit.limit, wait) from limit
        return OtpSent(message, otp)

    def _count_calling_ip(self, caller: Caller, calling_ip: str) -> None:
        assert self.otp_windows is not None, "the wiring gives the application its OTP windows"
        wait = self.otp_windows.hit_caller_ip(caller.client_id, calling_ip, self.clock.now())
        if wait is not None:
            raise OtpLimited("caller_ip", wait)

    def _issue_otp(self, client_id: str, workspace_id: str, brand: str, to: str, purpose: str, ip: str | None,
                   rate: int) -> Steps[tuple[Message, Otp]]:
        """A new code for client + number + purpose, sent as an `otp` message and charged at `rate`
        per segment; the message, the code's hash and the charge commit together."""
        key_of_texts = yield from self._text_key(workspace_id)

        def attempt() -> Steps[tuple[tuple[Any, ...], tuple[Message, Otp]]]:
            now = self.clock.now()
            otp = (yield Read(self._find, (otp_id(client_id, to, purpose), Otp))) or Otp(client_id=client_id, to=to,
                                                                                          purpose=purpose)
            wait = otp.cooldown_left(now)
            if wait > 0:
                raise OtpLimited("cooldown", wait)
            code = new_code()
            text = code_text(code, brand)
            parts = segment(text)
            message = accept(client_id=client_id, workspace_id=workspace_id, to=to, text=self._sealed(key_of_texts, text),
                             message_type="otp",
                             segments=parts.segments, encoding=parts.encoding, cost=rate * parts.segments,
                             idempotency_key=None, request_hash=None, at=now, expires_at=now + OTP_LIFETIME)
            otp.issue(code_hash=hash_code(self.otp_key, otp.id, code), message_id=message.id, ip=ip, at=now)
            return (message, otp), (message, otp)

        try:
            return (yield from retried(attempt, f"a code for {to}", tries=3))
        except Contended:  # other sends for this code kept winning the race: one of them was just sent
            raise OtpLimited("cooldown", RESEND_COOLDOWN) from None

    def verify_otp(self, caller: Caller, request: OtpVerifyRequest, calling_ip: str) -> Outcome:
        return run(self.verify_otp_steps(caller, request, calling_ip), self.save)

    def verify_otp_steps(self, caller: Caller, request: OtpVerifyRequest, calling_ip: str) -> Steps[Outcome]:
        """POST /v1/sms/otp/verify after validation: the calling IP's limit, then the check of
        docs/api.md, "OTP" (verify results); concurrent checks race on the code's version, so one code
        is verified once."""
        yield Read(self._count_calling_ip, (caller, calling_ip))
        client_id, to, purpose, code = caller.client_id, request.to, request.purpose, request.code

        def attempt() -> Steps[tuple[tuple[Any, ...], Outcome]]:
            otp = yield Read(self._find, (otp_id(client_id, to, purpose), Otp))
            if otp is None or otp.state is None:
                return (), Outcome(False, NO_ACTIVE_OTP)
            outcome = otp.verify(hash_code(self.otp_key, otp.id, code), self.clock.now())
            return ((otp,) if otp.pending_events else ()), outcome

        return (yield from retried(attempt, f"the check of a code for {to}"))

    def _find(self, aggregate_id: str, kind: type) -> Any:
        try:
            found = self.repository.get(aggregate_id)
        except AggregateNotFoundError:
            return None
        return found if isinstance(found, kind) else None

    # Texts: sealed under a key of their owner outside the log (domain/ports.py Texts)
    def seal(self, owner: str, text: str) -> str:
        return self.texts.seal(owner, text) if self.texts is not None else text

    def _text_key(self, owner: str) -> Steps[Any]:
        """The owner's current key for texts (from the cache of the texts port when it holds it)."""
        if self.texts is None:
            return None
        return (yield Read(self.texts.key, (owner,), self.texts.cached_key))

    def _sealed(self, key: Any, text: str) -> str:
        return self.texts.seal_with(key, text) if self.texts is not None else text

    def open_text(self, sealed: str | None) -> str | None:
        return self.texts.open(sealed) if self.texts is not None else sealed

    def shred_texts(self, workspace_id: str, actor: str) -> int:
        """`sandesh workspace shred-texts`: destroy the keys of the workspace's texts (audited as
        workspace.texts_shredded); counts, costs and statuses stay.  Its next send gets a new key."""
        workspace = self._get(workspace_id, Workspace, "workspace")
        if self.texts is None:
            raise RuntimeError("texts are not sealed in this process")
        keys = self.texts.shred(workspace_id)
        workspace.shred_texts(keys=keys, actor=actor, at=self.clock.now())
        self.save(workspace)
        return keys

    # Replies from recipients
    def store_reply_part(self, open_reply_id: str | None, sim_id: str, sender: str, reference: int | None,
                         total: int, sequence: int, text: str) -> Reply:
        """Record one part read from a SIM (before it is deleted there); duplicates are dropped.
        A part is sealed under a key of the reply alone until the reply is finished."""
        now = self.clock.now()
        reply = self._find(open_reply_id, Reply) if open_reply_id else None
        if reply is None:
            reply = Reply(sim_id=sim_id, sender=sender, reference=reference, total=max(total, 1), at=now)
        reply.store_part(sequence, self.seal(reply_owner(reply.id), text), at=now)
        self.save(reply)
        return reply

    def reply(self, reply_id: str) -> Reply:
        return self._get(reply_id, Reply, "reply")

    def finish_reply(self, reply_id: str, attributed_to: Message | None) -> Reply:
        """The whole reply, its text sealed under the key of the workspace it is attributed to;
        the parts' own key is then destroyed.  A reply no one sent to keeps the parts' key.
        A STOP or START reply changes its sender's opt-out in the same append, so a crash
        never records one without the other (docs/design.md, "Opt-outs")."""
        def attempt() -> Steps[tuple[tuple[Any, ...], Reply]]:
            reply = self._get(reply_id, Reply, "reply")
            if reply.complete:  # finished elsewhere
                return (), reply
            text = "".join(self.open_text(reply.parts[s]) or "" for s in sorted(reply.parts))
            owner = attributed_to.workspace_id if attributed_to else reply_owner(reply.id)
            now = self.clock.now()
            reply.finish(self.seal(owner, text), attributed_to.client_id if attributed_to else None,
                         attributed_to.id if attributed_to else None, at=now)
            return (reply, *self._opt_out_by_reply(reply.id, text, attributed_to, now)), reply
            yield  # a generator: its reads are plain calls (the dispatcher only)

        reply = run(retried(attempt, f"reply {reply_id}"), self.save)
        if attributed_to is not None and self.texts is not None:
            self.texts.shred(reply_owner(reply.id))
        return reply

    def message(self, message_id: str) -> Message | None:
        return self._find(message_id, Message)

    # Opt-outs of promotional messages (domain/optout.py)
    def opt_out(self, workspace_id: str, number: str, source: str, actor: str, reply_id: str | None = None) -> bool:
        """The number gets no more promotional messages of the workspace.  False, and nothing
        appended, when it had opted out already."""
        return self._change_opt_out(workspace_id, number, True, source, actor, reply_id)

    def opt_in(self, workspace_id: str, number: str, source: str, actor: str, reply_id: str | None = None) -> bool:
        """The number gets the workspace's promotional messages again; False when it had not opted out."""
        return self._change_opt_out(workspace_id, number, False, source, actor, reply_id)

    def _change_opt_out(self, workspace_id: str, number: str, opted_out: bool, source: str, actor: str,
                        reply_id: str | None) -> bool:
        self._get(workspace_id, Workspace, "workspace")
        normalised = phone.normalise(number.strip())
        if normalised is None:
            raise InvalidInput(f"{number!r} is not a Nepal mobile number: 977 and 10 digits starting 96, 97 or 98, "
                               "e.g. 9779812345678")
        def attempt() -> Steps[tuple[tuple[Any, ...], bool]]:
            optout = self._opt_out_of(workspace_id, normalised)
            changed = optout.change(opted_out, source, actor, reply_id, at=self.clock.now())
            return ((optout,) if changed else ()), changed
            yield  # a generator: its reads are plain calls (the CLI only)

        return run(retried(attempt, f"the opt-out of {normalised}"), self.save)

    def _opt_out_of(self, workspace_id: str, number: str) -> OptOut:
        return self._find(optout_id(workspace_id, number), OptOut) or OptOut(workspace_id=workspace_id, number=number)

    def _opt_out_by_reply(self, reply_id: str, text: str, attributed_to: Message | None, now: float) -> list[OptOut]:
        """The change a STOP or START reply asks for (docs/api.md, "Opt-out"): to the promotional
        messages of the workspace of the message it answers, for the number that message went to."""
        word = stop_word(text)
        if word is None or attributed_to is None:
            return []
        optout = self._opt_out_of(attributed_to.workspace_id, attributed_to.to)
        return [optout] if optout.change(word == STOP, REPLY, RECIPIENT, reply_id, at=now) else []

    # Sending: the dispatcher's steps (workers/dispatcher.py, workers/sim_worker.py)
    def change_message(self, message_id: str, change: Callable[[Message], None]) -> Message:
        return run(self.change_message_steps(message_id, change), self.save)

    def change_message_steps(self, message_id: str, change: Callable[[Message], None]) -> Steps[Message]:
        """Apply `change` to the message as the log has it now and append what it decided.
        The sender and the status-report reader both write to a message: a version conflict
        means the other one wrote first, so read it again."""
        def attempt() -> Steps[tuple[tuple[Any, ...], Message]]:
            message = yield Read(self._get, (message_id, Message, "message"))
            change(message)
            return (message,), message

        return (yield from retried(attempt, f"a change to {message_id}"))

    def submit_message(self, message_id: str, sim_id: str) -> Submission:
        """A SIM is about to send a message it leased.  Submitted is recorded before the first
        AT+CMGS, so a message is never sent twice blindly (docs/design.md, "The dispatcher")."""
        message = self.message(message_id)
        if message is None or message.status != "queued":
            return Submission(RELEASE)
        now = self.clock.now()
        if message.expired(now):  # it ran out while leased: not sent either
            self.change_message(message_id, lambda m: m.expire(at=now))
            return Submission(SKIP)
        text = self.open_text(message.text)
        if text is None:  # its workspace's texts were erased before it went out: failed, refunded
            self.change_message(message_id, lambda m: m.fail(TEXT_ERASED, at=now))
            return Submission(SKIP)
        message.submit(sim_id, at=now)
        try:
            self.save(message)
        except IntegrityError:
            return Submission(SKIP)  # another SIM submitted it first (its lease had been handed back)
        return Submission(SEND, message, text)

    # Webhook deliveries
    def delivery(self, delivery_id: str) -> WebhookDelivery:
        return self._get(delivery_id, WebhookDelivery, "webhook delivery")

    def deliveries(self, delivery_ids: list[str]) -> dict[str, WebhookDelivery]:
        """Several deliveries as they are now, read in one round trip (the webhook sender's
        lease); an id with no delivery is left out."""
        return self.aggregates_of(delivery_ids, WebhookDelivery)

    def aggregates_of(self, ids: Iterable[str], kind: type[A]) -> dict[str, A]:
        """Several aggregates of one kind as they are now, read in one round trip; an id with
        none of that kind is left out."""
        events: dict[str, list[Any]] = {}
        for stored in self.recorder.select_events_of(list(ids)):  # type: ignore[attr-defined]
            events.setdefault(stored.originator_id, []).append(self.mapper.to_domain_event(stored))
        found = {key: _projected(its_events) for key, its_events in events.items()}
        return {key: aggregate for key, aggregate in found.items() if isinstance(aggregate, kind)}

    def add_deliveries(self, deliveries: list[WebhookDelivery]) -> None:
        """Append new deliveries; an id that exists already (the same message and status again,
        or a batch read again after a crash) is skipped."""
        pending: dict[str, list[Any]] = {}
        for delivery in deliveries:
            pending.setdefault(delivery.id, delivery.collect_events())  # the first of each id in a batch
        if not pending:
            return
        try:
            self.append_events([e for events in pending.values() for e in events])
        except IntegrityError:
            for events in pending.values():
                try:
                    self.append_events(events)
                except IntegrityError:
                    pass

    def record_attempt(self, delivery: WebhookDelivery, status_code: int | None, error: str | None,
                       duration: float, append: Callable[..., None] | None = None) -> WebhookDelivery:
        """One POST of `delivery` (as loaded before it was made), recorded (by `append`: the
        webhook sender's group commit; `save` by default); InvalidTransition when another sender
        attempted it at the same time."""
        delivery.attempted(status_code, error, duration, at=self.clock.now())
        try:
            (append or self.save)(delivery)
        except IntegrityError:
            raise InvalidTransition(f"{delivery.id} was attempted by another sender at the same time") from None
        return delivery

    def redeliver(self, delivery_id: str, actor: str) -> WebhookDelivery:
        """A new delivery of the same event body, with a new id (audited)."""
        original = self.delivery(delivery_id)
        now = self.clock.now()
        again = new_delivery(original.client_id, original.event_type, original.subject, original.status,
                             original.body, at=now, redelivery_of=original.id)
        original.redelivered(client_id=original.client_id, redelivered_as=again.id, actor=actor, at=now)
        self.save(original, again)
        return again

    # What happened to a message
    def message_history(self, message_id: str, reply_ids: list[str],
                        webhook_url_of: Callable[[str], str | None]) -> dict[str, Any]:
        """The message's whole life from the log, oldest first (domain/history.py): its own
        events, every webhook delivery of it and its attempts, and the replies attributed to it
        (`reply_ids`, from the replies read model).  `webhook_url_of(client_id)`: the client's
        webhook URL, for the host of each attempt."""
        message = self.message(message_id)
        if message is None:
            raise NotFound(f"no message {message_id!r}")
        webhook_url = webhook_url_of(message.client_id)
        deliveries = []
        to_read = [delivery_id(message_id, status) for status in sorted(set(WEBHOOK_STATUS.values()))]
        while to_read:  # each status's delivery, then every redelivery an operator asked for
            delivery = self._find(to_read.pop(0), WebhookDelivery)
            if delivery is None:
                continue
            events = self._events(delivery.id)
            deliveries.append((delivery, events))
            to_read += [e.redelivered_as for e in events if isinstance(e, WebhookDelivery.Redelivered)]
        replies = [self._events(reply_id) for reply_id in reply_ids]
        return {"messageId": message.id, "workspaceId": message.workspace_id, "clientId": message.client_id,
                "events": history.entries(self._events(message_id), deliveries, replies, webhook_url,
                                          self.open_text)}

    def _events(self, originator_id: str) -> list[Any]:
        return [self.mapper.to_domain_event(stored) for stored in self.recorder.select_events(originator_id)]

    # The audit trail
    def operator_events(self) -> Iterator[Any]:
        topics = topics_of(ACTIONS)
        start = 1
        while True:
            page = self.recorder.select_notifications(start=start, limit=500, topics=topics)
            for notification in page:
                yield self.mapper.to_domain_event(notification)
            if len(page) < 500:
                return
            start = page[-1].id + 1

    def audit(self, workspace_id: str | None = None, client_id: str | None = None,
              since: float | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        workspace_of_client: dict[str, str] = {}
        lines = []
        for event in self.operator_events():
            if isinstance(event, Client.Created):
                workspace_of_client[event.originator_id] = event.workspace_id
            if not operator_change(event):
                continue
            line = audit_line(event, workspace_of_client)
            if workspace_id and line["workspaceId"] != workspace_id:
                continue
            if client_id and line["clientId"] != client_id:
                continue
            if since is not None and line["at"] < since:
                continue
            lines.append({**line, "at": iso(line["at"])})
        return lines[-limit:] if limit else lines


def _reply_of(message: Message) -> dict[str, Any]:
    return accepted_reply(message.id, message.message_type, message.segments, message.encoding, message.cost,
                          message.expires_at, message.send_at)


def _replayed(prior: Prior, request_hash: str | None) -> Sent:
    if prior.request_hash != request_hash:
        raise IdempotencyConflict(IdempotencyConflict.DIFFERENT_BODY)
    return Sent(prior.response.encode(), replayed=True)


def _projected(events: list[Any]) -> Any:
    """The aggregate its events make, each event applied in turn: eventsourcing's
    `project_aggregate` without its check of every event against a runtime Protocol, which
    costs 21 µs an event, seven times the rest (docs/performance.md, "Leased ahead")."""
    aggregate = None
    for event in events:
        aggregate = event.mutate(aggregate)
    return aggregate
