"""What the dispatcher and the webhook sender record (domain/usecases/dispatch.py, webhooks.py),
and a message's history read back from the log (history.py)."""
from __future__ import annotations

import time

import pytest

from sandesh.domain.errors import InvalidInput, InvalidTransition, Refused
from sandesh.domain.inbound import reply_owner
from sandesh.domain.message import Message
from sandesh.domain.optout import START, STOP, confirmation
from sandesh.domain.topics import topics_of
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


def test_a_reply_a_device_tells_again_after_it_was_finished_is_neither_recorded_nor_sealed_again(store: Store):
    """A phone tells each reply twice (its webhook, its inbox): the second, read once the first
    was finished and its parts' key destroyed, must make no key again."""
    sent = store.sandesh.sending.send_sms(store.caller(store.workspace(1_000)), request(to=a_number()))
    sim = a_sim(store)
    told, recorded = store.sandesh.dispatch.store_keyed_reply(sim, "inbox-7", sent.message.to, "Namaste")
    assert recorded
    reply = store.sandesh.dispatch.finish_reply(told.id, sent.message)
    assert store.sandesh.texts.open(reply.text) == "Namaste"
    again, recorded = store.sandesh.dispatch.store_keyed_reply(sim, "inbox-7", sent.message.to, "Namaste")
    assert (again.id, recorded) == (told.id, False)
    assert store.sandesh.texts.cached_key(reply_owner(told.id)) is None


def replied(store: Store, sent, text: str):
    """The recipient of `sent` replies `text`, a whole SMS through a SIM."""
    part = store.sandesh.dispatch.store_reply_part(None, a_sim(store), sent.message.to, None, 1, 1, text)
    return store.sandesh.dispatch.finish_reply(part.id, sent.message)


def messages_to(store: Store, workspace: str, number: str) -> list[Message]:
    """The workspace's messages to `number`, oldest first, read from the log."""
    accepted = [e for e in store.sandesh.log.notifications(topics_of([Message.Accepted]))
                if e.workspace_id == workspace and e.to == number]
    return [store.sandesh.history.message(e.originator_id) for e in accepted]


@pytest.mark.parametrize("stop, start, language", [("BAND", "SURU", "en"), ("बन्द", "सुरु", "ne"),
                                                   ("Radda", "start", "en"), ("रद्द", "Suru", "ne")])
def test_nepali_words_opt_out_and_back_in_confirmed_in_their_language_when_the_workspace_confirms(
        store: Store, stop, start, language):
    workspace, number = store.workspace(1_000), a_number()
    caller = store.caller(workspace)
    store.sandesh.operators.set_replies(workspace, None, True, "ops")
    sent = store.sandesh.sending.send_sms(caller, request(to=number, messageType="promotional"))
    reply = replied(store, sent, stop)
    with pytest.raises(Refused):
        store.sandesh.sending.send_sms(caller, request(to=number, messageType="promotional"))
    [confirmed] = messages_to(store, workspace, number)[1:]
    assert store.sandesh.texts.open(confirmed.text) == confirmation(STOP, language, "Pasal")
    assert (confirmed.message_type, confirmed.client_id) == ("transactional", caller.client_id)
    assert store.balance(workspace) == 1_000 - 2 * 100  # the promotion and its confirmation
    assert reply.in_reply_to == sent.message.id
    replied(store, sent, stop)  # out already: nothing changes, nothing is confirmed again
    replied(store, sent, start)
    assert store.sandesh.sending.send_sms(caller, request(to=number, messageType="promotional"))
    texts = [store.sandesh.texts.open(m.text) for m in messages_to(store, workspace, number)]
    assert texts[1:3] == [confirmation(STOP, language, "Pasal"),
                          confirmation(START, "en" if start.isascii() else "ne", "Pasal")]


def test_no_confirmation_unless_the_workspace_confirms(store: Store):
    workspace, number = store.workspace(1_000), a_number()
    sent = store.sandesh.sending.send_sms(store.caller(workspace), request(to=number))
    replied(store, sent, "STOP")
    assert len(messages_to(store, workspace, number)) == 1


def test_help_is_answered_with_the_help_text_once_a_day(store: Store):
    workspace, number = store.workspace(1_000), a_number()
    sent = store.sandesh.sending.send_sms(store.caller(workspace), request(to=number))
    replied(store, sent, "HELP")
    assert len(messages_to(store, workspace, number)) == 1, "no help text: no answer"
    store.sandesh.operators.set_replies(workspace, "  Call 01-4412345, 10 to 5.  ", None, "ops")
    for word in ("help", "सहयोग", "SAHAYOG"):
        replied(store, sent, word)
    [answer] = messages_to(store, workspace, number)[1:]
    assert store.sandesh.texts.open(answer.text) == "Call 01-4412345, 10 to 5."
    assert store.balance(workspace) == 1_000 - 2 * 100


def test_an_answer_the_balance_cannot_pay_is_left_out_and_the_opt_out_stands(store: Store):
    workspace, number = store.workspace(100), a_number()
    caller = store.caller(workspace)
    store.sandesh.operators.set_replies(workspace, "Call us", True, "ops")
    sent = store.sandesh.sending.send_sms(caller, request(to=number, messageType="promotional"))
    assert store.balance(workspace) == 0
    reply = replied(store, sent, "बन्द")
    assert reply.complete and len(messages_to(store, workspace, number)) == 1
    with pytest.raises(Refused):
        store.sandesh.sending.send_sms(caller, request(to=number, messageType="promotional"))


def test_a_help_text_longer_than_three_sms_is_refused(store: Store):
    workspace = store.workspace(0)
    with pytest.raises(InvalidInput):
        store.sandesh.operators.set_replies(workspace, "x" * 500, None, "ops")
    assert store.sandesh.operators.set_replies(workspace, "", True, "ops").help_text is None


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
