"""One-time passwords as use cases (domain/usecases/otp.py): sent, checked once, limited."""
from __future__ import annotations

import re

import pytest

from sandesh.domain.errors import InsufficientBalance, OtpLimited, Refused
from sandesh.domain.otp import NO_ACTIVE_OTP
from sandesh.domain.sending import OtpSendRequest, OtpVerifyRequest

from .conftest import Store, a_number


def the_code(store: Store, message_id: str) -> str:
    text = store.sandesh.texts.open(store.sandesh.history.message(message_id).text)
    return re.search(r"\b\d{6}\b", text).group(0)


def test_a_code_is_sent_charged_and_verified_once(store: Store):
    caller, number = store.caller(store.workspace(1_000)), a_number()
    sent = store.sandesh.otp.send_otp(caller, OtpSendRequest(number, "login", None), "10.0.0.1")
    assert (sent.message.message_type, sent.message.status) == ("otp", "queued")
    assert store.balance(caller.workspace_id) == 1_000 - sent.message.cost
    code = the_code(store, sent.message.id)
    wrong = "000000" if code != "000000" else "111111"
    assert store.sandesh.otp.verify_otp(caller, OtpVerifyRequest(number, "login", wrong), "10.0.0.1").verified is False
    assert store.sandesh.otp.verify_otp(caller, OtpVerifyRequest(number, "login", code), "10.0.0.1").verified is True
    again = store.sandesh.otp.verify_otp(caller, OtpVerifyRequest(number, "login", code), "10.0.0.1")
    assert (again.verified, again.reason) == (False, NO_ACTIVE_OTP)


def test_a_second_code_within_the_cooldown_is_refused_with_its_wait(store: Store):
    caller, number = store.caller(store.workspace(1_000)), a_number()
    store.sandesh.otp.send_otp(caller, OtpSendRequest(number, "login", None), "10.0.0.1")
    with pytest.raises(OtpLimited) as limited:
        store.sandesh.otp.send_otp(caller, OtpSendRequest(number, "login", None), "10.0.0.1")
    assert limited.value.limit == "cooldown" and 0 < limited.value.retry_after <= 60
    store.sandesh.otp.send_otp(caller, OtpSendRequest(number, "signup", None), "10.0.0.1")  # another purpose


def test_a_number_gets_three_codes_in_ten_minutes_across_workspaces(store: Store):
    number = a_number()
    for purpose in ("a", "b", "c"):
        store.sandesh.otp.send_otp(store.caller(store.workspace(1_000)), OtpSendRequest(number, purpose, None), "10.0.0.1")
    with pytest.raises(OtpLimited) as limited:
        store.sandesh.otp.send_otp(store.caller(store.workspace(1_000)), OtpSendRequest(number, "d", None), "10.0.0.1")
    assert limited.value.limit == "otp_number_limit" and 0 < limited.value.retry_after <= 600


def test_a_code_the_workspace_cannot_pay_or_may_not_send_is_refused(store: Store):
    with pytest.raises(InsufficientBalance):
        store.sandesh.otp.send_otp(store.caller(store.workspace(0)), OtpSendRequest(a_number(), "login", None), "10.0.0.1")
    with pytest.raises(Refused) as refused:
        store.sandesh.otp.send_otp(store.caller(store.workspace(1_000), allowed_types=["transactional"]),
                               OtpSendRequest(a_number(), "login", None), "10.0.0.1")
    assert refused.value.code == "forbidden"


@pytest.mark.parametrize("kept, sent", [
    ({"otp_template": "{code}: log in at pasal.example"}, r"[0-9]{6} is your Pasal verification code\. It expires in 5 minutes\."),
    ({"brand": "paypal.com"}, r"[0-9]{6} is your verification code\. It expires in 5 minutes\."),
    ({"brand": "paypal.com", "otp_template": "{brand}: {code}"}, r"[0-9]{6} is your verification code\. It expires in 5 minutes\."),
])
def test_a_template_or_brand_kept_from_before_the_rules_that_they_refuse_is_not_sent(store: Store, kept, sent):
    """A log may hold a template or a brand set before today's rules: it replays as it was, and a
    code's message goes out without it (docs/api.md, "OTP messages that apps fill in")."""
    caller, number = store.caller(store.workspace(1_000), **kept), a_number()
    message = store.sandesh.otp.send_otp(caller, OtpSendRequest(number, "login", None), "10.0.0.1").message
    assert re.fullmatch(sent, store.sandesh.texts.open(store.sandesh.history.message(message.id).text))
