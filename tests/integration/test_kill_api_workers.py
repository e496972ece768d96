"""kill -9 of API worker processes under load (docs/reliability.md): gunicorn starts new ones;
every send retried with its Idempotency-Key ends as exactly one message, charged once."""
import os
import random
import signal
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import psutil
import psycopg
import pytest
import requests

from tests.conftest import Server

RATE = 100


@pytest.fixture(scope="module", autouse=True)
def a_route(route):
    return route


def test_api_workers_killed_every_1_5_s_lose_nothing_and_charge_nothing_twice(env, sandesh, database_url):
    ws = sandesh("workspace", "create", "--name", "Kill", "--rate", f"transactional={RATE}")["id"]
    sandesh("workspace", "activate", ws)
    sandesh("workspace", "credit", ws, "100000000")
    key = sandesh("client", "create", "--workspace", ws, "--brand", "Kill", "--rate-limit", "100000")["key"]
    server = Server(env, workers=2)
    url = server.url + "/v1/sms/send"
    outcome: dict[str, int] = {}  # Idempotency-Key -> status of its first answer (-1: no answer)
    stop = threading.Event()

    def post(idempotency):
        try:
            return requests.post(url, json={"to": "9779841234567", "text": f"kill {idempotency}"},
                                 headers={"x-api-key": key, "Idempotency-Key": idempotency}, timeout=10).status_code
        except requests.RequestException:
            return -1

    def client(n):
        while not stop.is_set():
            idempotency = f"kill-{n}-{uuid.uuid4().hex[:10]}"
            outcome[idempotency] = post(idempotency)

    kills = 0
    try:
        with ThreadPoolExecutor(8) as pool:
            for n in range(8):
                pool.submit(client, n)
            deadline = time.monotonic() + 12
            while time.monotonic() < deadline:
                time.sleep(1.5)
                workers = psutil.Process(server.process.pid).children()
                if workers:
                    os.kill(random.choice(workers).pid, signal.SIGKILL)
                    kills += 1
            stop.set()
        assert kills >= 7, f"a worker killed every 1.5 s for 12 s, not {kills} times"  # gunicorn started new ones
        assert server.process.poll() is None
        assert set(outcome.values()) <= {202, 503, -1}, set(outcome.values())
        lost = [k for k, status in outcome.items() if status != 202]
        for idempotency in lost:  # as a client does: retry with the same key until it is answered
            for _ in range(20):
                if post(idempotency) == 202:
                    break
                time.sleep(0.2)
            else:
                raise AssertionError(f"{idempotency} was never answered")
        with psycopg.connect(database_url, autocommit=True) as conn:
            stored = conn.execute("SELECT count(*) FROM idempotency_keys WHERE key LIKE 'kill-%'").fetchone()[0]
            balance = conn.execute("SELECT balance FROM workspaces WHERE id = %s", (ws,)).fetchone()[0]
        assert stored == len(outcome), "every send is exactly one message"
        assert balance == 100000000 - RATE * len(outcome), "each charged exactly once"
        print(f"kill -9 of API workers: {kills} kills, {len(outcome)} sends, {len(lost)} unanswered at first "
              f"and retried, {stored} messages, each charged once")
    finally:
        stop.set()
        server.stop()
