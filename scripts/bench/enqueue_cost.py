"""What PostgreSQL spends on a message joining the queue, inside a send's append: the turn
written inline (the two probes as subqueries of each INSERT, parsed and planned every time)
beside the function `sandesh_turn` (projections/dispatch.py, planned once per server process).

    .venv/bin/python -m scripts.bench.enqueue_cost [N ...]   (default: 1000 10000 100000)

For each N: N messages wait in the queue (accepted through the application, as backlog.py
does), then scripts of 1, 5 and 16 enqueues (a group commit's batches: BEGIN, the INSERTs,
ROLLBACK) run 300 times each way on one connection.  Prints the server process's CPU per
message (from /proc, so run it alone, on the machine of the database) and the wall time per
script.  Figures in docs/performance.md, "The turn as a function".
"""
from __future__ import annotations

import argparse
import sys
import time
import uuid
from typing import Any

from sandesh.domain.settings import Settings
from sandesh.projections import dispatch
from sandesh.projections.rows import Computed
from sandesh.projections.engine.sql import SqlRows
from sandesh.projections.storage.store import StatementBuffer
from sandesh.scripts.service.bootstrap import bootstrap

from .backlog import fill
from .common import funded_workspace, scratch_database
from .cpu_split import cpu_seconds

# The turn as it was written before the function (kept here only to measure against).
INLINE = ("greatest((SELECT turn + 1 FROM dispatch_queue WHERE client_id = %s AND priority = %s ORDER BY turn DESC"
          " LIMIT 1), (SELECT turn FROM dispatch_queue WHERE priority = %s AND sim_id IS NULL ORDER BY turn LIMIT 1), 0)")
RUNS = 300


def _cpu(pid: int) -> float:
    return sum(cpu_seconds([pid]))


def _script(conn: Any, client: str, n: int, inline: bool) -> str:
    buffer = StatementBuffer(conn)  # each statement rendered, as in an append
    rows = SqlRows(buffer, dispatch.MODEL.tables)
    for _ in range(n):
        at = time.time()
        rows.insert("dispatch_queue", {
            "message_id": f"msg_{uuid.uuid4().hex}", "client_id": client, "message_type": "transactional",
            "priority": 1, "to": "9779812345678", "operator": "ncell", "parts": 1, "enqueued_at": at,
            "not_before": at, "expires_at": None,
            "turn": (Computed(INLINE, (client, 1, 1), lambda memory: 0) if inline
                     else dispatch.turn(client, 1))})
    return ";\n".join(["BEGIN", *buffer.statements, "ROLLBACK"])


def main(argv: list[str]) -> int:
    sizes = [int(a) for a in argv] or [1000, 10_000, 100_000]
    print(f"{'waiting':>9} {'batch':>6} {'turn':>9} {'server CPU/message':>19} {'wall/script':>12}")
    for waiting in sizes:
        with scratch_database() as env:
            runtime = bootstrap(Settings.from_env(env), pool_size=2)
            workspace = funded_workspace(runtime.sandesh, "Enqueue", 10**13)
            client = runtime.sandesh.operators.create_client(workspace, "Enqueue", None, 10**6, "bench")[0].id
            fill(runtime, workspace, client, waiting)
            with runtime.connection() as conn:
                conn.execute("ANALYZE dispatch_queue")
                backend = conn.execute("SELECT pg_backend_pid() AS pid").fetchone()["pid"]
                for batch in (1, 5, 16):
                    for inline in (True, False):
                        scripts = [_script(conn, client, batch, inline) for _ in range(RUNS)]
                        for script in scripts[:10]:  # warm: the function's plans, the caches
                            conn.execute(script, prepare=False)
                        cpu, started = _cpu(backend), time.perf_counter()
                        for script in scripts:
                            conn.execute(script, prepare=False)
                        wall = (time.perf_counter() - started) / RUNS
                        per_message = (_cpu(backend) - cpu) / RUNS / batch
                        print(f"{waiting:>9,} {batch:>6} {'inline' if inline else 'function':>9} "
                              f"{per_message * 1000:>16.3f} ms {wall * 1000:>9.3f} ms", flush=True)
            runtime.close()
    return 0


def _arguments() -> list[str]:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("sizes", metavar="N", type=int, nargs="*",
                        help="messages waiting in the queue, one run each (default: 1000 10000 100000)")
    return [str(n) for n in parser.parse_args().sizes]


if __name__ == "__main__":
    sys.exit(main(_arguments()))
