"""How much the per-client request rate adds to a request (issue: "must not add more than ~1 ms").

Runs in one process against a scratch database on the local PostgreSQL:
  1. the statements alone: the caller's row (`request_rate.caller`, read on a cache miss) and
     one request counted (`request_rate.take`, as for a client below 50 requests/s);
  2. GET /v1/sms/balance through the whole Falcon app (auth, gating, read model, JSON) with the
     limiter on and off, interleaved in blocks so drift hits both alike.  The app has no caller
     cache (as in-process apps), so every request reads its caller; the client's rate is high,
     so the limiter counts it a share at a time (projections/callers.py).
Usage: .venv/bin/python -m scripts.bench.rate_limit_overhead [N]
"""
from __future__ import annotations

import argparse
import statistics
import time

import falcon.testing

from sandesh.domain.credentials import sha256_hex
from sandesh.domain.settings import Settings
from sandesh.projections import request_rate
from sandesh.projections.storage.group_commit import GroupCommit
from sandesh.scripts.service.bootstrap import bootstrap

from .common import funded_workspace, percentile, reported_route, scratch_database


def _timed(function, n: int) -> list[float]:
    out = []
    for _ in range(n):
        started = time.perf_counter()
        function()
        out.append((time.perf_counter() - started) * 1000)
    return out


def _summary(label: str, ms: list[float]) -> str:
    return (f"{label:<38} n={len(ms):>5}  mean={statistics.fmean(ms):6.3f} ms  p50={percentile(ms, 50):6.3f} ms"
            f"  p99={percentile(ms, 99):6.3f} ms")


def main(n: int = 3000) -> None:
    from sandesh.api.app import create_app

    with scratch_database() as env:
        runtime = bootstrap(Settings.from_env(env), pool_size=3)
        # the statement reads SIM health too: measure it with a route, as in production
        with reported_route(runtime):
            app = runtime.sandesh
            client, key, _ = app.operators.create_client(funded_workspace(app, "Bench", 0), "Bench", None, 1_000_000, "bench")

            key_hash, window = sha256_hex(key), runtime.settings.route_window
            with runtime.connection() as conn:
                assert request_rate.caller(conn, key_hash, window)["route_until"] > runtime.clock.now()
                counted: list[float] = []
                plain: list[float] = []
                for _ in range(n // 100):
                    counted += _timed(lambda: request_rate.take(conn, client.id, 1_000_000, 1, runtime.clock.now()), 100)
                    plain += _timed(lambda: request_rate.caller(conn, key_hash, window), 100)

            headers = {"x-api-key": key}
            commits = GroupCommit(runtime.sandesh.log.append_events)
            with_limit = falcon.testing.TestClient(create_app(runtime.sandesh, runtime.connection, route_window=window,
                                                              health=runtime.health, commits=commits))
            without = falcon.testing.TestClient(create_app(runtime.sandesh, runtime.connection, route_window=window,
                                                           health=runtime.health, commits=commits, rate_limit=False))
            on: list[float] = []
            off: list[float] = []
            for _ in range(n // 100):
                on += _timed(lambda: with_limit.simulate_get("/v1/sms/balance", headers=headers), 100)
                off += _timed(lambda: without.simulate_get("/v1/sms/balance", headers=headers), 100)
            assert with_limit.simulate_get("/v1/sms/balance", headers=headers).status_code == 200
        runtime.close()

    print(_summary("count one request (take)", counted))
    print(_summary("read the caller (a cache miss)", plain))
    print(_summary("GET /v1/sms/balance, limiter on", on))
    print(_summary("GET /v1/sms/balance, limiter off", off))
    print(f"added by the limiter: mean {statistics.fmean(on) - statistics.fmean(off):+.3f} ms, "
          f"p50 {percentile(on, 50) - percentile(off, 50):+.3f} ms, p99 {percentile(on, 99) - percentile(off, 99):+.3f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("n", metavar="N", type=int, nargs="?", default=3000, help="requests of each kind (default: 3000)")
    main(parser.parse_args().n)
