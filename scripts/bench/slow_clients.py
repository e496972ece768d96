"""Ordinary clients beside slow ones, as a user runs the product (`sandesh serve` and `sandesh
worker all`, send_bench.product): 500 sockets that send a request a byte every 2 s, half
stopping inside their headers and half inside their body, while wrk sends GET /v1/sms/balance
on 32 connections; then the same without them (docs/performance.md, "Slow clients").

Usage: .venv/bin/python -m scripts.bench.slow_clients [--slow 500] [--seconds 20]
Needs wrk.  Uses a scratch database on $SANDESH_TEST_POSTGRES.
"""
from __future__ import annotations

import argparse
import os
import re
import socket
import subprocess
import threading
import time
from contextlib import ExitStack

from .common import scratch_database
from .send_bench import SANDESH, client_keys, accepting, product

BALANCE_LUA = """
local key = os.getenv("SANDESH_BENCH_KEYS")
request = function()
  return wrk.format("GET", "/v1/sms/balance", {["x-api-key"] = key})
end
done = function(summary, latency, requests)
  io.write(string.format("RESULT requests=%d duration_us=%d p50_ms=%.3f p99_ms=%.3f non2xx=%d socket_errors=%d\\n",
    summary.requests, summary.duration, latency:percentile(50) / 1000, latency:percentile(99) / 1000,
    summary.errors.status, summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
"""


def _ordinary(key: str, seconds: int, script: str) -> dict[str, float]:
    out = subprocess.run(["wrk", "-t2", "-c32", f"-d{seconds}s", "--timeout", "5s", "-s", script,
                          f"http://127.0.0.1:{SANDESH}"], env={**os.environ, "SANDESH_BENCH_KEYS": key},
                         capture_output=True, text=True, check=True).stdout
    fields = dict(re.findall(r"(\w+)=([\d.]+)", out.split("RESULT", 1)[1]))
    return {"rps": int(fields["requests"]) / (int(fields["duration_us"]) / 1e6), "p50": float(fields["p50_ms"]),
            "p99": float(fields["p99_ms"]), "failed": int(fields["non2xx"]) + int(fields["socket_errors"])}


def _slow(count: int, key: str, stop: threading.Event) -> dict[str, int]:
    """`count` sockets, half stopping inside their headers, half inside their body, each sending
    a byte every 2 s; returns how many the server answered 408, closed, or left open."""
    head = (f"POST /v1/sms/send HTTP/1.1\r\nHost: sandesh\r\nContent-Type: application/json\r\nx-api-key: {key}\r\n"
            ).encode()
    sockets = []
    for i in range(count):
        sock = socket.create_connection(("127.0.0.1", SANDESH))
        sock.sendall(head if i % 2 else head + b"Content-Length: 400\r\n\r\n{")
        sockets.append(sock)
    while not stop.wait(2.0):
        for sock in sockets:
            try:
                sock.send(b"X")
            except OSError:
                pass
    outcome = {"408": 0, "closed": 0, "open": 0}
    for sock in sockets:
        sock.settimeout(0.01)
        try:
            got = sock.recv(64)
            outcome["408" if got.startswith(b"HTTP/1.1 408") else "closed"] += 1
        except socket.timeout:
            outcome["open"] += 1
        except OSError:
            outcome["closed"] += 1
        sock.close()
    return outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slow", type=int, default=500)
    parser.add_argument("--seconds", type=int, default=20)
    args = parser.parse_args()
    with scratch_database() as env, ExitStack() as running:
        [key] = client_keys(env, 1, 1)
        running.enter_context(product(env, running))
        accepting([key])
        script = os.path.join(env.get("TMPDIR", "/tmp"), f"balance-{os.getpid()}.lua")
        with open(script, "w") as file:
            file.write(BALANCE_LUA)
        alone = _ordinary(key, args.seconds, script)
        stop, outcome = threading.Event(), {}
        slow = threading.Thread(target=lambda: outcome.update(_slow(args.slow, key, stop)))
        slow.start()
        time.sleep(3)  # every slow socket open
        beside = _ordinary(key, args.seconds, script)
        stop.set()
        slow.join()
        os.unlink(script)
    print(f"wrk -t2 -c32 -d{args.seconds}s GET /v1/sms/balance, one client")
    for name, run in (("alone", alone), (f"beside {args.slow} slow sockets", beside)):
        print(f"  {name:<28} {run['rps']:8.0f} answers/s  p50 {run['p50']:6.2f} ms  p99 {run['p99']:6.2f} ms  "
              f"{run['failed']} failed")
    print(f"  the slow sockets after {args.seconds + 3} s: {outcome}")


if __name__ == "__main__":
    main()
