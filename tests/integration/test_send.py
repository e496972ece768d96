"""POST /v1/sms/send and GET /v1/sms/messages/:id against `sandesh serve` and real PostgreSQL."""
from concurrent.futures import ThreadPoolExecutor

import orjson
import psycopg
import pytest
import requests

from tests.conftest import Server

TO = "9779812345678"


@pytest.fixture(scope="module", autouse=True)
def a_route(route):
    """Every send here needs a route: an enabled SIM reported healthy."""
    return route


@pytest.fixture
def workspace(sandesh):
    """A fresh active workspace with NPR 100 and a client allowed 1,000 requests/s."""
    ws = sandesh("workspace", "create", "--name", "Send", "--rate", "otp=150", "--rate", "promotional=40")["id"]
    sandesh("workspace", "activate", ws)
    sandesh("workspace", "set-promo-hours", ws, "off")  # its promotions go at once, at any hour (test_promo_hours)
    sandesh("workspace", "credit", ws, "10000")
    client = sandesh("client", "create", "--workspace", ws, "--brand", "Send", "--rate-limit", "1000")
    return {"id": ws, "client": client["id"], "key": client["key"]}


def send(server, key, body, **headers):
    headers = {"x-api-key": key, "content-type": "application/json", **headers}
    data = body if isinstance(body, bytes) else orjson.dumps(body)
    return requests.post(server.url + "/v1/sms/send", data=data, headers=headers, timeout=10)


def balance(server, key):
    return requests.get(server.url + "/v1/sms/balance", headers={"x-api-key": key}, timeout=5).json()["balance"]["amount"]


def lookup(server, key, message_id):
    return requests.get(server.url + f"/v1/sms/messages/{message_id}", headers={"x-api-key": key}, timeout=5)


def test_a_send_is_accepted_queued_and_charged_rate_times_segments(server, workspace):
    answer = send(server, workspace["key"], {"to": "+" + TO, "text": "a" * 161})
    assert answer.status_code == 202
    body = answer.json()
    assert body == {"messageId": body["messageId"], "status": "queued", "messageType": "transactional",
                    "segments": 2, "encoding": "GSM-7", "cost": 200}
    assert body["messageId"].startswith("msg_")
    assert balance(server, workspace["key"]) == 10000 - 200


@pytest.mark.parametrize("text, segments, encoding", [
    ("Namaste", 1, "GSM-7"), ("नमस्ते, तपाईंको कोड", 1, "UCS-2"), ("Price: 5€ {ok}", 1, "GSM-7"),
    ("👍🏽" * 18, 2, "UCS-2"), ("€" * 459 if False else "€" * 80, 1, "GSM-7"), ("a" * 918, 6, "GSM-7"),
])
def test_segments_and_encoding_in_the_reply(server, workspace, text, segments, encoding):
    body = send(server, workspace["key"], {"to": TO, "text": text}).json()
    assert (body["segments"], body["encoding"]) == (segments, encoding)


def test_message_types_are_charged_at_their_own_rate(server, workspace):
    otp = send(server, workspace["key"], {"to": TO, "text": "123456 is your code", "messageType": "otp"}).json()
    promo = send(server, workspace["key"], {"to": TO, "text": "Dashain sale", "messageType": "promotional"}).json()
    assert (otp["messageType"], otp["cost"]) == ("otp", 150)
    assert (promo["messageType"], promo["cost"]) == ("promotional", 40)
    assert balance(server, workspace["key"]) == 10000 - 190


def test_invalid_requests_are_400_with_details_and_charge_nothing(server, workspace):
    answer = send(server, workspace["key"], {"to": "9812345678", "text": "hi"})
    assert answer.status_code == 400 and answer.json()["code"] == "invalid_request"
    assert answer.json()["details"] == [{"path": ["to"], "code": "invalid_phone_number",
                                         "message": "to must be a Nepal mobile number: 977 and 10 digits starting "
                                                    "96, 97 or 98, e.g. 9779812345678"}]
    too_long = send(server, workspace["key"], {"to": TO, "text": "a" * 919})
    assert too_long.status_code == 400 and too_long.json()["details"][0]["path"] == ["text"]
    assert send(server, workspace["key"], b"[]").status_code == 400
    assert balance(server, workspace["key"]) == 10000


