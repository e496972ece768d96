"""Scheduled sends and cancel (docs/api.md, "Scheduled sends") against `sandesh serve`, real
PostgreSQL, the test clock and a real HTTPS webhook receiver."""
import orjson
import pytest
import requests

from sandesh.domain.clock import iso
from sandesh.domain.webhook import delivery_id
from sandesh.workers import webhook_guard
from sandesh.workers.webhooks import WebhookSender
from tests.integration.test_webhooks import deliver, lifecycle

TO = "9779812345678"


@pytest.fixture(scope="module", autouse=True)
def a_route(route):
    return route


@pytest.fixture
def account(sandesh, receiver):
    ws = sandesh("workspace", "create", "--name", "Later")["id"]
    sandesh("workspace", "activate", ws)
    sandesh("workspace", "set-promo-hours", ws, "off")  # a promotion's sendAt is its own at any hour here
    sandesh("workspace", "credit", ws, "10000")
    path = f"/hooks/{ws}"
    client = sandesh("client", "create", "--workspace", ws, "--brand", "Later", "--rate-limit", "1000",
                     "--webhook-url", receiver.url(path))
    return {"id": ws, "client": client["id"], "key": client["key"], "path": path}


def post(server, key, path, body=None):
    return requests.post(server.url + path, data=orjson.dumps(body) if body is not None else None, timeout=10,
                         headers={"x-api-key": key, "content-type": "application/json"})


def send(server, key, **body):
    return post(server, key, "/v1/sms/send", {"to": TO, "text": "Tihar offer: 20% off", **body})


def cancel(server, key, message_id):
    return post(server, key, f"/v1/sms/messages/{message_id}/cancel")


def lookup(server, key, message_id):
    return requests.get(server.url + f"/v1/sms/messages/{message_id}", headers={"x-api-key": key}, timeout=5).json()


def balance(server, key):
    return requests.get(server.url + "/v1/sms/balance", headers={"x-api-key": key}, timeout=5).json()["balance"]["amount"]


@pytest.mark.parametrize("send_at, code", [
    ("2020-01-01T00:00:00Z", "in_the_past"),
    ("2026-12-01T09:00:00", "missing_offset"),
    ("next tuesday", "invalid_datetime"),
    ("2026-12-01", "invalid_datetime"),
    (1764000000, "invalid_type"),
])
def test_a_send_at_that_is_not_a_future_time_with_an_offset_is_400(server, account, send_at, code):
    answer = send(server, account["key"], sendAt=send_at)
    assert answer.status_code == 400
    assert answer.json()["details"][0]["path"] == ["sendAt"] and answer.json()["details"][0]["code"] == code
    assert balance(server, account["key"]) == 10000


def test_at_most_30_days_ahead(server, account, runtime):
    now = runtime.clock.now()
    too_far = send(server, account["key"], sendAt=iso(now + 30 * 86400 + 60))
    assert too_far.status_code == 400 and too_far.json()["details"][0]["code"] == "too_far_ahead"
    assert send(server, account["key"], sendAt=iso(now + 30 * 86400 - 60)).status_code == 202


def test_a_scheduled_send_is_charged_now_and_shows_its_send_at(server, account, runtime):
    at = iso(runtime.clock.now() + 7200)
    kathmandu = at.replace("Z", "+00:00")
    answer = send(server, account["key"], sendAt=kathmandu, validFor=600)
    assert answer.status_code == 202
    body = answer.json()
    assert (body["status"], body["sendAt"], body["cost"]) == ("scheduled", at, 100)
    assert body["expiresAt"] == iso(runtime.clock.now() + 7200 + 600) or body["expiresAt"] > at
    assert balance(server, account["key"]) == 10000 - 100
    found = lookup(server, account["key"], body["messageId"])
    assert (found["status"], found["sendAt"]) == ("scheduled", at)
    with runtime.connection() as conn:
        in_queue = conn.execute("SELECT count(*) AS n FROM dispatch_queue WHERE message_id = %s",
                                (body["messageId"],)).fetchone()["n"]
    assert in_queue == 0, "a scheduled message waits outside the queue"


