"""Sends, batches, Idempotency-Keys, cancels and scheduled sends, as use cases (domain/usecases/sending.py)."""
from __future__ import annotations

import time

import orjson
import pytest

from sandesh.domain.errors import IdempotencyConflict, InsufficientBalance, NotCancelable, NotFound, Refused
from sandesh.domain.message import Message
from sandesh.domain.sending import ItemRefused, Problem, parse_send
from sandesh.domain.usecases.sending import Accepted, BatchAccepted, Replayed

from .conftest import Store, a_number


def request(to: str | None = None, text: str = "Your order is on its way", **fields):
    parsed, problems = parse_send({"to": to or a_number(), "text": text, **fields}, time.time())
    assert not problems, problems
    return parsed


def test_a_send_is_accepted_queued_and_charged_its_rate_per_segment(store: Store):
    caller = store.caller(store.workspace(1_000))
    sent = store.sandesh.sending.send_sms(caller, request(text="x" * 161))  # two segments of GSM-7
    assert isinstance(sent, Accepted)
    assert (sent.message.status, sent.message.segments, sent.message.cost) == ("queued", 2, 200)
    assert store.balance(caller.workspace_id) == 800
    assert store.sandesh.history.message(sent.message.id).status == "queued"


def test_a_send_the_balance_cannot_pay_is_refused_whole(store: Store):
    caller = store.caller(store.workspace(150))
    with pytest.raises(InsufficientBalance) as short:
        store.sandesh.sending.send_sms(caller, request(text="x" * 161))
    assert short.value.cost == 200
    assert store.balance(caller.workspace_id) == 150


@pytest.mark.parametrize("changes, code", [({"allowed_types": ["otp"]}, "forbidden"),
                                           ({"sms_enabled": False}, "sms_disabled"),
                                           ({"has_route": False}, "unavailable")])
def test_a_send_the_callers_state_refuses_is_not_charged(store: Store, changes, code):
    caller = store.caller(store.workspace(1_000), **changes)
    with pytest.raises(Refused) as refused:
        store.sandesh.sending.send_sms(caller, request())
    assert refused.value.code == code
    assert store.balance(caller.workspace_id) == 1_000


def test_a_retry_with_the_same_idempotency_key_replays_the_first_answer_and_charges_once(store: Store):
    caller = store.caller(store.workspace(1_000))
    first = store.sandesh.sending.send_sms(caller, request(to="9779841000001"), "order-1", "hash-a")
    again = store.sandesh.sending.send_sms(caller, request(to="9779841000001"), "order-1", "hash-a")
    assert isinstance(first, Accepted) and isinstance(again, Replayed)
    assert orjson.loads(again.response)["messageId"] == first.message.id
    assert store.balance(caller.workspace_id) == 900
    with pytest.raises(IdempotencyConflict) as conflict:
        store.sandesh.sending.send_sms(caller, request(to="9779841000002"), "order-1", "hash-b")
    assert conflict.value.reason == IdempotencyConflict.DIFFERENT_BODY


def test_a_batch_judges_each_item_alone_and_charges_the_accepted_together(store: Store):
    caller = store.caller(store.workspace(1_000), allowed_types=["transactional"])
    invalid = [Problem(["messages", 1, "to"], "to is required", "required")]
    sent = store.sandesh.sending.send_batch(caller, [request(), invalid, request(messageType="promotional")])
    assert isinstance(sent, BatchAccepted)
    accepted, refused_invalid, refused_type = sent.results
    assert isinstance(accepted, Message) and accepted.status == "queued"
    assert refused_invalid == ItemRefused("invalid_request", tuple(invalid))
    assert refused_type == ItemRefused("forbidden")
    assert store.balance(caller.workspace_id) == 900


def test_a_batch_the_balance_cannot_pay_sends_none_of_it(store: Store):
    caller = store.caller(store.workspace(150))
    with pytest.raises(InsufficientBalance) as short:
        store.sandesh.sending.send_batch(caller, [request(), request()])
    assert short.value.cost == 200
    assert store.balance(caller.workspace_id) == 150


def test_a_batch_retried_with_its_key_replays_its_first_body(store: Store):
    caller = store.caller(store.workspace(1_000))
    first = store.sandesh.sending.send_batch(caller, [request(), request()], "batch-1", "hash-a")
    again = store.sandesh.sending.send_batch(caller, [request(), request()], "batch-1", "hash-a")
    assert isinstance(first, BatchAccepted) and isinstance(again, Replayed)
    assert [r["messageId"] for r in orjson.loads(again.response)["results"]] == [m.id for m in first.results]
    assert store.balance(caller.workspace_id) == 800


def test_a_queued_message_is_canceled_and_refunded_in_full_by_its_own_client_only(store: Store):
    workspace = store.workspace(1_000)
    caller, other = store.caller(workspace), store.caller(workspace)
    sent = store.sandesh.sending.send_sms(caller, request())
    with pytest.raises(NotFound):
        store.sandesh.sending.cancel_message(other.client_id, sent.message.id)
    assert store.sandesh.sending.cancel_message(caller.client_id, sent.message.id).status == "canceled"
    assert store.balance(workspace) == 1_000
    with pytest.raises(NotCancelable) as late:
        store.sandesh.sending.cancel_message(caller.client_id, sent.message.id)
    assert late.value.status == "canceled"


def test_a_scheduled_message_waits_for_its_send_at_then_joins_the_queue(store: Store):
    caller = store.caller(store.workspace(1_000))
    at = time.time() + 3600
    sent = store.sandesh.sending.send_sms(caller, request(sendAt=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))))
    assert sent.message.status == "scheduled"
    assert store.sandesh.sending.release_scheduled([sent.message.id]) == 1
    assert store.sandesh.history.message(sent.message.id).status == "queued"
    assert store.sandesh.sending.release_scheduled([sent.message.id]) == 0  # released once


def test_a_promotional_message_to_a_number_that_opted_out_is_refused(store: Store):
    workspace = store.workspace(1_000)
    caller, number = store.caller(workspace), a_number()
    assert store.sandesh.operators.opt_out(workspace, number, "operator", "tester") is True
    assert store.sandesh.operators.opt_out(workspace, number, "operator", "tester") is False
    with pytest.raises(Refused) as refused:
        store.sandesh.sending.send_sms(caller, request(to=number, messageType="promotional"))
    assert refused.value.code == "recipient_opted_out"
    assert isinstance(store.sandesh.sending.send_sms(caller, request(to=number)), Accepted)  # transactional goes
    assert store.sandesh.operators.opt_in(workspace, number, "operator", "tester") is True
    assert isinstance(store.sandesh.sending.send_sms(caller, request(to=number, messageType="promotional")), Accepted)
