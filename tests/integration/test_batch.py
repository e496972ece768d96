"""POST /v1/sms/send/batch against `sandesh serve` and real PostgreSQL (docs/api.md, "Batch sends")."""
import orjson
import pytest
import requests

TO = "9779812345678"


@pytest.fixture(scope="module", autouse=True)
def a_route(route):
    return route


def workspace(sandesh, credit="10000", rate_limit="1000"):
    """A fresh active workspace (transactional 100, promotional 40 paisa a segment) and a client."""
    ws = sandesh("workspace", "create", "--name", "Batch", "--rate", "promotional=40")["id"]
    sandesh("workspace", "activate", ws)
    sandesh("workspace", "set-promo-hours", ws, "off")  # its promotions are queued at once, at any hour
    sandesh("workspace", "credit", ws, credit)
    client = sandesh("client", "create", "--workspace", ws, "--brand", "Batch", "--rate-limit", rate_limit)
    return {"id": ws, "client": client["id"], "key": client["key"]}


def batch(server, key, body, **headers):
    data = body if isinstance(body, bytes) else orjson.dumps(body)
    return requests.post(server.url + "/v1/sms/send/batch", data=data, timeout=30,
                         headers={"x-api-key": key, "content-type": "application/json", **headers})


def balance(server, key):
    return requests.get(server.url + "/v1/sms/balance", headers={"x-api-key": key}, timeout=5).json()["balance"]["amount"]


def lookup(server, key, message_id):
    return requests.get(server.url + f"/v1/sms/messages/{message_id}", headers={"x-api-key": key}, timeout=5)


def test_each_item_is_judged_alone_and_only_the_accepted_ones_are_charged(server, sandesh):
    account = workspace(sandesh)
    answer = batch(server, account["key"], {"messages": [
        {"to": TO, "text": "Order 1 shipped"},
        {"to": "9812345678", "text": "bad number"},
        {"to": TO, "text": "Dashain sale", "messageType": "promotional"},
        {"to": TO, "text": "a" * 919},
        "not an object",
        {"to": TO, "text": "typo", "type": "promotional"},
        {"to": TO, "text": "two segments " + "a" * 150, "messageType": "transactional"},
    ]})
    assert answer.status_code == 202, answer.text
    results = answer.json()["results"]
    assert len(results) == 7
    first, bad_number, promo, too_long, not_object, typo, long = results
    assert first == {"messageId": first["messageId"], "status": "queued", "messageType": "transactional",
                     "segments": 1, "encoding": "GSM-7", "cost": 100}
    assert (promo["messageType"], promo["cost"]) == ("promotional", 40)
    assert (long["segments"], long["cost"]) == (2, 200)
    assert bad_number["code"] == "invalid_request"
    assert [d["path"] for d in bad_number["details"]] == [["messages", 1, "to"]]
    assert too_long["details"][0]["path"] == ["messages", 3, "text"] and too_long["details"][0]["code"] == "too_long"
    assert not_object["details"][0]["path"] == ["messages", 4]
    assert typo["details"][0] == {"path": ["messages", 5, "type"], "code": "unknown_field",
                                  "message": typo["details"][0]["message"]}
    assert balance(server, account["key"]) == 10000 - 100 - 40 - 200
    for accepted in (first, promo, long):
        assert lookup(server, account["key"], accepted["messageId"]).json()["status"] == "queued"


def test_a_type_the_workspace_may_not_send_is_refused_per_item(server, sandesh):
    account = workspace(sandesh)
    sandesh("workspace", "set-types", account["id"], "transactional")
    results = batch(server, account["key"], {"messages": [
        {"to": TO, "text": "allowed"}, {"to": TO, "text": "not allowed", "messageType": "promotional"}]}).json()["results"]
    assert results[0]["status"] == "queued"
    assert results[1]["code"] == "forbidden" and results[1]["error"]
    assert balance(server, account["key"]) == 10000 - 100


def test_a_batch_the_balance_cannot_cover_is_402_and_nothing_is_sent_or_charged(server, sandesh, runtime):
    account = workspace(sandesh, credit="1000")
    items = [{"to": TO, "text": f"alert {i}"} for i in range(11)]  # 11 x 100 paisa > 1,000
    answer = batch(server, account["key"], {"messages": items})
    assert answer.status_code == 402 and answer.json()["code"] == "insufficient_balance"
    assert "1100" in answer.json()["error"]
    assert balance(server, account["key"]) == 1000
    with runtime.connection() as conn:
        queued = conn.execute("SELECT count(*) AS n FROM dispatch_queue WHERE client_id = %s",
                              (account["client"],)).fetchone()["n"]
    assert queued == 0
    assert batch(server, account["key"], {"messages": items[:10]}).status_code == 202
    assert balance(server, account["key"]) == 0


