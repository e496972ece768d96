"""A replay of a kept log timed in this process.

    .venv/bin/python -m scripts.bench.replay_split URL

URL is a database a `scripts/bench/replay.py --keep` run kept.  The replay runs as `sandesh
replay` runs it, in this process.  To time an earlier commit's code on the same log, put its
checkout first on the path under the package's name (`git worktree add /tmp/old-src COMMIT;
mkdir /tmp/old; ln -s /tmp/old-src /tmp/old/sandesh; PYTHONPATH=/tmp/old .venv/bin/python -m
scripts.bench.replay_split URL`): everything but this module is imported from the package
found.  Prints one JSON line: wall seconds, events per second, the pass's seconds and the
summary's memory.
"""
from __future__ import annotations

import argparse
import time

import orjson

from sandesh.domain.settings import Settings
from sandesh.projections import replay
from sandesh.scripts.service.bootstrap import bootstrap

from .common import bench_env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("database_url", metavar="URL", help="the database of a kept log")
    args = parser.parse_args()
    runtime = bootstrap(Settings.from_env(bench_env(args.database_url)), pool_size=2)
    try:
        started = time.monotonic()
        summary = replay.replay(runtime, list(replay.NAMES))
        wall = time.monotonic() - started
    finally:
        runtime.close()
    print(orjson.dumps({"code": replay.__file__, "events": summary["events"], "wallSeconds": round(wall, 1),
                        "eventsPerSecond": round(summary["events"] / wall),
                        "readAndFoldSeconds": summary["readSeconds"], "memory": summary["memory"]}).decode())


if __name__ == "__main__":
    main()
