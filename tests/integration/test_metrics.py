"""GET /metrics (docs/design.md, "Metrics") on a real `sandesh serve` with two gunicorn workers,
real `sandesh worker dispatch` and `sandesh worker webhooks` processes and emulated modems:
Prometheus text format without a key; counts summed over every process, an ended one included;
sends by type and outcome; the queue, the SIMs and the projections' lag read from the database
at the scrape; webhook attempts by outcome; no label a message id or a number; 200 while the
database is away."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psutil
import psycopg
import pytest
import requests
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.parser import text_string_to_metric_families

from sandesh.api.metrics import CACHE_SECONDS
from sandesh.domain.release import VERSION
from sandesh.domain.sending import parse_send
from sandesh.projections import follower
from tests.helpers import funded_workspace
from tests.conftest import ROOT, SECRET_KEY, Server
from tests.private_postgres import PrivatePostgres

TEMPLATES = {"/v1/sms/send", "/v1/sms/messages/{message_id}", "/v1/sms/balance", "/v1/sms/otp/send",
             "/v1/sms/otp/verify", "/v1/health", "/v1/ready", "/v1/openapi.json", "/metrics", "unmatched"}


def scrape(server):
    answer = requests.get(f"{server.url}/metrics", timeout=10)
    assert answer.status_code == 200, answer.text
    return answer, [s for family in text_string_to_metric_families(answer.text) for s in family.samples]


def value(samples, name, **labels):
    """The sum of the samples called `name` whose labels include `labels` (0 when there is none)."""
    return sum(s.value for s in samples if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()))


def eventually(server, check, timeout=30.0):
    """Scrape until check(samples) holds; returns those samples."""
    deadline = time.monotonic() + timeout
    while True:
        _, samples = scrape(server)
        if check(samples):
            return samples
        assert time.monotonic() < deadline, [s for s in samples if s.name.startswith(("sandesh_sim", "sandesh_web"))]
        time.sleep(0.2)


def post(server, path, body, key=None, **headers):
    return requests.post(f"{server.url}{path}", json=body, timeout=10,
                         headers={**({"x-api-key": key} if key else {}), **headers})


@pytest.fixture(scope="module")
def workspace(sandesh):
    """An active workspace that may send transactional and OTP messages, not promotional ones."""
    ws = sandesh("workspace", "create", "--name", "Metrics", "--types", "transactional,otp")["id"]
    sandesh("workspace", "activate", ws)
    sandesh("workspace", "credit", ws, "1000000")
    return {"id": ws, "key": sandesh("client", "create", "--workspace", ws, "--brand", "Metrics")["key"]}


def test_metrics_answer_200_without_a_key_in_prometheus_text_format(server):
    answer, samples = scrape(server)
    assert answer.headers["content-type"].startswith("text/plain; version=")
    assert value(samples, "sandesh_database_up") == 1
    names = {s.name for s in samples}
    assert names and all(n.startswith("sandesh_") for n in names), names  # every process's, not one's runtime
    assert {"sandesh_queue_depth", "sandesh_queue_oldest_age_seconds", "sandesh_projection_lag_events"} <= names


def test_without_a_token_only_a_caller_on_this_machine_is_answered(server):
    """A request a proxy forwarded (one not in SANDESH_TRUSTED_PROXIES, on this machine) carries
    its headers: refused, whatever the socket's peer."""
    for header in ({"X-Forwarded-For": "203.0.113.9"}, {"Forwarded": "for=203.0.113.9"}, {"X-Real-IP": "1.2.3.4"}):
        answer = requests.get(f"{server.url}/metrics", headers=header, timeout=10)
        assert (answer.status_code, answer.json()["code"]) == (403, "forbidden"), header
        assert "SANDESH_METRICS_TOKEN" in answer.json()["error"]


