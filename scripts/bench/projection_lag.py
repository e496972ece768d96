"""How far the followed read models trail the log while sends arrive.

    .venv/bin/python -m scripts.bench.projection_lag [--rate 500] [--seconds 30]

`sandesh worker projections` runs as a user starts it (a subprocess); the figures start once it
follows the log (one send has reached the read model).  This process sends
`--rate` messages per second for `--seconds` through the application with the API's group
commit, from 16 threads (as gunicorn's threads would), to 8 clients of 2 workspaces.  One send
in ten is watched: the time its append returned, and the time its row appeared in `messages`
(the followed read model GET /v1/sms/messages/:id reads), polled every 2 ms.  The lag is the
difference; the figures are its p50, p99 and maximum, and the send rate reached.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import threading
import time

import orjson
import psycopg

from sandesh.domain.sending import parse_send
from sandesh.domain.settings import Settings
from sandesh.scripts.service.bootstrap import bootstrap

from .common import ROOT, bench_clients, percentile, scratch_database

THREADS = 16
WATCH_EVERY = 10
POLL_SECONDS = 0.002


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=int, default=500, help="sends per second (default 500)")
    parser.add_argument("--seconds", type=float, default=30.0, help="how long to send (default 30)")
    args = parser.parse_args()
    with scratch_database() as env:
        runtime = bootstrap(Settings.from_env(env), pool_size=THREADS, group_commit=True)
        worker = subprocess.Popen([sys.executable, "-m", "sandesh.scripts.service.cli", "worker", "projections"], env=env,
                                  cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            print(orjson.dumps(measure(runtime, env["DATABASE_URL"], args.rate, args.seconds)).decode())
        finally:
            worker.terminate()
            worker.wait(10)
            runtime.close()


def warm_up(app, database_url: str, client: tuple[str, str], request) -> None:
    """Wait until the worker has started and follows the log: one send reaches `messages`."""
    message = app.sending.send(client[0], client[1], request, 100)
    deadline = time.monotonic() + 30
    with psycopg.connect(database_url, autocommit=True) as conn:
        while not conn.execute("SELECT 1 FROM messages WHERE id = %s", (message.id,)).fetchone():
            if time.monotonic() > deadline:
                raise SystemExit("`sandesh worker projections` did not start within 30 s")
            time.sleep(0.05)


def measure(runtime, database_url: str, rate: int, seconds: float) -> dict:
    app = runtime.sandesh
    clients = bench_clients(app, "Lag", 2, 4)
    request, _ = parse_send({"to": "9779812345678", "text": "Your order has shipped and arrives tomorrow."})
    warm_up(app, database_url, clients[0], request)
    watched: dict[str, float] = {}   # message id -> when its append returned
    seen: dict[str, float] = {}      # message id -> when its row was first read
    lock = threading.Lock()
    sent = [0]
    started = time.monotonic()
    stop_at = started + seconds

    def sender(index: int) -> None:
        n = index
        while True:
            due = started + n / rate  # each thread takes every THREADS-th slot of the schedule
            now = time.monotonic()
            if due >= stop_at:
                return
            if due > now:
                time.sleep(due - now)
            client_id, workspace_id = clients[n % len(clients)]
            message = app.sending.send(client_id, workspace_id, request, 100)
            done = time.monotonic()
            with lock:
                sent[0] += 1
                if n % WATCH_EVERY == 0:
                    watched[message.id] = done
            n += THREADS

    def watcher(stop: threading.Event) -> None:
        with psycopg.connect(database_url, autocommit=True) as conn:
            query = "SELECT id FROM messages WHERE id = ANY(%s)"
            while not stop.is_set():
                with lock:
                    pending = [m for m in watched if m not in seen]
                if pending:
                    found = conn.execute(query, (pending,), prepare=True).fetchall()
                    now = time.monotonic()
                    with lock:
                        for (message_id,) in found:
                            seen[message_id] = now
                time.sleep(POLL_SECONDS)

    stop = threading.Event()
    watching = threading.Thread(target=watcher, args=(stop,))
    watching.start()
    threads = [threading.Thread(target=sender, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - started
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with lock:
            if len(seen) == len(watched):
                break
        time.sleep(0.05)
    stop.set()
    watching.join()
    lags = sorted((seen[m] - watched[m]) * 1000 for m in watched if m in seen)
    if not lags:
        raise SystemExit("no watched send reached the read model: is `sandesh worker projections` running?")
    return {"targetRate": rate, "sendsPerSecond": round(sent[0] / elapsed), "sends": sent[0],
            "watched": len(watched), "neverSeen": len(watched) - len(lags),
            "lagMs": {"p50": round(percentile(lags, 50), 1), "p99": round(percentile(lags, 99), 1),
                      "max": round(lags[-1], 1)}}


if __name__ == "__main__":
    main()
