"""Alerts that reach a person (docs/operations.md, "Alerts"), on real PostgreSQL and the test
clock: the notifier (workers/notifier.py) raises an alert once a condition has held for its
delay and tells each destination through Apprise, here `json://` to a real local HTTP receiver;
one message when it starts, one "recovered" when it ends, none between; the alerts survive a
replay; `sandesh alerts` adds, lists, tests, tunes and shows them."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

import pytest

from sandesh.domain.bs import bs_day_text
from sandesh.domain.clock import NEPAL
from sandesh.domain.sending import parse_send
from sandesh.domain.webhook import new_delivery
from sandesh.projections import sim_health
from sandesh.workers.notifier import FAILING_WEBHOOKS_EVERY, Notifier
from tests import contract
from tests.conftest import ROOT
from tests.helpers import funded_workspace, until


class JsonReceiver:
    """What Apprise's json:// posts: {"title", "message", "type", …}, kept in order (and each
    message's type)."""

    def __init__(self) -> None:
        self.messages: list[str] = []
        self.types: dict[str, str] = {}
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                posted = json.loads(body)
                receiver.messages.append(posted["message"])
                receiver.types[posted["message"]] = posted["type"]
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"json://127.0.0.1:{self.server.server_address[1]}/alerts"
        contract.devices.add(f"127.0.0.1:{self.server.server_address[1]}")  # not Sandesh's answers

    def about(self, words: str) -> list[str]:
        return [m for m in self.messages if words in m]


@pytest.fixture(scope="module")
def receiver_json() -> Iterator[JsonReceiver]:
    made = JsonReceiver()
    yield made
    made.server.shutdown()


@pytest.fixture(scope="module")
def notifier(runtime: Any, sandesh: Any, receiver_json: JsonReceiver) -> Notifier:
    added = sandesh("alerts", "add", receiver_json.url)
    assert added["conditions"] == "all"
    return Notifier(runtime)


def heartbeat(runtime: Any, sim_id: str, healthy: bool) -> None:
    with runtime.connection() as conn:
        sim_health.record(conn, sim_id, healthy=healthy, registered=healthy, signal_dbm=-70 if healthy else None,
                          last_error=None if healthy else "no answer to AT", dispatcher="tests",
                          at=runtime.clock.now(), reachable=healthy)


def test_a_destination_is_checked_and_listed_without_its_password(sandesh: Any):
    bogus = sandesh.run("alerts", "add", "carrier-pigeon://coop")
    assert bogus.returncode != 0 and "is not an Apprise URL" in bogus.stderr
    unknown = sandesh.run("alerts", "add", "json://127.0.0.1:9/x", "--only", "sim_unusable,moon_phase")
    assert unknown.returncode != 0 and "unknown condition 'moon_phase'" in unknown.stderr
    mail = sandesh("alerts", "add", "mailtos://owner:hunter2@mail.example.com", "--only", "no_route")
    listed = {d["id"]: d for d in sandesh("alerts", "list")["destinations"]}
    assert listed[mail["id"]]["url"] == "mailtos://owner:****@mail.example.com"
    assert listed[mail["id"]]["conditions"] == ["no_route"]
    assert "hunter2" not in str(listed)
    bot = sandesh("alerts", "add", "tgram://123456789:AAHsecretbottoken/987654")
    assert "AAHsecretbottoken" not in str(sandesh("alerts", "list"))
    sandesh("alerts", "remove", bot["id"])
    sandesh("alerts", "remove", mail["id"])
    assert mail["id"] not in {d["id"] for d in sandesh("alerts", "list")["destinations"]}


