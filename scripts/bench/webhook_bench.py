"""Webhook deliveries per second to a local HTTPS receiver.

    .venv/bin/python -m scripts.bench.webhook_bench [EVENTS] [--concurrency N ...]

In a scratch database: one client whose webhook URL is the example receiver
(scripts/example_receiver.py, its own process, verifying every signature) behind a trustme
certificate; EVENTS messages each end `failed`, so each makes one message.status delivery.
For each concurrency a fresh client and fresh events; the figure is from the sender's start
until the last delivery is recorded as delivered (following the log, signing, POSTing over
TLS, recording each attempt as an event).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time

import trustme

from .common import ROOT, funded_workspace, scratch_database


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("events", nargs="?", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, scratch_database() as env:
        ca = trustme.CA()
        ca.cert_pem.write_to_path(f"{tmp}/ca.pem")
        ca.issue_cert("localhost").private_key_and_cert_chain_pem.write_to_path(f"{tmp}/receiver.pem")
        env = {**env, "SANDESH_WEBHOOK_ALLOW_PRIVATE": "1", "REQUESTS_CA_BUNDLE": f"{tmp}/ca.pem"}
        for concurrency in args.concurrency:
            print(run(env, tmp, args.events, concurrency), flush=True)


def run(env: dict[str, str], tmp: str, events: int, concurrency: int) -> str:
    from sandesh.domain.sending import parse_send
    from sandesh.domain.settings import Settings
    from sandesh.scripts.bootstrap import bootstrap
    from sandesh.workers.webhooks import WebhookSender

    from tests.conftest import free_port

    runtime = bootstrap(Settings.from_env(env), pool_size=concurrency + 4)
    port = free_port()
    app = runtime.app
    ws = funded_workspace(app, "Bench", 100 * events)
    client, _, secret = app.create_client(ws, "Bench", f"https://localhost:{port}/hooks", 1000, "bench")
    receiver = subprocess.Popen([sys.executable, "scripts/example_receiver.py", "--port", str(port),
                                 "--cert", f"{tmp}/receiver.pem"], cwd=ROOT, env={**env, "WEBHOOK_SECRET": secret},
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    receiver.stderr.readline()  # "listening on ..."
    try:
        request, _ = parse_send({"to": "9779812345678", "text": "bench"})
        for _ in range(events):
            message = app.send(client.id, ws, request, 100)
            message.fail("bench", at=runtime.clock.now())
            app.save(message)
        sender = WebhookSender(runtime, concurrency=concurrency)
        stop = threading.Event()
        started = time.monotonic()
        thread = threading.Thread(target=sender.run, args=(stop,), daemon=True)
        thread.start()
        with runtime.connection() as conn:
            while True:
                row = conn.execute("SELECT count(*) FILTER (WHERE state = 'delivered') AS done,"
                                   " count(*) FILTER (WHERE state NOT IN ('delivered', 'attempting')) AS other"
                                   " FROM webhook_deliveries WHERE client_id = %s", (client.id,)).fetchone()
                if row["done"] + row["other"] >= events:
                    break
                time.sleep(0.05)
        seconds = time.monotonic() - started
        stop.set()
        thread.join(timeout=5)
        sender.close()
        return (f"concurrency {concurrency:3d}: {events} deliveries in {seconds:.2f} s = {events / seconds:,.0f}/s"
                f" ({row['other']} not delivered)")
    finally:
        receiver.terminate()
        receiver.wait(timeout=5)
        runtime.close()


if __name__ == "__main__":
    os.chdir(ROOT)
    main()
