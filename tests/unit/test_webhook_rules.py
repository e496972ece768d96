"""Webhook rules as pure functions: the retry table, signatures, the SSRF guard's address check."""
import pytest
import stripe

from sandesh.domain.signature import SignatureError, sign, verify_signature
from sandesh.domain.webhook import DEAD, DELAYS, DELIVERED, WAITING, after_attempt, delivery_id
from sandesh.workers.webhook_guard import refused_reason

SECRET = "whsec_" + "A" * 43
BODY = b'{"type":"message.status","id":"msg_1","status":"sent"}'


def test_any_2xx_is_delivered():
    assert after_attempt(1, 200) == after_attempt(7, 299) == (DELIVERED, None)


def test_temporary_failures_wait_10s_30s_2m_10m_30m_1h_3h_then_dead_after_the_8th():
    """Delays after attempts 1-7; attempt 8 is the last (docs/api.md, "Retries")."""
    assert DELAYS == (10, 30, 120, 600, 1800, 3600, 10800)
    assert [after_attempt(n, 503) for n in range(1, 8)] == [(WAITING, float(d)) for d in DELAYS]
    assert after_attempt(8, 503) == after_attempt(8, None) == (DEAD, None)
    assert after_attempt(3, None) == (WAITING, 120.0), "no answer in 10 s is temporary"


@pytest.mark.parametrize("code", [400, 401, 403, 404, 410, 422, 499])
def test_a_permanent_4xx_ends_after_3_attempts_in_total(code):
    assert after_attempt(1, code) == (WAITING, 10.0)
    assert after_attempt(2, code) == (WAITING, 30.0)
    assert after_attempt(3, code) == (DEAD, None)


@pytest.mark.parametrize("code", [408, 429, 301, 302, 500, 502])
def test_408_429_3xx_and_5xx_are_temporary(code):
    assert after_attempt(3, code) == (WAITING, 120.0)


def test_one_delivery_id_per_message_and_status():
    assert delivery_id("msg_1", "sent") == delivery_id("msg_1", "sent") != delivery_id("msg_1", "queued")
    assert delivery_id("msg_1", "sent").startswith("whd_")


def test_the_signature_is_hmac_sha256_of_t_dot_body_keyed_with_the_whole_secret():
    import hashlib
    import hmac

    header = sign([SECRET], 1_800_000_000, BODY)
    expected = hmac.new(SECRET.encode(), b"1800000000." + BODY, hashlib.sha256).hexdigest()
    assert header == f"t=1800000000,v1={expected}"


def test_stripes_verifier_accepts_our_signatures_with_one_or_two_v1():
    import time

    now = int(time.time())
    header = sign(["whsec_new", SECRET], now, BODY)
    assert stripe.WebhookSignature.verify_header(BODY.decode(), header, SECRET, tolerance=300)
    assert stripe.WebhookSignature.verify_header(BODY.decode(), header, "whsec_new", tolerance=300)
    with pytest.raises(stripe.SignatureVerificationError):
        stripe.WebhookSignature.verify_header(BODY.decode() + " ", header, SECRET, tolerance=300)


def test_verify_accepts_any_v1_for_any_secret_within_300_s():
    header = sign(["whsec_new", SECRET], 1000, BODY)
    assert verify_signature(SECRET, header, BODY, now=1300) == 1000
    assert verify_signature(["whsec_x", "whsec_new"], header, BODY.decode(), now=700) == 1000


@pytest.mark.parametrize("header, now, body", [
    (sign([SECRET], 1000, BODY), 1301, BODY),          # too old
    (sign([SECRET], 1000, BODY), 699, BODY),           # too far ahead
    (sign([SECRET], 1000, BODY), 1000, BODY + b"\n"),  # the body changed
    (sign(["whsec_other"], 1000, BODY), 1000, BODY),   # another secret
    ("v1=" + "0" * 64, 1000, BODY),                     # no t
    ("t=1000", 1000, BODY),                             # no v1
    (None, 1000, BODY),
])
def test_verify_rejects(header, now, body):
    with pytest.raises(SignatureError):
        verify_signature(SECRET, header, body, now=now)


@pytest.mark.parametrize("address", ["127.0.0.1", "10.0.0.8", "172.16.5.4", "192.168.1.1", "169.254.169.254",
                                     "100.64.0.1", "0.0.0.0", "224.0.0.1", "240.0.0.1", "::1", "fe80::1", "fc00::1",
                                     "::ffff:127.0.0.1", "::ffff:10.0.0.1"])
def test_the_guard_refuses_addresses_that_are_not_public(address):
    assert refused_reason(address)


@pytest.mark.parametrize("address, kind", [
    ("64:ff9b::a00:1", "private, inside NAT64"),                      # 10.0.0.1 through the well-known NAT64 prefix
    ("64:ff9b::7f00:1", "loopback, inside NAT64"),
    ("64:ff9b:1::a00:1", "NAT64 local-use"),                          # RFC 8215: never global
    ("2002:a00:1::1", "private, inside 6to4"),                        # 6to4 of 10.0.0.1
    ("2002:7f00:1::1", "loopback, inside 6to4"),
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "IETF protocol assignments (Teredo among them)"),
    ("::7f00:1", "loopback, as an IPv4-compatible address"),          # ::127.0.0.1
    ("::a9fe:a9fe", "link-local, as an IPv4-compatible address"),     # ::169.254.169.254
    ("192.0.0.8", "IETF protocol assignments"), ("192.0.0.170", "IETF protocol assignments"),
    ("198.18.0.1", "benchmarking"), ("192.0.2.1", "documentation"), ("2001:db8::1", "documentation"),
    ("100::1", "discard-only"),
])
def test_the_guard_refuses_every_range_that_is_not_global_also_inside_ipv6(address, kind):
    """NAT64, 6to4, Teredo and IPv4-compatible addresses carry an IPv4 address; 192.0.0.0/24
    is IETF's.  Python 3.11's `is_global` lets several of these through."""
    assert refused_reason(address) == kind


@pytest.mark.parametrize("address", ["8.8.8.8", "202.166.194.10", "2001:4860:4860::8888",
                                     "64:ff9b::808:808", "2002:808:808::1"])
def test_the_guard_lets_public_addresses_through(address):
    """A public IPv4 address behind NAT64 or 6to4 is public."""
    assert refused_reason(address) is None
