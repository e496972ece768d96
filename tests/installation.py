"""A whole installation run as an operator runs it, for the tests that upgrade, rotate keys or
fail a database over under traffic: its long-running processes, a client sending meanwhile,
and waiting for what the processes do."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
import urllib.request
from collections import Counter
from pathlib import Path

import requests


class Processes:
    """The long-running processes of one test, by name; stopped with SIGTERM as an operator would."""

    def __init__(self, logs: Path):
        self.logs, self.running = logs, {}

    def start(self, name: str, argv: list[str], env: dict[str, str]) -> subprocess.Popen:
        log = open(self.logs / f"{name}.log", "ab")
        self.running[name] = subprocess.Popen(argv, env=env, cwd=self.logs, stdout=log, stderr=log,
                                              stdin=subprocess.DEVNULL, start_new_session=True)
        return self.running[name]

    def stop(self, name: str) -> None:
        process = self.running.pop(name)
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    def stop_all(self) -> None:
        for name in list(self.running):
            self.stop(name)


class Traffic:
    """Sends to whichever APIs are up, in turn; keeps every answer's status and each 202's id.
    A connection refused by an API being restarted is tried on the next one."""

    def __init__(self, key: str):
        self.key, self.urls = key, []
        self.acked: dict[str, str] = {}  # message id -> its text
        self.statuses: Counter[int] = Counter()
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        session, n = requests.Session(), 0
        while not self.stop.wait(0.25):
            n += 1
            text = f"rolling upgrade {n}"
            for _ in range(4):
                with self.lock:
                    urls = list(self.urls)
                if not urls:
                    break
                url = urls[n % len(urls)]
                try:
                    answer = session.post(f"{url}/v1/sms/send", timeout=10, json={"to": "9779841000001", "text": text},
                                          headers={"x-api-key": self.key, "Idempotency-Key": f"upgrade-{n}"})
                except requests.ConnectionError:  # the same request, with the same key, to another API
                    urls.remove(url)
                    continue
                self.statuses[answer.status_code] += 1
                if answer.status_code == 202:
                    self.acked[answer.json()["messageId"]] = text
                break

    def serve_at(self, *urls: str) -> None:
        with self.lock:
            self.urls = list(urls)


def wait_draining(left, total: int, next_window, what: str, timeout: float = 120.0, stall: float = 5.0) -> None:
    """Wait until `left()` messages of `total` left a modem.  A pool sends at most 30 parts a SIM
    in 30 minutes (domain/pacing.py): traffic that outran it waits for the next window, so when
    the count stops growing for `stall` seconds, `next_window()` moves the test clock on."""
    deadline, seen, since = time.monotonic() + timeout, -1, time.monotonic()
    while (count := left()) != total:
        assert time.monotonic() < deadline, f"timed out waiting for {what}: {count} of {total}"
        if count != seen:
            seen, since = count, time.monotonic()
        elif time.monotonic() - since > stall:
            next_window()
            since = time.monotonic()
        time.sleep(0.25)


def wait_until(check, what: str, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.25)
    return found


def answering(url: str) -> bool:
    """The API answers.  Asked without `requests`, whose answers the suite checks against this
    release's document: the previous release's health answer has no `version`."""
    try:
        with urllib.request.urlopen(f"{url}/v1/health", timeout=2) as answer:
            return answer.status == 200
    except OSError:
        return False


def devices(log: Path, count: int) -> list[str]:
    """The emulator's pseudo-terminals, from the JSON line it prints per modem, once all `count` are there."""
    lines = [line for line in log.read_text().splitlines() if line.startswith("{")] if log.exists() else []
    return [json.loads(line)["device"] for line in lines] if len(lines) >= count else []