def test_a_type_the_workspace_does_not_allow_is_403_forbidden(server, sandesh, workspace):
    sandesh("workspace", "set-types", workspace["id"], "otp")
    answer = send(server, workspace["key"], {"to": TO, "text": "hi"})
    assert answer.status_code == 403 and answer.json()["code"] == "forbidden"
    assert balance(server, workspace["key"]) == 10000


def test_switched_off_sms_is_503_sms_disabled_and_charges_nothing(server, sandesh, workspace):
    sandesh("sms", "disable", "--reason", "test")
    try:
        answer = send(server, workspace["key"], {"to": TO, "text": "hi"})
        assert answer.status_code == 503 and answer.json()["code"] == "sms_disabled"
    finally:
        sandesh("sms", "enable")
    assert balance(server, workspace["key"]) == 10000


def test_no_enabled_sim_is_503_unavailable_and_charges_nothing(server, sandesh, workspace):
    sims = [s["name"] for s in sandesh("sim", "list")["sims"] if s["enabled"]]
    for name in sims:
        sandesh("sim", "disable", name)
    try:
        answer = send(server, workspace["key"], {"to": TO, "text": "hi"})
        assert answer.status_code == 503 and answer.json()["code"] == "unavailable"
    finally:
        for name in sims:
            sandesh("sim", "enable", name)
    assert balance(server, workspace["key"]) == 10000


def test_a_sim_no_dispatcher_has_reported_on_is_no_route_503_unavailable_and_charges_nothing(server, sandesh,
                                                                                              workspace, route):
    """A route is an enabled SIM a dispatcher reported healthy: one nobody drives sends nothing."""
    sandesh("sim", "disable", "route-1")
    unreported = sandesh("sim", "add", "--name", "never-reported", "--port", "loop://")
    try:
        answer = send(server, workspace["key"], {"to": TO, "text": "hi"})
        assert answer.status_code == 503 and answer.json()["code"] == "unavailable"
    finally:
        sandesh("sim", "disable", unreported["id"])
        sandesh("sim", "enable", "route-1")
    assert balance(server, workspace["key"]) == 10000


def test_a_sim_reported_unhealthy_is_no_route(server, workspace, route):
    with route.unhealthy():
        answer = send(server, workspace["key"], {"to": TO, "text": "hi"})
        assert answer.status_code == 503 and answer.json()["code"] == "unavailable"
    assert balance(server, workspace["key"]) == 10000


def test_a_heartbeat_older_than_the_route_window_is_no_route(server, sandesh, workspace, route):
    """SANDESH_ROUTE_WINDOW defaults to 60 s of the service clock."""
    with route.silent():
        sandesh("clock", "advance", "55")
        assert send(server, workspace["key"], {"to": TO, "text": "just in time"}).status_code == 202
        sandesh("clock", "advance", "6")
        answer = send(server, workspace["key"], {"to": TO, "text": "too late"})
        assert answer.status_code == 503 and answer.json()["code"] == "unavailable"
    assert balance(server, workspace["key"]) == 10000 - 100


def test_a_sim_reported_healthy_within_the_route_window_is_a_route(server, workspace, route):
    answer = send(server, workspace["key"], {"to": TO, "text": "hi"})
    assert answer.status_code == 202 and answer.json()["messageId"].startswith("msg_")
    assert balance(server, workspace["key"]) == 10000 - 100