def test_canceling_a_scheduled_message_refunds_it_in_full_and_tells_the_webhook(server, account, runtime, receiver):
    message_id = send(server, account["key"], sendAt=iso(runtime.clock.now() + 3600)).json()["messageId"]
    answer = cancel(server, account["key"], message_id)
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "canceled" and answer.json()["id"] == message_id
    assert balance(server, account["key"]) == 10000
    sender = WebhookSender(runtime, http=webhook_guard.session(True, str(receiver.ca_file)))
    try:
        deliver(sender)
    finally:
        sender.close()
    [hook] = receiver.wait(account["path"], 1, 20)
    event = orjson.loads(hook.body)
    assert (event["type"], event["id"], event["status"]) == ("message.status", message_id, "canceled")
    again = cancel(server, account["key"], message_id)
    assert again.status_code == 409 and again.json()["code"] == "message_not_cancelable"
    assert "canceled" in again.json()["error"]
    assert balance(server, account["key"]) == 10000
    assert runtime.sandesh.webhooks.delivery(delivery_id(message_id, "canceled")).state == "delivered"


def test_a_queued_message_no_modem_took_can_be_canceled(server, account, runtime):
    message_id = send(server, account["key"]).json()["messageId"]
    assert cancel(server, account["key"], message_id).status_code == 200
    assert lookup(server, account["key"], message_id)["status"] == "canceled"
    assert balance(server, account["key"]) == 10000
    with runtime.connection() as conn:
        left = conn.execute("SELECT count(*) AS n FROM dispatch_queue WHERE message_id = %s",
                            (message_id,)).fetchone()["n"]
    assert left == 0


def test_a_message_handed_to_a_modem_cannot_be_canceled(server, account, runtime):
    message_id = send(server, account["key"]).json()["messageId"]
    lifecycle(runtime, runtime.sandesh.history.message(message_id), ("submit",))
    answer = cancel(server, account["key"], message_id)
    assert answer.status_code == 409 and answer.json()["code"] == "message_not_cancelable"
    assert "submitted" in answer.json()["error"]
    lifecycle(runtime, runtime.sandesh.history.message(message_id), ("accept",), ("report", 0))
    assert "delivered" in cancel(server, account["key"], message_id).json()["error"]
    assert balance(server, account["key"]) == 10000 - 100


def test_another_clients_message_is_not_found(server, account, sandesh):
    message_id = send(server, account["key"]).json()["messageId"]
    other = sandesh("client", "create", "--workspace", account["id"], "--brand", "Other")
    assert cancel(server, other["key"], message_id).status_code == 404
    assert cancel(server, account["key"], "msg_nope").status_code == 404
    assert lookup(server, account["key"], message_id)["status"] == "queued"


def test_a_scheduled_promotion_to_a_number_that_opted_out_meanwhile_fails_refunded(server, account, runtime, sandesh):
    from sandesh.workers.dispatcher import Dispatcher

    number = "9779812000777"
    message_id = send(server, account["key"], to=number, messageType="promotional",
                      sendAt=iso(runtime.clock.now() + 60)).json()["messageId"]
    receipt = send(server, account["key"], to=number, sendAt=iso(runtime.clock.now() + 60)).json()["messageId"]
    sandesh("optout", "add", account["id"], number)
    sandesh("clock", "advance", "61")
    assert Dispatcher(runtime).release_scheduled() == 2  # one released, one failed
    promo = lookup(server, account["key"], message_id)
    assert promo["status"] == "failed" and "opted out" in promo["error"]
    assert lookup(server, account["key"], receipt)["status"] == "queued", "a transactional message is never held back"
    assert balance(server, account["key"]) == 10000 - 100
