"""What the notifier's look costs (docs/performance.md, "The notifier"): SIMs registered and
reported healthy, a destination, and workspaces each with a balance alert (none low) and a
client whose 20 webhook deliveries were delivered (read-model rows written directly: the look
reads only those); `Notifier.step` timed, its CPU and wall time per look and its SQL
statements per look, at each number of SIMs and of workspaces.

    .venv/bin/python -m scripts.bench.notifier [--sims 100,1000] [--workspaces 100] [--looks 200]
"""
from __future__ import annotations

import argparse
import time
from typing import Any

import orjson
import psycopg

from sandesh.domain.settings import Settings
from sandesh.projections import sim_health
from sandesh.scripts.service.bootstrap import bootstrap
from sandesh.workers.notifier import Notifier

from .common import percentile, scratch_database


def counting(runtime: Any) -> list[int]:
    """Count the statements the runtime's connections execute (psycopg's Cursor.execute)."""
    seen = [0]
    execute = psycopg.Cursor.execute

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        seen[0] += 1
        return execute(self, *args, **kwargs)

    psycopg.Cursor.execute = counted  # type: ignore[method-assign]
    return seen


_WORKSPACES = """
INSERT INTO workspaces (id, name, status, rates, types, balance, balance_alert, created_at, updated_at)
SELECT 'ws_bench' || n, 'Bench ' || n, 'active', '{}', '[]', 100000, 50000, %(now)s, %(now)s
FROM generate_series(1, %(n)s) AS n;
INSERT INTO clients (id, workspace_id, brand, webhook_url, rate_limit, key_hash, key_prefix, secret_sealed,
                     secret_hash, enabled, created_at, updated_at)
SELECT 'cl_bench' || n, 'ws_bench' || n, 'Bench' || n, 'https://hooks.example/in', 100, 'hash' || n, 'sk_', '', '',
       true, %(now)s, %(now)s
FROM generate_series(1, %(n)s) AS n;
INSERT INTO webhook_deliveries (id, client_id, event_type, subject, status, state, attempts, created_at, updated_at)
SELECT 'whd_bench' || n || '_' || d, 'cl_bench' || n, 'message.status', 'msg_' || d, 'delivered', 'delivered', 1,
       %(now)s - d, %(now)s - d
FROM generate_series(1, %(n)s) AS n, generate_series(1, 20) AS d;
ANALYZE workspaces; ANALYZE clients; ANALYZE webhook_deliveries;
"""


def measure(sims: int, workspaces: int, looks: int) -> dict[str, Any]:
    with scratch_database() as env:
        runtime = bootstrap(Settings.from_env(env), pool_size=2)
        try:
            ids = [runtime.sandesh.sims.add_sim(f"bench-{n}", f"loop://{n}", 115200, None, "bench").id
                   for n in range(sims)]
            runtime.sandesh.alerts.add_destination("json://127.0.0.1:9/unused", "json://127.0.0.1:9/unused", [], "bench")
            with runtime.connection() as conn:
                for sim_id in ids:
                    sim_health.record(conn, sim_id, healthy=True, registered=True, signal_dbm=-70, last_error=None,
                                      dispatcher="bench", at=runtime.clock.now())
                for statement in filter(str.strip, _WORKSPACES.split(";")):
                    conn.execute(statement, {"n": workspaces, "now": runtime.clock.now()} if "%(" in statement else None)
            notifier = Notifier(runtime)
            notifier.step()  # warm: prepared plans, imports
            seen = counting(runtime)
            cpu, wall = [], []
            for _ in range(looks):
                started_cpu, started = time.process_time(), time.perf_counter()
                notifier.step()
                cpu.append((time.process_time() - started_cpu) * 1000)
                wall.append((time.perf_counter() - started) * 1000)
            return {"sims": sims, "workspaces": workspaces, "looks": looks, "statementsPerLook": seen[0] / looks,
                    "cpuMsPerLook": {"p50": round(percentile(cpu, 50), 2), "p95": round(percentile(cpu, 95), 2)},
                    "wallMsPerLook": {"p50": round(percentile(wall, 50), 2), "p95": round(percentile(wall, 95), 2)}}
        finally:
            runtime.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", default="100,1000", help="numbers of SIMs, comma-separated (default 100,1000)")
    parser.add_argument("--workspaces", default="100", help="numbers of workspaces, comma-separated (default 100)")
    parser.add_argument("--looks", type=int, default=200, help="looks timed at each (default 200)")
    args = parser.parse_args()
    for sims in (int(n) for n in args.sims.split(",")):
        for workspaces in (int(n) for n in args.workspaces.split(",")):
            print(orjson.dumps(measure(sims, workspaces, args.looks)).decode(), flush=True)


if __name__ == "__main__":
    main()
