"""What the dispatcher and the webhook sender record (domain/usecases/dispatch.py, webhooks.py),
and a message's history read back from the log (history.py)."""
from __future__ import annotations

import time

import pytest

from sandesh.domain.errors import InvalidTransition, Refused
from sandesh.domain.usecases.dispatch import RELEASE, SEND
from sandesh.domain.webhook import new_delivery

from .conftest import Store, a_number
from .test_sending import request


def a_sim(store: Store) -> str:
    return store.sandesh.sims.add_sim(f"sim-{a_number()}", "loop://", 115200, None, "ops").id


def test_a_leased_message_is_submitted_once_with_its_text_opened(store: Store):
    caller = store.caller(store.workspace(1_000))
    sent = store.sandesh.sending.send_sms(caller, request(text="Namaste"))
    sim = a_sim(store)
    submission = store.sandesh.dispatch.submit_message(sent.message.id, sim)
    assert (submission.action, submission.text, submission.message.status) == (SEND, "Namaste", "submitted")
    assert store.sandesh.dispatch.submit_message(sent.message.id, sim).action == RELEASE


def test_a_message_the_network_rejects_before_any_segment_was_accepted_is_refunded(store: Store):
    caller = store.caller(store.workspace(1_000))
    sent = store.sandesh.sending.send_sms(caller, request())
    store.sandesh.dispatch.submit_message(sent.message.id, a_sim(store))
    store.sandesh.dispatch.change_message(sent.message.id, lambda m: m.reject("CMS ERROR 500", at=time.time()))
    assert store.sandesh.history.message(sent.message.id).status == "rejected"
    assert store.balance(caller.workspace_id) == 1_000


def test_a_stop_reply_to_a_promotional_message_opts_its_sender_out_in_the_same_append(store: Store):
    workspace, number = store.workspace(1_000), a_number()
    caller = store.caller(workspace)
    sent = store.sandesh.sending.send_sms(caller, request(to=number, messageType="promotional"))
    sim = a_sim(store)
    first = store.sandesh.dispatch.store_reply_part(None, sim, number, 7, 2, 1, "ST")
    part = store.sandesh.dispatch.store_reply_part(first.id, sim, number, 7, 2, 2, "OP")
    reply = store.sandesh.dispatch.finish_reply(part.id, sent.message)
    assert store.sandesh.texts.open(reply.text) == "STOP"
    with pytest.raises(Refused) as refused:
        store.sandesh.sending.send_sms(caller, request(to=number, messageType="promotional"))
    assert refused.value.code == "recipient_opted_out"
    assert store.sandesh.operators.opt_out(workspace, number, "operator", "ops") is False  # out already


def test_a_delivery_records_its_attempts_and_an_operator_asks_for_it_again(store: Store):
    caller = store.caller(store.workspace(1_000))
    sent = store.sandesh.sending.send_sms(caller, request())
    delivery = new_delivery(caller.client_id, "message.status", sent.message.id, "failed",
                            {"messageId": sent.message.id}, at=time.time())
    store.sandesh.webhooks.add_deliveries([delivery, delivery])  # the same one twice is kept once
    loaded = store.sandesh.webhooks.delivery(delivery.id)
    stale = store.sandesh.webhooks.delivery(delivery.id)
    store.sandesh.webhooks.record_attempt(loaded, 500, None, 0.2)
    with pytest.raises(InvalidTransition):
        store.sandesh.webhooks.record_attempt(stale, 200, None, 0.1)  # another sender attempted it meanwhile
    again = store.sandesh.webhooks.redeliver(delivery.id, "ops")
    assert again.id != delivery.id and again.body == delivery.body
    assert set(store.sandesh.webhooks.deliveries([delivery.id, again.id, "whd_missing"])) == {delivery.id, again.id}
    history = store.sandesh.history.message_history(sent.message.id, [], lambda client_id: "https://example.com/h")
    kinds = [entry["type"] for entry in history["events"]]
    assert kinds[0] == "accepted" and kinds.count("webhook_attempt") == 1
    assert kinds.count("webhook_created") == 2 and kinds.count("webhook_redelivered") == 1
