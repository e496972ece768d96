"""Backlog benchmark: does the queue's depth slow the next OTP, and does a backlog use the SIMs
to their pacing cap?

    .venv/bin/python -m scripts.bench.backlog N [--sims 4] [--windows 20] [--otps 30] [--cpu-seconds 20]

1. A scratch database on $SANDESH_TEST_POSTGRES with the test clock, 4 emulated modems
   (pseudo-terminals, in this process), an active workspace and client.
2. N promotional messages are queued while no dispatcher runs: accepted through the
   application (the same events, debits and queue rows as POST /v1/sms/send), 1,000 per
   append, to N different numbers.
3. `sandesh serve` and `sandesh worker dispatch` start as the README starts them (no flags).
4. Pacing: for each of --windows pacing windows, wait until the backlog has filled the pool's
   windows, count each SIM's parts, then move the test clock on 30 minutes.
5. CPU: the dispatcher's CPU time over --cpu-seconds while the backlog waits for windows.
6. OTPs: --otps times, move the clock on 30 minutes (the backlog pours into the fresh windows),
   wait 0 to 1 s, POST /v1/sms/otp/send, and time its 202 to the AT+CMGS that carries it.

Prints one JSON object.  Figures and the commands are in docs/performance.md.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from typing import Any

import requests

from sandesh.domain.message import accept
from sandesh.domain.pacing import PARTS_PER_WINDOW, WINDOW_SECONDS
from sandesh.domain.sending import parse_send
from sandesh.domain.settings import Settings
from sandesh.projections.storage import db
from sandesh.scripts.service.bootstrap import bootstrap
from sandesh.scripts.service.commands import register_emulated
from sandesh.scripts.service.emulator import Emulator

from .common import ROOT, funded_workspace, latencies_ms, scratch_database, stop

PREFIXES = ("984", "980", "986", "981", "985", "982", "961", "972")


def fill(runtime: Any, workspace: str, client: str, n: int) -> float:
    started = time.monotonic()
    done = 0
    while done < n:
        batch = min(1000, n - done)
        events = []
        for i in range(done, done + batch):
            request, _ = parse_send({"to": f"977{PREFIXES[i % len(PREFIXES)]}{i:07d}",
                                     "text": f"Dashain offer {i}: 20% off", "messageType": "promotional"})
            message = accept(client_id=client, workspace_id=workspace, to=request.to, text=request.text,
                             message_type="promotional", segments=request.segments, encoding=request.encoding,
                             cost=request.segments, idempotency_key=None, request_hash=None, at=runtime.clock.now())
            events += message.collect_events()
        runtime.sandesh.log.append_events(events)
        done += batch
        if done % 100_000 == 0:
            print(f"queued {done:,}", file=sys.stderr, flush=True)
    return time.monotonic() - started


def parts_in_window(runtime: Any) -> dict[str, int]:
    now = runtime.clock.now()
    with runtime.connection() as conn:
        rows = conn.execute("SELECT sim_id, count(*) AS n FROM sent_parts WHERE at > %s GROUP BY sim_id",
                            (now - WINDOW_SECONDS,)).fetchall()
    return {r["sim_id"]: r["n"] for r in rows}


def waiting(runtime: Any) -> int:
    with runtime.connection() as conn:
        return conn.execute("SELECT count(*) AS n FROM dispatch_queue WHERE sim_id IS NULL").fetchone()["n"]


def settle(runtime: Any, sims: list[str], timeout: float = 60.0) -> dict[str, int]:
    """Wait until the pool's windows are as full as the backlog makes them (no part for 1 s)."""
    deadline = time.monotonic() + timeout
    last, since = None, time.monotonic()
    while time.monotonic() < deadline:
        used = parts_in_window(runtime)
        if used != last:
            last, since = used, time.monotonic()
        elif time.monotonic() - since >= 1.0:
            return {sim: used.get(sim, 0) for sim in sims}
        time.sleep(0.1)
    raise SystemExit(f"the pool did not settle within {timeout:.0f} s: {last}")