def test_no_usable_sim_alerts_once_after_its_delay_and_once_when_it_ends(runtime, sandesh, notifier, receiver_json):
    sim = sandesh("sim", "add", "--name", "alert-1", "--port", "loop://")
    heartbeat(runtime, sim["id"], healthy=False)
    notifier.step()
    assert receiver_json.about("no usable SIM") == [], "it must hold for a minute first"
    sandesh("clock", "advance", "61")
    heartbeat(runtime, sim["id"], healthy=False)
    notifier.step()
    notifier.step()
    assert receiver_json.about("no usable SIM") == ["Sandesh: no usable SIM in the pool: messages wait"]
    assert receiver_json.types["Sandesh: no usable SIM in the pool: messages wait"] == "warning"
    holding = sandesh("alerts", "status")["holding"]
    assert [(a["condition"], a["told"]) for a in holding if a["condition"] == "no_route"] == [("no_route", 1)]
    sandesh("clock", "advance", "30")
    heartbeat(runtime, sim["id"], healthy=True)
    notifier.step()
    notifier.step()
    [recovered] = receiver_json.about("recovered: no route")
    assert re.fullmatch(r"Sandesh: recovered: no route, after 3[0-2] s", recovered), "30 s of the clock, and the test's own"
    assert receiver_json.types[recovered] == "success"  # a channel that shows the kind shows the end apart
    assert not [a for a in sandesh("alerts", "status")["holding"] if a["condition"] == "no_route"]
    heartbeat(runtime, sim["id"], healthy=False)  # again at once: within the interval, no second alert
    sandesh("clock", "advance", "120")
    heartbeat(runtime, sim["id"], healthy=False)
    notifier.step()
    assert len(receiver_json.about("no usable SIM")) == 1
    heartbeat(runtime, sim["id"], healthy=True)


def test_an_otp_waiting_past_a_minute_alerts(runtime, sandesh, notifier, receiver_json):
    app = runtime.sandesh
    workspace = funded_workspace(app, "Alerted", 10_000)
    client = app.operators.create_client(workspace, "A", None, 100, "t")[0].id
    request, problems = parse_send({"to": "9779841000123", "text": "123456 is your code", "messageType": "otp"})
    assert not problems
    app.sending.send(client, workspace, request, 100)
    notifier.step()
    assert receiver_json.about("OTP") == []
    sandesh("clock", "advance", "75")
    notifier.step()
    [told] = receiver_json.about("an OTP has waited")
    assert told.startswith("Sandesh: an OTP has waited 1 min")


def test_a_condition_turned_off_does_not_alert(sandesh):
    assert sandesh("alerts", "tune", "projections_lag", "--off") == {"condition": "projections_lag", "after": None,
                                                                      "on": False}
    status = sandesh("alerts", "status")["conditions"]
    assert status["projections_lag"] == {"after": None, "on": False} and status["no_route"]["after"] == 60
    assert sandesh("alerts", "tune", "projections_lag", "--default")["after"] == 60


def test_the_alerts_survive_a_replay(runtime, sandesh, notifier):
    before = sandesh("alerts", "status")
    assert before["ended"], "an alert has ended by now"
    sandesh("replay", "registry")
    after = sandesh("alerts", "status")
    assert (after["holding"], after["ended"]) == (before["holding"], before["ended"])


def test_alerts_test_sends_to_each_destination(sandesh, notifier, receiver_json):
    told = sandesh("alerts", "test")["told"]
    assert [t["error"] for t in told] == [None] and receiver_json.messages[-1] == "Sandesh: a test alert"


def test_a_sims_low_credit_ending_validity_and_cap_alert_naming_it(runtime, sandesh, notifier, receiver_json):
    app = runtime.sandesh
    sim = sandesh("sim", "add", "--name", "credit-1", "--port", "loop://")
    ends = (datetime.fromtimestamp(runtime.clock.now(), NEPAL) + timedelta(days=2)).date().isoformat()
    app.sims.record_sim_credit(sim["id"], 400, f"Your balance is Rs. 4.00. Valid till {ends}.", "tests")
    heartbeat(runtime, sim["id"], healthy=True)
    notifier.step()
    assert receiver_json.about("SIM credit-1 credit low") == ["Sandesh: SIM credit-1 credit low: NPR 4.00, below NPR 10.00"]
    assert receiver_json.about("SIM credit-1 validity") == [f"Sandesh: SIM credit-1 validity ends {ends} (in 2 days)"]
    with runtime.connection() as conn:
        sim_health.record(conn, sim["id"], healthy=False, registered=True, signal_dbm=-70, last_error=None,
                          dispatcher="tests", at=runtime.clock.now(), resting_until=runtime.clock.now() + 3600,
                          resting_reason="its daily cap of 100 parts is reached")
    notifier.step()
    assert receiver_json.about("cap") == ["Sandesh: SIM credit-1 at its plan's cap: its daily cap of 100 parts is reached"]
    app.sims.record_sim_credit(sim["id"], 50_000, "Your balance is Rs. 500.00. Valid till 2099-12-31.", "tests")
    heartbeat(runtime, sim["id"], healthy=True)
    notifier.step()
    assert [m.split(", after")[0] for m in receiver_json.about("recovered: SIM credit-1")] == [
        "Sandesh: recovered: SIM credit-1 credit low", "Sandesh: recovered: SIM credit-1 validity ending",
        "Sandesh: recovered: SIM credit-1 cap reached"]
    sandesh("sim", "disable", sim["id"])


