"""One-time passwords against `sandesh serve`, real PostgreSQL and the test clock: every row of
the verify results and every limit of docs/api.md, "OTP"."""
import itertools
import re
import time
from concurrent.futures import ThreadPoolExecutor

import orjson
import psycopg
import pytest
import requests

from sandesh.projections import follower
from tests.conftest import Server

_numbers = itertools.count(10_000_000)


def fresh_number() -> str:
    """A number no other test has used, so per-number windows do not leak between tests."""
    return f"97798{next(_numbers):08d}"


@pytest.fixture(scope="module", autouse=True)
def a_route(route):
    """Every send here needs a route: an enabled SIM reported healthy."""
    return route


def make_client(sandesh, brand="Himal Bank", types=None):
    ws = sandesh("workspace", "create", "--name", brand, "--rate", "otp=150", *(["--types", types] if types else []))["id"]
    sandesh("workspace", "activate", ws)
    sandesh("workspace", "credit", ws, "100000")
    client = sandesh("client", "create", "--workspace", ws, "--brand", brand, "--rate-limit", "1000")
    return {"workspace": ws, "id": client["id"], "key": client["key"]}


@pytest.fixture
def client(sandesh):
    return make_client(sandesh)


def post(server, key, path, body, **headers):
    return requests.post(f"{server.url}/v1/sms/otp/{path}", data=orjson.dumps(body), timeout=10,
                         headers={"x-api-key": key, "content-type": "application/json", **headers})


def send_code(server, runtime, key, to, purpose="login", **extra):
    """Send a code and read it back from the message's (decrypted) text, as the dispatcher will."""
    answer = post(server, key, "send", {"to": to, "purpose": purpose, **extra})
    assert answer.status_code == 202, answer.text
    text = runtime.sandesh.texts.open(runtime.sandesh.history.message(answer.json()["messageId"]).text)
    return answer, re.match(r"(\d{6}) is your ", text).group(1)


def verify(server, key, to, code, purpose="login"):
    answer = post(server, key, "verify", {"to": to, "purpose": purpose, "code": code})
    assert answer.status_code == 200, answer.text
    return answer.json()


def wrong(code):
    return f"{(int(code) + 1) % 10**6:06d}"


