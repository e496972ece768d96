"""A replay of a kept log timed in this process, folded in one process or split in two.

    .venv/bin/python scripts/bench/replay_split.py URL [--one | --live] [--second NAMES]

URL is a database a `scripts/bench/replay.py --keep` run kept.  Without --one the replay folds as
`sandesh replay` does (in two processes from `replay.PARALLEL_FROM` events on); with it, in this
process alone; with --second, the second process folds those projections (to compare
splits); with --live, through the live executors into the scratch tables (`replay.EXECUTOR`).  To time an earlier commit's code on the same log, put its checkout first on
the path under the package's name (`git worktree add /tmp/old-src COMMIT; mkdir /tmp/old;
ln -s /tmp/old-src /tmp/old/sandesh; PYTHONPATH=/tmp/old .venv/bin/python scripts/bench/replay_split.py
URL --one`): run as a file, this script imports everything else from the package found.  Prints one JSON line: wall
seconds, events per second, the pass's seconds and the summary's memory.
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
    parser.add_argument("--one", action="store_true", help="fold in this process alone")
    parser.add_argument("--live", action="store_true", help="fold through the live executors (replay.EXECUTOR)")
    parser.add_argument("--second", metavar="NAMES",
                        help="the projections the second process folds, comma-separated (default: replay.SECOND, "
                             f"{','.join(replay.SECOND)})")
    args = parser.parse_args()
    if args.one:
        replay.PARALLEL_FROM = 1 << 62
    if args.live:
        replay.EXECUTOR = "live"
    if args.second:
        second = tuple(args.second.split(","))
        unknown = set(second) - set(replay.NAMES)
        if unknown:
            parser.error(f"no projection {', '.join(sorted(unknown))}: choose among {', '.join(replay.NAMES)}")
        replay.SECOND = second
    runtime = bootstrap(Settings.from_env(bench_env(args.database_url)), pool_size=2)
    try:
        started = time.monotonic()
        summary = replay.replay(runtime, list(replay.NAMES))
        wall = time.monotonic() - started
    finally:
        runtime.close()
    print(orjson.dumps({"code": replay.__file__, "executor": replay.EXECUTOR, "split": not args.one,
                        "second": None if args.one else list(replay.SECOND), "events": summary["events"],
                        "wallSeconds": round(wall, 1), "eventsPerSecond": round(summary["events"] / wall),
                        "readAndFoldSeconds": summary["readSeconds"], "memory": summary["memory"]}).decode())


if __name__ == "__main__":
    main()