def test_a_clients_failing_webhooks_alert_after_30_minutes_and_a_given_up_delivery_at_once(runtime, sandesh, notifier,
                                                                                         receiver_json):
    app = runtime.sandesh
    workspace = funded_workspace(app, "Hooked", 1000)
    client = app.operators.create_client(workspace, "HookedShop", "https://hooks.example/in", 100, "t")[0].id
    deliveries = [new_delivery(client, "message.status", f"msg_{n}", "delivered", {"n": n}, at=runtime.clock.now())
                  for n in range(2)]
    app.webhooks.add_deliveries(deliveries)
    app.webhooks.record_attempt(app.webhooks.delivery(deliveries[0].id), 500, None, 0.1)
    sandesh("clock", "advance", str(FAILING_WEBHOOKS_EVERY))  # the failing clients are looked for this often
    notifier.step()
    sandesh("clock", "advance", "1000")
    notifier.step()
    assert receiver_json.about("HookedShop") == [], "failing for 30 minutes first"
    sandesh("clock", "advance", "801")
    notifier.step()
    assert receiver_json.about("HookedShop") == ["Sandesh: webhooks of client HookedShop failing: deliveries retried"]
    delivery = app.webhooks.delivery(deliveries[1].id)
    while delivery.state != "dead":
        delivery = app.webhooks.record_attempt(app.webhooks.delivery(delivery.id), 410, None, 0.1)
    notifier.step()
    assert receiver_json.about("given up") == ["Sandesh: webhooks of client HookedShop: 1 given up in the last hour"]
    sandesh("clock", "advance", "3601")
    app.webhooks.record_attempt(app.webhooks.delivery(deliveries[0].id), 200, None, 0.1)
    notifier.step()
    assert [m.split(", after")[0] for m in receiver_json.about("recovered: webhooks")] == [
        "Sandesh: recovered: webhooks failing, HookedShop", "Sandesh: recovered: webhooks dead, HookedShop"]


def test_the_interval_before_the_same_alert_again_is_a_setting(runtime, sandesh, notifier, receiver_json):
    assert sandesh("alerts", "status")["interval"] == 600
    assert sandesh("alerts", "interval", "30") == {"interval": 30}
    sim = sandesh("sim", "add", "--name", "flap-1", "--port", "loop://")
    credit = runtime.sandesh.sims.record_sim_credit
    for amount, wait in ((400, 0), (50_000, 0), (400, 0), (400, 31), (50_000, 0)):  # low again at once, then later
        if wait:
            sandesh("clock", "advance", str(wait))
        credit(sim["id"], amount, f"Your balance is Rs. {amount / 100:.2f}", "tests")
        notifier.step()
    told = [m.split(", after")[0] for m in receiver_json.messages if "flap-1" in m]
    assert told == ["Sandesh: SIM flap-1 credit low: NPR 4.00, below NPR 10.00", "Sandesh: recovered: SIM flap-1 credit low",
                    "Sandesh: SIM flap-1 credit low: NPR 4.00, below NPR 10.00", "Sandesh: recovered: SIM flap-1 credit low"]
    assert sandesh("alerts", "interval", "--default") == {"interval": 600}
    assert sandesh("alerts", "status")["interval"] == 600
    sandesh("sim", "disable", sim["id"])


