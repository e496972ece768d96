"""GET /v1/events against `sandesh serve`, a real dispatcher with emulated modems, the projections
worker writing the feed and the webhook sender following the log (docs/api.md, "GET /v1/events"):
the feed is what the webhooks carry, item for item, for every client with or without a URL, only
the caller's; a long poll answers as soon as an event arrives; and the feed is a read model like
the others, which a replay rebuilds alike, telling no one."""
from __future__ import annotations

import os
import queue
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import orjson
import psycopg
import pytest
import requests

from sandesh.projections.storage.db import advance_clock
from sandesh.projections.feed import CHANNEL
from sandesh.workers import webhook_guard
from sandesh.workers.webhooks import WebhookSender
from tests.conftest import ROOT, wait_for_status
from tests.helpers import funded_workspace
from tests.integration.test_inbound_list import replied


@pytest.fixture(scope="module")
def webhooks(runtime, receiver) -> Iterator[WebhookSender]:
    """The webhook sender, following the log on a thread as `sandesh worker webhooks` does."""
    sender = WebhookSender(runtime, http=webhook_guard.session(True, str(receiver.ca_file)))
    stop = threading.Event()
    thread = threading.Thread(target=sender.run, args=(stop,), daemon=True)
    thread.start()
    yield sender
    stop.set()
    thread.join(timeout=10)
    sender.close()


def client(runtime, name: str, url: str | None = None) -> tuple[str, str]:
    """A new client's id and key."""
    ws = funded_workspace(runtime.sandesh, name, 100_000)
    made, key, _ = runtime.sandesh.operators.create_client(ws, name, url, 1000, "test")
    return made.id, key


def events(server, key: str, **query: Any) -> requests.Response:
    return requests.get(server.url + "/v1/events", params=query, headers={"x-api-key": key}, timeout=40)


def send(server, key: str, number: str, text: str = "Your parcel is on its way") -> str:
    answer = requests.post(server.url + "/v1/sms/send", json={"to": number, "text": text},
                           headers={"x-api-key": key}, timeout=10)
    assert answer.status_code == 202, answer.text
    return answer.json()["messageId"]


def whole_feed(server, key: str, limit: int, after: str | None = None) -> list[dict[str, Any]]:
    """Every event after `after`, page by page."""
    found = []
    while True:
        answer = events(server, key, limit=limit, **({"after": after} if after else {}))
        assert answer.status_code == 200, answer.text
        page = answer.json()
        found += page["data"]
        after = found[-1]["id"] if found else after
        if not page["hasMore"]:
            return found


def test_the_feed_is_what_the_webhooks_carried_item_for_item_and_only_the_callers(
        server, runtime, phones, receiver, webhooks, projections_worker):
    hooked_id, hooked = client(runtime, "Hooked shop", receiver.url("/feed"))
    _, plain = client(runtime, "No URL shop")
    sent = [send(server, hooked, f"97798110000{n:02d}") for n in range(3)]
    wait_for_status(runtime, sent, {"delivered"})
    answered = replied(server, runtime, phones, hooked, "9779811000099", "Thik cha, dhanyabad")
    plain_sent = send(server, plain, "9779811000050")
    wait_for_status(runtime, [plain_sent], {"delivered"})

    received = receiver.wait("/feed", 9)  # sent and delivered of 4 messages, and the reply
    deadline = time.monotonic() + 10  # the projections worker writes the feed, the sender the deliveries
    while len(feed := whole_feed(server, hooked, limit=2)) < 9 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(feed) == 9
    by_delivery = {r.headers["x-service-delivery"][len("whd_"):]: orjson.loads(r.body) for r in received}
    assert {item["id"][len("evt_"):]: item["data"] for item in feed} == by_delivery
    for item in feed:
        assert item["type"] == item["data"]["type"]
        assert item["createdAt"] == item["data"]["at"]
    # the log's order: each message's sent before its delivered, the reply after what it answers
    order = [(item["data"]["id"], item["data"].get("status")) for item in feed]
    for message in [*sent, answered]:
        assert order.index((message, "sent")) < order.index((message, "delivered"))
    [reply] = [item["data"] for item in feed if item["type"] == "message.inbound"]
    assert (reply["text"], reply["inReplyTo"]) == ("Thik cha, dhanyabad", answered)
    assert order.index((answered, "delivered")) < order.index((reply["id"], None))

    # a client without a URL has its feed all the same, and each sees only its own: once the
    # projections worker has read as far in the log (it trails the log by moments)
    deadline = time.monotonic() + 10
    while len(plain_feed := whole_feed(server, plain, limit=100)) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [(i["data"]["id"], i["data"]["status"]) for i in plain_feed] == [(plain_sent, "sent"),
                                                                            (plain_sent, "delivered")]
    assert whole_feed(server, hooked, limit=100, after=feed[-1]["id"]) == []
    assert whole_feed(server, hooked, limit=5, after=feed[3]["id"]) == feed[4:]
    refused = events(server, plain, after=feed[0]["id"])
    assert refused.status_code == 400 and refused.json()["details"][0]["path"] == ["after"]


