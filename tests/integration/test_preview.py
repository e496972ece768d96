"""POST /v1/sms/preview (docs/api.md, "POST /v1/sms/preview") against `sandesh serve`: what a send
of the same body would be charged, with GSM-7 hints; nothing charged or stored; validated as a send."""
import orjson
import pytest
import requests

pytestmark = pytest.mark.usefixtures("route")  # the sends a preview is compared with need a route
TO = "9779812345678"


@pytest.fixture
def workspace(sandesh):
    """Rates of its own, so a cost at the default rate would show."""
    ws = sandesh("workspace", "create", "--name", "Preview", "--rate", "transactional=30",
                 "--rate", "promotional=45")["id"]
    sandesh("workspace", "activate", ws)
    sandesh("workspace", "credit", ws, "10000")
    client = sandesh("client", "create", "--workspace", ws, "--brand", "Preview", "--rate-limit", "1000")
    return {"id": ws, "client": client["id"], "key": client["key"]}


def post(server, key, path, body):
    return requests.post(server.url + path, data=orjson.dumps(body), timeout=10,
                         headers={"x-api-key": key, "content-type": "application/json"})


def balance(server, key):
    return requests.get(server.url + "/v1/sms/balance", headers={"x-api-key": key}, timeout=5).json()["balance"]


def test_a_curly_apostrophe_is_shown_with_its_gsm7_stand_in_and_what_it_saves(server, workspace):
    text = "We’ve shipped your order. " * 3  # 78 characters: UCS-2 makes it 2 segments, GSM-7 one
    answer = post(server, workspace["key"], "/v1/sms/preview", {"text": text, "messageType": "promotional"})
    assert answer.status_code == 200
    assert answer.json() == {
        "messageType": "promotional", "segments": 2, "encoding": "UCS-2", "characters": 78,
        "charactersPerSegment": 67, "cost": 90, "sendable": True,
        "ucs2Characters": [{"position": p, "character": "’", "replacement": "'"} for p in (2, 28, 54)],
        "gsm7Text": text.replace("’", "'"), "gsm7Segments": 1, "gsm7Cost": 45}


def test_a_preview_equals_what_the_send_of_the_same_body_is_charged(server, workspace):
    body = {"to": TO, "text": "नमस्ते! " * 12, "messageType": "transactional"}
    shown = post(server, workspace["key"], "/v1/sms/preview", body).json()
    sent = post(server, workspace["key"], "/v1/sms/send", body).json()
    assert (shown["segments"], shown["encoding"], shown["cost"]) == (sent["segments"], sent["encoding"], sent["cost"])
    assert "ucs2Characters" not in shown and "gsm7Text" not in shown  # Devanagari is UCS-2 by nature


def test_a_preview_charges_and_stores_nothing(server, workspace, runtime):
    for _ in range(3):
        assert post(server, workspace["key"], "/v1/sms/preview", {"to": TO, "text": "Hello"}).status_code == 200
    assert balance(server, workspace["key"])["amount"] == 10000
    with runtime.connection() as conn:
        found = conn.execute("SELECT count(*) AS n FROM dispatch_queue WHERE client_id = %s",
                             (workspace["client"],)).fetchone()
    assert found["n"] == 0


def test_a_text_over_6_segments_is_answered_not_sendable(server, workspace):
    answer = post(server, workspace["key"], "/v1/sms/preview", {"text": "a" * 919})
    assert answer.status_code == 200
    assert {k: answer.json()[k] for k in ("segments", "encoding", "charactersPerSegment", "cost", "sendable")} == {
        "segments": 7, "encoding": "GSM-7", "charactersPerSegment": 153, "cost": 210, "sendable": False}


@pytest.mark.parametrize("body, path", [
    ({"to": "9812345678", "text": "hi"}, ["to"]), ({"text": "   "}, ["text"]), ({}, ["text"]),
    ({"text": "hi", "messageType": "bulk"}, ["messageType"]), ({"text": "hi", "type": "otp"}, ["type"]),
    ({"text": "hi", "validFor": 5}, ["validFor"]),
])
def test_a_body_a_send_refuses_is_refused_the_same_way(server, workspace, body, path):
    previewed = post(server, workspace["key"], "/v1/sms/preview", body)
    sent = post(server, workspace["key"], "/v1/sms/send", {"to": TO, **body} if path != ["to"] else body)
    assert previewed.status_code == sent.status_code == 400
    assert previewed.json()["details"][0]["path"] == path
    assert previewed.json()["details"][0] == sent.json()["details"][0]


def test_a_preview_counts_toward_the_request_rate(server, sandesh, workspace):
    key = sandesh("client", "create", "--workspace", workspace["id"], "--brand", "Slow", "--rate-limit", "1")["key"]
    codes = [post(server, key, "/v1/sms/preview", {"text": "hi"}).status_code for _ in range(3)]
    assert codes[0] == 200 and 429 in codes
