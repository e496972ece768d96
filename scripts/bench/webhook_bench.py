"""Webhook deliveries per second to a local HTTPS receiver.

    .venv/bin/python -m scripts.bench.webhook_bench [EVENTS] [--concurrency N ...] [--slow N]
        [--slow-receivers K] [--repeat N]

In a scratch database: one client whose webhook URL is the example receiver
(scripts/devtools/example_receiver.py, its own process, verifying every signature) behind a trustme
certificate; EVENTS messages each end `failed`, so each makes one message.status delivery.
For each concurrency a fresh client and fresh events; the figure is from the sender's start
until the last delivery is recorded as delivered (following the log, signing, POSTing over
TLS, recording each attempt as an event).

`--slow N`: the same run again with a second client first, whose receiver takes 10 s to answer
each request and has N deliveries due before the quick client's; the quick client's rate is
compared with the run without it.  `--slow-receivers K`: K such clients, each with its own
receiver and N deliveries due first.
"""
from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import trustme

from .common import ROOT, funded_workspace, scratch_database


def main() -> None:
    from sandesh.workers.webhooks import CONCURRENCY

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("events", nargs="?", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[CONCURRENCY],
                        help=f"sender threads (default: the sender's own, {CONCURRENCY})")
    parser.add_argument("--slow", type=int, default=0, metavar="N",
                        help="also run with N deliveries due first to a receiver that takes 10 s per request")
    parser.add_argument("--slow-receivers", type=int, default=1, metavar="K",
                        help="with --slow: K such receivers, N deliveries due first to each (default 1)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="runs of each case, alternating; the medians are printed after them")
    args = parser.parse_args()
    if args.slow_receivers < 1:
        parser.error("--slow-receivers: at least 1")
    slow_ones = "a receiver" if args.slow_receivers == 1 else f"each of {args.slow_receivers} receivers"
    cost = "the slow receiver costs" if args.slow_receivers == 1 else "the slow receivers cost"
    with tempfile.TemporaryDirectory() as tmp, scratch_database() as env:
        ca = trustme.CA()
        ca.cert_pem.write_to_path(f"{tmp}/ca.pem")
        ca.issue_cert("localhost").private_key_and_cert_chain_pem.write_to_path(f"{tmp}/receiver.pem")
        env = {**env, "SANDESH_WEBHOOK_ALLOW_PRIVATE": "1", "REQUESTS_CA_BUNDLE": f"{tmp}/ca.pem"}
        for concurrency in args.concurrency:
            rates, costs = [], []
            for _ in range(args.repeat):
                alone = run(env, tmp, args.events, concurrency)
                rates.append(args.events / alone[0])
                print(f"concurrency {concurrency:3d}: {args.events} deliveries in {alone[0]:.2f} s = "
                      f"{args.events / alone[0]:,.0f}/s ({alone[1]} not delivered)", flush=True)
                if args.slow:
                    beside = run(env, tmp, args.events, concurrency, slow=args.slow, slow_receivers=args.slow_receivers)
                    costs.append(beside[0] / alone[0] - 1)
                    print(f"concurrency {concurrency:3d}, {args.slow} due first to {slow_ones} taking 10 s: "
                          f"{args.events} deliveries in {beside[0]:.2f} s = {args.events / beside[0]:,.0f}/s "
                          f"({beside[1]} not delivered), {beside[0] / alone[0] - 1:+.1%} time; after every "
                          f"delivery was created: {beside[2]:.2f} s against {alone[2]:.2f} s, "
                          f"{beside[2] / alone[2] - 1:+.1%}", flush=True)
            if args.repeat > 1:
                print(f"concurrency {concurrency:3d}, median of {args.repeat}: {statistics.median(rates):,.0f}/s alone"
                      + (f"; {cost} {statistics.median(costs):+.1%} time" if costs else ""),
                      flush=True)


def _receiver(env: dict[str, str], tmp: str, port: int, secret: str, delay: float = 0.0) -> subprocess.Popen:
    receiver = subprocess.Popen([sys.executable, "scripts/devtools/example_receiver.py", "--port", str(port),
                                 "--cert", f"{tmp}/receiver.pem", "--delay", str(delay)], cwd=ROOT,
                                env={**env, "WEBHOOK_SECRET": secret},
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    receiver.stderr.readline()  # "listening on ..."
    return receiver


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(env: dict[str, str], tmp: str, events: int, concurrency: int, slow: int = 0,
        slow_receivers: int = 1) -> tuple[float, int, float]:
    """Seconds until the last delivery was recorded, how many were not delivered, and the seconds
    from the moment every delivery existed until the last was recorded."""
    from sandesh.domain.sending import parse_send
    from sandesh.domain.settings import Settings
    from sandesh.scripts.service.bootstrap import bootstrap
    from sandesh.workers.webhooks import POOL_SIZE, WebhookSender

    runtime = bootstrap(Settings.from_env(env), pool_size=POOL_SIZE)  # as `sandesh worker webhooks` opens it
    app = runtime.sandesh
    ws = funded_workspace(app, "Bench", 100 * (events + slow * slow_receivers))
    receivers = []
    try:
        request, _ = parse_send({"to": "9779812345678", "text": "bench"})
        clients = []
        for name, count, delay in [(f"Slow {i}", slow, 10.0) for i in range(slow_receivers)] + [("Bench", events, 0.0)]:
            if not count:
                continue
            port = _free_port()
            made, _, secret = app.operators.create_client(ws, name, f"https://localhost:{port}/hooks", 1000, "bench")
            receivers.append(_receiver(env, tmp, port, secret, delay))
            clients.append(made)
            for _ in range(count):
                message = app.sending.send(made.id, ws, request, 100)
                message.fail("bench", at=runtime.clock.now())
                app.log.save(message)
        client = clients[-1]
        sender = WebhookSender(runtime, concurrency=concurrency)
        stop = threading.Event()
        started = time.monotonic()
        thread = threading.Thread(target=sender.run, args=(stop,), daemon=True)
        thread.start()
        created_after = None
        with runtime.connection() as conn:
            while True:
                row = conn.execute("SELECT count(*) AS made, count(*) FILTER (WHERE state = 'delivered') AS done,"
                                   " count(*) FILTER (WHERE state NOT IN ('delivered', 'attempting')) AS other"
                                   " FROM webhook_deliveries WHERE client_id = %s", (client.id,)).fetchone()
                if created_after is None and row["made"] >= events:
                    created_after = time.monotonic() - started
                if row["done"] + row["other"] >= events:
                    break
                time.sleep(0.05)
        seconds = time.monotonic() - started
        print(f"  every delivery created after {created_after:.2f} s; the last recorded after {seconds:.2f} s",
              flush=True)
        stop.set()
        thread.join(timeout=5)
        for receiver in receivers:  # the slow receiver's attempts end now, and are recorded
            receiver.terminate()
        sender.close(wait=True)
        return seconds, row["other"], seconds - created_after
    finally:
        for receiver in receivers:
            receiver.terminate()
            receiver.wait(timeout=5)
        runtime.close()


if __name__ == "__main__":
    os.chdir(ROOT)
    main()
