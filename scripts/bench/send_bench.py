"""Send benchmark, as a user runs the product: POST /v1/sms/send over HTTP (wrk) against
`sandesh serve` with `sandesh worker all` running beside it (the projections worker follows
every send; two emulated modems are registered, as `sandesh up` starts them), and against the
durable baseline (durable_app.py: parse, insert one row, commit, one transaction per request),
in alternating runs on one scratch database (docs/performance.md, "Send benchmark").

Scenarios: (a) one workspace, one client; (b) one workspace, 8 clients; (c) 8 workspaces.  For
each, at each connection count: sends/s of both, their ratio, p50/p99, errors and non-2xx
answers, and the projections' lag when wrk ends (events, and seconds until caught up); the
median of --repeat runs.  Then one long run of (a) at the first connection count, for the lag
at the end of a minute of sends.

Usage: .venv/bin/python -m scripts.bench.send_bench [--seconds 10] [--repeat 3]
       [--connections 32 1000] [--scenario a b c] [--long-seconds 60]
Needs wrk (`apt-get install wrk`).  Uses a scratch database on $SANDESH_TEST_POSTGRES.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Iterator

import requests

from sandesh.domain.settings import Settings
from sandesh.projections import follower
from sandesh.scripts.service.bootstrap import bootstrap

from .common import ROOT, funded_workspace, scratch_database

LUA = Path(__file__).with_name("send.lua")
SANDESH, DURABLE = 18701, 18702
LAG_CAP = 10_000_000


def _wait(url: str, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            requests.get(url, timeout=1)
            return
        except (requests.ConnectionError, requests.Timeout):  # listening, but no worker took it yet
            if process.poll() is not None:
                raise SystemExit(f"server exited: {process.args}")
            time.sleep(0.1)
    raise SystemExit("server did not start")


@contextmanager
def launched(args: list[str], env: dict[str, str], ready: str | None = None) -> Iterator[subprocess.Popen]:
    """A process of ours until the block ends (SIGTERM, then its exit)."""
    process = subprocess.Popen([sys.executable, "-m", *args], env=env, cwd=ROOT, stdin=subprocess.PIPE,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if ready is not None:
            _wait(ready, process)
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


def children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")


@contextmanager
def product(env: dict[str, str], stack: ExitStack) -> Iterator[dict[str, list[int]]]:
    """The product as a user runs it, on this database: two emulated modems registered, `sandesh
    worker all` and `sandesh serve` (no flag), sends accepted; yields the pids of its processes
    by role ("serve" for the API's workers, "projections", "dispatch", "webhooks")."""
    quiet = dict(env)  # the default log level: an access line per request (to /dev/null)
    emulator = stack.enter_context(launched(["sandesh.scripts.service.cli", "emulator", "--sims", "2", "--register"], quiet))
    time.sleep(3)  # the modems registered
    assert emulator.poll() is None, "the emulator did not start"
    workers = stack.enter_context(launched(["sandesh.scripts.service.cli", "worker", "all"], quiet))
    serve = stack.enter_context(launched(["sandesh.scripts.service.cli", "serve", "--bind", f"127.0.0.1:{SANDESH}"], quiet,
                                         f"http://127.0.0.1:{SANDESH}/v1/health"))
    time.sleep(2)  # every process up
    pids = {"serve": children(serve.pid)}
    for pid in children(workers.pid):
        role = cmdline(pid).split("worker ", 1)[-1].split()[0]
        pids[role] = [pid]
    yield pids


def client_keys(env: dict[str, str], workspaces: int, per_workspace: int) -> list[str]:
    """The API keys of `per_workspace` clients in each of `workspaces` well-funded workspaces,
    each with a rate no benchmark reaches."""
    runtime = bootstrap(Settings.from_env(env), pool_size=2)
    keys = []
    for w in range(workspaces):
        ws = funded_workspace(runtime.sandesh, f"Bench {w}", 10**12)
        for c in range(per_workspace):
            keys.append(runtime.sandesh.operators.create_client(ws, f"B{w}.{c}", None, 10**6, "bench")[1])
    runtime.close()
    return keys


def _settle(database_url: str) -> None:
    """Wait until PostgreSQL is idle (no autovacuum after the previous burst), so the next
    run, baseline or not, gets the same machine."""
    import psycopg

    deadline = time.monotonic() + 30
    with psycopg.connect(database_url, autocommit=True) as conn:
        while time.monotonic() < deadline:
            busy = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'"
                                " OR (state = 'active' AND pid <> pg_backend_pid() AND backend_type = 'client backend')"
                                ).fetchone()[0]
            if not busy:
                break
            time.sleep(0.5)
    time.sleep(1)


