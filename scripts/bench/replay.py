"""How fast `sandesh replay` rebuilds every read model.

    .venv/bin/python -m sandesh.scripts.bench.replay N [--profile]

Makes a log of about N events through the application (no HTTP): 4 clients in 2 workspaces,
each message accepted, submitted, its part accepted by the network, sent, reported and
delivered (6 events), appended in batches as the API's group commit does; every 50th message
also has an Idempotency-Key.  Then `sandesh replay` runs as a user runs it (a subprocess, all
projections) and the figures are printed: log events, wall seconds, log events per second, the
one pass over the log, and each projection's load and swap.  With --profile the
replay runs in this process under cProfile instead and the top functions are printed.
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

import orjson

from sandesh.domain.message import accept
from sandesh.domain.sending import parse_send
from sandesh.domain.settings import Settings
from sandesh.projections import replay
from sandesh.scripts.bootstrap import bootstrap

from .common import ROOT, bench_clients, scratch_database

EVENTS_PER_MESSAGE = 6
BATCH_MESSAGES = 100


def fill(runtime, events: int) -> int:
    """Append about `events` events; returns how many the log holds."""
    app = runtime.app
    clients = bench_clients(app, "Replay", 2, 2)
    request, _ = parse_send({"to": "9779812345678", "text": "Your order has shipped and arrives tomorrow."})
    messages = max(1, events // EVENTS_PER_MESSAGE)
    started, made = time.monotonic(), 0
    while made < messages:
        batch = []
        for i in range(made, min(messages, made + BATCH_MESSAGES)):
            client_id, workspace_id = clients[i % len(clients)]
            now = app.clock.now()
            key = f"order-{i}" if i % 50 == 0 else None
            message = accept(client_id=client_id, workspace_id=workspace_id, to=request.to,
                             text=app.texts.seal(workspace_id, request.text),
                             message_type="transactional", segments=1, encoding=request.encoding, cost=100,
                             idempotency_key=key, request_hash="h" if key else None, at=now)
            message.submit("sim_bench", at=now)
            message.part_accepted(1, i % 256, at=now)
            message.report(1, 0, at=now)
            batch += message.collect_events()
        app.log.append_events(batch)
        made += BATCH_MESSAGES
        if made % 10_000 < BATCH_MESSAGES:
            rate = made * EVENTS_PER_MESSAGE / (time.monotonic() - started)
            sys.stderr.write(f"  made {made * EVENTS_PER_MESSAGE:,} events ({rate:,.0f}/s)\n")
    return app.log.recorder.max_notification_id() or 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("events", type=int, help="about how many log events to make")
    parser.add_argument("--profile", action="store_true", help="replay in this process under cProfile")
    args = parser.parse_args()
    with scratch_database() as env:
        runtime = bootstrap(Settings.from_env(env), pool_size=2)
        try:
            total = fill(runtime, args.events)
            if args.profile:
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
                done = subprocess.run([sys.executable, "-m", "sandesh.scripts.cli", "replay"], env=env, cwd=ROOT,
                                      capture_output=True, text=True, check=True)
                wall = time.monotonic() - started
                summary = orjson.loads(done.stdout)
                peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        finally:
            runtime.close()
    shares = {name: p["seconds"] for name, p in summary["projections"].items()}
    print(orjson.dumps({"logEvents": total, "replayedEvents": summary["events"], "wallSeconds": round(wall, 2),
                        "logEventsPerSecond": round(total / wall), "insideSeconds": summary["seconds"],
                        "readAndFoldSeconds": summary.get("readSeconds"), "peakMemoryMB": round(peak),
                        "loadAndSwapSeconds": shares}).decode())


if __name__ == "__main__":
    main()
