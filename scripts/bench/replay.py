"""How fast `sandesh replay` rebuilds every read model, and what it holds in memory.

    .venv/bin/python -m scripts.bench.replay N [N...] [--shape lifecycle|campaign|both] [--profile] [--keep]
    .venv/bin/python -m scripts.bench.replay 1000000 10000000 --shape campaign --on URL1 --on URL2

Makes a log of about N events through the domain and the log (no HTTP, no group commit: the
messages' events appended in batches of 100 messages, as the API's group commit appends them),
4 clients in 2 workspaces, every 50th message with an Idempotency-Key.  Two shapes:

- `lifecycle`: each message accepted, submitted, its part accepted by the network, sent,
  reported and delivered (6 events);
- `campaign`: rounds of 1,000 messages accepted, after each of which the 100 waiting longest
  are sent and delivered: two thirds of the events are `Accepted`, and the queue keeps growing.

Then `sandesh replay` runs as a user runs it (a subprocess, all projections, no flags) and the
figures are printed per shape: log events, wall seconds, log events per second, the one pass
over the log, each projection's load and swap, the replay's peak memory and the rows it let
go of.  Given two sizes or more, the figures of a year's log (250 million events) follow,
extrapolated from the last two on a straight line (marked `"extrapolated": true`).  With
--profile the replay runs in this process under cProfile instead and the top functions are
printed.  `--keep` keeps each log's database and `--on` replays a kept one, so that the logs of
both shapes, made once, are replayed beside each other in one run.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import resource
import subprocess
import sys
import time
from contextlib import nullcontext

import orjson

from sandesh.domain.message import accept
from sandesh.domain.sending import parse_send
from sandesh.domain.settings import Settings
from sandesh.projections.engine import replay
from sandesh.scripts.service.bootstrap import bootstrap

from .common import ROOT, bench_clients, bench_env, scratch_database

BATCH_MESSAGES = 100


CAMPAIGN_ROUND = 1000   # messages accepted in a round of the campaign shape...
CAMPAIGN_SENT = 100     # ...after which this many of the longest waiting are sent and delivered


def fill(runtime, events: int, shape: str = "lifecycle") -> int:
    """Append about `events` events of the shape; returns how many the log holds."""
    app = runtime.sandesh
    clients = bench_clients(app, "Replay", 2, 2)
    request, _ = parse_send({"to": "9779812345678", "text": "Your order has shipped and arrives tomorrow."})
    started, made, waiting = time.monotonic(), 0, []

    def accepted(i: int):
        client_id, workspace_id = clients[i % len(clients)]
        key = f"order-{i}" if i % 50 == 0 else None
        return accept(client_id=client_id, workspace_id=workspace_id, to=request.to,
                      text=app.texts.seal(workspace_id, request.text), message_type="transactional", segments=1,
                      encoding=request.encoding, cost=100, idempotency_key=key, request_hash="h" if key else None,
                      at=app.clock.now())

    def delivered(message, i: int) -> None:
        now = app.clock.now()
        message.submit("sim_bench", at=now)
        message.part_accepted(1, i % 256, at=now)
        message.report(1, 0, at=now)

    written = 0
    while written < events:
        batch = []
        if shape == "lifecycle":
            for i in range(made, made + BATCH_MESSAGES):
                message = accepted(i)
                delivered(message, i)
                batch += message.collect_events()
            made += BATCH_MESSAGES
        else:
            for i in range(made, made + BATCH_MESSAGES):
                message = accepted(i)
                batch += message.collect_events()
                waiting.append(message)
            made += BATCH_MESSAGES
            if made % CAMPAIGN_ROUND == 0:
                app.log.append_events(batch)
                written += len(batch)
                batch = []
                for n, message in enumerate(waiting[:CAMPAIGN_SENT]):
                    delivered(message, n)
                    batch += message.collect_events()
                del waiting[:CAMPAIGN_SENT]
        app.log.append_events(batch)
        written += len(batch)
        if made % 20_000 < BATCH_MESSAGES:
            sys.stderr.write(f"  {shape}: made {written:,} events ({written / (time.monotonic() - started):,.0f}/s)\n")
    return app.log.recorder.max_notification_id() or 0


YEAR = 250_000_000  # events a year's log holds (docs/performance.md, "Replay")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("events", type=int, nargs="+",
                        help="about how many log events to make; given two sizes or more, the figures of a year's log "
                             f"({YEAR:,} events) are extrapolated from the last two")
    parser.add_argument("--shape", choices=("lifecycle", "campaign", "both"), default="both",
                        help="the log's shape (default both, one after the other)")
    parser.add_argument("--profile", action="store_true", help="replay in this process under cProfile")
    parser.add_argument("--keep", action="store_true",
                        help="keep the databases the logs were made in (their addresses go to stderr), to replay again")
    parser.add_argument("--on", metavar="DATABASE_URL", action="append", default=[],
                        help="replay the log of this database (one --keep kept) instead of making one; repeated, "
                             "one for each run in order (each shape, each size); the shape and size only label it")
    args = parser.parse_args()
    kept = list(args.on)
    for shape in (("lifecycle", "campaign") if args.shape == "both" else (args.shape,)):
        measured = []
        for events in args.events:
            figures = run(events, shape, args.profile, keep=args.keep, on=kept.pop(0) if kept else None)
            measured.append(figures)
            print(orjson.dumps({"shape": shape, **figures}).decode(), flush=True)
        if len(measured) >= 2 and not args.profile:
            print(orjson.dumps({"shape": shape, **extrapolate(measured[-2], measured[-1], YEAR)}).decode(), flush=True)


def extrapolate(smaller: dict, larger: dict, events: int) -> dict:
    """The figures of a log of `events`, on the line through two measured ones: wall seconds grow
    by the slope between them; so does peak memory while the larger replay held every row, but
    once it let rows go (it reached its budget), the budget holds it where it was."""
    grown = events - larger["logEvents"]
    per_event = (larger["wallSeconds"] - smaller["wallSeconds"]) / (larger["logEvents"] - smaller["logEvents"])
    wall = larger["wallSeconds"] + per_event * grown
    if larger["rowsSpilled"]:
        memory, held = larger["peakMemoryMB"], True
    else:
        slope = (larger["peakMemoryMB"] - smaller["peakMemoryMB"]) / (larger["logEvents"] - smaller["logEvents"])
        memory, held = larger["peakMemoryMB"] + slope * grown, False
    return {"logEvents": events, "extrapolated": True, "wallSeconds": round(wall),
            "logEventsPerSecond": round(events / wall), "peakMemoryMB": round(memory), "heldByTheBudget": held}


def run(events: int, shape: str, profile: bool, keep: bool = False, on: str | None = None) -> dict:
    with (nullcontext(bench_env(on)) if on else scratch_database(keep)) as env:
        runtime = bootstrap(Settings.from_env(env), pool_size=2)
        try:
            total = (runtime.sandesh.log.recorder.max_notification_id() or 0) if on else fill(runtime, events, shape)
            if profile:
                profiler = cProfile.Profile()
                started = time.monotonic()
                profiler.enable()
                summary = replay.replay(runtime, list(replay.NAMES))
                profiler.disable()
                wall = time.monotonic() - started
                peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
                out = io.StringIO()
                pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(30)
                print(out.getvalue())
            else:
                started = time.monotonic()
                done = subprocess.run([sys.executable, "-m", "sandesh.scripts.service.cli", "replay"], env=env, cwd=ROOT,
                                      capture_output=True, text=True, check=True)
                wall = time.monotonic() - started
                summary = orjson.loads(done.stdout)
                peak = summary["memory"]["peakMB"]  # the replay's own, not the largest child's so far
        finally:
            runtime.close()
    shares = {name: p["seconds"] for name, p in summary["projections"].items()}
    return {"logEvents": total, "replayedEvents": summary["events"], "wallSeconds": round(wall, 2),
            "logEventsPerSecond": round(total / wall), "insideSeconds": summary["seconds"],
            "readAndFoldSeconds": summary.get("readSeconds"), "peakMemoryMB": round(peak),
            "rowsSpilled": summary.get("memory", {}).get("rowsSpilled"),
            "rowsTakenBack": summary.get("memory", {}).get("rowsTakenBack"), "loadAndSwapSeconds": shares}


if __name__ == "__main__":
    main()
