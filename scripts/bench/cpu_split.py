"""Where the machine's CPU goes while `sandesh serve` (as installed) takes sends: its workers,
PostgreSQL, wrk, and how idle the machine is left (docs/performance.md, "The caller cache"), and
how often the workers' threads are switched out ("Random bytes without a thread switch");
`--bare`: the same for the bare baseline app.

Usage: .venv/bin/python -m sandesh.scripts.bench.cpu_split [--workspaces 1] [--seconds 8] [--bare]
Needs wrk.  Uses a scratch database on $SANDESH_TEST_POSTGRES; PostgreSQL's CPU is that of
every postgres process of the machine, so run it alone.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import time
from pathlib import Path

from sandesh.domain.settings import Settings
from sandesh.scripts.bootstrap import bootstrap

from .common import reported_route, scratch_database
from .send_bench import _clients, served, served_bare, wrk_sends


def _cpu_seconds(pids: list[int]) -> tuple[float, float]:
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
    """Voluntary context switches of every thread of these processes (a thread that waits: for
    a lock, the GIL, a socket)."""
    total = 0
    for pid in pids:
        for status in Path(f"/proc/{pid}/task").glob("*/status"):
            try:
                total += int(next(line for line in status.read_text().splitlines()
                                  if line.startswith("voluntary_ctxt_switches")).split()[1])
            except (FileNotFoundError, ProcessLookupError):
                pass
    return total


def _machine() -> list[int]:
    return [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspaces", type=int, default=1, help="1: scenario (a); 8: scenario (c)")
    parser.add_argument("--seconds", type=int, default=8)
    parser.add_argument("--bare", action="store_true",
                        help="the bare baseline app (bare_app.py) under the same gunicorn settings, for comparison")
    args = parser.parse_args()
    with scratch_database() as env:
        runtime = bootstrap(Settings.from_env(env), pool_size=1)
        with reported_route(runtime):
            keys = _clients(env, args.workspaces, 1)
            with (served_bare if args.bare else served)(env, 18721) as workers:
                wrk = wrk_sends(18721, keys, 32, args.seconds + 4)
                time.sleep(2)  # past the warm-up
                postgres = [int(p) for p in subprocess.run(["pgrep", "postgres"], capture_output=True,
                                                           text=True).stdout.split()]
                groups = {"workers": workers, "postgres": postgres, "wrk": [wrk.pid]}
                started, before, machine = time.monotonic(), {k: _cpu_seconds(v) for k, v in groups.items()}, _machine()
                switches = _switches(workers)
                time.sleep(args.seconds)
                elapsed = time.monotonic() - started
                switches = (_switches(workers) - switches) / elapsed
                after = {k: _cpu_seconds(v) for k, v in groups.items()}
                used = {k: sum(after[k]) - sum(before[k]) for k in groups}
                system = {k: after[k][1] - before[k][1] for k in groups}
                used, system = ({k: v / elapsed for k, v in d.items()} for d in (used, system))
                ticks = [b - a for a, b in zip(machine, _machine())]
                out = wrk.communicate()[0]
        runtime.close()
    rate = next(line for line in out.splitlines() if "Requests/sec" in line).split()[-1]
    print(f"{'bare app: requests/s' if args.bare else 'sends/s'} {float(rate):.0f} (wrk, whole run); cores used: " +
          ", ".join(f"{k} {v:.2f} ({system[k]:.2f} in the kernel)" for k, v in used.items()) +
          f"; machine idle {100 * (ticks[3] + ticks[4]) / sum(ticks):.0f} %, in the kernel {100 * ticks[2] / sum(ticks):.0f} %")
    per_send = {k: v / float(rate) * 1000 for k, v in used.items()}
    print(f"CPU per {'request' if args.bare else 'send'}: " + ", ".join(f"{k} {v:.3f} ms" for k, v in per_send.items())
          + f"; the workers' threads switched out {switches / float(rate):.1f} times")


if __name__ == "__main__":
    main()