def test_the_route_window_is_configurable(server, env, sandesh, workspace, route):
    """The same heartbeat, 6 s old: a route within the default 60 s, none within SANDESH_ROUTE_WINDOW=5."""
    short = Server({**env, "SANDESH_ROUTE_WINDOW": "5"}, workers=1)
    try:
        with route.silent():
            sandesh("clock", "advance", "6")
            answer = send(short, workspace["key"], {"to": TO, "text": "hi"})
            assert answer.status_code == 503 and answer.json()["code"] == "unavailable"
            assert send(server, workspace["key"], {"to": TO, "text": "hi"}).status_code == 202
    finally:
        short.stop()


def test_checks_come_in_the_order_of_decisions_1(server, sandesh, workspace):
    """400 before 403 forbidden before 503 sms_disabled before 402 (docs/api.md, "Order of checks")."""
    sandesh("workspace", "set-types", workspace["id"], "otp")
    sandesh("sms", "disable")
    try:
        assert send(server, workspace["key"], {"to": "1", "text": "hi"}).json()["code"] == "invalid_request"
        assert send(server, workspace["key"], {"to": TO, "text": "hi"}).json()["code"] == "forbidden"
        sandesh("workspace", "set-types", workspace["id"], "transactional")
        assert send(server, workspace["key"], {"to": TO, "text": "hi"}).json()["code"] == "sms_disabled"
    finally:
        sandesh("sms", "enable")


def test_a_balance_below_the_cost_is_402_and_a_top_up_then_a_retry_with_the_same_key_works(server, sandesh, workspace):
    big = {"to": TO, "text": "a" * 918}  # 6 segments = 600 paisa
    for _ in range(16):
        assert send(server, workspace["key"], big).status_code == 202
    assert balance(server, workspace["key"]) == 400
    short = send(server, workspace["key"], big, **{"Idempotency-Key": "order-1"})
    assert short.status_code == 402 and short.json()["code"] == "insufficient_balance"
    assert balance(server, workspace["key"]) == 400
    sandesh("workspace", "credit", workspace["id"], "1000")
    retried = send(server, workspace["key"], big, **{"Idempotency-Key": "order-1"})
    assert retried.status_code == 202 and "Idempotent-Replayed" not in retried.headers
    assert balance(server, workspace["key"]) == 800


def test_fifty_concurrent_sends_against_a_balance_for_twenty_never_go_below_zero(server, sandesh):
    ws = sandesh("workspace", "create", "--name", "Race")["id"]
    sandesh("workspace", "activate", ws)
    sandesh("workspace", "credit", ws, "2000")  # 20 messages at 100 paisa
    keys = [sandesh("client", "create", "--workspace", ws, "--brand", f"R{i}", "--rate-limit", "1000")["key"]
            for i in range(5)]
    with ThreadPoolExecutor(max_workers=50) as pool:
        answers = list(pool.map(lambda i: send(server, keys[i % 5], {"to": TO, "text": f"race {i}"}), range(50)))
    codes = sorted(a.status_code for a in answers)
    assert codes == [202] * 20 + [402] * 30
    assert balance(server, keys[0]) == 0


def test_same_key_same_body_replays_the_original_without_a_second_charge(server, workspace):
    first = send(server, workspace["key"], {"to": TO, "text": "Your order shipped"}, **{"Idempotency-Key": "ship-1"})
    again = send(server, workspace["key"], b'{ "text" : "Your order shipped",\n "to": "9779812345678" }',
                 **{"Idempotency-Key": "ship-1"})
    assert first.status_code == again.status_code == 202
    assert again.headers["Idempotent-Replayed"] == "true" and "Idempotent-Replayed" not in first.headers
    assert again.content == first.content
    assert balance(server, workspace["key"]) == 10000 - 100


def test_same_key_with_a_different_body_is_409(server, workspace):
    send(server, workspace["key"], {"to": TO, "text": "one"}, **{"Idempotency-Key": "k-409"})
    other = send(server, workspace["key"], {"to": TO, "text": "two"}, **{"Idempotency-Key": "k-409"})
    assert other.status_code == 409 and other.json()["code"] == "idempotency_conflict"
    assert balance(server, workspace["key"]) == 10000 - 100