def test_with_a_token_metrics_answer_whoever_sends_it_and_no_one_else(env):
    token = "scrape-" + uuid.uuid4().hex
    running = Server({**env, "SANDESH_METRICS_TOKEN": token}, workers=1)
    try:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {token}"}):
            answer = requests.get(f"{running.url}/metrics", headers=headers, timeout=10)
            assert (answer.status_code, answer.json()["code"]) == (401, "unauthorized"), headers
            assert answer.headers["WWW-Authenticate"] == "Bearer"
        through_a_proxy = {"Authorization": f"Bearer {token}", "X-Forwarded-For": "203.0.113.9"}
        answer = requests.get(f"{running.url}/metrics", headers=through_a_proxy, timeout=10)
        assert answer.status_code == 200 and "sandesh_build_info" in answer.text
    finally:
        running.stop()


def test_the_release_of_the_process_and_of_the_database_are_gauges(server):
    """`sandesh_build_info` names the release of the process that answered; the database's
    releases (who migrated it, where its log is finalized) come with it (docs/operations.md,
    "Upgrading")."""
    _, samples = scrape(server)
    assert [s.labels for s in samples if s.name == "sandesh_build_info"] == [{"version": VERSION}]
    assert [s.labels for s in samples if s.name == "sandesh_database_release_info"] == [
        {"migrated_by": VERSION, "finalized": VERSION}]


