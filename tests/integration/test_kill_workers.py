"""kill -9 of the projections worker and of the webhook sender at work (docs/reliability.md):
a read model counts every event exactly once, and no webhook delivery is lost."""
import os
import signal
import subprocess
import sys
import threading
import time

import psycopg

from sandesh.domain.sending import parse_send
from sandesh.projections.storage.db import advance_clock
from tests.helpers import funded_workspace
from tests.conftest import ROOT
from tests.receiver import Receiver


def _worker(env, name):
    return subprocess.Popen([sys.executable, "-m", "sandesh.scripts.service.cli", "worker", name], cwd=ROOT,
                            env={**env, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _kill(process):
    os.kill(process.pid, signal.SIGKILL)
    process.wait()


def test_the_projections_worker_killed_three_times_under_load_counts_each_send_exactly_once(runtime, env,
                                                                                             database_url):
    ws = funded_workspace(runtime.sandesh, "Count", 10**8, "t")
    client = runtime.sandesh.operators.create_client(ws, "Count", None, 1000, "t")[0].id
    request, _ = parse_send({"to": "9779841234567", "text": "count me once"})
    sent, stop = [], threading.Event()

    def sending():
        while not stop.is_set():
            sent.append(runtime.sandesh.sending.send(client, ws, request, 100).id)

    thread = threading.Thread(target=sending, daemon=True)
    worker = _worker(env, "projections")
    thread.start()
    try:
        for _ in range(3):
            time.sleep(1.5)
            _kill(worker)  # mid-batch, as likely as not
            worker = _worker(env, "projections")
        stop.set()
        thread.join()
        deadline = time.monotonic() + 30
        while True:
            with psycopg.connect(database_url, autocommit=True) as conn:
                projected = conn.execute("SELECT count(*) FROM messages WHERE client_id = %s", (client,)).fetchone()[0]
                counted = conn.execute("SELECT sent, spent FROM client_counters WHERE client_id = %s",
                                       (client,)).fetchone()
            if projected == len(sent) and counted and counted[0] == len(sent):
                break
            assert time.monotonic() < deadline, (projected, counted, len(sent))
            time.sleep(0.2)
        assert counted == (len(sent), 100 * len(sent)), "every send counted once, none twice"
        print(f"kill -9 of the projections worker: {len(sent)} sends, each projected and counted once")
    finally:
        stop.set()
        if worker.poll() is None:
            _kill(worker)


def test_the_webhook_sender_killed_while_attempts_are_in_flight_loses_no_delivery(runtime, env, tmp_path):
    """A killed sender's leases run out (60 s of the service clock) and the deliveries are tried
    again: each arrives, perhaps twice under one x-service-delivery id, which receivers
    deduplicate (docs/api.md, "Retries")."""
    from tests.integration.test_webhooks import lifecycle

    receiver = Receiver(tmp_path)
    try:
        ws = funded_workspace(runtime.sandesh, "Hooks", 10**8, "t")
        client = runtime.sandesh.operators.create_client(ws, "Hooks", receiver.url("/slow"), 1000, "t")[0].id
        receiver.answer("/slow", ("hang", 1.0, 200))  # attempts are in flight when the kill comes
        messages = []
        for i in range(40):
            request, _ = parse_send({"to": f"97798410{i:05d}", "text": f"hook {i}"})
            messages.append(runtime.sandesh.sending.send(client, ws, request, 100))
            lifecycle(runtime, messages[-1], ("fail", "x"))
        worker_env = {**env, "REQUESTS_CA_BUNDLE": str(receiver.ca_file)}
        sender = _worker(worker_env, "webhooks")
        deadline = time.monotonic() + 20
        while len(receiver.at("/slow")) < 5:
            assert time.monotonic() < deadline, "nothing was attempted"
            time.sleep(0.05)
        _kill(sender)
        killed_with = len({r.headers["x-service-delivery"] for r in receiver.at("/slow")})
        with runtime.connection() as conn:
            advance_clock(conn, 61)  # the dead sender's leases end
        sender = _worker(worker_env, "webhooks")
        try:
            deadline = time.monotonic() + 60
            while True:
                with runtime.connection() as conn:
                    states = conn.execute("SELECT state, count(*) AS n FROM webhook_deliveries WHERE client_id = %s"
                                          " GROUP BY state", (client,)).fetchall()
                if {r["state"]: r["n"] for r in states} == {"delivered": 40}:
                    break
                assert time.monotonic() < deadline, states
                time.sleep(0.2)
        finally:
            _kill(sender)
        ids = {r.headers["x-service-delivery"] for r in receiver.at("/slow")}
        assert len(ids) == 40, "every delivery arrived"
        print(f"kill -9 of the webhook sender: {killed_with} deliveries under way at the kill; all 40 arrived, "
              f"{len(receiver.at('/slow')) - 40} twice under the same delivery id")
    finally:
        receiver.close()
