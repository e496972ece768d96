"""`sandesh worker projections`: keeps the followed read models up to date with the log."""
from __future__ import annotations

import logging
import threading

from domain.settings import Settings
from projections import follower
from projections.bootstrap import bootstrap

log = logging.getLogger("sandesh.worker.projections")


def run(settings: Settings, stop: threading.Event) -> None:
    runtime = bootstrap(settings, pool_size=3)
    log.info("following the log for %s", ", ".join(follower.FOLLOWED))
    try:
        follower.run(runtime, stop)
    finally:
        runtime.close()