def test_requests_are_counted_by_route_template_over_every_worker_an_ended_one_included(server, workspace, env):
    """Whichever worker answers the scrape, it reports the requests every worker answered, and
    a worker's counts stay after it dies (the files of prometheus_client's multiprocess mode)."""
    balance = {"route": "/v1/sms/balance", "method": "GET", "status": "200"}
    lookup = {"route": "/v1/sms/messages/{message_id}", "method": "GET", "status": "404"}
    unmatched = {"route": "unmatched", "method": "GET", "status": "404"}
    _, before = scrape(server)
    key = {"x-api-key": workspace["key"]}
    for _ in range(12):
        assert requests.get(f"{server.url}/v1/sms/balance", headers=key, timeout=10).status_code == 200
    for _ in range(3):
        missing = f"msg_{uuid.uuid4().hex}"
        assert requests.get(f"{server.url}/v1/sms/messages/{missing}", headers=key, timeout=10).status_code == 404
        assert requests.get(f"{server.url}/nowhere/9779812345678", timeout=10).status_code == 404

    # kill -9 a worker that answered some of them; gunicorn starts another
    workers = psutil.Process(server.process.pid).children()
    assert len(workers) == 2
    by_worker = {w.pid: _requests_in_files_of(env, w.pid, balance) for w in workers}
    assert sum(by_worker.values()) == 12
    killed = max(by_worker, key=by_worker.get)
    os.kill(killed, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while {w.pid for w in psutil.Process(server.process.pid).children()} - set(by_worker) == set():
        assert time.monotonic() < deadline, "gunicorn started no new worker"
        time.sleep(0.1)
    for _ in range(8):  # answered by the others: the killed one is gone
        assert requests.get(f"{server.url}/v1/sms/balance", headers=key, timeout=10).status_code == 200

    _, after = scrape(server)
    metric = "sandesh_http_requests_total"
    assert value(after, metric, **balance) - value(before, metric, **balance) == 20
    assert value(after, metric, **lookup) - value(before, metric, **lookup) == 3
    assert value(after, metric, **unmatched) - value(before, metric, **unmatched) == 3
    assert 0 < by_worker[killed] < 20  # its part is in the 20 although it ended
    latency = {"route": "/v1/sms/balance", "method": "GET"}
    count = "sandesh_http_request_duration_seconds_count"
    assert value(after, count, **latency) - value(before, count, **latency) == 20
    assert value(after, "sandesh_http_request_duration_seconds_bucket", le="+Inf", **latency) == value(
        after, count, **latency)
    # every scrape, whichever worker answers it, says the same
    assert {value(scrape(server)[1], metric, **balance) for _ in range(6)} == {value(after, metric, **balance)}


def _requests_in_files_of(env, pid, labels):
    files = [str(Path(env["SANDESH_METRICS_DIR"]) / f"counter_{pid}.db")]
    if not os.path.exists(files[0]):
        return 0
    samples = [s for metric in MultiProcessCollector.merge(files, accumulate=False) for s in metric.samples]
    return value(samples, "sandesh_http_requests_total", **labels)


def test_sends_are_counted_by_type_and_outcome(server, sandesh, workspace, route):
    key = workspace["key"]
    _, before = scrape(server)
    once = {"Idempotency-Key": f"metrics-{uuid.uuid4().hex}"}
    sends = [
        (post(server, "/v1/sms/send", {"to": "9779812345601", "text": "Order 1"}, key, **once), 202),
        (post(server, "/v1/sms/send", {"to": "9779812345601", "text": "Order 1"}, key, **once), 202),
        (post(server, "/v1/sms/send", {"to": "9779812345602", "text": "Sale", "messageType": "promotional"}, key), 403),
        (post(server, "/v1/sms/send", {"text": "no number"}, key), 400),
        (post(server, "/v1/sms/send", {"to": "9779812345603", "text": "no key"}), 401),
        (post(server, "/v1/sms/otp/send", {"to": "9779812345604", "purpose": "login"}, key), 202),
    ]
    assert [answer.status_code for answer, _ in sends] == [status for _, status in sends], [a.text for a, _ in sends]
    sandesh("sms", "disable", "--reason", "metrics test")
    try:
        assert post(server, "/v1/sms/send", {"to": "9779812345605", "text": "off"}, key).status_code == 503
    finally:
        sandesh("sms", "enable")

    _, after = scrape(server)
    counted = {(t, o): value(after, "sandesh_sends_total", type=t, outcome=o)
               - value(before, "sandesh_sends_total", type=t, outcome=o)
               for t, o in {(s.labels["type"], s.labels["outcome"]) for s in after if s.name == "sandesh_sends_total"}}
    assert {k: v for k, v in counted.items() if v} == {
        ("transactional", "accepted"): 1, ("transactional", "replayed"): 1, ("promotional", "forbidden"): 1,
        ("transactional", "invalid_request"): 1, ("otp", "accepted"): 1, ("transactional", "sms_disabled"): 1,
        ("unknown", "unauthorized"): 1}  # refused before its body was read: no type


def test_the_queue_depth_and_the_age_of_its_oldest_message_per_type(server, sandesh, route):
    """Messages accepted wait in the queue (nothing drives the route's SIM here)."""
    ws = sandesh("workspace", "create", "--name", "Queue")["id"]
    sandesh("workspace", "activate", ws)
    sandesh("workspace", "set-promo-hours", ws, "off")  # its promotions join the queue at any hour
    sandesh("workspace", "credit", ws, "100000")
    key = sandesh("client", "create", "--workspace", ws, "--brand", "Queue")["key"]
    time.sleep(CACHE_SECONDS)  # what each API worker read of the database before is forgotten
    _, before = scrape(server)
    for n in range(3):
        answer = post(server, "/v1/sms/send", {"to": f"97798123457{n:02}", "text": "Sale", "messageType": "promotional"},
                      key)
        assert answer.status_code == 202, answer.text
    depth = "sandesh_queue_depth"
    samples = eventually(server, lambda s: value(s, depth, type="promotional") - value(before, depth,
                                                                                        type="promotional") == 3)
    assert value(samples, depth, type="transactional") >= 1 and value(samples, depth, type="otp") >= 1
    sandesh("clock", "advance", "120")
    eventually(server, lambda s: all(120 <= value(s, "sandesh_queue_oldest_age_seconds", type=message_type) < 300
                                     for message_type in ("transactional", "otp", "promotional")))


def test_sim_gauges_show_each_sims_state_and_parts_used(server, sandesh, route):
    spare = sandesh("sim", "add", "--name", "metrics-spare", "--port", "loop://")["id"]
    sandesh("sim", "disable", spare)
    samples = eventually(server, lambda s: any(x.name == "sandesh_sim_state" and x.labels["sim"] == spare for x in s))
    states = {(s.labels["sim"], s.labels["state"]): s.value for s in samples if s.name == "sandesh_sim_state"}
    assert {state: states[(route.sim_id, state)] for state in ("active", "disabled", "quarantined", "unreachable")} \
        == {"active": 1, "disabled": 0, "quarantined": 0, "unreachable": 0}
    assert states[(spare, "disabled")] == 1 and states[(spare, "active")] == 0
    assert value(samples, "sandesh_sim_parts_used", sim=route.sim_id) == 0  # nothing sent through it


def test_projection_lag_is_what_the_followed_projections_have_still_to_apply(server, runtime):
    """No projections worker runs here: the sends above wait for it."""
    def lags(samples):
        return {s.labels["projection"]: s.value for s in samples if s.name == "sandesh_projection_lag_events"}

    lag = lags(eventually(server, lambda s: lags(s).get("otps", 0) > 0))
    assert set(lag) == {"messages", "counters", "otps", "audit", "campaigns", "feed"}
    assert lag["messages"] > 0 and lag["otps"] > 0
    follower.catch_up(runtime)
    eventually(server, lambda s: lags(s) == {"messages": 0, "counters": 0, "otps": 0, "audit": 0, "campaigns": 0,
                                             "feed": 0})


def test_a_dispatch_worker_counts_each_sims_submits_and_cms_errors(server, env, sandesh, runtime, route):
    """`sandesh worker dispatch` drives an emulated modem whose first submit is refused with
    +CMS ERROR: 38; the queued messages go out through it."""
    from sandesh.scripts.service.commands import register_emulated
    from sandesh.scripts.service.emulator import Emulator

    sandesh("sim", "disable", route.sim_id)  # a loop:// port: no modem to drive
    with Emulator(sims=1, report_delay=0.05) as emulator:
        register_emulated(runtime, emulator.devices(), "test")
        [emu] = [s["id"] for s in sandesh("sim", "list")["sims"] if s["name"] == "emu-1"]
        emulator.modem("emu-1").fail_next("AT+CMGS", "+CMS ERROR: 38")
        worker = subprocess.Popen([sys.executable, "-m", "sandesh.scripts.service.cli", "worker", "dispatch"],
                                  env={**env, "PYTHONPATH": str(ROOT)}, cwd=ROOT, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True)
        try:
            samples = eventually(server, lambda s: value(s, "sandesh_sim_cms_errors_total", sim=emu) == 1
                                 and value(s, "sandesh_sim_submits_total", sim=emu, outcome="accepted") >= 3
                                 and value(s, "sandesh_sim_parts_used", sim=emu) >= 3)
            assert value(samples, "sandesh_sim_submits_total", sim=emu, outcome="cms_error") == 1
            assert value(samples, "sandesh_sim_state", sim=emu, state="active") == 1
            assert value(samples, "sandesh_sim_state", sim=route.sim_id, state="disabled") == 1
        finally:
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(timeout=30) == 0, worker.stderr.read()
    _, samples = scrape(server)  # the worker ended: what it counted stays
    assert value(samples, "sandesh_sim_cms_errors_total", sim=emu) == 1
    assert value(samples, "sandesh_sim_submits_total", sim=emu, outcome="accepted") >= 3


def test_webhook_attempts_are_counted_by_outcome_with_their_duration(server, env, runtime, receiver):
    """The receiver answers the first attempt 500 (a retry is then due: `waiting`), every other 200."""
    app = runtime.sandesh
    workspace = funded_workspace(app, "Hooks", 10**6, "t")
    client, _, _ = app.operators.create_client(workspace, "Hooks", receiver.url("/metrics-hooks"), 1000, "t")
    receiver.answer("/metrics-hooks", 500, 200)
    request, _ = parse_send({"to": "9779812345690", "text": "hooked"})
    for _ in range(2):
        message = app.history.message(app.sending.send(client.id, workspace, request, 100).id)
        message.fail("no route", at=runtime.clock.now())  # a message.status webhook: failed
        app.log.save(message)
    worker = subprocess.Popen([sys.executable, "-m", "sandesh.scripts.service.cli", "worker", "webhooks"],
                              env={**env, "PYTHONPATH": str(ROOT), "REQUESTS_CA_BUNDLE": str(receiver.ca_file)},
                              cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        receiver.wait("/metrics-hooks", 2, timeout=30)
        samples = eventually(server, lambda s: value(s, "sandesh_webhook_deliveries_total", outcome="waiting") == 1
                             and value(s, "sandesh_webhook_deliveries_total", outcome="delivered") >= 1)
    finally:
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=30) == 0, worker.stderr.read()
    attempts = sum(value(samples, "sandesh_webhook_deliveries_total", outcome=o) for o in ("delivered", "waiting", "dead"))
    assert value(samples, "sandesh_webhook_deliveries_total", outcome="dead") == 0
    assert value(samples, "sandesh_webhook_delivery_duration_seconds_count") == attempts
    assert 0 < value(samples, "sandesh_webhook_delivery_duration_seconds_sum") < 10 * attempts


def test_no_label_value_is_a_message_id_a_number_or_a_path(server, runtime):
    """Labels are bounded: route templates, fixed types, outcomes and states, the operator's SIM ids."""
    with runtime.connection() as conn:
        ids = {r["id"] for r in conn.execute(
            f'SELECT DISTINCT originator_id::text AS id FROM "{runtime.sandesh.log.recorder.events_table_name}"')}
        sims = {r["id"] for r in conn.execute("SELECT id FROM sims")}
        numbers = {r["to"] for r in conn.execute('SELECT DISTINCT "to" FROM messages')}
    assert any(i.startswith("msg_") for i in ids) and numbers  # there are some to find
    _, samples = scrape(server)
    labels = {(name, v) for s in samples for name, v in s.labels.items()}
    assert {v for name, v in labels if name == "sim"} <= sims
    assert {v for name, v in labels if name == "route"} <= TEMPLATES
    for name, v in labels - {("sim", sim) for sim in sims}:
        assert v not in ids and not v.startswith(("msg_", "otp_", "whd_", "cl_", "ws_")), (name, v)
        assert not re.search(r"\d{7,}", v) and not any(number[-8:] in v for number in numbers), (name, v)


def test_metrics_answer_200_while_the_database_is_away(tmp_path):
    """A private PostgreSQL, really stopped: /metrics says the database is down and leaves out
    what it reads from it; the counts of the processes stay."""
    postgres = PrivatePostgres(Path(tempfile.mkdtemp(prefix="sandesh-metrics-pg-")))
    postgres.start()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("SANDESH_")},
           "DATABASE_URL": psycopg.conninfo.make_conninfo(postgres.url, dbname="sandesh_metrics"),
           "SANDESH_SECRET_KEY": SECRET_KEY, "SANDESH_METRICS_DIR": str(tmp_path / "metrics"),
           "PYTHONPATH": str(ROOT)}
    server = None
    try:
        subprocess.run([sys.executable, "-m", "sandesh.scripts.service.cli", "db", "migrate"], env=env, cwd=ROOT, check=True,
                       capture_output=True)
        server = Server(env, workers=2)
        deadline = time.monotonic() + 30
        while server.output().count("ASGI server listening") < 2:  # both workers booted before the stop
            assert time.monotonic() < deadline, server.output()
            time.sleep(0.1)
        _, samples = scrape(server)
        assert value(samples, "sandesh_database_up") == 1
        postgres.stop()
        time.sleep(CACHE_SECONDS)  # what a worker read before the stop is kept this long
        for _ in range(4):  # each worker, whether it noticed the outage yet or not
            _, samples = scrape(server)
            assert value(samples, "sandesh_database_up") == 0
            assert [s.labels for s in samples if s.name == "sandesh_build_info"] == [{"version": VERSION}]
            assert not [s for s in samples if s.name.startswith(("sandesh_queue", "sandesh_sim", "sandesh_projection"))]
            assert value(samples, "sandesh_http_requests_total", route="/metrics", status="200") >= 1  # the first
        postgres.start()
        eventually(server, lambda s: value(s, "sandesh_database_up") == 1, timeout=15)
    finally:
        if server is not None:
            server.stop()
        postgres.remove()
