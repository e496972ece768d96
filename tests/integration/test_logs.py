"""SANDESH_LOG_FORMAT=json: one JSON object per line, with the ids the line is about, and never
a key, secret, code or text."""
from __future__ import annotations

import logging
import subprocess
import sys
import time

import orjson
import pytest

from sandesh.domain import log_context
from sandesh.domain.sending import parse_send
from tests.helpers import funded_workspace
from sandesh.scripts.service.logs import JsonFormatter
from tests.conftest import ROOT


def test_the_webhook_worker_logs_json_lines_naming_the_client_and_nothing_secret(runtime, env, receiver, tmp_path):
    app = runtime.sandesh
    workspace = funded_workspace(app, "Logs", 10**6, "t")
    client, key, secret = app.operators.create_client(workspace, "Logs", receiver.url("/logs"), 1000, "t")
    text = "Log-me-not order 7731"
    request, _ = parse_send({"to": "9779812345678", "text": text})
    message = app.sending.send(client.id, workspace, request, 100)
    now = runtime.clock.now()
    m = app.history.message(message.id)
    m.submit("sim_logs", at=now)
    m.part_accepted(1, 9, at=now)
    app.log.save(m)
    stderr = tmp_path / "worker.log"
    with open(stderr, "w") as sink:
        worker = subprocess.Popen(
            [sys.executable, "-m", "sandesh.scripts.service.cli", "worker", "webhooks"], cwd=ROOT, stderr=sink,
            env={**env, "SANDESH_LOG_FORMAT": "json", "SANDESH_WEBHOOK_ALLOW_PRIVATE": "1",
                 "REQUESTS_CA_BUNDLE": str(receiver.ca_file)})
        try:
            receiver.wait("/logs", 1, timeout=30)
            deadline = time.monotonic() + 10
            while "attempt 1" not in stderr.read_text() and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            worker.terminate()
            worker.wait(10)
    lines = [orjson.loads(line) for line in stderr.read_text().splitlines() if line.strip()]
    assert lines and all({"time", "level", "logger", "message"} <= set(line) for line in lines)
    assert all(line["time"].endswith("Z") for line in lines)
    [attempt] = [line for line in lines if "attempt 1" in line["message"]]
    assert (attempt["level"], attempt["logger"], attempt["clientId"]) == ("INFO", "sandesh.worker.webhooks", client.id)
    raw = stderr.read_text()
    for never in (key, secret, text):
        assert never not in raw


def test_the_formatter_takes_ids_from_the_context_and_from_extra():
    record = logging.LogRecord("sandesh.dispatch", logging.WARNING, __file__, 1, "CMS %d", (38,), None)
    log_context.clear()
    with log_context.bound(sim_id="sim_1", message_id="msg_1"):
        line = orjson.loads(JsonFormatter().format(record))
    assert {k: line[k] for k in ("level", "logger", "message", "simId", "messageId")} == {
        "level": "WARNING", "logger": "sandesh.dispatch", "message": "CMS 38", "simId": "sim_1", "messageId": "msg_1"}
    assert "requestId" not in line  # only what the line is about
    record.client_id = "cl_9"
    assert orjson.loads(JsonFormatter().format(record))["clientId"] == "cl_9"
    with pytest.raises(AssertionError):
        log_context.set_fields(text="never a text")


def test_sandesh_serve_writes_only_json_lines_and_one_access_line_per_request(env, active_client):
    """Every line on a real `sandesh serve`'s stdout and stderr, gunicorn's own included, is one
    JSON object; each request writes one access line naming its route template (never the path's
    values, the query string or a key), status, time, size and ids."""
    import requests

    from tests.conftest import Server

    served = Server({**env, "SANDESH_LOG_FORMAT": "json"})
    key = active_client["key"]
    sent = {
        "balance": requests.get(served.url + "/v1/sms/balance?secret=hush-7731", timeout=5,
                                headers={"x-api-key": key, "x-request-id": "log-balance"}),
        "lookup": requests.get(served.url + "/v1/sms/messages/msg_unknown4411", timeout=5,
                               headers={"x-api-key": key, "x-request-id": "log-lookup"}),
        "bad body": requests.post(served.url + "/v1/sms/send", data=b"{not json", timeout=5,
                                  headers={"x-api-key": key, "x-request-id": "log-bad",
                                           "content-type": "application/json"}),
        "no key": requests.get(served.url + "/v1/sms/balance", timeout=5, headers={"x-request-id": "log-nokey"}),
        "nowhere": requests.get(served.url + "/v1/nowhere/9779812345678", timeout=5,
                                headers={"x-request-id": "log-404"}),
    }
    assert [r.status_code for r in sent.values()] == [200, 404, 400, 401, 404]
    served.stop()  # its shutdown lines are checked too
    raw = open(served.log.name).read()
    lines = [orjson.loads(line) for line in raw.splitlines() if line.strip()]  # raises on a line that is not JSON
    assert all({"time", "level", "logger", "message"} <= set(line) for line in lines)
    assert any(line["logger"] == "gunicorn.error" and "Booting worker" in line["message"] for line in lines)
    access = {line["requestId"]: line for line in lines if line["logger"] == "sandesh.access"}
    assert len([line for line in lines if line["logger"] == "sandesh.access"]) == len(access)  # one per request
    balance = access["log-balance"]
    assert (balance["method"], balance["route"], balance["status"]) == ("GET", "/v1/sms/balance", 200)
    assert balance["clientId"] == active_client["client"] and balance["workspaceId"] == active_client["workspace"]
    assert balance["bytes"] > 0 and 0 < balance["ms"] < 5000
    assert (access["log-lookup"]["route"], access["log-lookup"]["status"]) == ("/v1/sms/messages/{message_id}", 404)
    assert (access["log-bad"]["route"], access["log-bad"]["status"]) == ("/v1/sms/send", 400)
    assert access["log-nokey"]["status"] == 401 and "clientId" not in access["log-nokey"]
    assert access["log-404"]["route"] == "unmatched"
    for never in (key, "hush-7731", "msg_unknown4411", "9779812345678"):
        assert never not in raw
