"""What an open SIM pool page costs the server (docs/dashboard.md, "SIM pool"): a real `sandesh
serve` with one worker on a scratch database holding SIMS SIMs, and one operator's session
asking for the page's fragment back to back for SECONDS seconds.  Prints the requests per
second it answered, and the CPU spent per request by the serve processes and by the database's
backends (read from /proc), then what one open page costs at its refresh rate.

    .venv/bin/python -m scripts.bench.sim_pool_poll [--sims 8] [--seconds 20]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import orjson
import psycopg
import requests

from sandesh.api.dashboard.ops.sims import REFRESH_SECONDS

from .common import ROOT, scratch_database

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids: list[int]) -> float:
    """User and system CPU of these processes so far."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / TICK


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (FileNotFoundError, ProcessLookupError):
                continue
            if int(stat[1]) == pid:
                found.append(int(entry.name))
    return found


def prepare(env: dict[str, str], sims: int) -> str:
    """SIMs reported on once, and a signed-in operator; returns the operator's session id."""
    from sandesh.domain.settings import Settings
    from sandesh.projections import sim_health
    from sandesh.projections.storage import sessions
    from sandesh.scripts.service.bootstrap import bootstrap

    runtime = bootstrap(Settings.from_env(env))
    try:
        for n in range(sims):
            sim = runtime.sandesh.sims.add_sim(f"bench-{n}", "loop://", 115200, f"modems-{n % 2}", "bench")
            with runtime.connection() as conn:
                sim_health.record(conn, sim.id, healthy=True, registered=True, signal_dbm=-70 - n, last_error=None,
                                  dispatcher="bench", at=runtime.clock.now())
        person, _ = runtime.sandesh.people.add_person("ops@bench.example", "Ops", None, None, True, "bench")
        with runtime.connection() as conn:
            return sessions.begin(conn, person.id, runtime.clock.now(), sessions.SIGNED_IN)
    finally:
        runtime.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sims", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    with scratch_database() as env:
        session = prepare(env, args.sims)
        port = 8000 + os.getpid() % 1000
        serve = subprocess.Popen([sys.executable, "-m", "sandesh.scripts.service.cli", "serve", "--bind", f"127.0.0.1:{port}",
                                  "--workers", "1"], env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        try:
            url = f"http://127.0.0.1:{port}/dashboard/ops/sims/rows"
            http = requests.Session()
            http.cookies.set("sandesh_session", session)
            for _ in range(300):
                try:
                    if http.get(url, timeout=2).status_code == 200:
                        break
                except requests.ConnectionError:
                    time.sleep(0.1)
            serving = [serve.pid, *children(serve.pid)]
            dbname = psycopg.conninfo.conninfo_to_dict(env["DATABASE_URL"])["dbname"]
            with psycopg.connect(env["DATABASE_URL"]) as conn:
                backends = [r[0] for r in conn.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s"
                                                       " AND pid <> pg_backend_pid()", (dbname,)).fetchall()]
            before, db_before, started = cpu_seconds(serving), cpu_seconds(backends), time.monotonic()
            answered = 0
            while time.monotonic() - started < args.seconds:
                assert http.get(url, timeout=5).status_code == 200
                answered += 1
            elapsed = time.monotonic() - started
            serve_ms = (cpu_seconds(serving) - before) * 1000 / answered
            db_ms = (cpu_seconds(backends) - db_before) * 1000 / answered
        finally:
            serve.terminate()
            serve.wait(timeout=15)
    per_page = 1 / REFRESH_SECONDS
    print(orjson.dumps({
        "sims": args.sims, "requests": answered, "seconds": round(elapsed, 1),
        "requestsPerSecond": round(answered / elapsed, 1),
        "serveCpuMsPerRequest": round(serve_ms, 2), "databaseCpuMsPerRequest": round(db_ms, 2),
        "openPage": {"requestsPerSecond": round(per_page, 3),
                     "serveCpuPercentOfACore": round(serve_ms * per_page / 10, 3),
                     "databaseCpuPercentOfACore": round(db_ms * per_page / 10, 3)},
    }, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