def wrk(url: str, keys: list[str], seconds: int, connections: int) -> dict[str, float]:
    out = subprocess.run(["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "--timeout", "5s", "-s", str(LUA), url],
                         env={**os.environ, "SANDESH_BENCH_KEYS": ",".join(keys)}, capture_output=True, text=True,
                         check=True).stdout
    fields = dict(re.findall(r"(\w+)=([\d.]+)", out.split("RESULT", 1)[1]))
    requests_done = int(fields["requests"])
    return {"rps": requests_done / (int(fields["duration_us"]) / 1e6), "p50": float(fields["p50_ms"]),
            "p99": float(fields["p99_ms"]), "non2xx": int(fields["non2xx"]), "errors": int(fields["socket_errors"])}


def _lag(runtime: Any) -> tuple[int, float]:
    """The projections' lag now (events), and the seconds until they caught up (at most 120)."""
    table = runtime.sandesh.log.recorder.events_table_name
    with runtime.connection() as conn:
        behind = sum(follower.lags(conn, table, LAG_CAP).values())
    started = time.monotonic()
    left = behind
    while left and time.monotonic() - started < 120:
        time.sleep(0.05)
        with runtime.connection() as conn:
            left = sum(follower.lags(conn, table, LAG_CAP).values())
    return behind, time.monotonic() - started


def accepting(keys: list[str]) -> None:
    """Until a send is accepted: the dispatcher has reported its SIMs (a route)."""
    deadline = time.monotonic() + 30
    while wrk(f"http://127.0.0.1:{SANDESH}", keys, 1, 2)["non2xx"] and time.monotonic() < deadline:
        time.sleep(1)


def _median(runs: list[dict[str, float]]) -> dict[str, float]:
    """The run with the median throughput (its own latencies and lag come with it)."""
    return sorted(runs, key=lambda r: r["rps"])[len(runs) // 2]


def _line(name: str, connections: int, label: str, r: dict[str, float], ratio: str, runs: list[dict[str, float]]) -> str:
    lag = f"{r['lag_events']:>8.0f} {r['lag_seconds']:>6.2f}" if "lag_events" in r else f"{'':>8} {'':>6}"
    return (f"{name:<28} {connections:>5} {label:<8} {r['rps']:>8.0f} {r['p50']:>7.2f} {r['p99']:>7.2f} "
            f"{r['non2xx'] + r['errors']:>8.0f} {ratio:>6} {lag}   runs: " + "/".join(f"{x['rps']:.0f}" for x in runs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=10, help="seconds per run (default 10)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per server, scenario and connection count; "
                                                              "the median is shown (default 3)")
    parser.add_argument("--connections", type=int, nargs="+", default=[32, 1000], metavar="N",
                        help="wrk's open connections (default: 32 1000)")
    parser.add_argument("--scenario", choices=["a", "b", "c"], nargs="+", default=["a", "b", "c"],
                        help="which scenarios to run (default: all three)")
    parser.add_argument("--long-seconds", type=int, default=60,
                        help="the long run of scenario (a), for the projections' lag at its end (0: none)")
    args = parser.parse_args()
    if not shutil.which("wrk"):
        raise SystemExit("the send benchmark needs wrk: apt-get install wrk")
    shapes = {"a": ("(a) 1 workspace, 1 client", 1, 1), "b": ("(b) 1 workspace, 8 clients", 1, 8),
              "c": ("(c) 8 workspaces", 8, 1)}
    with scratch_database() as env, ExitStack() as running:
        scenarios = {shapes[s][0]: client_keys(env, *shapes[s][1:]) for s in args.scenario}
        running.enter_context(product(env, running))
        running.enter_context(launched(["scripts.bench.durable_app", f"127.0.0.1:{DURABLE}"],
                                       {**env, "SANDESH_LOG_LEVEL": "WARNING"}, f"http://127.0.0.1:{DURABLE}/v1/health"))
        runtime = bootstrap(Settings.from_env(env), pool_size=1)
        running.callback(runtime.close)
        accepting(next(iter(scenarios.values())))
        print(f"wrk -t2 -d{args.seconds}s, median of {args.repeat} alternating runs; sandesh serve and sandesh worker "
              f"all as installed (no flag); durable: gthread, {os.cpu_count()} workers x 16 threads, a pool of 16")
        print(f"{'scenario':<28} {'conns':>5} {'server':<8} {'sends/s':>8} {'p50 ms':>7} {'p99 ms':>7} "
              f"{'errors':>8} {'ratio':>6} {'lag ev':>8} {'lag s':>6}")
        for connections in args.connections:
            for name, keys in scenarios.items():
                runs: dict[str, list[dict[str, float]]] = {"durable": [], "sandesh": []}
                for _ in range(args.repeat):  # alternate, so drift and noise hit both alike
                    for label, port in (("durable", DURABLE), ("sandesh", SANDESH)):
                        _settle(env["DATABASE_URL"])
                        run = wrk(f"http://127.0.0.1:{port}", keys, args.seconds, connections)
                        if label == "sandesh":
                            run["lag_events"], run["lag_seconds"] = _lag(runtime)
                        runs[label].append(run)
                base, real = _median(runs["durable"]), _median(runs["sandesh"])
                print(_line(name, connections, "durable", base, "", runs["durable"]), flush=True)
                print(_line(name, connections, "sandesh", real, f"{real['rps'] / base['rps']:.2f}", runs["sandesh"]),
                      flush=True)
        if args.long_seconds:
            name, keys = next(iter(scenarios.items()))
            _settle(env["DATABASE_URL"])
            run = wrk(f"http://127.0.0.1:{SANDESH}", keys, args.long_seconds, args.connections[0])
            run["lag_events"], run["lag_seconds"] = _lag(runtime)
            print(f"long run, {args.long_seconds} s: " + _line(name, args.connections[0], "sandesh", run, "", [run]))


if __name__ == "__main__":
    main()
