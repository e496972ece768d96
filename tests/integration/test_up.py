"""`sandesh up` on a machine without DATABASE_URL: embedded PostgreSQL, demo key, running API."""
import os
import signal
import subprocess
import sys
import time

import orjson
import requests
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import ROOT, free_port


def test_up_starts_an_embedded_database_and_an_api_that_answers_a_new_key(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if k not in {"DATABASE_URL", "SANDESH_SECRET_KEY", "SANDESH_WEBHOOK_ALLOW_PRIVATE"}}
    env["PYTHONPATH"] = str(ROOT)
    port = free_port()
    up = subprocess.Popen([sys.executable, "-m", "sandesh.scripts.service.cli", "up", "--bind", f"127.0.0.1:{port}",
                           "--emulate", "hilink,android"],
                          cwd=tmp_path, env={**env, "SANDESH_WEBHOOK_ALLOW_PRIVATE": "1"},
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        started = orjson.loads(up.stdout.readline())
        assert started["baseUrl"] == f"http://127.0.0.1:{port}/v1"
        assert (tmp_path / "var" / "pg" / "PG_VERSION").exists()
        demo_key = started["demo"]["key"]
        deadline = time.monotonic() + 30
        while True:
            try:
                answer = requests.get(started["baseUrl"] + "/sms/balance", headers={"x-api-key": demo_key}, timeout=2)
                break
            except requests.ConnectionError:
                assert time.monotonic() < deadline and up.poll() is None, up.stderr.read1().decode()
                time.sleep(0.2)
        assert answer.status_code == 200 and answer.json()["balance"]["amount"] == 100000
        # Beside the demo key, the demo owner's link opens the dashboard's set-password page.
        assert started["demo"]["ownerEmail"] == "owner@demo.example"
        link = started["demo"]["setPasswordLink"]
        assert link.startswith(f"http://127.0.0.1:{port}/dashboard/set-password/person_")
        page = requests.get(link, timeout=5)
        assert page.status_code == 200 and "Set your password" in page.text
        # Another terminal in the same folder finds the same database and key through ./var/sandesh.env.
        made = subprocess.run([sys.executable, "-m", "sandesh.scripts.service.cli", "client", "create", "--workspace",
                               started["demo"]["workspaceId"], "--brand", "Mine"], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=60)
        assert made.returncode == 0, made.stderr
        key = orjson.loads(made.stdout)["key"]
        assert requests.get(started["baseUrl"] + "/sms/balance", headers={"x-api-key": key}, timeout=5).status_code == 200
        invited = subprocess.run([sys.executable, "-m", "sandesh.scripts.service.cli", "user", "add", "--email", "dev@demo.example",
                                  "--name", "Dev", "--workspace", started["demo"]["workspaceId"], "--role", "developer"],
                                 cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
        assert invited.returncode == 0, invited.stderr  # its link opens the dashboard `up` serves, on its port
        assert orjson.loads(invited.stdout)["setPasswordLink"].startswith(f"http://127.0.0.1:{port}/dashboard/")
        # ... and the settings `up` runs with: a webhook URL on this machine, allowed for the service, is
        # allowed for the command too, though its own environment does not say so.
        hooked = subprocess.run([sys.executable, "-m", "sandesh.scripts.service.cli", "client", "update",
                                 orjson.loads(made.stdout)["id"], "--webhook-url", "https://localhost:9443/hooks"],
                                cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
        assert hooked.returncode == 0, hooked.stderr
        # GET /metrics sums what the API's workers and `worker all`'s children count (in ./var/metrics)
        deadline = time.monotonic() + 30
        while True:
            text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
            samples = [s for family in text_string_to_metric_families(text) for s in family.samples]
            if any(s.name == "sandesh_sim_submits_total" for s in samples):  # the dispatcher drives the modems
                break
            assert time.monotonic() < deadline, text
            time.sleep(0.5)
        assert sum(s.value for s in samples if s.name == "sandesh_http_requests_total"
                   and s.labels["route"] == "/v1/sms/balance" and s.labels["status"] == "200") == 2
        assert any((tmp_path / "var" / "metrics").glob("counter_*.db"))
        # `--emulate hilink,android`: a HiLink stick and an Android phone beside the modems, in the pool.
        deadline = time.monotonic() + 30
        while True:
            listed = subprocess.run([sys.executable, "-m", "sandesh.scripts.service.cli", "sim", "list"], cwd=tmp_path,
                                    env=env, capture_output=True, text=True, timeout=60)
            states = {s["name"]: s["state"] for s in orjson.loads(listed.stdout)["sims"]}
            if states.get("emu-hilink") == states.get("emu-android") == "active":
                break
            assert time.monotonic() < deadline, states
            time.sleep(0.5)
    finally:
        up.send_signal(signal.SIGINT)
        assert up.wait(timeout=30) == 0
    assert not (tmp_path / "var" / "pg" / "postmaster.pid").exists(), "the embedded server stops with `up`"
