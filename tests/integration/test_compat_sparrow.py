"""The Sparrow SMS drop-in (api/compat.py) on a real `sandesh serve`: a request written for
Sparrow's v2 API, with only its base URL changed, sends, counts and tells the credit as Sparrow
does; each refusal Sparrow has a code for is given for its case, with nothing charged."""
import time

import pytest
import requests

from tests.helpers import funded_workspace, until


@pytest.fixture
def client(runtime, sandesh, route, projections_worker):
    """A fresh active workspace (NPR 10.00: ten transactional segments) and its client; the
    message list and the counters are followed read models, so their worker runs."""
    workspace = funded_workspace(runtime.sandesh, "Sparrow", 1000)
    made = sandesh("client", "create", "--workspace", workspace, "--brand", "School", "--rate-limit", "1000")
    return {"workspace": workspace, "id": made["id"], "key": made["key"]}


def sparrow(server, path="/compat/sparrow/v2/sms/"):
    return server.url + path


def balance(server, client):
    return requests.get(server.url + "/v1/sms/balance", headers={"x-api-key": client["key"]},
                        timeout=5).json()["balance"]["amount"]


def listed(server, client):
    return requests.get(server.url + "/v1/sms/messages", headers={"x-api-key": client["key"]},
                        timeout=5).json()["data"]


def test_a_get_a_form_and_json_send_as_sparrow_answers(server, client):
    fields = {"token": client["key"], "from": "Demo", "text": "Result: passed"}
    by_get = requests.get(sparrow(server), params={**fields, "to": "9841000001,9779841000002"}, timeout=5)
    assert by_get.status_code == 200, by_get.text
    assert by_get.json() == {"count": 2, "response_code": 200, "response": "2 messages have been queued for delivery"}
    by_form = requests.post(sparrow(server), data={**fields, "to": "+9779841000003"}, timeout=5)
    assert (by_form.status_code, by_form.json()["count"]) == (200, 1), by_form.text
    by_json = requests.post(sparrow(server, "/compat/sparrow/v2/sms"), json={**fields, "to": "9841000004,12345"},
                            timeout=5)
    assert (by_json.status_code, by_json.json()["count"]) == (200, 1), "the invalid number is counted out"
    deadline = time.monotonic() + 10
    while sorted(m["to"] for m in listed(server, client)) != [f"977984100000{n}" for n in range(1, 5)]:
        assert time.monotonic() < deadline, listed(server, client)
        time.sleep(0.2)
    assert balance(server, client) == 1000 - 4 * 100


@pytest.mark.parametrize("case, fields, code", [
    ("no to", {"text": "hi"}, 1000),
    ("no token", {"to": "9841000001", "text": "hi", "token": None}, 1000),
    ("a wrong token", {"to": "9841000001", "text": "hi", "token": "sk_live_" + "0" * 48}, 1002),
    ("empty text", {"to": "9841000001", "text": "  "}, 1010),
    ("one invalid receiver", {"to": "12345", "text": "hi"}, 1007),
    ("no valid receiver", {"to": "12345,0000", "text": "hi"}, 1011),
    ("more than the balance pays", {"to": ",".join(f"98410000{n:02d}" for n in range(11)), "text": "hi"}, 1013),
])
def test_each_refusal_has_sparrows_code_and_charges_nothing(server, client, case, fields, code):
    body = {"token": client["key"], **fields}
    answer = requests.post(sparrow(server), data={k: v for k, v in body.items() if v is not None}, timeout=5)
    assert answer.status_code == 403 and answer.json()["response_code"] == code, (case, answer.text)
    assert balance(server, client) == 1000 and listed(server, client) == []


def test_an_inactive_account_is_1003(server, sandesh, client):
    sandesh("client", "disable", client["id"])
    answer = requests.get(sparrow(server), params={"token": client["key"], "to": "9841000001", "text": "hi"}, timeout=5)
    assert (answer.status_code, answer.json()["response_code"]) == (403, 1003)


