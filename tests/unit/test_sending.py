"""Validation and refusals of POST /v1/sms/send that need no storage (docs/api.md, "POST /v1/sms/send")."""
import pytest

from sandesh.domain import phone
from sandesh.domain.sending import cost, parse_send, refusal


@pytest.mark.parametrize("given, stored", [
    ("9779812345678", "9779812345678"),
    ("+9779812345678", "9779812345678"),
    ("9779612345678", "9779612345678"),
    ("9779712345678", "9779712345678"),
])
def test_nepal_numbers_are_977_and_10_digits_starting_96_97_or_98(given, stored):
    assert phone.normalise(given) == stored


@pytest.mark.parametrize("given", [
    "9812345678", "09779812345678", "977981234567", "97798123456789", "9779512345678", "9779912345678",
    "+977 9812345678", "977-981-2345678", "++9779812345678", "919812345678", "9779812345678\n", "",
    "٩٧٧٩٨١٢٣٤٥٦٧٨", "97798१२३४५६७८",
])
def test_other_notations_and_countries_are_refused(given):
    assert phone.normalise(given) is None


def test_inbound_senders_carry_the_plus():
    assert phone.with_plus("9779812345678") == "+9779812345678"
    assert phone.with_plus("+9779812345678") == "+9779812345678"


def test_a_valid_request_is_normalised_and_counted():
    request, problems = parse_send({"to": "+9779812345678", "text": "Namaste"})
    assert problems == [] and request.to == "9779812345678"
    assert (request.message_type, request.segments, request.encoding) == ("transactional", 1, "GSM-7")
    request, _ = parse_send({"to": "9779812345678", "text": "नमस्ते", "messageType": "otp"})
    assert (request.message_type, request.encoding) == ("otp", "UCS-2")


@pytest.mark.parametrize("body, path, code", [
    ({"text": "hi"}, ["to"], "required"),
    ({"to": 9779812345678, "text": "hi"}, ["to"], "invalid_type"),
    ({"to": "9812345678", "text": "hi"}, ["to"], "invalid_phone_number"),
    ({"to": "9779812345678"}, ["text"], "required"),
    ({"to": "9779812345678", "text": 5}, ["text"], "invalid_type"),
    ({"to": "9779812345678", "text": "   \n"}, ["text"], "empty"),
    ({"to": "9779812345678", "text": "a" * 919}, ["text"], "too_long"),
    ({"to": "9779812345678", "text": "क" * 403}, ["text"], "too_long"),
    ({"to": "9779812345678", "text": "€" * 459}, ["text"], "too_long"),
    ({"to": "9779812345678", "text": "hi", "messageType": "marketing"}, ["messageType"], "invalid_enum"),
    ({"to": "9779812345678", "text": "hi", "messageType": None}, ["messageType"], "invalid_enum"),
])
def test_each_problem_names_its_field(body, path, code):
    request, problems = parse_send(body)
    assert request is None
    assert [(p.path, p.code) for p in problems] == [(path, code)]


def test_every_problem_is_listed_at_once():
    _, problems = parse_send({"to": "1", "text": "", "messageType": "x"})
    assert [p.path for p in problems] == [["to"], ["text"], ["messageType"]]


def test_six_segments_are_allowed():
    request, problems = parse_send({"to": "9779812345678", "text": "a" * 918})
    assert problems == [] and request.segments == 6


@pytest.mark.parametrize("allowed, sms_on, route, expected", [
    (["otp"], False, False, "forbidden"),
    (["transactional"], False, False, "sms_disabled"),
    (["transactional"], True, False, "unavailable"),
    (["transactional"], True, True, None),
])
def test_refusals_come_in_the_order_of_decisions_1(allowed, sms_on, route, expected):
    """Type allowed, then the SMS switch, then a route (docs/api.md, "Order of checks")."""
    assert refusal("transactional", allowed, sms_on, route) == expected


def test_cost_is_the_rate_per_segment_times_segments():
    assert cost({"transactional": 100, "otp": 150, "promotional": 40}, "otp", 3) == 450


def test_unknown_fields_are_refused_by_name_on_every_endpoint_body():
    from sandesh.domain.sending import parse_otp_send, parse_otp_verify

    _, problems = parse_send({"to": "9779812345678", "text": "hi", "messageTyp": "otp", "extra": 1})
    assert [(p.path, p.code) for p in problems] == [(["messageTyp"], "unknown_field"), (["extra"], "unknown_field")]
    _, problems = parse_otp_send({"to": "9779812345678", "purpose": "login", "code": "123456"})
    assert [(p.path, p.code) for p in problems] == [(["code"], "unknown_field")]
    _, problems = parse_otp_verify({"to": "9779812345678", "purpose": "login", "code": "1", "ip": "1.2.3.4"})
    assert [(p.path, p.code) for p in problems] == [(["ip"], "unknown_field")]
    request, problems = parse_send({"to": "9779812345678", "text": "hi", "messageType": "otp", "validFor": 60})
    assert not problems and request.valid_for == 60
