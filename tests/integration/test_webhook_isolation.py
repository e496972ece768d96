"""One tenant's receivers cannot slow another's webhooks (docs/design.md, "Webhook sender"), with
real sockets and a real `sandesh worker webhooks`: workspace A has 100 clients whose receivers
answer 200 with a 1 MB body and then drip a byte every 5 s, or stream a body without end, three
deliveries each; workspace B has one quick receiver.  B's webhooks arrive as fast as they do
alone (p99 within 1 s of it) and the sender's memory stays under RSS_BOUND.

Without a deadline per attempt, a cap on what is read and a share per workspace, A's attempts
held all 65 of the sender's threads, each for as long as its receiver dripped, and B's webhooks
did not arrive at all."""
from __future__ import annotations

import itertools
import signal
import subprocess
import sys
import threading
import time

import orjson
import psutil
import pytest

from sandesh.domain.sending import parse_send
from tests.conftest import ROOT
from tests.helpers import funded_workspace
from tests.integration.test_webhooks import lifecycle
from tests.receiver import Dripping

CLIENTS = 100
EACH = 3
B_SENDS = 30
RSS_BOUND = 200 * 1024 * 1024  # bytes: the sender's whole process (docs/performance.md, "Webhook deliveries")
_numbers = itertools.count(40_000_000)
pytestmark = pytest.mark.alone  # it measures latency or throughput: run with nothing beside it (scripts/test.sh)


def send(runtime, workspace: str, client_id: str) -> str:
    request, _ = parse_send({"to": f"97798{next(_numbers):08d}", "text": "isolated"})
    message = runtime.sandesh.sending.send(client_id, workspace, request, 100)
    lifecycle(runtime, message, ("fail", "x"))  # a `failed` webhook for each
    return message.id


def latencies(runtime, workspace: str, client_id: str, receiver, path: str) -> list[float]:
    """B's sends one after another, 0.1 s apart: seconds from each send's failure to its webhook."""
    sent: dict[str, float] = {}
    for _ in range(B_SENDS):
        message_id = send(runtime, workspace, client_id)
        sent[message_id] = time.time()
        time.sleep(0.1)
    arrived = receiver.wait(path, len(sent), timeout=60)
    first: dict[str, float] = {}
    for hook in arrived:
        first.setdefault(orjson.loads(hook.body)["id"], hook.at)
    return sorted(first[m] - at for m, at in sent.items())


def p99(values: list[float]) -> float:
    return values[min(len(values) - 1, int(0.99 * len(values)))]


@pytest.mark.parametrize("mode", ["body", "endless"])
def test_a_workspace_of_100_dripping_receivers_does_not_slow_anothers_webhooks(runtime, env, receiver, mode):
    dripping = Dripping(receiver.ca, mode, every=5.0)
    a = funded_workspace(runtime.sandesh, f"Tenant A {mode}", 10**8, "t")
    b = funded_workspace(runtime.sandesh, f"Tenant B {mode}", 10**8, "t")
    b_alone, b_busy = (runtime.sandesh.operators.create_client(b, "B", receiver.url(f"/{phase}-{mode}"), 1000, "t")[0].id
                       for phase in ("alone", "busy"))
    a_clients = [runtime.sandesh.operators.create_client(a, f"A{n}", dripping.url(f"/a/{n}"), 1000, "t")[0].id
                 for n in range(CLIENTS)]
    worker = subprocess.Popen([sys.executable, "-m", "sandesh.scripts.service.cli", "worker", "webhooks"], cwd=ROOT,
                              env={**env, "REQUESTS_CA_BUNDLE": str(receiver.ca_file), "PYTHONPATH": str(ROOT)},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak = [0]
    sampling = threading.Event()

    def sample() -> None:
        process = psutil.Process(worker.pid)
        while not sampling.wait(0.2):
            try:
                peak[0] = max(peak[0], process.memory_info().rss)
            except psutil.NoSuchProcess:
                return
    threading.Thread(target=sample, daemon=True).start()
    try:
        warm = runtime.sandesh.operators.create_client(b, "Warm", receiver.url(f"/warm-{mode}"), 1000, "t")[0].id
        send(runtime, b, warm)
        receiver.wait(f"/warm-{mode}", 1, timeout=30)  # the sender runs: what follows measures it, not its start
        alone = latencies(runtime, b, b_alone, receiver, f"/alone-{mode}")
        for _ in range(EACH):
            for client_id in a_clients:
                send(runtime, a, client_id)
        time.sleep(3)  # A's attempts have taken what they may of the sender
        busy = latencies(runtime, b, b_busy, receiver, f"/busy-{mode}")
        print(f"webhooks of another tenant while 100 receivers {'drip' if mode == 'body' else 'stream'}: "
              f"p99 {p99(busy):.3f} s (alone {p99(alone):.3f} s), max {busy[-1]:.3f} s; "
              f"sender RSS peak {peak[0] / 2**20:.0f} MiB")
        assert p99(busy) <= p99(alone) + 1.0, (alone, busy)
        assert peak[0] <= RSS_BOUND, peak[0]
    finally:
        sampling.set()
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
        dripping.close()
