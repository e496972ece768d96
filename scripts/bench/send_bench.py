"""Send benchmark: POST /v1/sms/send over HTTP with many connections (wrk), against
`sandesh serve` and, in the same run, a bare Falcon app that parses the same JSON and answers
202 under the same gunicorn settings (scripts/serve.options).

As installed (the default): `sandesh serve --bind ...` with no other flag, exactly as the README
starts it, and the bare app under the settings `sandesh serve` picked.  `--tuned` passes
`--workers 2 --threads 16 --worker-connections connections/2` to both (the earlier figures);
`--workers N` passes only that, to compare a worker count
(docs/performance.md, "One API worker, measured (ninth session)").
Scenarios: (a) one workspace, one client; (b) one workspace, 8 clients; (c) 8 workspaces.
Usage: .venv/bin/python -m sandesh.scripts.bench.send_bench [--seconds 6] [--repeat 3] [--connections 32]
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
from contextlib import contextmanager
from pathlib import Path
from typing import ContextManager, Iterator

import requests

from sandesh.domain.settings import Settings
from sandesh.scripts.bootstrap import bootstrap

from sandesh.scripts.serve import options

from .common import ROOT, funded_workspace, reported_route, scratch_database

LUA = Path(__file__).with_name("send.lua")


def _wait(url: str, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            requests.get(url, timeout=1)
            return
        except requests.ConnectionError:
            if process.poll() is not None:
                raise SystemExit(f"server exited: {process.args}")
            time.sleep(0.1)
    raise SystemExit("server did not start")


@contextmanager
def _serving(module: str, env: dict[str, str], port: int, ready: str) -> Iterator[list[int]]:
    """A gunicorn server (`python -m module ...`) until the block ends; yields its workers' pids."""
    server = subprocess.Popen([sys.executable, "-m", *module.split(), f"127.0.0.1:{port}"], env=env, cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait(f"http://127.0.0.1:{port}{ready}", server)
        time.sleep(2)  # every worker up
        yield [int(pid) for pid in Path(f"/proc/{server.pid}/task/{server.pid}/children").read_text().split()]
    finally:
        server.terminate()
        server.wait(timeout=20)


def served(env: dict[str, str], port: int) -> ContextManager[list[int]]:
    """`sandesh serve` as a user starts it (no flag) on a scratch database; yields its workers' pids."""
    return _serving("sandesh.scripts.cli serve --bind", {**env, "SANDESH_LOG_LEVEL": "WARNING"}, port, "/v1/health")


def served_bare(env: dict[str, str], port: int) -> ContextManager[list[int]]:
    """The bare baseline app (bare_app.py) under the same gunicorn settings; yields its workers' pids."""
    return _serving("sandesh.scripts.bench.bare_app", env, port, "/")


def wrk_sends(port: int, keys: list[str], connections: int, seconds: int) -> subprocess.Popen:
    """wrk posting sends with these keys (send.lua) in the background; its output on stdout."""
    return subprocess.Popen(["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "-s", str(LUA),
                             f"http://127.0.0.1:{port}"], env={**os.environ, "SANDESH_BENCH_KEYS": ",".join(keys)},
                            stdout=subprocess.PIPE, text=True)


def _clients(env: dict[str, str], workspaces: int, per_workspace: int) -> list[str]:
    runtime = bootstrap(Settings.from_env(env), pool_size=2)
    keys = []
    for w in range(workspaces):
        ws = funded_workspace(runtime.app, f"Bench {w}", 10**12)
        for c in range(per_workspace):
            keys.append(runtime.app.create_client(ws, f"B{w}.{c}", None, 10**6, "bench")[1])
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


def _wrk(url: str, keys: list[str], seconds: int, connections: int) -> dict[str, float]:
    out = subprocess.run(["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "--timeout", "5s", "-s", str(LUA), url],
                         env={**os.environ, "SANDESH_BENCH_KEYS": ",".join(keys)}, capture_output=True, text=True,
                         check=True).stdout
    fields = dict(re.findall(r"(\w+)=([\d.]+)", out.split("RESULT", 1)[1]))
    requests_done = int(fields["requests"])
    return {"rps": requests_done / (int(fields["duration_us"]) / 1e6), "p50": float(fields["p50_ms"]),
            "p99": float(fields["p99_ms"]), "non2xx": int(fields["non2xx"]), "errors": int(fields["socket_errors"])}


def _median(runs: list[dict[str, float]]) -> dict[str, float]:
    """The run with the median throughput (its own latencies come with it)."""
    return sorted(runs, key=lambda r: r["rps"])[len(runs) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=6)
    parser.add_argument("--repeat", type=int, default=3, help="runs per server and scenario; the median is shown")
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--scenario", choices=["a", "b", "c"], nargs="+", default=["a", "b", "c"],
                        help="which scenarios to run (default: all three)")
    not_installed = parser.add_mutually_exclusive_group()
    not_installed.add_argument("--tuned", action="store_true",
                               help="--workers 2 --threads 16 --worker-connections connections/2 for both servers, "
                                    "instead of what `sandesh serve` picks by itself")
    not_installed.add_argument("--workers", type=int, metavar="N",
                               help="--workers N for both servers, the rest as installed (to compare worker counts)")
    args = parser.parse_args()
    if args.workers is not None and args.workers < 1:
        parser.error("--workers: at least 1")
    if not shutil.which("wrk"):
        raise SystemExit("the send benchmark needs wrk: apt-get install wrk")
    flags = (["--workers", "2", "--threads", "16", "--worker-connections", str(args.connections // 2)]
             if args.tuned else ["--workers", str(args.workers)] if args.workers else [])
    mode = "tuned" if args.tuned else f"--workers {args.workers}" if args.workers else "as installed"
    with scratch_database() as env:
        runtime = bootstrap(Settings.from_env(env), pool_size=1)
        with reported_route(runtime):
            shapes = {"a": ("(a) 1 workspace, 1 client", 1, 1), "b": ("(b) 1 workspace, 8 clients", 1, 8),
                      "c": ("(c) 8 workspaces", 8, 1)}
            scenarios = {shapes[s][0]: _clients(env, *shapes[s][1:]) for s in args.scenario}
            sandesh = subprocess.Popen([sys.executable, "-m", "sandesh.scripts.cli", "serve", "--bind",
                                        "127.0.0.1:18701", *flags],
                                       env={**env, "SANDESH_LOG_LEVEL": "WARNING"},
                                       cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            bare = subprocess.Popen([sys.executable, "-m", "sandesh.scripts.bench.bare_app", "127.0.0.1:18702",
                                     *flags], cwd=ROOT, env=env,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                _wait("http://127.0.0.1:18701/v1/sms/balance", sandesh)
                _wait("http://127.0.0.1:18702/", bare)
                settings = options("-", *(int(f) if f.isdigit() else None for f in flags[1::2]))
                print(f"wrk -t2 -c{args.connections} -d{args.seconds}s, median of {args.repeat} alternating runs; "
                      f"{mode}: gunicorn {settings['worker_class']}, "
                      f"{settings['workers']} worker{'s' if settings['workers'] != 1 else ''} x "
                      f"{settings['threads']} threads, at most "
                      f"{settings['worker_connections']} connections each")
                print(f"{'scenario':<28} {'server':<8} {'sends/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'non-2xx':>8}"
                      f" {'ratio':>7}")
                for name, keys in scenarios.items():
                    runs: dict[str, list[dict[str, float]]] = {"bare": [], "sandesh": []}
                    for _ in range(args.repeat):  # alternate, so drift and noise hit both alike
                        for label, url in (("bare", "http://127.0.0.1:18702"), ("sandesh", "http://127.0.0.1:18701")):
                            _settle(env["DATABASE_URL"])
                            runs[label].append(_wrk(url, keys, args.seconds, args.connections))
                    base, real = _median(runs["bare"]), _median(runs["sandesh"])
                    for label, r in (("bare", base), ("sandesh", real)):
                        ratio = f"{real['rps'] / base['rps']:.0%}" if label == "sandesh" else ""
                        spread = "/".join(f"{x['rps']:.0f}" for x in runs[label])
                        print(f"{name:<28} {label:<8} {r['rps']:>9.0f} {r['p50']:>8.2f} {r['p99']:>8.2f} "
                              f"{r['non2xx'] + r['errors']:>8} {ratio:>7}   runs: {spread}")
            finally:
                for process in (sandesh, bare):
                    process.terminate()
                    process.wait(timeout=20)
        runtime.close()


if __name__ == "__main__":
    main()
