"""GET /v1/sms/inbound and GET /v1/sms/inbound/:id against `sandesh serve`, a real dispatcher
and emulated modems (docs/api.md, "GET /v1/sms/inbound"): a client reads the replies to its
messages without a webhook, and sees no other client's."""
from __future__ import annotations

import time
from typing import Any

import requests

from sandesh.scripts.service.emulator import Emulator
from tests.conftest import wait_for_status
from tests.helpers import funded_workspace


def client(runtime, name: str) -> str:
    ws = funded_workspace(runtime.sandesh, name, 100_000)
    return runtime.sandesh.operators.create_client(ws, name, None, 1000, "test")[1]


def get(server, key: str, path: str, **query: Any) -> requests.Response:
    return requests.get(server.url + path, params=query, headers={"x-api-key": key}, timeout=10)


def replied(server, runtime, phones: Emulator, key: str, number: str, text: str) -> str:
    """A message to `number`, delivered, and the phone's reply; returns the message's id."""
    answer = requests.post(server.url + "/v1/sms/send", json={"to": number, "text": "Did the parcel arrive?"},
                           headers={"x-api-key": key}, timeout=10)
    assert answer.status_code == 202, answer.text
    message_id = answer.json()["messageId"]
    wait_for_status(runtime, [message_id], {"delivered"})
    with runtime.connection() as conn:
        name = conn.execute("SELECT name FROM sims WHERE id = %s",
                            (runtime.sandesh.history.message(message_id).sim_id,)).fetchone()["name"]
    phones.modem(name).inject_inbound("+" + number, text)
    return message_id


def listed_until(server, key: str, count: int, **query: Any) -> dict[str, Any]:
    deadline = time.monotonic() + 20
    while True:
        answer = get(server, key, "/v1/sms/inbound", **query)
        assert answer.status_code == 200, answer.text
        if len(answer.json()["data"]) >= count:
            return answer.json()
        assert time.monotonic() < deadline, answer.json()
        time.sleep(0.2)


def test_a_client_reads_the_replies_to_its_messages_and_only_those(server, runtime, phones):
    mine, theirs = client(runtime, "Parcels"), client(runtime, "Clinic")
    texts = ["Aayo, dhanyabad!", "नमस्ते, पार्सल आइपुग्यो।", "Not yet"]
    sent = [replied(server, runtime, phones, mine, f"97798100000{n:02d}", text) for n, text in enumerate(texts)]
    other = replied(server, runtime, phones, theirs, "9779810000099", "Tomorrow at 10?")

    page = listed_until(server, mine, 3)
    assert page["nextCursor"] is None
    assert [(r["from"], r["text"], r["inReplyTo"]) for r in page["data"]] == \
        [(f"+97798100000{n:02d}", text, message) for n, text, message in zip((2, 1, 0), texts[::-1], sent[::-1])]
    first = page["data"][-1]
    assert first["id"].startswith("in_") and first["at"].endswith("Z")
    assert get(server, mine, f"/v1/sms/inbound/{first['id']}").json() == first

    [their_reply] = listed_until(server, theirs, 1)["data"]
    assert (their_reply["text"], their_reply["inReplyTo"]) == ("Tomorrow at 10?", other)
    assert get(server, mine, f"/v1/sms/inbound/{their_reply['id']}").status_code == 404
    assert get(server, theirs, f"/v1/sms/inbound/{first['id']}").status_code == 404
    assert get(server, mine, "/v1/sms/inbound/in_nope").status_code == 404

    halves = get(server, mine, "/v1/sms/inbound", limit=2).json()
    rest = get(server, mine, "/v1/sms/inbound", limit=2, cursor=halves["nextCursor"]).json()
    assert [r["id"] for r in halves["data"] + rest["data"]] == [r["id"] for r in page["data"]]
    assert rest["nextCursor"] is None
    assert get(server, mine, "/v1/sms/inbound", since=first["at"]).json()["data"] == page["data"]
    assert get(server, mine, "/v1/sms/inbound", until=first["at"]).json()["data"] == []
    refused = get(server, mine, "/v1/sms/inbound", cursor=their_reply["id"])
    assert refused.status_code == 400 and refused.json()["details"][0]["path"] == ["cursor"]
    refused = get(server, mine, "/v1/sms/inbound", status="delivered")
    assert refused.status_code == 400 and refused.json()["details"][0]["path"] == ["status"]