def test_the_daily_digest_tells_the_day_before_once_to_those_who_take_it(runtime, sandesh, notifier, receiver_json):
    from sandesh.projections import follower
    from tests.integration.test_webhooks import lifecycle

    refused = sandesh.run("alerts", "digest", "25:00")
    assert refused.returncode != 0 and "not a time of day: write HH:MM (Nepal time), or off" in refused.stderr
    assert sandesh("alerts", "digest", "08:00") == {"digest": "08:00"}
    assert sandesh("alerts", "status")["digest"] == "08:00"
    elsewhere, digest_only = JsonReceiver(), JsonReceiver()
    sandesh("alerts", "add", elsewhere.url, "--only", "no_route")
    sandesh("alerts", "add", digest_only.url, "--only", "digest")

    def move_to(day: Any, hour: int, minute: int) -> None:
        at = datetime.combine(day, datetime.min.time(), NEPAL) + timedelta(hours=hour, minutes=minute)
        sandesh("clock", "advance", str(int(at.timestamp() - runtime.clock.now()) + 1))

    today = datetime.fromtimestamp(runtime.clock.now(), NEPAL).date()
    day = today + timedelta(days=1)  # a day of this test's messages alone
    move_to(day, 0, 30)
    app = runtime.sandesh
    workspace = funded_workspace(app, "Digested", 10_000)
    client = app.operators.create_client(workspace, "D", None, 1000, "test")[0].id
    sent = [app.sending.send(client, workspace, parse_send({"to": f"97798410005{n:02d}", "text": "Digest"})[0], 100)
            for n in range(3)]
    lifecycle(runtime, sent[0], ("submit",), ("accept",), ("report", 0))
    lifecycle(runtime, sent[1], ("fail", "no SIM could send it"))
    follower.catch_up(runtime)
    move_to(day + timedelta(days=1), 7, 58)
    notifier.step()
    assert receiver_json.about(f"Sandesh {day} (") == [], "not before 08:00"
    move_to(day + timedelta(days=1), 8, 1)
    notifier.step()
    notifier.step()
    Notifier(runtime).step()  # started again: the day's digest is in the log, not sent twice
    [told] = receiver_json.about(f"Sandesh {day} (")
    assert re.fullmatch(rf"Sandesh {day} \({bs_day_text(day)}\): 3 accepted, 1 delivered, 0 undelivered, "
                        r"1 failed; 0 alerts\. "
                        r"Now \d+ of \d+ SIMs usable, \d+ waiting", told), told
    assert digest_only.messages == [told] and elsewhere.messages == []
    last = sandesh("alerts", "status")["lastDigest"]
    assert (last["day"], last["text"], last["told"], last["failed"]) == (str(day), told, 2, 0)

    sandesh("alerts", "digest", "off")
    move_to(day + timedelta(days=2), 9, 0)
    notifier.step()
    assert receiver_json.about(f"Sandesh {day + timedelta(days=1)} (") == [] and digest_only.messages == [told]
    for destination in sandesh("alerts", "list")["destinations"]:
        if destination["url"] in (elsewhere.url, digest_only.url):
            sandesh("alerts", "remove", destination["id"])


def test_of_two_notifiers_one_looks_and_the_other_takes_over_when_it_is_killed(runtime, sandesh, env, notifier,
                                                                                receiver_json, tmp_path):
    """`worker all` on two hosts runs two notifiers: one holds the turn and tells each alert
    once; killed, the other takes over and tells the end."""
    sim = sandesh("sim", "add", "--name", "twice-1", "--port", "loop://")
    sandesh("alerts", "tune", "sim_unusable", "--after", "0")
    logs = [tmp_path / f"notifier-{n}.log" for n in (1, 2)]
    workers = [subprocess.Popen([sys.executable, "-m", "sandesh.scripts.service.cli", "worker", "notifier"], cwd=ROOT,
                                env={**env, "PYTHONPATH": str(ROOT)}, stdout=log.open("w"), stderr=subprocess.STDOUT)
               for log in logs]
    try:
        said = until(lambda: [log.read_text() for log in logs] if all(
            "notifier looks" in log.read_text() for log in logs) else None, timeout=30)
        (holder,) = [w for w, text in zip(workers, said) if "this notifier looks" in text]
        heartbeat(runtime, sim["id"], healthy=False)
        until(lambda: receiver_json.about("SIM twice-1 unusable"), timeout=15)
        time.sleep(3)  # three more looks of the one, tries of the other
        assert len(receiver_json.about("SIM twice-1 unusable")) == 1
        holder.kill()
        holder.wait(timeout=10)
        heartbeat(runtime, sim["id"], healthy=True)
        [ended] = until(lambda: receiver_json.about("recovered: SIM twice-1"), timeout=20)
        assert ended.startswith("Sandesh: recovered: SIM twice-1 unusable")
        time.sleep(2)
        assert len(receiver_json.about("recovered: SIM twice-1")) == 1
    finally:
        for worker in workers:
            worker.terminate()
            worker.wait(timeout=30)
        sandesh("alerts", "tune", "sim_unusable", "--default")
        sandesh("sim", "disable", sim["id"])