def test_send_answers_202_with_message_and_expiry_and_charges_the_otp_rate(server, runtime, client, sandesh):
    to = fresh_number()
    answer, code = send_code(server, runtime, client["key"], "+" + to)
    body = answer.json()
    assert set(body) == {"success", "messageId", "expiresAt"} and body["success"] is True
    message = runtime.sandesh.history.message(body["messageId"])
    assert message.text.startswith("tk1:")  # sealed under the workspace's key in the log
    assert runtime.sandesh.texts.open(message.text) == f"{code} is your Himal Bank verification code. It expires in 5 minutes."
    assert (message.to, message.message_type, message.segments, message.cost) == (to, "otp", 1, 150)
    expires = time.mktime(time.strptime(body["expiresAt"][:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone
    assert abs(expires - (runtime.clock.now() + 300)) < 5
    assert sandesh("workspace", "show", client["workspace"])["balance"] == 100000 - 150


def test_the_right_code_verifies_once_then_no_active_otp(server, runtime, client):
    to = fresh_number()
    _, code = send_code(server, runtime, client["key"], to)
    assert verify(server, client["key"], to, code) == {"success": True, "verified": True}
    assert verify(server, client["key"], to, code) == {"success": True, "verified": False, "reason": "no_active_otp"}


def test_a_wrong_code_is_invalid_code_and_the_right_one_still_works(server, runtime, client):
    to = fresh_number()
    _, code = send_code(server, runtime, client["key"], to)
    for _ in range(4):
        assert verify(server, client["key"], to, wrong(code))["reason"] == "invalid_code"
    assert verify(server, client["key"], to, code)["verified"] is True


def test_the_fifth_wrong_try_locks_the_code_even_against_the_right_one(server, runtime, client):
    to = fresh_number()
    _, code = send_code(server, runtime, client["key"], to)
    reasons = [verify(server, client["key"], to, wrong(code))["reason"] for _ in range(5)]
    assert reasons == ["invalid_code"] * 5
    assert verify(server, client["key"], to, code) == {"success": True, "verified": False, "reason": "too_many_attempts"}
    assert verify(server, client["key"], to, wrong(code))["reason"] == "too_many_attempts"


def test_a_new_code_unlocks_and_replaces_the_old_one(server, runtime, client, sandesh):
    to = fresh_number()
    _, old = send_code(server, runtime, client["key"], to)
    for _ in range(5):
        verify(server, client["key"], to, wrong(old))
    sandesh("clock", "advance", "61")
    _, new = send_code(server, runtime, client["key"], to)
    if new != old:
        assert verify(server, client["key"], to, old)["reason"] == "invalid_code"
    assert verify(server, client["key"], to, new)["verified"] is True


def test_a_code_expires_after_5_minutes(server, runtime, client, sandesh):
    to = fresh_number()
    _, code = send_code(server, runtime, client["key"], to)
    sandesh("clock", "advance", "299")
    other = fresh_number()
    _, other_code = send_code(server, runtime, client["key"], other)
    sandesh("clock", "advance", "2")
    assert verify(server, client["key"], to, code) == {"success": True, "verified": False, "reason": "no_active_otp"}
    assert verify(server, client["key"], other, other_code)["verified"] is True  # still within its own 5 minutes


def test_verify_with_no_code_sent_or_another_purpose_is_no_active_otp(server, runtime, client):
    to = fresh_number()
    assert verify(server, client["key"], to, "123456")["reason"] == "no_active_otp"
    _, code = send_code(server, runtime, client["key"], to, purpose="login")
    assert verify(server, client["key"], to, code, purpose="payment")["reason"] == "no_active_otp"


def test_codes_are_per_client(server, runtime, client, sandesh):
    other = make_client(sandesh, "Other Bank")
    to = fresh_number()
    _, code = send_code(server, runtime, client["key"], to)
    assert verify(server, other["key"], to, code)["reason"] == "no_active_otp"
    assert verify(server, client["key"], to, code)["verified"] is True


def test_two_concurrent_verifies_of_the_right_code_verify_exactly_once(server, runtime, client):
    to = fresh_number()
    _, code = send_code(server, runtime, client["key"], to)
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda _: verify(server, client["key"], to, code), range(8)))
    assert sum(r["verified"] for r in results) == 1
    assert all(r["reason"] == "no_active_otp" for r in results if not r["verified"])


def test_concurrent_wrong_tries_are_each_counted(server, runtime, client):
    to = fresh_number()
    _, code = send_code(server, runtime, client["key"], to)
    with ThreadPoolExecutor(max_workers=6) as pool:
        reasons = list(pool.map(lambda _: verify(server, client["key"], to, wrong(code))["reason"], range(6)))
    assert sorted(reasons) == ["invalid_code"] * 5 + ["too_many_attempts"]


def _limited(answer, at_most):
    assert answer.status_code == 429 and answer.json()["code"] == "rate_limited", answer.text
    wait = int(answer.headers["Retry-After"])
    assert 1 <= wait <= at_most
    return wait


def test_resend_cooldown_is_one_code_per_60_seconds_per_client_number_and_purpose(server, runtime, client, sandesh):
    to = fresh_number()
    started = time.monotonic()
    send_code(server, runtime, client["key"], to)
    assert _limited(post(server, client["key"], "send", {"to": to, "purpose": "login"}), 60) >= 59
    send_code(server, runtime, client["key"], to, purpose="payment")  # another purpose is another code
    sandesh("clock", "advance", "30")
    wait = _limited(post(server, client["key"], "send", {"to": to, "purpose": "login"}), 60)
    assert 30 - (time.monotonic() - started) <= wait <= 30, "what is left of 60 s, in whole seconds rounded up"
    sandesh("clock", "advance", "31")
    send_code(server, runtime, client["key"], to)


def test_three_codes_per_number_per_10_minutes_across_all_workspaces(server, runtime, client, sandesh):
    to = fresh_number()
    others = [make_client(sandesh, f"Bank {i}") for i in range(2)]
    send_code(server, runtime, client["key"], to, purpose="a")
    sandesh("clock", "advance", "100")
    send_code(server, runtime, others[0]["key"], to, purpose="a")
    send_code(server, runtime, others[1]["key"], to, purpose="b")
    refused = post(server, client["key"], "send", {"to": to, "purpose": "b"})
    assert 490 <= _limited(refused, 600) <= 500  # the first of the three leaves the window in ~500 s
    assert post(server, client["key"], "send", {"to": fresh_number(), "purpose": "b"}).status_code == 202
    sandesh("clock", "advance", "501")
    send_code(server, runtime, client["key"], to, purpose="b")


def test_ten_codes_per_client_and_end_user_ip_per_10_minutes(server, runtime, client, sandesh):
    for _ in range(10):
        send_code(server, runtime, client["key"], fresh_number(), ip="203.0.113.7")
    _limited(post(server, client["key"], "send", {"to": fresh_number(), "purpose": "login", "ip": "203.0.113.7"}), 600)
    send_code(server, runtime, client["key"], fresh_number(), ip="203.0.113.8")
    send_code(server, runtime, client["key"], fresh_number())  # no ip: this limit does not apply
    other = make_client(sandesh, "Other")
    send_code(server, runtime, other["key"], fresh_number(), ip="203.0.113.7")  # per client
    sandesh("clock", "advance", "601")
    send_code(server, runtime, client["key"], fresh_number(), ip="203.0.113.7")


def test_sixty_requests_per_minute_per_client_and_calling_ip_sends_and_verifies_together(server, runtime, sandesh):
    client = make_client(sandesh, "Busy")
    to = fresh_number()
    send_code(server, runtime, client["key"], to)
    for _ in range(59):
        post(server, client["key"], "verify", {"to": to, "purpose": "login", "code": "000000"})
    refused = post(server, client["key"], "verify", {"to": to, "purpose": "login", "code": "000000"},
                   **{"X-Forwarded-For": "198.51.100.1"})  # the peer is not a trusted proxy: ignored
    _limited(refused, 60)
    _limited(post(server, client["key"], "send", {"to": fresh_number(), "purpose": "login"}), 60)
    other = make_client(sandesh, "Calm")
    assert post(server, other["key"], "send", {"to": fresh_number(), "purpose": "login"}).status_code == 202
    sandesh("clock", "advance", "61")
    assert post(server, client["key"], "send", {"to": fresh_number(), "purpose": "login"}).status_code == 202


def test_behind_a_trusted_proxy_the_address_it_appends_is_the_calling_ip_whatever_the_client_wrote(env, runtime, sandesh):
    proxied = Server({**env, "SANDESH_TRUSTED_PROXIES": "127.0.0.1,10.0.0.1"})
    try:
        client = make_client(sandesh, "Proxied")
        for _ in range(60):  # through two proxies: the client's address is the last untrusted hop
            post(proxied, client["key"], "verify", {"to": fresh_number(), "purpose": "x", "code": "1"},
                 **{"X-Forwarded-For": "198.51.100.1, 10.0.0.1"})
        for spoofed in ("198.51.100.1", "203.0.113.9, 198.51.100.1"):  # a forged first hop changes nothing
            _limited(post(proxied, client["key"], "verify", {"to": fresh_number(), "purpose": "x", "code": "1"},
                          **{"X-Forwarded-For": spoofed}), 60)
        answer = post(proxied, client["key"], "verify", {"to": fresh_number(), "purpose": "x", "code": "1"},
                      **{"X-Forwarded-For": "198.51.100.1, 198.51.100.2"})
        assert answer.status_code == 200
    finally:
        proxied.stop()


@pytest.mark.parametrize("body, path", [
    ({"purpose": "login"}, ["to"]),
    ({"to": "9812345678", "purpose": "login"}, ["to"]),
    ({"to": "9779812345678"}, ["purpose"]),
    ({"to": "9779812345678", "purpose": "x" * 65}, ["purpose"]),
    ({"to": "9779812345678", "purpose": "login", "ip": "not-an-ip"}, ["ip"]),
])
def test_invalid_send_requests_are_400_with_details(server, client, body, path):
    answer = post(server, client["key"], "send", body)
    assert answer.status_code == 400 and answer.json()["details"][0]["path"] == path


def test_invalid_verify_requests_are_400(server, client):
    answer = post(server, client["key"], "verify", {"to": "9779812345678", "purpose": "login", "code": 123456})
    assert answer.status_code == 400 and answer.json()["details"][0]["path"] == ["code"]


def test_the_error_cases_of_send_apply(server, runtime, sandesh):
    no_otp = make_client(sandesh, "NoOtp", types="transactional")
    assert post(server, no_otp["key"], "send", {"to": fresh_number(), "purpose": "l"}).json()["code"] == "forbidden"
    poor = make_client(sandesh, "Poor")
    sandesh("workspace", "set-rates", poor["workspace"], "otp=100001")
    assert post(server, poor["key"], "send", {"to": fresh_number(), "purpose": "l"}).status_code == 402
    sandesh("sms", "disable")
    try:
        assert post(server, poor["key"], "send", {"to": fresh_number(), "purpose": "l"}).json()["code"] == "sms_disabled"
    finally:
        sandesh("sms", "enable")
    pending_ws = sandesh("workspace", "create", "--name", "Pending")["id"]
    pending = sandesh("client", "create", "--workspace", pending_ws, "--brand", "P")["key"]
    assert post(server, pending, "send", {"to": fresh_number(), "purpose": "l"}).json()["code"] == "workspace_pending"
    assert post(server, pending, "verify", {"to": fresh_number(), "purpose": "l", "code": "1"}).status_code == 403


def test_no_healthy_sim_is_503_unavailable_and_leaves_no_code(server, runtime, sandesh, route):
    client = make_client(sandesh, "NoRoute")
    to = fresh_number()
    with route.unhealthy():
        answer = post(server, client["key"], "send", {"to": to, "purpose": "l"})
        assert (answer.status_code, answer.json()["code"]) == (503, "unavailable")
    assert sandesh("workspace", "show", client["workspace"])["balance"] == 100000
    assert verify(server, client["key"], to, "000000", purpose="l")["reason"] == "no_active_otp"
    assert post(server, client["key"], "send", {"to": to, "purpose": "l"}).status_code == 202


def test_a_refused_send_leaves_no_code_and_charges_nothing(server, runtime, sandesh):
    poor = make_client(sandesh, "Refused")
    sandesh("workspace", "set-rates", poor["workspace"], "otp=100001")
    to = fresh_number()
    assert post(server, poor["key"], "send", {"to": to, "purpose": "l"}).status_code == 402
    assert sandesh("workspace", "show", poor["workspace"])["balance"] == 100000
    assert verify(server, poor["key"], to, "000000", purpose="l")["reason"] == "no_active_otp"
    sandesh("workspace", "set-rates", poor["workspace"], "otp=150")
    assert post(server, poor["key"], "send", {"to": to, "purpose": "l"}).status_code == 202  # no cooldown left behind


def test_the_code_is_never_stored_logged_or_projected_in_clear(server, runtime, client, database_url):
    to = fresh_number()
    _, code = send_code(server, runtime, client["key"], to)
    verify(server, client["key"], to, wrong(code))
    follower.catch_up(runtime)
    with psycopg.connect(database_url) as conn:
        raw = b"".join(bytes(r[0]) for r in conn.execute("SELECT state FROM sandesh_events").fetchall())
        tables = "".join(str(conn.execute(f"SELECT * FROM {t}").fetchall())
                         for t in ("otps", "otp_issues", "messages", "client_counters", "idempotency_keys"))
    assert raw and to in tables, "the rows looked at hold this code's number"
    assert code.encode() not in raw and code not in tables
    assert code not in server.output()


def test_counters_and_the_otp_read_model_follow_the_log(server, runtime, sandesh):
    client = make_client(sandesh, "Counted")
    to = fresh_number()
    _, code = send_code(server, runtime, client["key"], to)
    verify(server, client["key"], to, wrong(code))
    verify(server, client["key"], to, code)
    follower.catch_up(runtime)
    counters = requests.get(server.url + "/v1/sms/balance", headers={"x-api-key": client["key"]}, timeout=5).json()["counters"]
    assert (counters["otpSent"], counters["otpVerified"], counters["sent"], counters["spent"]) == (1, 1, 1, 150)
    with runtime.connection() as conn:
        row = conn.execute('SELECT state, wrong_attempts, purpose FROM otps WHERE client_id = %s', (client["id"],)).fetchone()
    assert (row["state"], row["wrong_attempts"], row["purpose"]) == ("used", 1, "login")