def in_feed(runtime, client_id: str) -> float:
    """When the client's first event is in the feed (read every 5 ms)."""
    with psycopg.connect(runtime.settings.database_url, autocommit=True) as conn:
        while not conn.execute("SELECT 1 FROM events_feed WHERE client_id = %s", (client_id,)).fetchone():
            time.sleep(0.005)
    return time.monotonic()


def test_a_long_poll_answers_within_a_second_of_a_new_event(server, runtime, phones, webhooks, projections_worker):
    _, key = client(runtime, "Waiting shop")
    started = time.monotonic()
    idle = events(server, key, wait=1)
    assert idle.status_code == 200 and idle.json() == {"data": [], "hasMore": False}
    assert 1.0 <= time.monotonic() - started < 2.5

    client_id, key = client(runtime, "Watched shop")
    answers: list[tuple[float, requests.Response]] = []

    def long_poll() -> None:
        answer = events(server, key, wait=25)
        answers.append((time.monotonic(), answer))

    poll = threading.Thread(target=long_poll)
    poll.start()
    time.sleep(1.5)  # the poll is waiting
    seen: list[float] = []
    watch = threading.Thread(target=lambda: seen.append(in_feed(runtime, client_id)))
    watch.start()
    message = send(server, key, "9779811000070")
    watch.join(timeout=30)
    poll.join(timeout=30)
    [(answered_at, answer)] = answers
    assert answer.status_code == 200, answer.text
    # the projections worker may have read the delivery report in the same batch as the send
    got = [(item["data"]["id"], item["data"]["status"]) for item in answer.json()["data"]]
    assert got in ([(message, "sent")], [(message, "sent"), (message, "delivered")])
    # woken by the feed's channel: reading again every second instead would take up to a second
    assert answered_at - seen[0] < 0.5


def test_a_bad_query_is_refused_naming_the_parameter(server, runtime):
    _, key = client(runtime, "Careless shop")
    for query, path in (({"after": "evt_nope"}, "after"), ({"after": "evt_" + "0" * 32}, "after"),
                        ({"limit": "0"}, "limit"), ({"limit": "101"}, "limit"), ({"wait": "31"}, "wait"),
                        ({"wait": "1.5"}, "wait"), ({"since": "2026-01-01T00:00:00Z"}, "since")):
        answer = events(server, key, **query)
        assert answer.status_code == 400, (query, answer.text)
        assert answer.json()["code"] == "invalid_request" and answer.json()["details"][0]["path"] == [path]
    assert events(server, "sk_live_" + "0" * 48).status_code == 401


SECTION = re.compile(r"^### Polling for events\n(.*?)^### ", re.S | re.M)
BLOCK = re.compile(r"^```(python|js|php)\n(.*?)^```", re.S | re.M)
RUN = {"python": ("loop.py", [sys.executable]), "js": ("loop.js", ["node"]), "php": ("loop.php", ["php"])}


def loops() -> dict[str, str]:
    section = SECTION.search((ROOT / "docs" / "api.md").read_text()).group(1)
    return {language: code for language, code in BLOCK.findall(section)}


class Loop:
    """A polling loop of the doc, run as it stands, its printed lines read as they come."""

    def __init__(self, language: str, folder: Path, server, key: str):
        name, command = RUN[language]
        if shutil.which(command[0]) is None:
            pytest.fail(f"{command[0]} is missing: scripts/test.sh installs it", pytrace=False)
        (folder / name).write_text(loops()[language])
        self.process = subprocess.Popen([*command, name], cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True, env={**os.environ, "SANDESH_BASE": server.url + "/v1",
                                                        "SANDESH_API_KEY": key})
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [self.lines.put(line) for line in self.process.stdout], daemon=True).start()

    def printed(self, count: int) -> list[tuple[str, str, dict[str, Any]]]:
        found = []
        for _ in range(count):
            try:
                event_id, kind, data = self.lines.get(timeout=15).split(" ", 2)
            except queue.Empty:
                raise AssertionError(f"the loop printed {found}; stderr: {self.stop()}") from None
            found.append((event_id, kind, orjson.loads(data)))
        return found

    def stop(self) -> str:
        self.process.kill()
        return self.process.communicate(timeout=10)[1]