@pytest.mark.parametrize("key", ["x" * 256, "tab\there", "café".encode().decode("latin-1")])
def test_an_idempotency_key_of_other_than_1_to_255_printable_ascii_characters_is_400(server, workspace, key):
    answer = send(server, workspace["key"], {"to": TO, "text": "x"}, **{"Idempotency-Key": key})
    assert answer.status_code == 400
    assert answer.json()["details"] == [{"path": ["Idempotency-Key"], "code": "invalid_idempotency_key",
                                         "message": "Idempotency-Key must be 1 to 255 printable ASCII characters"}]


def test_keys_are_per_client(server, sandesh, workspace):
    other = sandesh("client", "create", "--workspace", workspace["id"], "--brand", "Other")["key"]
    a = send(server, workspace["key"], {"to": TO, "text": "x"}, **{"Idempotency-Key": "shared"})
    b = send(server, other, {"to": TO, "text": "y"}, **{"Idempotency-Key": "shared"})
    assert a.status_code == b.status_code == 202 and a.json()["messageId"] != b.json()["messageId"]


def test_a_key_whose_first_request_is_still_running_is_409(server, workspace, database_url):
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", (f"{workspace['client']} busy-1",))
        running = send(server, workspace["key"], {"to": TO, "text": "x"}, **{"Idempotency-Key": "busy-1"})
        assert running.status_code == 409 and "still running" in running.json()["error"]
        conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (f"{workspace['client']} busy-1",))
    assert send(server, workspace["key"], {"to": TO, "text": "x"}, **{"Idempotency-Key": "busy-1"}).status_code == 202


def test_concurrent_identical_requests_make_exactly_one_message_and_one_charge(server, workspace):
    with ThreadPoolExecutor(max_workers=12) as pool:
        answers = list(pool.map(lambda _: send(server, workspace["key"], {"to": TO, "text": "once"},
                                               **{"Idempotency-Key": "twins"}), range(12)))
    accepted = {a.json()["messageId"] for a in answers if a.status_code == 202}
    assert len(accepted) == 1
    assert all(a.status_code in (202, 409) for a in answers)
    assert balance(server, workspace["key"]) == 10000 - 100


def test_after_24_hours_the_key_is_free_again(server, sandesh, workspace):
    first = send(server, workspace["key"], {"to": TO, "text": "a"}, **{"Idempotency-Key": "day"}).json()
    sandesh("clock", "advance", str(24 * 3600 + 1))
    second = send(server, workspace["key"], {"to": TO, "text": "b"}, **{"Idempotency-Key": "day"})
    assert second.status_code == 202 and second.json()["messageId"] != first["messageId"]
    assert balance(server, workspace["key"]) == 10000 - 200


def test_a_message_is_visible_as_soon_as_its_send_answered(server, workspace):
    """Read-your-writes, with no projection worker running in this module."""
    sent = send(server, workspace["key"], {"to": TO, "text": "hello", "messageType": "promotional"}).json()
    found = lookup(server, workspace["key"], sent["messageId"])
    assert found.status_code == 200
    body = found.json()
    assert body == {"id": sent["messageId"], "to": TO, "status": "queued", "route": "device",
                    "messageType": "promotional", "segments": 1, "encoding": "GSM-7", "cost": 40,
                    "createdAt": body["createdAt"], "updatedAt": body["createdAt"], "expiresAt": None, "sendAt": None,
                    "error": None}
    assert body["createdAt"].endswith("Z")


def test_another_clients_message_is_404(server, sandesh, workspace):
    sent = send(server, workspace["key"], {"to": TO, "text": "mine"}).json()["messageId"]
    sibling = sandesh("client", "create", "--workspace", workspace["id"], "--brand", "Sibling")["key"]
    ws2 = sandesh("workspace", "create", "--name", "Stranger")["id"]
    stranger = sandesh("client", "create", "--workspace", ws2, "--brand", "Stranger")["key"]
    for key in (sibling, stranger):
        answer = lookup(server, key, sent)
        assert answer.status_code == 404 and answer.json()["code"] == "not_found"
    assert lookup(server, workspace["key"], "msg_" + "0" * 32).status_code == 404
    assert lookup(server, workspace["key"], "ws_nothing").status_code == 404