def advance(runtime: Any, seconds: float) -> None:
    with runtime.connection() as conn:
        db.advance_clock(conn, seconds)


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start(args: list[str], env: dict[str, str], log: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "sandesh.scripts.service.cli", *args], env=env, cwd=ROOT,
                            stdout=open(log, "w"), stderr=subprocess.STDOUT)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("n", type=int, help="promotional messages waiting")
    parser.add_argument("--sims", type=int, default=4)
    parser.add_argument("--windows", type=int, default=20)
    parser.add_argument("--otps", type=int, default=30)
    parser.add_argument("--cpu-seconds", type=float, default=20.0)
    parser.add_argument("--port", type=int, default=18731)
    args = parser.parse_args(argv)
    result: dict[str, Any] = {"waiting": args.n, "sims": args.sims}
    with scratch_database() as env, Emulator(sims=args.sims, report_delay=0.2) as emulator:
        env = {**env, "SANDESH_CLOCK": "test"}
        runtime = bootstrap(Settings.from_env(env), pool_size=2)
        register_emulated(runtime, emulator.devices(), "bench")
        workspace = funded_workspace(runtime.sandesh, "Backlog", 10**13)
        client, key, _ = runtime.sandesh.operators.create_client(workspace, "Backlog", None, 10**6, "bench")
        result["fill_seconds"] = round(fill(runtime, workspace, client.id, args.n), 1)
        with runtime.connection() as conn:
            conn.execute("VACUUM ANALYZE dispatch_queue")
            sims = [r["id"] for r in conn.execute("SELECT id FROM sims ORDER BY name").fetchall()]
        api = start(["serve", "--bind", f"127.0.0.1:{args.port}"], env, "/tmp/sandesh-backlog-serve.log")
        dispatcher = start(["worker", "dispatch"], env, "/tmp/sandesh-backlog-dispatch.log")
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    requests.get(f"http://127.0.0.1:{args.port}/v1/sms/balance", timeout=1)
                    break
                except requests.ConnectionError:
                    assert time.monotonic() < deadline, "sandesh serve did not start"
                    time.sleep(0.2)

            if args.n:
                per_sim = {sim: 0 for sim in sims}
                windows = 0
                for _ in range(args.windows):
                    used = settle(runtime, sims)
                    if waiting(runtime) == 0:
                        break
                    assert max(used.values()) <= PARTS_PER_WINDOW, used
                    for sim, n in used.items():
                        per_sim[sim] += n
                    windows += 1
                    advance(runtime, WINDOW_SECONDS + 1)
                cap = PARTS_PER_WINDOW * windows
                result["pacing"] = {"windows": windows, "cap_per_sim": cap,
                                    "parts_per_sim": list(per_sim.values()),
                                    "min_share_of_cap": round(min(per_sim.values()) / cap, 4) if cap else None}
                settle(runtime, sims)

            before, started = cpu_seconds(dispatcher.pid), time.monotonic()
            time.sleep(args.cpu_seconds)
            result["dispatcher_cpu_share_of_one_core"] = round(
                (cpu_seconds(dispatcher.pid) - before) / (time.monotonic() - started), 4)
            result["waiting_during_cpu"] = waiting(runtime)

            latencies = []
            rng = random.Random(7)
            for i in range(args.otps):
                advance(runtime, WINDOW_SECONDS + 1)
                time.sleep(rng.uniform(0.0, 1.0))
                to = f"977984{9_000_000 + i:07d}"
                answer = requests.post(f"http://127.0.0.1:{args.port}/v1/sms/otp/send",
                                       json={"to": to, "purpose": "login"},
                                       headers={"x-api-key": key, "content-type": "application/json"}, timeout=10)
                accepted_at = time.monotonic()
                assert answer.status_code == 202, answer.text
                deadline = time.monotonic() + 10
                while True:
                    hits = [p["cmgs_at"] for m in emulator.modems for p in list(m.sent) if p["to"] == to]
                    if hits:
                        latencies.append((min(hits) - accepted_at) * 1000)
                        break
                    assert time.monotonic() < deadline, f"OTP {i} did not reach a modem within 10 s"
                    time.sleep(0.002)
            result["otp_202_to_cmgs_ms"] = latencies_ms(latencies)
            result["waiting_at_end"] = waiting(runtime)
        finally:
            stop(dispatcher, api)
            runtime.close()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
