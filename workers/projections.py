"""`sandesh worker projections`: keeps the followed read models up to date with the log."""
from __future__ import annotations

import logging
import threading

from sandesh.projections import follower
from sandesh.projections.storage.runtime import Runtime

logger = logging.getLogger("sandesh.worker.projections")


POOL_SIZE = 3


def run(runtime: Runtime, stop: threading.Event) -> None:
    logger.info("following the log for %s", ", ".join(follower.FOLLOWED))
    follower.run(runtime, stop)