def test_the_credit_is_what_the_balance_pays_and_what_was_charged(server, client):
    credit = requests.get(sparrow(server, "/compat/sparrow/v2/credit/"), params={"token": client["key"]}, timeout=5)
    assert credit.json() == {"credits_available": 10, "credits_consumed": 0, "response_code": 200}
    assert requests.get(sparrow(server), params={"token": client["key"], "to": "9841000001,9841000002",
                                                   "text": "x" * 200}, timeout=5).json()["count"] == 2
    deadline = time.monotonic() + 10  # the counters are a followed read model: they trail by a moment
    while (credit := requests.get(sparrow(server, "/compat/sparrow/v2/credit"), params={"token": client["key"]},
                                  timeout=5).json())["credits_consumed"] != 4:
        assert time.monotonic() < deadline, credit
        time.sleep(0.2)
    assert credit["credits_available"] == 6  # NPR 6.00 left, NPR 1.00 a segment
    wrong = requests.get(sparrow(server, "/compat/sparrow/v2/credit/"), params={"token": "nope"}, timeout=5)
    assert (wrong.status_code, wrong.json()["response_code"]) == (403, 1002)


def test_the_clients_compat_type_is_the_type_of_its_sends_and_of_its_credit(server, sandesh, runtime, client):
    workspace = client["workspace"]
    runtime.sandesh.operators.set_rates(workspace, {"promotional": 50}, "test")
    assert sandesh("client", "update", client["id"], "--compat-type", "otp")["compatType"] == "otp"
    refused = sandesh.run("client", "update", client["id"], "--compat-type", "bulk")
    assert refused.returncode != 0 and "invalid choice" in refused.stderr
    sandesh("client", "update", client["id"], "--compat-type", "promotional")
    credit = requests.get(sparrow(server, "/compat/sparrow/v2/credit/"), params={"token": client["key"]}, timeout=5)
    assert credit.json()["credits_available"] == 20, "NPR 10.00 at NPR 0.50 a promotional segment"
    sent = requests.post(sparrow(server), data={"token": client["key"], "to": "9841000001", "text": "Sale!"}, timeout=5)
    assert sent.json()["count"] == 1
    [message] = until(lambda: listed(server, client))  # queued, or scheduled outside promotional hours
    assert message["messageType"] == "promotional"


def test_a_token_never_reaches_the_services_log(server, client):
    requests.get(sparrow(server), params={"token": client["key"], "to": "9841000001", "text": "hi"}, timeout=5)
    requests.get(sparrow(server, "/compat/sparrow/v2/credit/"), params={"token": client["key"]}, timeout=5)
    requests.get(sparrow(server), params={"token": client["key"][:-1] + "x", "to": "1", "text": "hi"}, timeout=5)
    assert "/compat/sparrow/v2/sms/" in server.output(), "the access lines are there"
    assert client["key"] not in server.output() and client["key"][:-1] not in server.output()


AAKASH = "/compat/aakash/sms/v3/send"


def test_an_aakash_send_lists_the_valid_and_the_invalid_and_charges_the_valid(server, client):
    answer = requests.post(server.url + AAKASH, data={"auth_token": client["key"], "to": "9841000001,12345,9801000002",
                                                      "text": "Namaste"}, timeout=5)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["error"], body["message"]) == (False, "2 messages have been queued for delivery.")
    assert [(v["mobile"], v["credit"], v["network"], v["status"]) for v in body["data"]["valid"]] == [
        ("9841000001", 1, "ntc", "queued"), ("9801000002", 1, "ncell", "queued")]
    assert all(v["id"].startswith("msg_") and v["text"] == "Namaste" for v in body["data"]["valid"])
    assert body["data"]["invalid"] == [{"mobile": "12345", "text": "Namaste", "credit": 0, "network": "N/A",
                                        "status": "aborted"}]
    assert balance(server, client) == 1000 - 2 * 100
    by_json = requests.post(server.url + AAKASH, json={"auth_token": client["key"], "to": "9851000003", "text": "hi"},
                            timeout=5)
    assert by_json.json()["data"]["valid"][0]["mobile"] == "9851000003"


@pytest.mark.parametrize("fields, status", [
    ({"to": "9841000001", "text": "hi"}, 400),
    ({"auth_token": "sk_live_" + "0" * 48, "to": "9841000001", "text": "hi"}, 403),
    ({"to": "12345", "text": "hi", "auth_token": None}, 400),
])
def test_an_aakash_refusal_is_in_aakashs_shape_and_charges_nothing(server, client, fields, status):
    body = {k: (client["key"] if k == "auth_token" and v is None else v) for k, v in fields.items()}
    answer = requests.post(server.url + AAKASH, data=body, timeout=5)
    assert answer.status_code == status, answer.text
    assert answer.json()["error"] is True and answer.json()["data"] == [] and answer.json()["message"]
    assert balance(server, client) == 1000
