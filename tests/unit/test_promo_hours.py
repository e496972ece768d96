"""Promotional hours in Nepal time (domain/promo_hours.py; docs/api.md, "Promotional hours")."""
from datetime import datetime, timedelta, timezone

import pytest

from sandesh.domain.errors import InvalidInput, InvalidRequest
from sandesh.domain.promo_hours import DEFAULT, PromoHours, parse, scheduled, shown
from sandesh.domain.sending import parse_send

NEPAL = timezone(timedelta(hours=5, minutes=45))


def nepal(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=NEPAL).timestamp()


@pytest.mark.parametrize("at, opening", [
    ("2026-11-25T23:30:00", "2026-11-26T08:00:00"),   # before midnight: the next morning
    ("2026-11-26T00:30:00", "2026-11-26T08:00:00"),   # after midnight: the same morning
    ("2026-11-26T07:59:59", "2026-11-26T08:00:00"),
    ("2026-11-26T08:00:00", "2026-11-26T08:00:00"),   # open from 08:00
    ("2026-11-26T19:59:59", "2026-11-26T19:59:59"),
    ("2026-11-26T20:00:00", "2026-11-27T08:00:00"),   # closed from 20:00
])
def test_the_default_hours_are_8_to_20_nepal_time(at, opening):
    assert DEFAULT.next_opening(nepal(at)) == nepal(opening)
    assert DEFAULT.is_open(nepal(at)) == (at == opening)


def test_hours_may_cross_midnight():
    night = parse("20:00-02:00")
    assert night.is_open(nepal("2026-11-25T23:30:00")) and night.is_open(nepal("2026-11-26T01:59:00"))
    assert night.next_opening(nepal("2026-11-26T02:00:00")) == nepal("2026-11-26T20:00:00")


@pytest.mark.parametrize("text, hours", [("08:00-20:00", DEFAULT), ("off", None), (" OFF ", None),
                                         ("09:30-18:45", PromoHours(9 * 3600 + 1800, 18 * 3600 + 2700))])
def test_hours_are_read_from_hh_mm_or_off_and_shown_the_same_way(text, hours):
    assert parse(text) == hours
    assert parse(shown(hours)) == hours


@pytest.mark.parametrize("text", ["8-20", "08:00", "24:00-08:00", "08:00-08:00", "08:00–20:00", "always"])
def test_other_hours_are_refused(text):
    with pytest.raises(InvalidInput):
        parse(text)


def request(**fields):
    parsed, problems = parse_send({"to": "9779812345678", "text": "Sale", "messageType": "promotional", **fields})
    assert not problems
    return parsed


def test_a_promotion_outside_the_hours_waits_for_the_opening_and_keeps_its_validity_end():
    now = nepal("2026-11-25T23:30:00")
    waiting = scheduled(request(validFor=86_400), DEFAULT, now)
    assert waiting.send_at == nepal("2026-11-26T08:00:00")
    assert waiting.send_at + waiting.valid_for == now + 86_400


def test_a_promotion_whose_validity_ends_before_the_opening_is_refused_naming_valid_for():
    with pytest.raises(InvalidRequest) as refused:
        scheduled(request(validFor=3600), DEFAULT, nepal("2026-11-25T23:30:00"))
    assert refused.value.path == ["validFor"]


def test_a_send_at_in_quiet_hours_moves_to_the_opening():
    later = request(sendAt="2026-11-26T03:00:00+05:45")
    assert scheduled(later, DEFAULT, nepal("2026-11-25T15:00:00")).send_at == nepal("2026-11-26T08:00:00")


@pytest.mark.parametrize("message_type", ["transactional", "otp"])
def test_otp_and_transactional_messages_never_wait(message_type):
    parsed, _ = parse_send({"to": "9779812345678", "text": "Code", "messageType": message_type})
    assert scheduled(parsed, DEFAULT, nepal("2026-11-25T23:30:00")) is parsed


def test_within_the_hours_or_with_them_off_nothing_changes():
    assert scheduled(request(), DEFAULT, nepal("2026-11-25T12:00:00")).send_at is None
    assert scheduled(request(), None, nepal("2026-11-25T23:30:00")).send_at is None
