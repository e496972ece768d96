"""The API while the database is away (docs/reliability.md): every request answers 503 in the
error shape with Retry-After within 2 s, never a 500 and never a hang; within 5 s of the
database's return every worker process answers again; nothing accepted is lost and nothing is
charged twice.  A private PostgreSQL server, really stopped and started; a real `sandesh serve`."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest
import requests

from sandesh.domain.release import VERSION
from tests.conftest import ROOT, SECRET_KEY, Sandesh, Server

RATE = 100  # paisa per segment




@pytest.fixture(scope="module")
def env(postgres, tmp_path_factory):
    url = psycopg.conninfo.make_conninfo(postgres.url, dbname="sandesh_outage")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("SANDESH_")},
           "DATABASE_URL": url, "SANDESH_SECRET_KEY": SECRET_KEY, "SANDESH_CLOCK": "test",
           "SANDESH_WEBHOOK_ALLOW_PRIVATE": "1", "USER": "tester", "PYTHONPATH": str(ROOT),
           "SANDESH_METRICS_DIR": str(tmp_path_factory.mktemp("metrics"))}
    subprocess.run([sys.executable, "-m", "sandesh.scripts.service.cli", "db", "migrate"], env=env, cwd=ROOT, check=True,
                   capture_output=True)
    return env


class Heartbeat:
    """A SIM reported healthy every second, as a dispatcher would; it waits out the outage."""

    def __init__(self, env):
        from sandesh.domain.settings import Settings
        from sandesh.scripts.service.bootstrap import bootstrap

        self.runtime = bootstrap(Settings.from_env(env), pool_size=1)
        self.sim = self.runtime.sandesh.sims.add_sim("outage-1", "loop://", 115200, None, "test").id
        self.stop = threading.Event()
        self.beat()
        threading.Thread(target=self._run, daemon=True).start()

    def beat(self):
        from sandesh.projections import sim_health

        with self.runtime.connection() as conn:
            sim_health.record(conn, self.sim, healthy=True, registered=True, signal_dbm=-70, last_error=None,
                              dispatcher="test", at=self.runtime.clock.now())

    def _run(self):
        while not self.stop.wait(1.0):
            try:
                self.beat()
            except Exception:  # the database is away: try again in a second
                pass

    def close(self):
        self.stop.set()
        self.runtime.close()


def test_an_outage_is_503_with_retry_after_then_every_worker_recovers_and_nothing_is_charged_twice(
        postgres, env, tmp_path):
    sandesh = Sandesh(env, tmp_path)
    ws = sandesh("workspace", "create", "--name", "Outage", "--rate", f"transactional={RATE}")["id"]
    sandesh("workspace", "activate", ws)
    sandesh("workspace", "credit", ws, "10000000")
    key = sandesh("client", "create", "--workspace", ws, "--brand", "Outage", "--rate-limit", "10000")["key"]
    heartbeat = Heartbeat(env)
    server = Server(env, workers=2)
    url = server.url + "/v1/sms/send"
    answers: list[tuple[str, int, dict, dict, float, float]] = []  # key, status, body, headers, seconds, started
    stop = threading.Event()

    def client(n):
        while not stop.is_set():
            idempotency = f"outage-{n}-{uuid.uuid4().hex[:8]}"
            started = time.monotonic()
            try:
                answer = requests.post(url, json={"to": "9779841234567", "text": f"order {idempotency}"},
                                       headers={"x-api-key": key, "Idempotency-Key": idempotency}, timeout=10)
            except requests.RequestException as error:
                answers.append((idempotency, -1, {"error": str(error)}, {}, time.monotonic() - started, started))
                continue
            answers.append((idempotency, answer.status_code, answer.json(), {k.lower(): v for k, v in answer.headers.items()},
                            time.monotonic() - started, started))
            time.sleep(0.02)

    try:
        with ThreadPoolExecutor(6) as pool:
            for n in range(6):
                pool.submit(client, n)
            time.sleep(1.5)
            postgres.stop("fast")
            stopped_at = time.monotonic()
            time.sleep(3)
            # the probes (api/health.py): the process is alive, and not ready, saying why, at once
            probe_started = time.monotonic()
            alive = requests.get(server.url + "/v1/health", timeout=10)
            ready = requests.get(server.url + "/v1/ready", timeout=10)
            probe_seconds = time.monotonic() - probe_started
            time.sleep(max(0.0, 6 - (time.monotonic() - stopped_at)))
            postgres.start()
            back_at = time.monotonic()
            time.sleep(7)
            stop.set()
        assert (alive.status_code, alive.json()) == (200, {"status": "ok", "version": VERSION})
        assert (ready.status_code, ready.headers.get("retry-after")) == (503, "2")
        assert ready.json()["ready"] is False and ready.json()["reasons"] == ["the database cannot be reached"]
        assert ready.json()["checks"]["database"] == "unreachable" and probe_seconds <= 4.0, probe_seconds
        assert requests.get(server.url + "/v1/ready", timeout=10).json()["checks"]["database"] == "ok"
        statuses = {a[1] for a in answers}
        assert statuses <= {202, 503}, [a for a in answers if a[1] not in (202, 503)][:3]
        during = [a for a in answers if a[1] == 503]
        assert during, "the outage was seen"
        outage = {"error": "The service cannot reach its database right now. Retry with the same Idempotency-Key.",
                  "code": "unavailable"}
        for _, _, body, headers, seconds, _ in during:
            assert body == outage and headers.get("retry-after") == "2", (body, headers)
            assert seconds <= 2.0, seconds
        assert max(a[4] for a in answers) <= 2.0, "no request hung"
        # within 5 s of the database's return every process answers again: no 503 after that
        late = [a for a in answers if a[5] > back_at + 5 and a[1] != 202]
        assert not late, late[:3]
        assert any(a[5] > back_at + 5 for a in answers)
        # new connections land on either worker process: every one answers
        fresh = {requests.post(url, json={"to": "9779841234567", "text": "which worker?"},
                               headers={"x-api-key": key, "Connection": "close"}, timeout=5).status_code
                 for _ in range(20)}
        assert fresh == {202}

        # Retried with their keys, every request ends as exactly one message, charged once.
        keys = {a[0] for a in answers}
        for idempotency in {a[0] for a in answers if a[1] != 202}:
            again = requests.post(url, json={"to": "9779841234567", "text": f"order {idempotency}"},
                                  headers={"x-api-key": key, "Idempotency-Key": idempotency}, timeout=10)
            assert again.status_code == 202, again.text
        with psycopg.connect(env["DATABASE_URL"], autocommit=True) as conn:
            stored = conn.execute("SELECT count(*) FROM idempotency_keys WHERE key LIKE 'outage-%'").fetchone()[0]
            balance = conn.execute("SELECT balance FROM workspaces WHERE id = %s", (ws,)).fetchone()[0]
            queued = conn.execute("SELECT count(*) FROM dispatch_queue").fetchone()[0]
        assert stored == len(keys), "every request that was retried with its key is one message"
        assert queued == len(keys) + 20
        assert balance == 10000000 - RATE * (len(keys) + 20), "each charged exactly once"
        recovered = min((a[5] + a[4] for a in answers if a[5] > back_at and a[1] == 202), default=None)
        print(f"outage: {len(answers)} requests, {len(during)} answered 503 (slowest {max(a[4] for a in during):.2f} s);"
              f" database away {back_at - stopped_at:.1f} s; first 202 {recovered - back_at:.2f} s after its return")
    finally:
        stop.set()
        server.stop()
        heartbeat.close()


def test_workers_ride_out_an_outage_and_an_otp_after_it_reaches_the_phone(postgres, env, tmp_path):
    """Every worker loop survives the database going away (no process exits): afterwards a code
    is sent through the emulated modem and the counters catch up."""
    from sandesh.scripts.service.emulator import Emulator

    sandesh = Sandesh(env, tmp_path)
    ws = sandesh("workspace", "create", "--name", "Ride out")["id"]
    sandesh("workspace", "activate", ws)
    sandesh("workspace", "credit", ws, "100000")
    client = sandesh("client", "create", "--workspace", ws, "--brand", "Ride", "--rate-limit", "1000")
    if any(s["name"] == "outage-1" for s in sandesh("sim", "list")["sims"]):
        sandesh("sim", "disable", "outage-1")  # the previous test's stand-in SIM: only the modem is a route
    with Emulator(sims=1, report_delay=0.05, first=61) as emulator:
        [(name, device)] = emulator.devices()
        sandesh("sim", "add", "--name", name, "--port", device)
        log = open(tmp_path / "workers.log", "w+")
        workers = subprocess.Popen([sys.executable, "-m", "sandesh.scripts.service.cli", "worker", "all"], env=env, cwd=ROOT,
                                   stdout=log, stderr=subprocess.STDOUT)
        server = Server(env, workers=1)
        try:
            headers = {"x-api-key": client["key"]}
            deadline = time.monotonic() + 20
            while requests.post(server.url + "/v1/sms/otp/send", json={"to": "9779841000061", "purpose": "before"},
                                headers=headers, timeout=5).status_code != 202:
                assert time.monotonic() < deadline, "no route before the outage"
                time.sleep(0.2)
            # every worker runs before the outage: the code reached the phone and was counted
            while requests.get(server.url + "/v1/sms/balance", headers=headers,
                               timeout=5).json()["counters"]["otpSent"] < 1 \
                    or not any(m["to"] == "9779841000061" for m in emulator.modems[0].sent):
                assert time.monotonic() < deadline, "the workers did not start"
                time.sleep(0.2)
            postgres.stop("fast")
            time.sleep(5)
            postgres.start()
            back_at = time.monotonic()
            while True:
                answer = requests.post(server.url + "/v1/sms/otp/send", json={"to": "9779841000062", "purpose": "after"},
                                       headers=headers, timeout=5)
                if answer.status_code == 202:
                    break
                assert answer.status_code == 503 and time.monotonic() < back_at + 15, answer.text
                time.sleep(0.2)
            while not any(m["to"] == "9779841000062" for m in emulator.modems[0].sent):
                assert time.monotonic() < back_at + 20, "the code never reached the phone"
                time.sleep(0.1)
            reached = time.monotonic() - back_at
            while requests.get(server.url + "/v1/sms/balance", headers=headers,
                               timeout=5).json()["counters"]["otpSent"] < 2:
                assert time.monotonic() < back_at + 25, "the counters stopped"
                time.sleep(0.2)
            assert workers.poll() is None
            log.seek(0)
            output = log.read()
            assert "Traceback" not in output, output[-3000:]
            assert "restarted" not in output, "no worker had to be restarted"
            assert "database unavailable" in output and "database reachable again" in output, output
            print(f"workers: a code sent after the outage reached the phone {reached:.1f} s after the database returned")
        finally:
            server.stop()
            workers.terminate()
            workers.wait(timeout=30)
            log.close()
