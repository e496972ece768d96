"""Where the machine's CPU goes while sends arrive, as a user runs the product (`sandesh serve`
and `sandesh worker all`, send_bench.product): per send, the API's workers, each worker
process, PostgreSQL and wrk, and how idle the machine is left; and how often each process's
threads are switched out (a thread that waits: for a lock, the GIL, a socket).

Usage: .venv/bin/python -m scripts.bench.cpu_split [--workspaces 1] [--seconds 8] [--connections 32]
Needs wrk.  Uses a scratch database on $SANDESH_TEST_POSTGRES; PostgreSQL's CPU is that of
every postgres process of the machine, so run it alone.  `--tables` adds the rows each table
gained, lost or changed per send (PostgreSQL's statistics, read again once the workers caught up).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import time
from contextlib import ExitStack
from pathlib import Path

import psycopg

from .common import scratch_database
from .send_bench import DURABLE, SANDESH, client_keys, launched, wrk, accepting, children, product


def cpu_seconds(pids: list[int]) -> tuple[float, float]:
    """User and system CPU seconds of these processes."""
    user = system = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            user, system = user + int(fields[11]), system + int(fields[12])
        except FileNotFoundError:
            pass
    return user / os.sysconf("SC_CLK_TCK"), system / os.sysconf("SC_CLK_TCK")


def _switches(pids: list[int]) -> int:
    """Voluntary context switches of every thread of these processes."""
    total = 0
    for pid in pids:
        for status in Path(f"/proc/{pid}/task").glob("*/status"):
            try:
                total += int(next(line for line in status.read_text().splitlines()
                                  if line.startswith("voluntary_ctxt_switches")).split()[1])
            except (FileNotFoundError, ProcessLookupError):
                pass
    return total


TABLE_WRITES = "SELECT relname, n_tup_ins, n_tup_upd, n_tup_del, n_tup_hot_upd FROM pg_stat_user_tables"


def _table_writes(env: dict[str, str]) -> dict[str, tuple[int, ...]]:
    with psycopg.connect(env["DATABASE_URL"], autocommit=True) as conn:
        conn.execute("SELECT pg_stat_force_next_flush()")
        return {name: tuple(counts) for name, *counts in conn.execute(TABLE_WRITES)}


def _machine() -> list[int]:
    return [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspaces", type=int, default=1, help="1: scenario (a); 8: scenario (c)")
    parser.add_argument("--seconds", type=int, default=8)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--durable", action="store_true", help="the durable baseline (durable_app.py) instead")
    parser.add_argument("--tables", action="store_true", help="rows written per send, by table")
    args = parser.parse_args()
    with scratch_database() as env, ExitStack() as running:
        keys = client_keys(env, args.workspaces, 1)
        if args.durable:
            server = running.enter_context(launched(["scripts.bench.durable_app", f"127.0.0.1:{DURABLE}"],
                                                    env, f"http://127.0.0.1:{DURABLE}/v1/health"))
            time.sleep(2)
            roles, port = {"durable": children(server.pid)}, DURABLE
        else:
            roles, port = running.enter_context(product(env, running)), SANDESH
            accepting(keys)
        postgres = [int(p) for p in subprocess.run(["pgrep", "-x", "postgres"], capture_output=True,
                                                   text=True).stdout.split()]
        groups = {**roles, "postgres": postgres}
        before = {name: (cpu_seconds(pids), _switches(pids)) for name, pids in groups.items()}
        tables = _table_writes(env) if args.tables else {}
        machine = _machine()
        run = wrk(f"http://127.0.0.1:{port}", keys, args.seconds, args.connections)
        after = {name: (cpu_seconds(pids), _switches(pids)) for name, pids in groups.items()}
        spent = [b - a for a, b in zip(machine, _machine())]
        if args.tables:
            time.sleep(3)  # the workers catch up, the statistics are flushed
            tables = {name: [b - a for a, b in zip(tables.get(name, (0,) * 4), counts)]
                      for name, counts in _table_writes(env).items()}
    sends = run["rps"] * args.seconds
    print(f"{run['rps']:.0f} sends/s, p50 {run['p50']:.1f} ms, p99 {run['p99']:.1f} ms, {run['non2xx']:.0f} non-2xx; "
          f"CPU per send in ms (user + system), and voluntary switches per send:")
    for name in groups:
        (u0, s0), w0 = before[name]
        (u1, s1), w1 = after[name]
        print(f"  {name:<12} {(u1 - u0 + s1 - s0) / sends * 1000:7.3f} ms   ({(u1 - u0) / sends * 1000:.3f} + "
              f"{(s1 - s0) / sends * 1000:.3f})   {(w1 - w0) / sends:6.2f} switches")
    print(f"  machine idle {spent[3] / sum(spent):.0%}")
    if tables:
        print("rows per send: inserted, updated (of which HOT), deleted")
        for name, (ins, upd, dele, hot) in sorted(tables.items(), key=lambda t: -sum(t[1][:3])):
            if ins or upd or dele:
                print(f"  {name:<32} {ins / sends:6.2f} {upd / sends:6.2f} ({hot / sends:4.2f}) {dele / sends:6.2f}")


if __name__ == "__main__":
    main()
