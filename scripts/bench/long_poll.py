"""What long polls of GET /v1/events cost the other endpoints, against the product as a user runs
it (`sandesh serve` and `sandesh worker all`, no flag; two emulated modems): the median, p90 and
p99 of `GET /v1/sms/messages/{id}` and of `POST /v1/sms/send`, one request at a time, with no
long poll open, with `--waiters` long polls (`wait=30`, each asked again as soon as it is
answered) held open by other clients, and with none again.  First, how soon a waiting poll
answers once an event of its own client is in the feed, the queue empty.  docs/performance.md, "Long polls of the events feed".

Usage: .venv/bin/python -m scripts.bench.long_poll [--waiters 200] [--requests 300]
"""
from __future__ import annotations

import argparse
import statistics
import threading
import time
from contextlib import ExitStack

import psycopg
import requests

from sandesh.domain.settings import Settings
from sandesh.scripts.service.bootstrap import bootstrap

from .common import funded_workspace, percentile, scratch_database
from .send_bench import SANDESH, product

URL = f"http://127.0.0.1:{SANDESH}"


class Waiters:
    """`count` long polls held open, each on a thread of its own (blocked on its socket), over
    `keys` (clients that send nothing, so each poll waits its 30 s), asked again as soon as
    answered."""

    def __init__(self, keys: list[str], count: int):
        self.answered = self.failed = self.open = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        for n in range(count):
            threading.Thread(target=self._poll, args=(keys[n % len(keys)],), daemon=True).start()

    def _poll(self, key: str) -> None:
        http = requests.Session()
        while not self._stop.is_set():
            with self._lock:
                self.open += 1
            try:
                answer = http.get(URL + "/v1/events?wait=30", headers={"x-api-key": key}, timeout=45)
                ok = answer.status_code == 200
            except requests.RequestException:
                ok = False
            with self._lock:
                self.open -= 1
                self.answered += ok
                self.failed += not ok

    def stop(self) -> None:
        self._stop.set()


def timed(http: requests.Session, key: str, count: int, message_id: str) -> tuple[list[float], list[float]]:
    lookups, sends = [], []
    for n in range(count):
        started = time.perf_counter()
        answer = http.get(f"{URL}/v1/sms/messages/{message_id}", headers={"x-api-key": key}, timeout=30)
        lookups.append((time.perf_counter() - started) * 1000)
        assert answer.status_code == 200, answer.text[:300]
        started = time.perf_counter()
        answer = http.post(URL + "/v1/sms/send", json={"to": f"97798{n % 10**8:08d}", "text": "a live send"},
                           headers={"x-api-key": key}, timeout=30)
        sends.append((time.perf_counter() - started) * 1000)
        assert answer.status_code == 202, answer.text[:300]
    return lookups, sends


def latency(http: requests.Session, database_url: str, client_id: str, key: str) -> str:
    """How soon a waiting poll answers once its client's next event is in the feed (found by
    reading events_feed every 5 ms), over 20 sends of that client, the queue empty."""
    took = []
    with psycopg.connect(database_url, autocommit=True) as conn:
        for n in range(20):
            count = conn.execute("SELECT count(*) FROM events_feed WHERE client_id = %s", (client_id,)).fetchone()[0]
            events = http.get(URL + "/v1/events", headers={"x-api-key": key}, timeout=30).json()["data"]
            after = {"after": events[-1]["id"]} if events else {}
            answered: list[float] = []

            def poll() -> None:
                requests.get(URL + "/v1/events", params={"wait": 30, **after}, headers={"x-api-key": key},
                             timeout=40)
                answered.append(time.monotonic())

            thread = threading.Thread(target=poll)
            thread.start()
            time.sleep(0.5)
            answer = http.post(URL + "/v1/sms/send", json={"to": f"97798{n:08d}", "text": "watched"},
                               headers={"x-api-key": key}, timeout=30)
            assert answer.status_code == 202, answer.text
            while conn.execute("SELECT count(*) FROM events_feed WHERE client_id = %s",
                               (client_id,)).fetchone()[0] == count:
                time.sleep(0.005)
            in_feed = time.monotonic()
            thread.join()
            took.append((answered[0] - in_feed) * 1000)
            deadline = time.monotonic() + 10  # its delivered event too, before the next
            while conn.execute("SELECT count(*) FROM events_feed WHERE client_id = %s",
                               (client_id,)).fetchone()[0] < count + 2 and time.monotonic() < deadline:
                time.sleep(0.05)
    return (f"a waiting poll answered {statistics.median(took):.1f} ms (median; p90 {percentile(took, 90):.1f}, "
            f"max {max(took):.1f}) after its client's event was in the feed, over {len(took)} events")


def row(name: str, lookups: list[float], sends: list[float]) -> str:
    return f"{name:<28} " + " ".join(f"{statistics.median(t):>8.2f} {percentile(t, 90):>7.2f} {percentile(t, 99):>7.2f}"
                                     for t in (lookups, sends))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--waiters", type=int, default=200, help="long polls held open (default 200)")
    parser.add_argument("--requests", type=int, default=300, help="lookups and sends at each step (default 300)")
    args = parser.parse_args()
    with scratch_database() as env, ExitStack() as running:
        runtime = bootstrap(Settings.from_env(env), pool_size=2)
        workspace = funded_workspace(runtime.sandesh, "Poll bench", 10**12)
        key = runtime.sandesh.operators.create_client(workspace, "Sender", None, 10**6, "bench")[1]
        made, watched, _ = runtime.sandesh.operators.create_client(workspace, "Watched", None, 10**6, "bench")
        watched_id = made.id
        quiet = [runtime.sandesh.operators.create_client(workspace, f"Waiter {n}", None, 10**6, "bench")[1]
                 for n in range(20)]
        runtime.close()
        running.enter_context(product(env, running))
        http = requests.Session()
        answer = http.post(URL + "/v1/sms/send", json={"to": "9779812345678", "text": "a live send"},
                           headers={"x-api-key": key}, timeout=30)
        message_id = answer.json()["messageId"]
        print(latency(http, env["DATABASE_URL"], watched_id, watched), flush=True)
        timed(http, key, 50, message_id)  # warm
        time.sleep(2)
        print(f"sandesh serve and sandesh worker all as installed (no flag); {args.requests} lookups and sends, "
              f"one at a time; ms")
        print(f"{'':<28} {'lookup p50':>8} {'p90':>7} {'p99':>7} {'send p50':>8} {'p90':>7} {'p99':>7}")
        print(row("no long poll", *timed(http, key, args.requests, message_id)), flush=True)
        waiters = Waiters(quiet, args.waiters)
        deadline = time.monotonic() + 30
        while waiters.open < args.waiters and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1)
        held = waiters.open
        print(row(f"{held} long polls open", *timed(http, key, args.requests, message_id)), flush=True)
        still = waiters.open
        waiters.stop()
        time.sleep(32)  # every poll answered and not asked again
        print(row("no long poll, again", *timed(http, key, args.requests, message_id)), flush=True)
        print(f"long polls: {held} open before, {still} after the timed requests; {waiters.answered} answered "
              f"(each after its 30 s), {waiters.failed} failed")


if __name__ == "__main__":
    main()
