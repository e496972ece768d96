"""What one lease costs with N promotional messages waiting: the head query of the lease now
(projections/dispatch.py) beside the lease query it replaced, both under EXPLAIN ANALYZE on the
same database.

    .venv/bin/python -m scripts.bench.lease_cost N [N ...]

Prints one JSON line per N: median execution time of 20 runs of each, and whether the plan sorts.
"""
from __future__ import annotations

import argparse
import json
import statistics

from sandesh.domain.settings import Settings
from sandesh.projections import dispatch
from sandesh.scripts.service.bootstrap import bootstrap

from .backlog import fill
from .common import funded_workspace, scratch_database

# The lease before the SIM-pool change: every lease ranked the whole waiting queue with a
# window function (kept here only to measure against).
BEFORE = """
WITH waiting AS (
    SELECT q.message_id, q.priority, q.enqueued_at, (last.sim_id = %(sim)s) AS sticky,
           row_number() OVER (PARTITION BY q.client_id, q.priority ORDER BY q.enqueued_at) AS turn
    FROM dispatch_queue q
    LEFT JOIN LATERAL (SELECT p.sim_id FROM sent_parts p WHERE p."to" = q."to" AND p.at > %(recent)s
                       ORDER BY p.at DESC LIMIT 1) last ON true
    WHERE q.sim_id IS NULL AND q.not_before <= %(now)s AND q.parts <= 30
      AND (q.leased_until IS NULL OR q.leased_until < %(now)s)
    ORDER BY q.priority, turn, q.enqueued_at
    LIMIT 50)
SELECT q.message_id FROM dispatch_queue q JOIN waiting w USING (message_id)
ORDER BY w.priority, w.sticky DESC NULLS LAST, w.turn, w.enqueued_at
LIMIT 1 FOR UPDATE OF q SKIP LOCKED
"""


def timed(conn, query: str, params: dict) -> tuple[float, bool]:
    times, sorts = [], False
    for _ in range(20):
        plan = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + query, params).fetchone()
        plan = plan["QUERY PLAN"][0]
        times.append(plan["Execution Time"])
        sorts = sorts or '"Sort' in json.dumps(plan)
    return statistics.median(times), sorts


def main(argv: list[str]) -> int:
    for n in [int(a) for a in argv]:
        with scratch_database() as env:
            runtime = bootstrap(Settings.from_env(env), pool_size=2)
            workspace = funded_workspace(runtime.sandesh, "Lease", 10**13)
            client = runtime.sandesh.operators.create_client(workspace, "Lease", None, 10**6, "bench")[0]
            fill(runtime, workspace, client.id, n)
            now = runtime.clock.now()
            params = {"now": now, "recent": now - 7 * 86400, "sim": "sim_x", "max_priority": 2, "limit": 16}
            with runtime.connection() as conn:
                conn.execute("VACUUM ANALYZE dispatch_queue")
                with conn.transaction():
                    after, after_sorts = timed(conn, dispatch.HEAD, params)
                    before, before_sorts = timed(conn, BEFORE, params)
            runtime.close()
        print(json.dumps({"waiting": n, "lease_ms_before": round(before, 2), "before_sorts": before_sorts,
                          "lease_ms_now": round(after, 3), "now_sorts": after_sorts}), flush=True)
    return 0


def _arguments() -> list[str]:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("sizes", metavar="N", type=int, nargs="+",
                        help="promotional messages waiting, one scratch database each")
    return [str(n) for n in parser.parse_args().sizes]


if __name__ == "__main__":
    raise SystemExit(main(_arguments()))
