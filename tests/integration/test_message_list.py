"""GET /v1/sms/messages against `sandesh serve` and real PostgreSQL (docs/api.md,
"GET /v1/sms/messages"): the client's own messages, newest first, filtered, paged by key."""
from __future__ import annotations

from typing import Any

import pytest
import requests

from sandesh.projections import follower
from tests.helpers import funded_workspace

TO, OTHER = "9779812345678", "9779801234567"


@pytest.fixture(scope="module", autouse=True)
def a_route(route):
    return route


def client(runtime) -> dict[str, str]:
    """A client of a funded workspace whose promotions leave at any hour."""
    ws = funded_workspace(runtime.sandesh, "Lists", 100_000)
    runtime.sandesh.operators.set_promo_hours(ws, "off", "test")
    return {"key": runtime.sandesh.operators.create_client(ws, "Lists", None, 1000, "test")[1], "workspace": ws}


def send(server, key: str, to: str = TO, message_type: str = "transactional") -> str:
    answer = requests.post(server.url + "/v1/sms/send", json={"to": to, "text": "Your order shipped",
                                                              "messageType": message_type},
                           headers={"x-api-key": key}, timeout=10)
    assert answer.status_code == 202, answer.text
    return answer.json()["messageId"]


def batch(server, key: str, count: int) -> list[str]:
    answer = requests.post(server.url + "/v1/sms/send/batch", timeout=10, headers={"x-api-key": key},
                           json={"messages": [{"to": TO, "text": f"Notice {n}"} for n in range(count)]})
    assert answer.status_code == 202, answer.text
    return [r["messageId"] for r in answer.json()["results"]]


def listed(server, key: str, **query: Any) -> requests.Response:
    return requests.get(server.url + "/v1/sms/messages", params=query, headers={"x-api-key": key}, timeout=10)


def every_page(server, key: str, between=lambda: None, **query: Any) -> list[dict[str, Any]]:
    found, cursor = [], None
    while True:
        answer = listed(server, key, **query, **({"cursor": cursor} if cursor else {}))
        assert answer.status_code == 200, answer.text
        found += answer.json()["data"]
        cursor = answer.json()["nextCursor"]
        if cursor is None:
            return found
        between()


def test_the_clients_messages_newest_first_each_as_its_lookup_gives_it(server, runtime):
    mine, theirs = client(runtime), client(runtime)
    sent = [send(server, mine["key"]) for _ in range(3)]
    other = send(server, theirs["key"])
    follower.catch_up(runtime)
    answer = listed(server, mine["key"])
    assert answer.status_code == 200
    body = answer.json()
    assert [m["id"] for m in body["data"]] == sent[::-1] and body["nextCursor"] is None
    lookup = requests.get(f"{server.url}/v1/sms/messages/{sent[0]}", headers={"x-api-key": mine["key"]}, timeout=5)
    assert body["data"][-1] == lookup.json()
    assert [m["id"] for m in listed(server, theirs["key"]).json()["data"]] == [other]  # another client's: none


def test_pages_by_key_neither_skip_nor_repeat_while_sends_arrive(server, runtime):
    """A batch's messages share their acceptance time: the id breaks the tie."""
    mine = client(runtime)
    before = [send(server, mine["key"]) for _ in range(2)] + batch(server, mine["key"], 7) + [send(server, mine["key"])]
    follower.catch_up(runtime)
    arrived = []

    def more_arrive() -> None:
        arrived.append(send(server, mine["key"]))
        follower.catch_up(runtime)

    pages = every_page(server, mine["key"], between=more_arrive, limit=3)
    ids = [m["id"] for m in pages]
    assert len(ids) == len(set(ids)) == len(before) and set(ids) == set(before)
    assert [(m["createdAt"], m["id"]) for m in pages] == sorted(((m["createdAt"], m["id"]) for m in pages),
                                                               reverse=True)
    assert len(arrived) == 3  # 10 messages in pages of 3: they arrived between the pages, in none of them
    assert [m["id"] for m in listed(server, mine["key"], limit=4).json()["data"]] == arrived[::-1] + [before[-1]]


def test_filters_status_type_number_and_time(server, runtime):
    mine = client(runtime)
    first = send(server, mine["key"])
    promotional = send(server, mine["key"], message_type="promotional")
    other_number = send(server, mine["key"], to=OTHER)
    canceled = send(server, mine["key"])
    assert requests.post(f"{server.url}/v1/sms/messages/{canceled}/cancel", headers={"x-api-key": mine["key"]},
                         timeout=5).status_code == 200
    follower.catch_up(runtime)

    def ids(**query: Any) -> list[str]:
        answer = listed(server, mine["key"], **query)
        assert answer.status_code == 200, answer.text
        return [m["id"] for m in answer.json()["data"]]

    assert ids(status="canceled") == [canceled]
    assert ids(status="queued") == [other_number, promotional, first]
    assert ids(messageType="promotional") == [promotional]
    assert ids(to=OTHER) == [other_number] == ids(to="+" + OTHER)
    assert ids(to=TO, messageType="transactional") == [canceled, first]
    created = {m["id"]: m["createdAt"] for m in listed(server, mine["key"]).json()["data"]}
    assert ids(since=created[promotional]) == [canceled, other_number, promotional]
    assert ids(until=created[promotional]) == [first]
    assert ids(since=created[promotional], until=created[canceled]) == [other_number, promotional]
    assert ids(status="delivered") == []


@pytest.mark.parametrize("query, path, code", [
    ({"status": "lost"}, "status", "invalid_enum"),
    ({"messageType": "otp-ish"}, "messageType", "invalid_enum"),
    ({"to": "9812345678"}, "to", "invalid_phone_number"),
    ({"since": "2026-11-28"}, "since", "invalid_datetime"),
    ({"until": "2026-11-28T10:00:00"}, "until", "missing_offset"),
    ({"since": "2026-11-28T10:00:00Z", "until": "2026-11-28T09:00:00Z"}, "until", "empty_range"),
    ({"limit": "0"}, "limit", "out_of_range"),
    ({"limit": "101"}, "limit", "out_of_range"),
    ({"limit": "ten"}, "limit", "out_of_range"),
    ({"cursor": "evt_1"}, "cursor", "invalid_cursor"),
    ({"page": "2"}, "page", "unknown_parameter"),
    ({"status": ["queued", "sent"]}, "status", "repeated"),
])
def test_a_bad_parameter_is_400_naming_it(server, active_client, query, path, code):
    answer = listed(server, active_client["key"], **query)
    assert answer.status_code == 400, answer.text
    body = answer.json()
    assert body["code"] == "invalid_request"
    assert [(d["path"], d["code"]) for d in body["details"]] == [([path], code)]


def test_another_clients_cursor_is_refused(server, runtime):
    mine, theirs = client(runtime), client(runtime)
    theirs_sent = send(server, theirs["key"])
    send(server, mine["key"])
    follower.catch_up(runtime)
    answer = listed(server, mine["key"], cursor=theirs_sent)
    assert answer.status_code == 400
    assert [(d["path"], d["code"]) for d in answer.json()["details"]] == [(["cursor"], "unknown_cursor")]
    assert listed(server, "sk_live_" + "0" * 48).status_code == 401
