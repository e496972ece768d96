"""Devices benchmark: a serial modem, a HiLink stick and an Android phone in one pool.

    .venv/bin/python -m scripts.bench.devices [--each 20] [--messages 300]

1. A scratch database with the test clock; one emulated device of each kind, in this process:
   the serial modem on a pseudo-terminal, the HiLink stick and the phone as HTTP servers on
   127.0.0.1, registered as `sandesh sim add` registers them.
2. `sandesh serve` and `sandesh worker all` start as the README starts them (no flags).
3. For each kind alone (the other two disabled): --each messages posted one after another,
   the device idle in between, each timed from its 202 to the device's send (AT+CMGS on the modem, `sms/send-sms` on the
   stick, `POST /message` on the phone).
4. The three together: --messages messages to different numbers, posted at once; the test
   clock moves on 30 minutes whenever the pool's pacing windows are full.  Counts how the
   messages spread and that each reached a device exactly once.

Prints one JSON object.  Figures and the command are in docs/performance.md.
"""
from __future__ import annotations

import argparse
import collections
import json
import time
from typing import Any, Callable

import requests

from sandesh.domain.pacing import WINDOW_SECONDS
from sandesh.domain.settings import Settings
from sandesh.scripts.service.android_emulator import AndroidPhone
from sandesh.scripts.service.bootstrap import bootstrap
from sandesh.scripts.service.commands import register_emulated
from sandesh.scripts.service.emulator import Emulator
from sandesh.scripts.service.hilink_emulator import HilinkDevice

from .backlog import advance, start
from .common import funded_workspace, latencies_ms, scratch_database, stop


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--each", type=int, default=20, help="messages timed on each kind alone")
    parser.add_argument("--messages", type=int, default=300, help="messages through the three together")
    parser.add_argument("--port", type=int, default=18741)
    args = parser.parse_args(argv)
    base = f"http://127.0.0.1:{args.port}"
    result: dict[str, Any] = {}
    with scratch_database() as env, Emulator(sims=1, report_delay=0.05) as serial, HilinkDevice() as stick, \
            AndroidPhone() as phone:
        env = {**env, "SANDESH_CLOCK": "test"}
        runtime = bootstrap(Settings.from_env(env), pool_size=2)
        register_emulated(runtime, serial.devices(), "bench")
        runtime.sandesh.sims.add_sim("stick", stick.port_url(), 115200, None, "bench")
        runtime.sandesh.sims.add_sim("phone", phone.port_url(), 115200, None, "bench")
        workspace = funded_workspace(runtime.sandesh, "Devices", 10**13)
        _, key, _ = runtime.sandesh.operators.create_client(workspace, "Devices", None, 10**6, "bench")
        headers = {"x-api-key": key, "content-type": "application/json"}
        with runtime.connection() as conn:
            ids = {r["name"]: r["id"] for r in conn.execute("SELECT id, name FROM sims").fetchall()}
        kinds: dict[str, tuple[str, Callable[[], list[tuple[str, str, float]]]]] = {
            "serial": (serial.modems[0].name, lambda: [(p["to"].lstrip("+"), p.get("text") or "", p["cmgs_at"])
                                                        for p in list(serial.modems[0].sent)]),
            "hilink": ("stick", lambda: [(s.to.lstrip("+"), s.text, s.posted_at) for s in list(stick.sent)]),
            "android": ("phone", lambda: [(s["to"].lstrip("+"), s["text"], s["posted_at"]) for s in list(phone.sent)]),
        }
        api = start(["serve", "--bind", f"127.0.0.1:{args.port}"], env, "/tmp/sandesh-devices-serve.log")
        workers = start(["worker", "all"], env, "/tmp/sandesh-devices-workers.log")
        try:
            wait_until(lambda: up(base), 30, "sandesh serve did not start")
            number = iter(range(10_000_000, 99_999_999))
            for kind, (name, sent) in kinds.items():
                for other, _ in kinds.values():
                    switch(runtime, ids[other], other == name)
                advance(runtime, WINDOW_SECONDS + 1)  # a fresh pacing window; the heartbeats come again
                wait_until(lambda: route(runtime, ids[name]), 30, f"{kind} never became a route")
                latencies = []
                for _ in range(args.each):
                    to = f"97798{next(number):08d}"
                    answer = requests.post(base + "/v1/sms/send", json={"to": to, "text": f"Timed {kind} {to}"},
                                           headers=headers, timeout=10)
                    accepted = time.monotonic()
                    assert answer.status_code == 202, answer.text
                    at = wait_until(lambda: next((a for t, _, a in sent() if t == to), None), 10,
                                    f"a message never reached the {kind} device")
                    latencies.append((at - accepted) * 1000)
                    time.sleep(0.5)  # the device idle again (one send at a time) before the next is timed
                result[f"{kind}_202_to_send_ms"] = latencies_ms(latencies)
            for name, _ in kinds.values():
                switch(runtime, ids[name], True)
            advance(runtime, WINDOW_SECONDS + 1)
            wait_until(lambda: all(route(runtime, ids[n]) for n, _ in kinds.values()), 30, "the pool never became whole")
            texts = {}
            started = time.monotonic()
            for n in range(args.messages):
                to = f"97798{next(number):08d}"
                texts[to] = f"Pool {n}"
                answer = requests.post(base + "/v1/sms/send", json={"to": to, "text": texts[to]}, headers=headers,
                                       timeout=10)
                assert answer.status_code == 202, answer.text
            deadline = time.monotonic() + 300
            while True:
                reached = collections.Counter(t for _, sent in kinds.values() for t, text, _ in sent()
                                              if texts.get(t) == text)
                if len(reached) == len(texts):
                    break
                assert time.monotonic() < deadline, f"{len(reached)} of {len(texts)} reached a device in 300 s"
                advance(runtime, WINDOW_SECONDS + 1)  # the next pacing windows
                time.sleep(2.0)
            result["pool"] = {
                "messages": args.messages, "seconds": round(time.monotonic() - started, 1),
                "by_kind": {kind: sum(1 for t, text, _ in sent() if texts.get(t) == text)
                            for kind, (_, sent) in kinds.items()},
                "sent_more_than_once": sum(1 for count in reached.values() if count > 1)}
        finally:
            stop(workers, api)
            runtime.close()
    print(json.dumps(result))
    return 0


def switch(runtime: Any, sim_id: str, on: bool) -> None:
    with runtime.connection() as conn:
        enabled = conn.execute("SELECT enabled FROM sims WHERE id = %s", (sim_id,)).fetchone()["enabled"]
    if enabled != on:
        (runtime.sandesh.sims.enable_sim if on else runtime.sandesh.sims.disable_sim)(sim_id, "bench")


def up(base: str) -> bool:
    try:
        requests.get(base + "/v1/health", timeout=1)
        return True
    except requests.ConnectionError:
        return False


def route(runtime: Any, sim_id: str) -> bool:
    with runtime.connection() as conn:
        row = conn.execute("SELECT healthy FROM sim_health WHERE sim_id = %s AND heartbeat_at > %s",
                           (sim_id, runtime.clock.now() - 60)).fetchone()
    return bool(row and row["healthy"])


def wait_until(check: Callable[[], Any], seconds: float, failure: str) -> Any:
    deadline = time.monotonic() + seconds
    while not (found := check()):
        if time.monotonic() > deadline:
            raise SystemExit(failure)
        time.sleep(0.002)
    return found


if __name__ == "__main__":
    raise SystemExit(main())
