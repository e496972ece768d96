"""Redelivering an outage (Webhooks.redeliver_outage; docs/operations.md, "Redelivering an outage")."""
from __future__ import annotations

import uuid

import pytest

from sandesh.domain.errors import InvalidInput, NotFound
from sandesh.domain.webhook import ATTEMPTING, DEAD, DELIVERED, MAX_ATTEMPTS, WAITING, new_delivery

from .conftest import Store

HOUR = 3600.0


def made(store: Store, client_id: str, hours_ago: float, outcome: str, subject: str):
    """A delivery created `hours_ago`, left `outcome`: waiting (one 500), dead (three 404s) or delivered."""
    at = store.sandesh.clock.now() - hours_ago * HOUR
    subject = f"{subject}_{uuid.uuid4().hex[:8]}"  # a delivery's id is derived from its subject and status
    delivery = new_delivery(client_id, "message.status", subject, "sent", {"id": subject}, at=at)
    store.sandesh.webhooks.add_deliveries([delivery])
    for status in {"waiting": [500], "dead": [404, 404, 404], "delivered": [200]}[outcome]:
        store.sandesh.webhooks.record_attempt(store.sandesh.webhooks.delivery(delivery.id), status, None, 0.1)
    assert store.sandesh.webhooks.delivery(delivery.id).state == outcome
    return delivery.id


@pytest.fixture
def outage(store: Store):
    """A client whose receiver was down between 30 and 2 hours ago, beside another client."""
    caller = store.caller()
    other = store.caller(caller.workspace_id)
    ids = {"before": made(store, caller.client_id, 40, "dead", "msg_before"),
           "first": made(store, caller.client_id, 30, "dead", "msg_first"),
           "second": made(store, caller.client_id, 20, "waiting", "msg_second"),
           "delivered": made(store, caller.client_id, 10, "delivered", "msg_delivered"),
           "third": made(store, caller.client_id, 3, "dead", "msg_third"),
           "other": made(store, other.client_id, 20, "dead", "msg_other")}
    return caller, ids


def anew(store: Store, delivery_id: str):
    """The delivery an outage's redelivery made of a dead one."""
    return store.sandesh.webhooks.delivery(store.sandesh.webhooks.delivery(delivery_id).redelivered_as)


def test_every_dead_or_waiting_delivery_of_the_span_is_attempted_again_as_itself_in_its_order(store, outage):
    caller, ids = outage
    now = store.sandesh.clock.now()
    count = store.sandesh.webhooks.redeliver_outage(caller.client_id, now - 31 * HOUR, now - 2 * HOUR, None, "ops")
    assert count == 3
    first, third = (store.sandesh.webhooks.delivery(ids[name]) for name in ("first", "third"))
    assert first.state == third.state == DEAD  # a dead delivery is final: its event goes in a new one
    again = [anew(store, ids["first"]), store.sandesh.webhooks.delivery(ids["second"]), anew(store, ids["third"])]
    assert all(d.state == ATTEMPTING and d.attempts == a for d, a in zip(again, (0, 1, 0)))
    assert [d.delivery_header for d in again] == [ids["first"], ids["second"], ids["third"]]  # x-service-delivery
    assert again[0].body == first.body and again[0].redelivery_of == first.id
    assert [d.next_at for d in again] == sorted(d.next_at for d in again)  # due in their original order
    assert all(d.next_at <= now for d in again)
    untouched = {name: store.sandesh.webhooks.delivery(ids[name]) for name in ("before", "delivered", "other")}
    assert {name: d.state for name, d in untouched.items()} == {"before": DEAD, "delivered": DELIVERED, "other": DEAD}
    assert all(d.redelivered_as is None for d in untouched.values())


def test_an_outage_redelivered_twice_sends_each_event_once_more(store, outage):
    caller, ids = outage
    now = store.sandesh.clock.now()
    assert store.sandesh.webhooks.redeliver_outage(caller.client_id, now - 31 * HOUR, now - 2 * HOUR, "dead", "ops") == 2
    assert store.sandesh.webhooks.redeliver_outage(caller.client_id, now - 31 * HOUR, now - 2 * HOUR, "dead", "ops") == 0


def test_it_is_audited_once_with_the_count(store, outage):
    caller, _ = outage
    now = store.sandesh.clock.now()
    store.sandesh.webhooks.redeliver_outage(caller.client_id, now - 31 * HOUR, None, "dead", "ops")
    [line] = [line for line in store.sandesh.history.audit(client_id=caller.client_id)
              if line["action"] == "webhook.redelivered"]
    assert line["actor"] == "ops" and line["workspaceId"] == caller.workspace_id
    assert line["details"]["count"] == 2 and line["details"]["states"] == ["dead"]


def test_the_state_chooses_dead_or_waiting_ones(store, outage):
    caller, ids = outage
    now = store.sandesh.clock.now()
    assert store.sandesh.webhooks.redeliver_outage(caller.client_id, now - 50 * HOUR, None, "waiting", "ops") == 1
    assert store.sandesh.webhooks.delivery(ids["second"]).state == ATTEMPTING
    assert store.sandesh.webhooks.delivery(ids["before"]).state == DEAD


def test_a_dead_deliverys_event_gets_a_full_round_and_a_waiting_one_its_attempts_left(store, outage):
    caller, ids = outage
    now = store.sandesh.clock.now()
    store.sandesh.webhooks.redeliver_outage(caller.client_id, now - 31 * HOUR, None, None, "ops")
    for delivery, attempts in ((anew(store, ids["third"]), MAX_ATTEMPTS), (store.sandesh.webhooks.delivery(ids["second"]),
                                                                          MAX_ATTEMPTS - 1)):
        for _ in range(attempts - 1):
            delivery = store.sandesh.webhooks.record_attempt(delivery, 503, None, 0.1)
            assert delivery.state == WAITING
        delivery = store.sandesh.webhooks.record_attempt(delivery, 503, None, 0.1)
        assert delivery.state == DEAD and delivery.attempts == MAX_ATTEMPTS  # the interface's 8, never more


def test_nothing_to_redeliver_records_nothing(store, outage):
    caller, _ = outage
    now = store.sandesh.clock.now()
    assert store.sandesh.webhooks.redeliver_outage(caller.client_id, now - HOUR, None, None, "ops") == 0
    assert not [line for line in store.sandesh.history.audit(client_id=caller.client_id)
                if line["action"] == "webhook.redelivered"]


def test_bad_input_is_refused(store, outage):
    caller, _ = outage
    now = store.sandesh.clock.now()
    with pytest.raises(InvalidInput):
        store.sandesh.webhooks.redeliver_outage(caller.client_id, now - HOUR, None, "delivered", "ops")
    with pytest.raises(InvalidInput):
        store.sandesh.webhooks.redeliver_outage(caller.client_id, now - HOUR, now - 2 * HOUR, None, "ops")
    with pytest.raises(NotFound):
        store.sandesh.webhooks.redeliver_outage("cl_missing", now - HOUR, None, None, "ops")
    with pytest.raises(NotFound):  # a page of another workspace
        store.sandesh.webhooks.redeliver_outage(caller.client_id, now - 50 * HOUR, None, None, "ops", workspace_id="ws_x")
    assert store.sandesh.webhooks.delivery(outage[1]["first"]).state == DEAD