def test_the_docs_give_the_polling_loop_in_python_nodejs_and_php():
    assert set(loops()) == {"python", "js", "php"}


@pytest.mark.parametrize("language", ["python", "js", "php"])
def test_each_polling_loop_prints_every_event_once_and_goes_on_after_a_restart(
        language, server, runtime, phones, webhooks, projections_worker, tmp_path):
    client_id, key = client(runtime, f"Polling shop {language}")
    first = send(server, key, "9779811000060", "नमस्ते! Your order is packed")
    wait_for_status(runtime, [first], {"delivered"})

    running = Loop(language, tmp_path, server, key)
    before = running.printed(2)
    assert [(kind, data["id"], data["status"]) for _, kind, data in before] == \
        [("message.status", first, "sent"), ("message.status", first, "delivered")]
    assert [(i, "message.status", i_data) for i, _, i_data in before] == \
        [(item["id"], item["type"], item["data"]) for item in whole_feed(server, key, limit=100)]
    assert (tmp_path / "sandesh-last-event").read_text() == before[-1][0]
    running.stop()

    second = send(server, key, "9779811000061")
    wait_for_status(runtime, [second], {"delivered"})
    again = Loop(language, tmp_path, server, key)
    try:
        after = again.printed(2)
        assert [(data["id"], data["status"]) for _, _, data in after] == [(second, "sent"), (second, "delivered")]
        third = send(server, key, "9779811000062")  # while the loop waits
        assert [(data["id"], data["status"]) for _, _, data in again.printed(1)] == [(third, "sent")]
    finally:
        again.stop()


def test_the_feed_is_a_read_model_that_a_replay_rebuilds_alike_telling_no_one(
        server, runtime, phones, receiver, webhooks, projections_worker, sandesh):
    """`sandesh replay feed` makes the feed the projections worker made, row for row and answer
    for answer, and `replay --check` compares it.  Its rows are no news: a replay wakes no long
    poll, while the worker's next commit does (docs/design.md, "The events feed")."""
    client_id, key = client(runtime, "Replayed shop", receiver.url("/replayed"))
    sent = [send(server, key, f"97798110001{n:02d}") for n in range(2)]
    wait_for_status(runtime, sent, {"delivered"})
    replied(server, runtime, phones, key, "9779811000199", "Pheri bhetaunla")
    deadline = time.monotonic() + 15  # sent and delivered of 3 messages, and the reply
    while len(live := whole_feed(server, key, limit=100)) < 7 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(live) == 7 and live[-1]["type"] == "message.inbound"
    with runtime.connection() as conn:
        rows = conn.execute("SELECT * FROM events_feed ORDER BY position").fetchall()

    with psycopg.connect(runtime.settings.database_url, autocommit=True) as listener:
        listener.execute(f"LISTEN {CHANNEL}")
        replayed = sandesh("replay", "feed")
        checked = sandesh("replay", "--check", "feed")
        told = [n.payload for n in listener.notifies(timeout=1)]
        send(server, key, "9779811000198")
        heard = [n.payload for n in listener.notifies(timeout=10, stop_after=1)]
    assert (told, heard) == ([], [client_id])

    assert list(replayed["projections"]) == ["feed"] and checked["ok"] is True
    assert checked["projections"]["feed"]["tables"]["events_feed"]["rows"] >= len(rows)
    with runtime.connection() as conn:
        assert conn.execute("SELECT * FROM events_feed WHERE position <= %s ORDER BY position",
                            (rows[-1]["position"],)).fetchall() == rows
    assert whole_feed(server, key, limit=100)[:7] == live


def test_events_are_kept_thirty_days(server, runtime, phones, webhooks, projections_worker):
    _, key = client(runtime, "Old shop")
    message = send(server, key, "9779811000080")
    wait_for_status(runtime, [message], {"delivered"})
    deadline = time.monotonic() + 10
    while len(kept := events(server, key).json()["data"]) < 2:
        assert time.monotonic() < deadline, kept
        time.sleep(0.1)
    with runtime.connection() as conn:
        advance_clock(conn, 29 * 86_400)
    assert events(server, key, after=kept[0]["id"]).json()["data"] == kept[1:]
    with runtime.connection() as conn:
        advance_clock(conn, 2 * 86_400)
    assert events(server, key).json() == {"data": [], "hasMore": False}
    refused = events(server, key, after=kept[0]["id"])
    assert refused.status_code == 400 and refused.json()["details"][0]["path"] == ["after"]
