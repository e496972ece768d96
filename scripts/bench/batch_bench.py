"""Batch sends as installed: messages accepted per second through POST /v1/sms/send/batch in
batches of 1,000, against `sandesh serve` started with no flag, with the projections worker and
the webhook sender following the log beside it (docs/performance.md, "Batch sends").  The
dispatcher is not run: the route is a SIM reported healthy that nothing drives, so the queue
only grows.

    .venv/bin/python -m scripts.bench.batch_bench [--seconds 20] [--concurrency 4] [--repeat 3]

Each of `--concurrency` threads posts batches of `--size` different numbers and texts for
`--seconds`, as one of 4 clients of one workspace, with no Idempotency-Key (and with one, in a
second pass, when `--keyed`).  Prints messages accepted per second and the p50 and p99 time of
one batch; the median of `--repeat` runs.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import threading
import time

import orjson
import requests

from sandesh.domain.settings import Settings
from sandesh.scripts.service.bootstrap import bootstrap

from .common import ROOT, funded_workspace, percentile, reported_route, scratch_database
from .send_bench import launched

PREFIXES = ("98", "97", "96")


def _body(thread: int, size: int) -> bytes:
    return orjson.dumps({"messages": [
        {"to": f"977{PREFIXES[i % 3]}{thread:02d}{i:06d}",
         "text": f"Dashain offer {i}: 20% off everything in store until Sunday. Reply STOP to opt out.",
         "messageType": "promotional" if i % 2 else "transactional"} for i in range(size)]})


def _run(url: str, keys: list[str], size: int, seconds: float, concurrency: int, keyed: bool) -> dict[str, float]:
    accepted, times, failures = [0] * concurrency, [[] for _ in range(concurrency)], [0] * concurrency
    start = time.monotonic()
    deadline = start + seconds

    def post(n: int) -> None:
        session = requests.Session()
        body = _body(n, size)
        headers = {"x-api-key": keys[n % len(keys)], "content-type": "application/json"}
        i = 0
        while time.monotonic() < deadline:
            if keyed:
                headers["Idempotency-Key"] = f"bench-{n}-{i}-{start}"
            began = time.perf_counter()
            answer = session.post(url, data=body, headers=headers, timeout=60)
            times[n].append(time.perf_counter() - began)
            if answer.status_code == 202:
                accepted[n] += sum(1 for r in answer.json()["results"] if "messageId" in r)
            else:
                failures[n] += 1
            i += 1

    threads = [threading.Thread(target=post, args=(n,)) for n in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - start
    every = sorted(t for ts in times for t in ts)
    return {"messages/s": sum(accepted) / elapsed, "batches": len(every), "failed": sum(failures),
            "p50 ms": percentile(every, 50) * 1000, "p99 ms": percentile(every, 99) * 1000}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=20, help="length of one run")
    parser.add_argument("--concurrency", type=int, default=4, help="batches in flight at once")
    parser.add_argument("--size", type=int, default=1000, help="messages per batch (1 to 1,000)")
    parser.add_argument("--repeat", type=int, default=3, help="runs; the median is shown")
    parser.add_argument("--keyed", action="store_true", help="every batch with its own Idempotency-Key")
    args = parser.parse_args()
    with scratch_database() as env:
        runtime = bootstrap(Settings.from_env(env), pool_size=1)
        quiet = {**env, "SANDESH_LOG_LEVEL": "WARNING"}
        with reported_route(runtime), \
                launched(["sandesh.scripts.service.cli", "worker", "projections"], quiet), \
                launched(["sandesh.scripts.service.cli", "worker", "webhooks"], quiet):
            workspace = funded_workspace(runtime.sandesh, "Batch bench", 10**13)
            runtime.sandesh.operators.set_promo_hours(workspace, "off", "bench")  # promotions queued at any hour
            keys = [runtime.sandesh.operators.create_client(workspace, f"B{c}", None, 10**6, "bench")[1] for c in range(4)]
            server = subprocess.Popen([sys.executable, "-m", "sandesh.scripts.service.cli", "serve", "--bind", "127.0.0.1:18711"],
                                      env={**env, "SANDESH_LOG_LEVEL": "WARNING"}, cwd=ROOT,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                deadline = time.monotonic() + 30
                while True:
                    try:
                        requests.get("http://127.0.0.1:18711/v1/health", timeout=1)
                        break
                    except requests.ConnectionError:
                        if time.monotonic() > deadline or server.poll() is not None:
                            raise SystemExit("sandesh serve did not start")
                        time.sleep(0.2)
                url = "http://127.0.0.1:18711/v1/sms/send/batch"
                _run(url, keys, args.size, 3, args.concurrency, args.keyed)  # warm up every worker
                runs = [_run(url, keys, args.size, args.seconds, args.concurrency, args.keyed)
                        for _ in range(args.repeat)]
                for n, run in enumerate(runs, 1):
                    print(f"run {n}: {run['messages/s']:,.0f} messages/s, {run['batches']} batches, "
                          f"p50 {run['p50 ms']:.0f} ms, p99 {run['p99 ms']:.0f} ms, {run['failed']} non-202")
                print(f"median: {statistics.median(r['messages/s'] for r in runs):,.0f} messages/s accepted in "
                      f"batches of {args.size:,} ({args.concurrency} in flight, "
                      f"{'keyed' if args.keyed else 'no key'}); p99 of a batch "
                      f"{statistics.median(r['p99 ms'] for r in runs):.0f} ms")
            finally:
                server.terminate()
                server.wait(timeout=15)
        runtime.close()


if __name__ == "__main__":
    main()
