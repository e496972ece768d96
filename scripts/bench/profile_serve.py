"""Where the CPU goes while sends arrive, as a user runs the product: wrk drives POST
/v1/sms/send at `sandesh serve` with `sandesh worker all` beside it (send_bench.product), and
py-spy samples the API's workers and each worker process (the thread holding the GIL only).
The samples are split by process and by the stage of the path they are in.

Usage: .venv/bin/python -m scripts.bench.profile_serve [--seconds 10] [--connections 32]
Needs wrk and py-spy (`pip install py-spy`).  Uses a scratch database on $SANDESH_TEST_POSTGRES.
"""
from __future__ import annotations

import argparse
import collections
import os
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from .common import scratch_database
from .send_bench import LUA, SANDESH, client_keys, accepting, product

# The first stage (innermost frame wins) a sample's stack passes through, by file and function.
STAGES = [
    ("metrics middleware", ("api/metrics.py", "process_")),
    ("authentication (caller cache, rate shares)", ("api/auth.py", "process_resource")),
    ("request id middleware, access line", ("api/app.py", "process_")),
    ("body read + JSON parse", ("api/body.py", "json_object")),
    ("validation + segments", ("domain/sending.py", "parse_send")),
    ("Message aggregate + event", ("domain/message.py", "")),
    ("group commit (append script)", ("projections/storage/group_commit.py", "")),
    ("use case, other", ("domain/usecases/", "")),
    ("blocking threads, hand-over", ("concurrent/futures", "")),
    ("send resource, other", ("api/send.py", "on_post")),
    ("logging", ("logging/", "")),
    ("falcon (routing, request, response)", ("falcon/", "")),
    ("gunicorn (HTTP parsing, sockets)", ("gunicorn/", "")),
    ("asyncio (the loop)", ("asyncio/", "")),
    ("projection handlers (rows)", ("projections/engine/sql.py", "")),
    ("follower (read, decode, apply)", ("projections/follower.py", "")),
    ("eventsourcing (decode, cipher)", ("eventsourcing/", "")),
    ("psycopg", ("psycopg/", "")),
]


def _stage(stack: str) -> str:
    frames = stack.split(";")
    for name, (path, function) in STAGES:
        for frame in frames:
            if path in frame and function in frame.split(" (")[0]:
                return name
    return "other"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--leaves", type=int, default=12, help="how many of the most sampled innermost frames to show")
    args = parser.parse_args()
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    with scratch_database() as env, ExitStack() as running, tempfile.TemporaryDirectory() as folder:
        keys = client_keys(env, 1, 1)
        pids = running.enter_context(product(env, running))
        accepting(keys)
        wrk = subprocess.Popen(["wrk", "-t2", f"-c{args.connections}", f"-d{args.seconds + 2}s", "-s", str(LUA),
                                f"http://127.0.0.1:{SANDESH}"], env={**os.environ, "SANDESH_BENCH_KEYS": ",".join(keys)},
                               stdout=subprocess.PIPE, text=True)
        time.sleep(1)
        watched = {pid: role for role in ("serve", "projections", "dispatch", "webhooks") for pid in pids.get(role, [])}
        spies = [subprocess.Popen([spy, "record", "--gil", "--format", "raw", "--rate", "200", "--duration",
                                   str(args.seconds),
                                   "--pid", str(pid), "--output", str(Path(folder) / f"{role}-{pid}.txt"),
                                   "--nonblocking"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                 for pid, role in watched.items()]
        for process in spies:
            process.wait()
        result = wrk.communicate()[0]
        by_role: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
        leaves: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
        for file in Path(folder).glob("*.txt"):
            role = file.name.split("-")[0]
            for line in file.read_text().splitlines():
                stack, _, count = line.rpartition(" ")
                if "(idle)" in stack or stack.endswith(("wait (threading.py)", "select (selectors.py)")):
                    continue
                by_role[role][_stage(stack)] += int(count)
                leaves[role][" <- ".join(reversed(stack.split(";")[-3:]))] += int(count)
    print(result.strip().splitlines()[-1] if result.strip() else "")
    for role, samples in by_role.items():
        total = sum(samples.values())
        print(f"py-spy, {role} ({sum(1 for r in watched.values() if r == role)} process(es)), {total} samples of "
              f"{args.seconds} s at 200/s, by stage:")
        for name, count in samples.most_common():
            print(f"  {name:<44} {count / total:6.1%}  {count / 200 / args.seconds:5.2f} cores")
        print("  the innermost frames seen most often:")
        for leaf, count in leaves[role].most_common(args.leaves):
            print(f"    {count / total:6.1%}  {leaf}")


if __name__ == "__main__":
    main()