@pytest.mark.parametrize("body, path, code", [
    ({"messages": []}, ["messages"], "invalid_length"),
    ({"messages": [{"to": TO, "text": "x"}] * 1001}, ["messages"], "invalid_length"),
    ({}, ["messages"], "required"),
    ({"messages": {"to": TO}}, ["messages"], "invalid_type"),
    ({"messages": [{"to": TO, "text": "x"}], "sendAt": "tomorrow"}, ["sendAt"], "unknown_field"),
])
def test_the_body_itself_must_hold_1_to_1000_items(server, sandesh, body, path, code):
    account = workspace(sandesh)
    answer = batch(server, account["key"], body)
    assert answer.status_code == 400 and answer.json()["code"] == "invalid_request"
    assert answer.json()["details"][0]["path"] == path and answer.json()["details"][0]["code"] == code
    assert balance(server, account["key"]) == 10000


def test_one_idempotency_key_covers_the_batch(server, sandesh):
    account = workspace(sandesh)
    body = {"messages": [{"to": TO, "text": "once"}, {"to": "1", "text": "never"}, {"to": TO, "text": "twice"}]}
    first = batch(server, account["key"], body, **{"Idempotency-Key": "campaign-7"})
    again = batch(server, account["key"], body, **{"Idempotency-Key": "campaign-7"})
    assert first.status_code == again.status_code == 202
    assert again.content == first.content and again.headers["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in first.headers
    assert balance(server, account["key"]) == 10000 - 200
    other = batch(server, account["key"], {"messages": [{"to": TO, "text": "other"}]},
                  **{"Idempotency-Key": "campaign-7"})
    assert other.status_code == 409 and other.json()["code"] == "idempotency_conflict"
    assert balance(server, account["key"]) == 10000 - 200


def test_a_batch_counts_as_one_request_toward_the_rate(server, sandesh):
    account = workspace(sandesh, rate_limit="1")
    answer = batch(server, account["key"], {"messages": [{"to": TO, "text": f"n {i}"} for i in range(50)]})
    assert answer.status_code == 202 and len(answer.json()["results"]) == 50
    assert all(r["status"] == "queued" for r in answer.json()["results"])


def test_items_may_be_scheduled(server, sandesh, runtime):
    account = workspace(sandesh)
    from sandesh.domain.clock import iso

    at = iso(runtime.clock.now() + 3600)
    results = batch(server, account["key"], {"messages": [
        {"to": TO, "text": "later", "sendAt": at}, {"to": TO, "text": "now"},
        {"to": TO, "text": "long ago", "sendAt": "2020-01-01T00:00:00Z"}]}).json()["results"]
    assert (results[0]["status"], results[0]["sendAt"]) == ("scheduled", at)
    assert results[1]["status"] == "queued"
    assert results[2]["details"][0]["path"] == ["messages", 2, "sendAt"]
    assert balance(server, account["key"]) == 10000 - 200


def test_a_promotion_to_a_number_that_opted_out_is_refused_per_item_and_not_charged(server, sandesh):
    account = workspace(sandesh)
    sandesh("optout", "add", account["id"], "9779812000555")
    results = batch(server, account["key"], {"messages": [
        {"to": "9779812000555", "text": "Dashain sale", "messageType": "promotional"},
        {"to": "+9779812000555", "text": "Your order shipped"},
        {"to": "9779812000556", "text": "Dashain sale", "messageType": "promotional"}]}).json()["results"]
    assert results[0]["code"] == "recipient_opted_out" and "details" not in results[0]
    assert results[1]["status"] == "queued" and results[2]["status"] == "queued"
    assert balance(server, account["key"]) == 10000 - 100 - 40


def test_batches_of_many_clients_at_once_take_the_turns_replay_gives(server, sandesh):
    """A batch joins the queue in one statement (projections/dispatch.py enqueue_many); the turns
    it gives, with batches of several clients and types committed together and single sends
    between them, are those replay gives one event after another."""
    from concurrent.futures import ThreadPoolExecutor

    accounts = [workspace(sandesh, credit="1000000") for _ in range(3)]

    def burst(n):
        account = accounts[n % 3]
        items = [{"to": f"97798{n:02d}{i:06d}", "text": f"offer {n}.{i}",
                  "messageType": ("promotional", "transactional", "otp")[i % 3]} for i in range(40)]
        answers = [batch(server, account["key"], {"messages": items}).status_code]
        answers.append(requests.post(server.url + "/v1/sms/send", timeout=10, data=orjson.dumps(
            {"to": TO, "text": f"single {n}"}), headers={"x-api-key": account["key"],
                                                         "content-type": "application/json"}).status_code)
        return answers

    with ThreadPoolExecutor(6) as pool:
        answers = [a for group in pool.map(burst, range(12)) for a in group]
    assert set(answers) == {202}
    done = sandesh.run("replay", "--check", "registry")
    assert done.returncode == 0, done.stdout[:3000]
