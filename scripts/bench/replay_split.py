"""A replay of a kept log timed in this process.

    .venv/bin/python -m scripts.bench.replay_split URL [--from-checkpoint [--then N]]

URL is a database a `scripts/bench/replay.py --keep` run kept.  The replay runs as `sandesh
replay` runs it, in this process.  To time an earlier commit's code on the same log, put its
checkout first on the path under the package's name (`git worktree add /tmp/old-src COMMIT;
mkdir /tmp/old; ln -s /tmp/old-src /tmp/old/sandesh; PYTHONPATH=/tmp/old .venv/bin/python -m
scripts.bench.replay_split URL`): everything but the benchmarks is imported from the package
found.  Prints one JSON line: the events folded (from a checkpoint, those after it), wall
seconds, events per second, the pass's seconds and the summary's memory.  `--from-checkpoint` times `sandesh replay --from-checkpoint` instead; when
the database has no checkpoint, one is made first at the log's head and `--then N` more events
(the lifecycle shape) are written after it, neither timed.
"""
from __future__ import annotations

import argparse
import time

import orjson

from sandesh.domain.settings import Settings
from sandesh.projections.engine import checkpoints, replay
from sandesh.scripts.service.bootstrap import bootstrap

from .common import bench_env
from .replay import fill


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("database_url", metavar="URL", help="the database of a kept log")
    parser.add_argument("--from-checkpoint", action="store_true",
                        help="replay from the checkpoint, made first at the log's head if there is none")
    parser.add_argument("--then", type=int, default=0, metavar="N",
                        help="events written after a checkpoint made here (default 0)")
    args = parser.parse_args()
    runtime = bootstrap(Settings.from_env(bench_env(args.database_url)), pool_size=2)
    try:
        start = 0  # the position the replay folds from
        if args.from_checkpoint:
            with runtime.connection() as conn:
                kept = checkpoints.read(conn)
            if not all(name in kept for name in replay.NAMES):
                start = replay.checkpoint(runtime, list(replay.NAMES), from_zero=True)["position"]
                if args.then:
                    fill(runtime, args.then, "lifecycle")
            else:
                start = min(kept[name]["position"] for name in replay.NAMES)
        started = time.monotonic()
        summary = replay.replay(runtime, list(replay.NAMES), from_checkpoint=args.from_checkpoint)
        wall = time.monotonic() - started
    finally:
        runtime.close()
    events = summary["events"] - start
    print(orjson.dumps({"code": replay.__file__, "fromCheckpoint": args.from_checkpoint, "events": events,
                        "wallSeconds": round(wall, 1), "eventsPerSecond": round(events / wall),
                        "readAndFoldSeconds": summary["readSeconds"], "memory": summary["memory"]}).decode())


if __name__ == "__main__":
    main()
