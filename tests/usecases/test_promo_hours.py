"""Promotional messages wait for their workspace's promotional hours (Sending.send_sms and
send_batch over domain/promo_hours.py; docs/api.md, "Promotional hours").  The hours are chosen
around the clock's present, so each test is the same at any time of day."""
from __future__ import annotations

import time

import pytest

from sandesh.domain.errors import InvalidRequest
from sandesh.domain.message import SCHEDULED
from sandesh.domain.promo_hours import DAY, NEPAL_OFFSET, PromoHours
from sandesh.domain.sending import ItemRefused, parse_send

from .conftest import Store, a_number


def closed_now(now: float) -> tuple[PromoHours, float]:
    """Hours that open two hours from now (to the minute) for one hour, and when they open."""
    local = (now + NEPAL_OFFSET) % DAY
    start = int(local + 2 * 3600) // 60 * 60 % DAY
    opening = now + (start - local) % DAY
    return PromoHours(start, (start + 3600) % DAY), opening


def request(message_type: str = "promotional", **fields):
    parsed, problems = parse_send({"to": a_number(), "text": "Tihar sale", "messageType": message_type, **fields},
                                  time.time())
    assert not problems, problems
    return parsed


def test_a_promotion_outside_the_hours_is_charged_at_once_and_scheduled_for_the_opening(store: Store):
    hours, opening = closed_now(store.sandesh.clock.now())
    caller = store.caller(store.workspace(1_000), promo_hours=hours)
    message = store.sandesh.sending.send_sms(caller, request()).message
    assert (message.status, message.send_at) == (SCHEDULED, pytest.approx(opening, abs=1))
    assert store.balance(caller.workspace_id) == 900
    assert store.sandesh.sending.cancel_message(caller.client_id, message.id).status == "canceled"  # like any scheduled
    assert store.balance(caller.workspace_id) == 1_000


@pytest.mark.parametrize("message_type", ["transactional", "otp"])
def test_otp_and_transactional_messages_never_wait(store: Store, message_type):
    hours, _ = closed_now(store.sandesh.clock.now())
    caller = store.caller(promo_hours=hours)
    message = store.sandesh.sending.send_sms(caller, request(message_type)).message
    assert (message.status, message.send_at) == ("queued", None)


def test_within_the_hours_or_with_them_off_a_promotion_is_queued_at_once(store: Store):
    now = store.sandesh.clock.now()
    local = int((now + NEPAL_OFFSET) % DAY)
    open_now = PromoHours((local - 3600) % DAY, (local + 3600) % DAY)
    for hours in (open_now, None):
        message = store.sandesh.sending.send_sms(store.caller(promo_hours=hours), request()).message
        assert (message.status, message.send_at) == ("queued", None)


def test_a_promotion_whose_valid_for_ends_before_the_opening_is_refused_and_not_charged(store: Store):
    hours, opening = closed_now(store.sandesh.clock.now())
    caller = store.caller(store.workspace(1_000), promo_hours=hours)
    with pytest.raises(InvalidRequest) as refused:
        store.sandesh.sending.send_sms(caller, request(validFor=3600))
    assert refused.value.path == ["validFor"]
    assert store.balance(caller.workspace_id) == 1_000
    kept = store.sandesh.sending.send_sms(caller, request(validFor=4 * 3600)).message
    assert kept.send_at == pytest.approx(opening, abs=1)
    assert kept.expires_at == pytest.approx(kept.created_at + 4 * 3600, abs=1)  # its validity still ends then


def test_a_batch_judges_each_item_alone(store: Store):
    hours, opening = closed_now(store.sandesh.clock.now())
    caller = store.caller(store.workspace(1_000), promo_hours=hours)
    results = store.sandesh.sending.send_batch(caller, [request(), request(validFor=60), request("transactional")]).results
    assert results[0].status == SCHEDULED and results[0].send_at == pytest.approx(opening, abs=1)
    assert isinstance(results[1], ItemRefused) and results[1].code == "invalid_request"
    assert results[1].problems[0].path == ["messages", 1, "validFor"]
    assert results[2].status == "queued"
    assert store.balance(caller.workspace_id) == 800
