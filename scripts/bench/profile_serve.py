"""Where the CPU of `sandesh serve` goes under load, as installed: wrk drives POST /v1/sms/send
at a server started with no flag, and py-spy samples every worker process (threads on CPU
only), then the samples are split by the stage of the send path they are in.

Usage: .venv/bin/python -m sandesh.scripts.bench.profile_serve [--seconds 10] [--connections 32]
Needs wrk and py-spy (`pip install py-spy`).  Uses a scratch database on $SANDESH_TEST_POSTGRES.
"""
from __future__ import annotations

import argparse
import collections
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sandesh.domain.settings import Settings
from sandesh.scripts.bootstrap import bootstrap

from .common import reported_route, scratch_database
from .send_bench import _clients, served, wrk_sends

# The first stage (innermost frame wins) a sample's stack passes through, by file and function.
STAGES = [
    ("metrics middleware", ("api/metrics.py", "process_")),
    ("authentication (caller cache, rate shares)", ("api/auth.py", "process_resource")),
    ("request id middleware", ("api/app.py", "process_")),
    ("body read + JSON parse", ("api/body.py", "json_object")),
    ("validation + segments", ("domain/sending.py", "parse_send")),
    ("idempotency hash", ("domain/sending.py", "request_hash")),
    ("Message aggregate + event", ("domain/message.py", "")),
    ("group commit (append script)", ("projections/group_commit.py", "")),
    ("use case, other", ("domain/application.py", "send_sms")),
    ("send resource, other", ("api/send.py", "on_post")),
    ("falcon (routing, request, response)", ("falcon/", "")),
    ("gunicorn (HTTP parsing, sockets, threads)", ("gunicorn/", "")),
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
    parser.add_argument("--leaves", type=int, default=15, help="how many of the most sampled innermost frames to show")
    args = parser.parse_args()
    with scratch_database() as env:
        runtime = bootstrap(Settings.from_env(env), pool_size=1)
        with reported_route(runtime):
            keys = _clients(env, 1, 1)
            with served(env, 18711) as workers, tempfile.TemporaryDirectory() as folder:
                wrk = wrk_sends(18711, keys, args.connections, args.seconds + 2)
                time.sleep(1)
                spies = [subprocess.Popen([shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy")),
                                           "record", "--gil", "--format", "raw", "--rate", "200", "--duration",
                                           str(args.seconds), "--pid", str(pid), "--output",
                                           str(Path(folder) / f"{pid}.txt"), "--nonblocking"],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                         for pid in workers]
                for spy in spies:
                    spy.wait()
                result = wrk.communicate()[0]
                samples: collections.Counter[str] = collections.Counter()
                leaves: collections.Counter[str] = collections.Counter()
                for file in Path(folder).glob("*.txt"):
                    for line in file.read_text().splitlines():
                        stack, _, count = line.rpartition(" ")
                        samples[_stage(stack)] += int(count)
                        leaves[" <- ".join(reversed(stack.split(";")[-3:]))] += int(count)
        runtime.close()
    total = sum(samples.values())
    print(result.strip().splitlines()[-1] if result.strip() else "")
    print(f"py-spy, {len(workers)} workers, {total} samples of threads on CPU, by stage of the send path:")
    for name, count in samples.most_common():
        print(f"  {name:<44} {count / total:6.1%}")
    print("the innermost frames seen most often:")
    for leaf, count in leaves.most_common(args.leaves):
        print(f"  {count / total:6.1%}  {leaf}")


if __name__ == "__main__":
    main()