def test_the_text_is_encrypted_at_rest_and_keys_stay_out_of_events_and_logs(server, workspace, database_url, runtime):
    from sandesh.projections import follower

    secret_text = "Parcel 8841-ZETA at Thamel counter"
    message_id = send(server, workspace["key"], {"to": TO, "text": secret_text}).json()["messageId"]
    follower.catch_up(runtime)  # the messages read model holds the message too
    with psycopg.connect(database_url) as conn:
        states = b"".join(bytes(r[0]) for r in conn.execute("SELECT state FROM sandesh_events").fetchall())
        tables = str(conn.execute("SELECT * FROM messages").fetchall())
        mine = [bytes(r[0]) for r in conn.execute("SELECT state FROM sandesh_events WHERE originator_id = %s",
                                                  (message_id,)).fetchall()]
    assert len(mine) == 1 and message_id in tables, "the accepted event and the row looked at are this message's"
    assert b"8841-ZETA" not in mine[0] and b"8841-ZETA" not in states and "8841-ZETA" not in tables
    assert workspace["key"].encode() not in states
    assert workspace["key"] not in server.output() and "8841-ZETA" not in server.output()


# Validity: `validFor` (docs/design.md, "Validity")

@pytest.mark.parametrize("valid_for, code", [(59, "out_of_range"), (86_401, "out_of_range"), (0, "out_of_range"),
                                             ("600", "invalid_type"), (600.5, "invalid_type"), (True, "invalid_type"),
                                             (None, None)])
def test_valid_for_must_be_whole_seconds_from_60_to_86400(server, workspace, valid_for, code):
    answer = send(server, workspace["key"], {"to": TO, "text": "Sale ends at noon", "validFor": valid_for})
    if code is None:  # null is the same as leaving it out
        assert answer.status_code == 202 and "expiresAt" not in answer.json()
        return
    assert answer.status_code == 400, answer.text
    body = answer.json()
    assert body["code"] == "invalid_request"
    assert [(d["path"], d["code"]) for d in body["details"]] == [(["validFor"], code)]


def test_a_send_with_valid_for_says_when_it_expires_in_the_reply_and_the_lookup(server, workspace, sandesh):
    from sandesh.domain.clock import parse_iso

    now = parse_iso(sandesh("clock", "show")["now"])
    answer = send(server, workspace["key"], {"to": TO, "text": "Your table is ready", "validFor": 600})
    assert answer.status_code == 202
    expires = parse_iso(answer.json()["expiresAt"])
    assert 600 <= expires - now <= 605
    found = lookup(server, workspace["key"], answer.json()["messageId"]).json()
    assert found["expiresAt"] == answer.json()["expiresAt"]
    plain = send(server, workspace["key"], {"to": TO, "text": "No hurry"}).json()
    assert lookup(server, workspace["key"], plain["messageId"]).json()["expiresAt"] is None


def test_an_unknown_field_is_refused_naming_it_and_nothing_is_charged(server, workspace):
    """A misspelt field never changes what is sent silently (revised 2026-11-23; docs/design.md,
    "Decisions: HTTP interface")."""
    before = balance(server, workspace["key"])
    answer = send(server, workspace["key"], {"to": TO, "text": "Tihar offer", "type": "promotional"})
    assert answer.status_code == 400
    body = answer.json()
    assert body["code"] == "invalid_request"
    assert body["details"] == [{"path": ["type"], "code": "unknown_field",
                                "message": "unknown field 'type'; this endpoint takes to, text, messageType, validFor, sendAt"}]
    assert balance(server, workspace["key"]) == before
