"""Rotating the root key on logs of growing length (docs/performance.md, "Rotating the key"):
`sandesh key rotate` and `sandesh key retire`, timed as an operator runs them, on a database
whose events table holds N rows, and what they did to that table (rows updated, dead tuples,
its size).

Usage: .venv/bin/python -m scripts.bench.key_rotation [N ...]   (default: 0 1000000 10000000)

The rows are made by COPY (each a 200-byte random state under a made-up originator), not by
sends: a rotation never reads nor writes an event, which is what this measures, and a real
10-million-event log takes half an hour to write (scripts/bench/replay.py).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import psycopg

from .common import ROOT, SECRET_KEY as OLD, scratch_database

NEW = "bench-root-key-after-it-fedcba9876543210fedcba"
BATCH = 1_000_000


def fill(url: str, rows: int) -> None:
    """`rows` events appended by COPY, in batches, with progress on stderr."""
    with psycopg.connect(url, autocommit=True) as conn:
        done = 0
        while done < rows:
            take = min(BATCH, rows - done)
            with conn.cursor().copy("COPY sandesh_events (originator_id, originator_version, topic, state)"
                                    " FROM STDIN") as copy:
                for n in range(done, done + take):
                    copy.write_row((f"msg_{n:032x}", 1, "sandesh.domain.message:Message.Accepted", os.urandom(200)))
            done += take
            sys.stderr.write(f"\r  {done:,} of {rows:,} events")
        sys.stderr.write("\n")
        conn.execute("VACUUM ANALYZE sandesh_events")


def table_state(url: str) -> dict[str, int]:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_force_next_flush()")
        row = conn.execute("SELECT n_live_tup, n_dead_tup, n_tup_upd, n_tup_del, pg_total_relation_size(relid)"
                           " FROM pg_stat_user_tables WHERE relname = 'sandesh_events'").fetchone()
    return dict(zip(("live", "dead", "updated", "deleted", "bytes"), row))


def timed(env: dict[str, str], *args: str) -> float:
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "sandesh.scripts.service.cli", *args], env=env, cwd=ROOT, check=True,
                   capture_output=True)
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", type=int, nargs="*", default=[0, 1_000_000, 10_000_000], metavar="N",
                        help="events in the log for each run (default: 0 1000000 10000000)")
    args = parser.parse_args()
    print(f"{'events':>12} {'rotate s':>9} {'retire s':>9} {'status s':>9} {'updated':>8} {'dead before':>12} "
          f"{'dead after':>11} {'MB before':>10} {'MB after':>9}")
    for size in args.sizes:
        with scratch_database() as env:
            url = env["DATABASE_URL"]
            fill(url, size)
            before = table_state(url)
            both = {**env, "SANDESH_SECRET_KEY": NEW, "SANDESH_PREVIOUS_KEYS": OLD}
            rotate = timed(both, "key", "rotate")
            with psycopg.connect(url) as conn:
                old_id = conn.execute("SELECT id FROM sandesh_keys WHERE position = 0").fetchone()[0]
            retire = timed(both, "key", "retire", old_id)
            status = timed({**env, "SANDESH_SECRET_KEY": NEW}, "key", "status")
            after = table_state(url)
            print(f"{size:>12,} {rotate:>9.2f} {retire:>9.2f} {status:>9.2f} {after['updated'] - before['updated']:>8} "
                  f"{before['dead']:>12} {after['dead']:>11} {before['bytes'] / 2**20:>10.0f} "
                  f"{after['bytes'] / 2**20:>9.0f}", flush=True)


if __name__ == "__main__":
    main()
