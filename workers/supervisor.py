"""Runs workers until SIGTERM or Ctrl-C, then stops them cleanly.

`sandesh worker NAME` runs one worker in this process; `sandesh worker all` runs each worker
that exists in its own process and forwards the stop to all of them.
"""
from __future__ import annotations

import logging
import signal
import subprocess
import sys
import threading
import time
from typing import Callable

from domain.settings import Settings

from . import dispatcher, projections, webhooks

def _dispatch(settings: Settings, stop: threading.Event, host: str | None = None) -> None:
    from projections.bootstrap import bootstrap

    runtime = bootstrap(settings, pool_size=4)
    running = dispatcher.Dispatcher(runtime, host)
    running.start()
    threading.Thread(target=lambda: (stop.wait(), running.stop.set()), daemon=True).start()
    try:
        running.run()
    finally:
        running.close()
        runtime.close()


WORKERS: dict[str, Callable[..., None]] = {"projections": projections.run, "dispatch": _dispatch,
                                           "webhooks": webhooks.run}


def run_one(name: str, settings: Settings, **options: object) -> int:
    settings.require_secret_key()
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    WORKERS[name](settings, stop, **options)
    return 0


def run_all(settings: Settings, extra_args: list[str]) -> int:
    settings.require_secret_key()
    children = [subprocess.Popen([sys.executable, "-m", "scripts.cli", *extra_args, "worker", name])
                for name in WORKERS]
    stopping = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stopping.set())
    while not stopping.is_set() and all(child.poll() is None for child in children):
        time.sleep(0.2)
    for child in children:
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
    codes = []
    for child in children:
        try:
            codes.append(child.wait(timeout=20))
        except subprocess.TimeoutExpired:
            child.kill()
            codes.append(1)
    return 0 if stopping.is_set() or all(code == 0 for code in codes) else 1
