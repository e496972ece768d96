"""Helpers for benchmarks: a throwaway database on the local server, percentiles."""
from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import psycopg
from psycopg.conninfo import make_conninfo

ROOT = Path(__file__).resolve().parents[2]
SERVER = os.environ.get("SANDESH_TEST_POSTGRES", "postgresql://root@127.0.0.1:5432/postgres")
SECRET_KEY = "bench-secret-key-0123456789abcdef0123456789"


def bench_env(database_url: str) -> dict[str, str]:
    """The environment to run Sandesh in on a benchmark's database."""
    return {**os.environ, "DATABASE_URL": database_url, "SANDESH_SECRET_KEY": SECRET_KEY, "PYTHONPATH": str(ROOT)}


@contextmanager
def scratch_database(keep: bool = False) -> Iterator[dict[str, str]]:
    """A migrated database for one benchmark run; yields the environment to run Sandesh in.
    Dropped afterwards, unless `keep`: then its address is written to stderr."""
    name = f"sandesh_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(SERVER, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    env = bench_env(make_conninfo(SERVER, dbname=name))
    try:
        subprocess.run([sys.executable, "-m", "sandesh.scripts.service.cli", "db", "migrate"], env=env, check=True,
                       capture_output=True)
        yield env
    finally:
        if keep:
            sys.stderr.write(f"kept the database: {env['DATABASE_URL']}\n")
        else:
            with psycopg.connect(SERVER, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def funded_workspace(app: Any, name: str, amount: int, actor: str = "bench", rates: dict[str, int] | None = None) -> str:
    """An active workspace with `amount` paisa of balance, made through the operator use cases."""
    workspace = app.operators.create_workspace(name, None, rates or {}, actor)
    app.operators.activate_workspace(workspace.id, actor)
    if amount:
        app.operators.credit_workspace(workspace.id, amount, None, actor)
    return workspace.id


def bench_clients(app: Any, name: str, workspaces: int, per_workspace: int) -> list[tuple[str, str]]:
    """(client id, workspace id) of `per_workspace` clients in each of `workspaces` well-funded
    workspaces, made through the operator use cases."""
    made = []
    for w in range(workspaces):
        workspace = funded_workspace(app, f"{name} {w}", 10**12, "bench")
        for c in range(per_workspace):
            client, _, _ = app.operators.create_client(workspace, f"{name} {w}.{c}", None, 10_000, "bench")
            made.append((client.id, workspace))
    return made


@contextmanager
def reported_route(runtime: Any) -> Iterator[str]:
    """A SIM that stays a route for the whole run: registered, and reported healthy every few
    seconds with the dispatcher's heartbeat function, as a running dispatcher would.  Nothing
    drives its modem, so what is sent stays queued."""
    from sandesh.projections import sim_health
    from sandesh.workers.dispatcher import heartbeat_seconds

    sim = runtime.sandesh.sims.add_sim(f"bench-{uuid.uuid4().hex[:6]}", "loop://", 115200, None, "bench")
    stop = threading.Event()

    def report() -> None:
        with runtime.connection() as conn:
            sim_health.record(conn, sim.id, healthy=True, registered=True, signal_dbm=-73, last_error=None,
                              dispatcher="bench", at=runtime.clock.now())

    def keep_reporting() -> None:
        while not stop.wait(heartbeat_seconds(runtime.settings.route_window)):
            report()

    report()
    reporter = threading.Thread(target=keep_reporting, name="bench heartbeat", daemon=True)
    reporter.start()
    try:
        yield sim.id
    finally:
        stop.set()
        reporter.join()


def send_environ(key: str, body: bytes) -> dict[str, Any]:
    """The WSGI environ of one POST /v1/sms/send with this key and JSON body (in-process benches)."""
    return {"REQUEST_METHOD": "POST", "PATH_INFO": "/v1/sms/send", "QUERY_STRING": "", "SERVER_NAME": "bench",
            "SERVER_PORT": "80", "SERVER_PROTOCOL": "HTTP/1.1", "wsgi.url_scheme": "http",
            "wsgi.input": io.BytesIO(body), "wsgi.errors": sys.stderr, "CONTENT_LENGTH": str(len(body)),
            "CONTENT_TYPE": "application/json", "HTTP_X_API_KEY": key}


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def stop(*processes: Any) -> None:
    """Ends the product's processes a bench started, as systemd stops them (SIGTERM)."""
    for process in processes:
        process.terminate()
        process.wait(timeout=20)


def latencies_ms(values: list[float]) -> dict[str, float]:
    """Count, p50, p95 and max of latencies in milliseconds, as the benches print them."""
    return {"count": len(values), "p50": round(percentile(values, 50), 1), "p95": round(percentile(values, 95), 1),
            "max": round(max(values), 1)}


def timed_load(request: Callable[[Any, int], int], seconds: float, threads: int,
               rate: float | None = None) -> dict:
    """`request(session, n)` (n counts the requests from 0; it returns the answer's status) from
    `threads` threads for `seconds`: at `rate` a second, each at its time whatever the others'
    answers (the threads take turns), or, without a rate, each thread again as soon as its last
    was answered.  Their latencies and statuses."""
    import itertools
    import time
    from collections import Counter

    import requests

    numbers = itertools.count()
    latencies: list[float] = []
    statuses: Counter[int] = Counter()
    lock = threading.Lock()
    begin = time.monotonic()
    stop = begin + seconds

    def run(k: int) -> None:
        http = requests.Session()
        for turn in itertools.count():
            if rate is not None:
                due = begin + (turn * threads + k) / rate
                if due >= stop:
                    break
                time.sleep(max(0.0, due - time.monotonic()))
            elif time.monotonic() >= stop:
                break
            started = time.perf_counter()
            status = request(http, next(numbers))
            took = time.perf_counter() - started
            with lock:
                statuses[status] += 1
                latencies.append(took)

    running = [threading.Thread(target=run, args=(k,)) for k in range(threads)]
    for thread in running:
        thread.start()
    for thread in running:
        thread.join()
    return {"latencies": latencies, "statuses": dict(statuses)}


def summary(name: str, result: dict) -> str:
    """A line of a timed load's figures: how many answers, their p50 and p99, their statuses."""
    latencies = result["latencies"]
    return (f"{name:<34} {len(latencies):>7} {percentile(latencies, 50) * 1000:>8.1f} "
            f"{percentile(latencies, 99) * 1000:>8.1f}   statuses {result['statuses']}")
