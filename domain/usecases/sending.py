"""Sending: a message, a batch, a scheduled message released, a message canceled.  The charge,
the Accepted events and the Idempotency-Key's record commit in one append, refused whole by
the store's guards (InsufficientBalance, IdempotencyKeyTaken).  Each use case is a generator of
steps (domain/steps.py): the API drives it on its event loop, `run` drives it anywhere else."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from eventsourcing.persistence import IntegrityError

from ..batch import record as record_batch
from ..clock import Clock
from ..errors import IdempotencyConflict, IdempotencyKeyTaken, InsufficientBalance, InvalidRequest, NotFound, Refused
from ..message import SCHEDULED, Message, accept
from ..optout import held_back
from ..preview import Preview, preview
from ..promo_hours import scheduled
from ..ports import Caller, IdempotencyKeys, OptOuts, Prior, Texts
from ..sending import ItemRefused, Problem, SendRequest, cost as send_cost, parse_send, refusal as send_refusal
from ..steps import Append, Blocks, Read, Steps, retried, run
from .log import Log

# The 202 body of a batch, as its first request got it: kept under its Idempotency-Key (the API renders it).
BatchAnswer = Callable[[Sequence["Message | ItemRefused"]], str]


@dataclass(frozen=True)
class Accepted:
    message: Message


@dataclass(frozen=True)
class BatchAccepted:
    results: tuple[Message | ItemRefused, ...]  # in the order of the batch's items


@dataclass(frozen=True)
class Replayed:
    """An earlier request with the same Idempotency-Key and body: its 202 body, byte for byte."""
    response: str


class Sending:
    def __init__(self, log: Log, clock: Clock, texts: Texts, idempotency: IdempotencyKeys, opt_outs: OptOuts,
                 append: Callable[..., None], batch_answer: BatchAnswer):
        self.log, self.clock, self.texts = log, clock, texts
        self.idempotency, self.opt_outs = idempotency, opt_outs
        self.append = append  # sends are appended by the process's group commit in the API
        self.batch_answer = batch_answer

    def send_sms(self, caller: Caller, request: SendRequest, idempotency_key: str | None = None,
                 request_hash: str | None = None) -> Accepted | Replayed:
        return run(self.send_sms_steps(caller, request, idempotency_key, request_hash), self.append)

    def send_sms_steps(self, caller: Caller, request: SendRequest, idempotency_key: str | None = None,
                       request_hash: str | None = None) -> Steps[Accepted | Replayed]:
        """POST /v1/sms/send after validation, in the order of docs/api.md, "Order of checks":
        the Idempotency-Key (a replay, or 409 while a twin runs or for another body), then the
        refusals (Refused), the promotional hours (a promotion outside them is scheduled for
        their opening, or InvalidRequest when its validFor ends first), then the charge (InsufficientBalance).  `request_hash` is
        sending.request_hash of the body."""
        return (yield from self._idempotent(caller, idempotency_key, request_hash,
                                            lambda key, hash_: self._accept(caller, request, key, hash_)))

    def send_batch(self, caller: Caller, items: list[SendRequest | list[Problem]], idempotency_key: str | None = None,
                   request_hash: str | None = None) -> BatchAccepted | Replayed:
        return run(self.send_batch_steps(caller, items, idempotency_key, request_hash), self.append)

    def send_batch_steps(self, caller: Caller, items: list[SendRequest | list[Problem]],
                         idempotency_key: str | None = None,
                         request_hash: str | None = None) -> Steps[BatchAccepted | Replayed]:
        """POST /v1/sms/send/batch after the body's own checks: each item (a request, or the
        problems that made it invalid) is judged alone by the rules of a single send; the
        accepted ones are charged together in one append, or none is (InsufficientBalance).
        One Idempotency-Key covers the batch (docs/api.md, "Batch sends")."""
        return (yield from self._idempotent(caller, idempotency_key, request_hash,
                                            lambda key, hash_: self._accept_batch(caller, items, key, hash_)))

    def send(self, client_id: str, workspace_id: str, request: SendRequest, cost: int,
             idempotency_key: str | None = None, request_hash: str | None = None) -> Message:
        """Accept a message at a known cost, with no refusal checked (the `sandesh` command's and
        the tests' own sends)."""
        return run(self._send_steps(client_id, workspace_id, request, cost, idempotency_key, request_hash),
                   self.append)

    def preview(self, caller: Caller, request: SendRequest) -> Preview:
        """POST /v1/sms/preview: what a send of this request would be charged, at the caller's
        workspace rates; nothing is charged, stored or refused."""
        return preview(request.text, caller.rates, request.message_type)

    def cancel_message(self, client_id: str, message_id: str) -> Message:
        return run(self.cancel_message_steps(client_id, message_id), self.log.save)

    def cancel_message_steps(self, client_id: str, message_id: str) -> Steps[Message]:
        """POST /v1/sms/messages/:id/cancel: a scheduled or queued message that no modem was
        handed yet is canceled and refunded in full; otherwise NotCancelable with its status.
        A SIM submitting it at the same moment races on its version: one of the two wins."""
        def attempt() -> Steps[tuple[tuple[Message, ...], Message]]:
            message = yield Read(self.log.find, (message_id, Message))
            if message is None or message.client_id != client_id:
                raise NotFound(f"no message {message_id!r}")
            message.cancel(at=self.clock.now())
            return (message,), message

        return (yield from retried(attempt, f"the cancel of {message_id}"))

    def release_scheduled(self, message_ids: list[str]) -> int:
        """Scheduled messages whose `sendAt` came join the queue; returns how many were released or failed
        (one canceled, or released by another dispatcher, meanwhile is left alone).  A promotional
        one whose recipient opted out meanwhile fails instead, refunded (docs/api.md, "Opt-out")."""
        released = 0
        for message_id in message_ids:
            message = self.log.find(message_id, Message)
            if message is None:
                continue
            if (message.status == SCHEDULED and held_back(message.message_type)
                    and self.opt_outs.opted_out(message.workspace_id, [message.to])):
                message.fail("the recipient opted out of promotional messages before its sendAt", at=self.clock.now())
            else:
                message.release(at=self.clock.now())
            if not message.pending_events:
                continue
            try:
                self.log.save(message)
                released += 1
            except IntegrityError:
                continue  # canceled or released elsewhere meanwhile
        return released

    def _idempotent(self, caller: Caller, key: str | None, request_hash: str | None,
                    accept: Callable[[str | None, str | None], Steps[Any]]) -> Steps[Any]:
        if key is None:
            return (yield from accept(None, None))
        yield Blocks()  # the key's lock is held on a connection until the send is decided
        with self.idempotency.claim(caller.client_id, key, self.clock.now()) as claim:
            if claim.running_elsewhere:
                raise IdempotencyConflict(IdempotencyConflict.RUNNING)
            if claim.prior is not None:
                return _replayed(claim.prior, request_hash)
            try:
                return (yield from accept(key, request_hash))
            except IdempotencyKeyTaken:  # a twin committed between our claim and our append
                taken = self.idempotency.prior(caller.client_id, key, self.clock.now())
                if taken is None:
                    raise
                return _replayed(taken, request_hash)

    def _accept(self, caller: Caller, request: SendRequest, key: str | None,
                request_hash: str | None) -> Steps[Accepted]:
        code = send_refusal(request.message_type, caller.allowed_types, caller.sms_enabled, caller.has_route)
        if code:
            raise Refused(code)
        if held_back(request.message_type) and (yield Read(self.opt_outs.opted_out, (caller.workspace_id,
                                                                                      [request.to]))):
            raise Refused("recipient_opted_out")
        request = scheduled(request, caller.promo_hours, self.clock.now())
        cost = send_cost(caller.rates, request.message_type, request.segments)
        try:
            message = yield from self._send_steps(caller.client_id, caller.workspace_id, request, cost, key,
                                                  request_hash)
        except InsufficientBalance as short:
            raise InsufficientBalance(f"The workspace balance is lower than the message cost ({cost} paisa).",
                                      cost=cost) from short
        return Accepted(message)

    def _accept_batch(self, caller: Caller, items: list[SendRequest | list[Problem]], key: str | None,
                      request_hash: str | None) -> Steps[BatchAccepted]:
        now = self.clock.now()
        results: list[Message | ItemRefused] = []
        promoted = sorted({i.to for i in items if isinstance(i, SendRequest) and held_back(i.message_type)})
        opted_out = (yield Read(self.opt_outs.opted_out, (caller.workspace_id, promoted))) if promoted else set()
        key_of_texts = yield from text_key(self.texts, caller.workspace_id)
        for index, item in enumerate(items):
            if isinstance(item, list):
                results.append(ItemRefused("invalid_request", tuple(item)))
                continue
            code = send_refusal(item.message_type, caller.allowed_types, caller.sms_enabled, caller.has_route)
            if not code and held_back(item.message_type) and item.to in opted_out:
                code = "recipient_opted_out"
            if code:
                results.append(ItemRefused(code))
                continue
            try:
                item = scheduled(item, caller.promo_hours, now)
            except InvalidRequest as refused:
                results.append(ItemRefused("invalid_request", (Problem(["messages", index, *refused.path],
                                                                       refused.message, refused.code),)))
                continue
            results.append(self.message(caller.client_id, caller.workspace_id, item,
                                        send_cost(caller.rates, item.message_type, item.segments), now, key_of_texts))
        messages = [r for r in results if isinstance(r, Message)]
        batch = [record_batch(client_id=caller.client_id, workspace_id=caller.workspace_id, idempotency_key=key,
                              request_hash=request_hash, response=self.batch_answer(results),
                              message_ids=[m.id for m in messages], at=now)] if key is not None else []
        if messages or batch:
            total = sum(m.cost for m in messages)
            try:
                yield Append((*messages, *batch))
            except InsufficientBalance as short:
                raise InsufficientBalance(f"The workspace balance is lower than the cost of the batch's "
                                          f"{len(messages)} accepted messages ({total} paisa); none was sent.",
                                          cost=total) from short
        return BatchAccepted(tuple(results))

    def _send_steps(self, client_id: str, workspace_id: str, request: SendRequest, cost: int,
                    idempotency_key: str | None, request_hash: str | None) -> Steps[Message]:
        key_of_texts = yield from text_key(self.texts, workspace_id)
        message = self.message(client_id, workspace_id, request, cost, self.clock.now(), key_of_texts,
                               idempotency_key, request_hash)
        yield Append((message,))
        return message

    def message(self, client_id: str, workspace_id: str, request: SendRequest, cost: int, now: float,
                key_of_texts: Any, idempotency_key: str | None = None, request_hash: str | None = None) -> Message:
        """A new message, its text sealed under `key_of_texts` (`text_key`); its validity
        (`validFor`) counts from its `sendAt` when it is scheduled."""
        start = request.send_at if request.send_at is not None else now
        return accept(
            client_id=client_id, workspace_id=workspace_id, to=request.to,
            text=self.texts.seal_with(key_of_texts, request.text),
            message_type=request.message_type, segments=request.segments, encoding=request.encoding,
            cost=cost, idempotency_key=idempotency_key, request_hash=request_hash, at=now,
            expires_at=start + request.valid_for if request.valid_for is not None else None,
            send_at=request.send_at,
        )


    def answer_steps(self, client_id: str, workspace_id: str, rates: dict[str, int], to: str, text: str,
                     now: float) -> Steps[tuple[Message | None, list[Problem]]]:
        """A transactional message of the client that answers an SMS from `to` (a keyword's
        reply, a help text, a confirmation), charged at the workspace's rate, not yet appended;
        None and the problems when `to` or `text` cannot be sent."""
        request, problems = parse_send({"to": to, "text": text, "messageType": "transactional"}, now)
        if request is None or problems:
            return None, problems
        key = yield from text_key(self.texts, workspace_id)
        return self.message(client_id, workspace_id, request, send_cost(rates, "transactional", request.segments),
                            now, key), []


def text_key(texts: Texts, owner: str) -> Steps[Any]:
    """The owner's current key for texts (from the port's cache when it holds it)."""
    return (yield Read(texts.key, (owner,), texts.cached_key))


def _replayed(prior: Prior, request_hash: str | None) -> Replayed:
    if prior.request_hash != request_hash:
        raise IdempotencyConflict(IdempotencyConflict.DIFFERENT_BODY)
    return Replayed(prior.response)
