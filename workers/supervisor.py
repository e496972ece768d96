"""Runs workers until SIGTERM or Ctrl-C, then stops them cleanly.

`sandesh worker NAME` runs one worker in this process; `sandesh worker all` runs each worker
that exists in its own process, starts again one that dies (with capped backoff, logged), and
forwards the stop to all of them.
"""
from __future__ import annotations

import logging
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from sandesh.domain.errors import NeedsNewerRelease
from sandesh.domain.settings import Settings
from sandesh.projections.storage.runtime import Runtime

from . import dispatcher, notifier, projections, webhooks

logger = logging.getLogger("sandesh.supervisor")


def _dispatch(runtime: Runtime, stop: threading.Event, host: str | None = None) -> None:
    running = dispatcher.Dispatcher(runtime, host)
    running.start()
    threading.Thread(target=lambda: (stop.wait(), running.stop.set()), daemon=True).start()
    try:
        running.run()
    finally:
        if holding := running.close():
            logger.warning("dispatcher stopped; the threads of SIMs %s had not let go of their ports",
                           ", ".join(holding))


@dataclass(frozen=True)
class Worker:
    run: Callable[..., None]  # (runtime, stop, **options): returns once `stop` is set
    pool_size: int            # database connections it needs


WORKERS: dict[str, Worker] = {"projections": Worker(projections.run, projections.POOL_SIZE),
                              "dispatch": Worker(_dispatch, 4),
                              "webhooks": Worker(webhooks.run, webhooks.POOL_SIZE),
                              "notifier": Worker(notifier.run, notifier.POOL_SIZE)}


# A worker that met an event only a newer release can read exits with this status, and is not
# started again: it would meet the same event (docs/operations.md, "Upgrading").
NEEDS_NEWER_RELEASE = NeedsNewerRelease.exit_status
# A worker whose root key the database does not take (not the current one, or retired: it found
# out once the database answered) exits with this status, and is not started again either: it
# would write what the other processes cannot read (projections/storage/keys.py, KeyRing.refusal).
KEY_REFUSED = 4
NOT_RESTARTED = {NEEDS_NEWER_RELEASE: "the database needs a newer release",
                 KEY_REFUSED: "its root key is not the database's (`sandesh key status`)"}


def run_one(name: str, settings: Settings, open_runtime: Callable[[Settings, int, str], Runtime],
            **options: object) -> int:
    """Run one worker in this process until SIGTERM or Ctrl-C; `open_runtime` is the wiring
    (scripts/service/bootstrap.py), given by the caller so that workers do not import the entry points."""
    settings.require_secret_key()
    stop = stop_on_signals()
    worker = WORKERS[name]
    runtime = open_runtime(settings, worker.pool_size, name)
    newer: list[str] = []
    refused: list[str] = []
    runtime.log.mapper.on_newer = lambda message: (newer.append(message), stop.set())  # type: ignore[attr-defined]
    if runtime.keys is not None:
        runtime.keys.on_refused = lambda message: (refused.append(message), stop.set())
    try:
        worker.run(runtime, stop, **options)
    finally:
        runtime.close()
    if newer:
        logger.critical("worker %s stopped: %s", name, newer[0])
        return NEEDS_NEWER_RELEASE
    if refused:
        logger.critical("worker %s stopped: %s", name, refused[0])
        return KEY_REFUSED
    return 0


def run_all(settings: Settings, extra_args: list[str]) -> int:
    settings.require_secret_key()
    children = [Child(f"worker {name}", [sys.executable, "-m", "sandesh.scripts.service.cli", *extra_args, "worker", name])
                for name in WORKERS]
    return supervise(children, stop_on_signals())


RESTART_DELAYS = (1, 2, 4, 8, 16, 30)  # seconds; reset once a child has run for a minute
STEADY_SECONDS = 60.0


@dataclass
class Child:
    """A process that is started again whenever it dies (docs/reliability.md)."""
    name: str
    argv: list[str]
    env: dict[str, str] | None = None
    stdout: Any = None
    process: subprocess.Popen | None = None
    started: float = 0.0
    restart_at: float = 0.0
    crashes: int = 0

    def start(self) -> None:
        self.process = subprocess.Popen(self.argv, env=self.env, stdout=self.stdout)
        self.started = time.monotonic()


def stop_on_signals() -> threading.Event:
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    return stop


def supervise(children: list[Child], stop: threading.Event) -> int:
    """Run the children until `stop`; restart one that exits, with capped backoff, logged."""
    for child in children:
        if child.process is None:
            child.start()
    while not stop.is_set():
        now = time.monotonic()
        for child in children:
            if child.process is not None and (code := child.process.poll()) is not None:
                if code in NOT_RESTARTED:
                    logger.critical("%s stopped: %s; stopping every worker", child.name, NOT_RESTARTED[code])
                    stop.set()
                    return _stop_all(children, code)
                ran = now - child.started
                child.crashes = 1 if ran >= STEADY_SECONDS else child.crashes + 1
                delay = RESTART_DELAYS[min(child.crashes - 1, len(RESTART_DELAYS) - 1)]
                logger.warning("%s exited with status %s after %.0f s; restarting it in %d s", child.name, code, ran, delay)
                child.process, child.restart_at = None, now + delay
            elif child.process is None and now >= child.restart_at:
                child.start()
                logger.warning("%s restarted (pid %d)", child.name, child.process.pid)
        stop.wait(0.2)
    return _stop_all(children, 0)


def _stop_all(children: list[Child], status: int) -> int:
    running = [c.process for c in children if c.process is not None and c.process.poll() is None]
    for process in running:
        process.send_signal(signal.SIGTERM)
    for process in running:
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
    return status
