"""Redelivering an outage (docs/operations.md, "Redelivering an outage"): a receiver that was down
for a day gets every event it missed after one `sandesh webhooks redeliver --client`, through a
real `sandesh serve`, a real `sandesh worker webhooks` and a real HTTPS receiver, on the test clock."""
import signal
from collections import Counter
import subprocess
import sys
import time

import orjson
import pytest
import requests

from sandesh.domain.clock import iso
from sandesh.domain.signature import verify_signature
from sandesh.domain.webhook import DELAYS, MAX_ATTEMPTS
from tests.conftest import ROOT

PATH = "/hooks/outage"


@pytest.fixture(scope="module")
def client(sandesh, receiver):
    ws = sandesh("workspace", "create", "--name", "Outage")["id"]
    sandesh("workspace", "activate", ws)
    sandesh("workspace", "credit", ws, "100000")
    return sandesh("client", "create", "--workspace", ws, "--brand", "Outage", "--webhook-url", receiver.url(PATH),
                   "--rate-limit", "1000")


@pytest.fixture(scope="module")
def webhook_worker(env, receiver):
    worker = subprocess.Popen([sys.executable, "-m", "sandesh.scripts.service.cli", "worker", "webhooks"],
                              env={**env, "REQUESTS_CA_BUNDLE": str(receiver.ca_file), "PYTHONPATH": str(ROOT)},
                              cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    yield worker
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=20) == 0, worker.stderr.read()


def settled(sandesh, client_id, states, timeout=10.0):
    """The client's deliveries once their states are `states` (a Counter; an attempt is
    recorded just after its answer)."""
    deadline = time.monotonic() + timeout
    while True:
        listed = sandesh("webhooks", "list", "--client", client_id)["deliveries"]
        if Counter(d["state"] for d in listed) == states:
            return listed
        assert time.monotonic() < deadline, f"the deliveries are not {states}: {listed}"
        time.sleep(0.2)


def canceled_sends(server, key, count):
    """Sends through the API, each canceled before a modem takes it: one `canceled` event each."""
    ids = []
    for n in range(count):
        headers = {"x-api-key": key, "content-type": "application/json"}
        sent = requests.post(server.url + "/v1/sms/send", headers=headers, timeout=10,
                             data=orjson.dumps({"to": f"97798100000{n:02d}", "text": f"Order {n} shipped"}))
        assert sent.status_code == 202, sent.text
        ids.append(sent.json()["messageId"])
        canceled = requests.post(server.url + f"/v1/sms/messages/{ids[-1]}/cancel", headers={"x-api-key": key},
                                 timeout=10)
        assert canceled.status_code == 200, canceled.text
    return ids


def test_a_receiver_down_for_a_day_gets_every_event_it_missed_after_one_command(
        server, route, sandesh, runtime, receiver, client, webhook_worker):
    receiver.answer(PATH, 503)
    since = iso(runtime.clock.now() - 60)
    messages = canceled_sends(server, client["key"], 3)
    receiver.wait(PATH, 3, timeout=30)
    for attempt, delay in enumerate(DELAYS, start=2):  # every retry fails: 8 attempts, then dead
        sandesh("clock", "advance", str(delay))
        receiver.wait(PATH, 3 * attempt, timeout=30)
    dead = settled(sandesh, client["id"], Counter(dead=3))
    assert len(dead) == 3 and all(d["attempts"] == MAX_ATTEMPTS for d in dead)
    sandesh("clock", "advance", str(20 * 3600))  # the receiver's owners notice the next day
    missed = receiver.at(PATH)

    receiver.answer(PATH, 200)
    answer = sandesh("webhooks", "redeliver", "--client", client["id"], "--since", since, "--state", "dead")
    assert answer == {"clientId": client["id"], "redelivered": 3, "states": ["dead"], "since": since, "until": None}

    again = receiver.wait(PATH, len(missed) + 3, timeout=30)[len(missed):]
    first = {r.headers["x-service-delivery"]: r for r in missed[:3]}
    assert {r.headers["x-service-delivery"] for r in again} == set(first)  # the same deliveries, by their id
    assert sorted(orjson.loads(r.body)["id"] for r in again) == sorted(messages)
    for request in again:
        original = first[request.headers["x-service-delivery"]]
        assert request.body == original.body  # byte for byte
        t = verify_signature(client["webhookSecret"], request.headers["x-service-signature"], request.body,
                             now=runtime.clock.now())
        assert t > verify_signature(client["webhookSecret"], original.headers["x-service-signature"], original.body,
                                    tolerance=10**9) + 20 * 3600  # signed afresh, on the service clock
    listed = settled(sandesh, client["id"], Counter(dead=3, delivered=3))  # a dead delivery stays dead:
    assert {d["redeliveryOf"] for d in listed if d["state"] == "delivered"} == set(first)  # its event went anew
    lines = [orjson.loads(line) for line in sandesh.run("audit", "--client", client["id"]).stdout.splitlines()]
    [audited] = [line for line in lines if line["action"] == "webhook.redelivered"]
    assert audited["details"]["count"] == 3 and audited["actor"] == "tester"
    assert sandesh("webhooks", "redeliver", "--client", client["id"], "--since", since)["redelivered"] == 0


@pytest.mark.parametrize("args, says", [
    (("--client", "cl_x"), "--since"),
    (("--client", "cl_x", "--since", "yesterday"), "ISO 8601"),
    (("whd_x", "--client", "cl_x", "--since", "2026-11-21T00:00:00Z"), "not both"),
    (("--client", "cl_missing", "--since", "2026-11-21T00:00:00Z"), "no client"),
    (("--client", "cl_x", "--since", "2026-11-21T00:00:00Z", "--state", "delivered"), "invalid choice"),
])
def test_a_redelivery_without_what_it_needs_is_refused_with_exit_2(sandesh, args, says):
    done = sandesh.run("webhooks", "redeliver", *args)
    assert done.returncode == 2 and says in done.stderr, done.stderr
