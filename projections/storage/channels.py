"""Following a PostgreSQL notification channel from a thread (LISTEN/NOTIFY), the one loop
behind the dispatcher's wake-ups and the API's caller cache (docs/design.md, "The dispatcher",
"The caller cache").

A notification is only delivered to a connection that was listening when it was sent, so a
follower hears `on_connect()` after every (re)connection and before the first notification,
and `on_lost()` as soon as the connection fails: whatever it kept from notifications must be
thrown away there, since what changed while it was away it will never hear about.
"""
from __future__ import annotations

import logging
import threading
from typing import Callable, Optional

import psycopg

logger = logging.getLogger("sandesh.channels")

# The API processes' caller caches (projections/callers.py) hear on CALLERS what they must
# forget: a client, workspace or the SMS switch changed (CALLER), or the route may have (ROUTE).
CALLERS = "sandesh_callers"
CALLER, ROUTE = "caller", "route"

FIRST_DELAY, MAX_DELAY = 0.5, 2.0  # seconds between reconnection attempts: doubled, capped


def listen(database_url: str, channel: str, wake: Callable[[str], None], stop: threading.Event, *,
           on_connect: Callable[[], None], on_lost: Callable[[], None] = lambda: None) -> None:
    """Call `wake(payload)` for every notification on `channel` until `stop` is set.  A database
    that goes away is waited for with capped backoff, logged once when it goes and once when it
    is back."""
    delay, down = FIRST_DELAY, False
    while not stop.is_set():
        try:
            with psycopg.connect(database_url, autocommit=True, connect_timeout=5) as conn:
                conn.execute(f"LISTEN {channel}")
                if down:
                    logger.info("%s channel: listening again", channel)
                delay, down = FIRST_DELAY, False
                on_connect()
                while not stop.is_set():
                    for notify in conn.notifies(timeout=1.0):
                        wake(notify.payload)
        except psycopg.Error as error:
            on_lost()
            if stop.is_set():
                return  # closing: the connection went with the process's pool or database
            if not down:
                logger.warning("%s channel: lost (%s); retrying with backoff", channel,
                            str(error).strip().splitlines()[0])
                down = True
            stop.wait(delay)
            delay = min(delay * 2, MAX_DELAY)


class Remembered:
    """What a process keeps of the database between requests while it listens on `channel`:
    `forget(payload)` is called for each notification, `forget(None)` when the channel is
    (re)connected or lost, and nothing may be kept while it is down.  A value read before a
    notification and kept after it would be stale: read `generation` before reading the value
    and keep it with `keep(generation, ...)`, which refuses it if anything came between."""

    def __init__(self, database_url: str | None, channel: str, name: str):
        self.lock = threading.Lock()
        self.generation = 0
        self._live = False
        self._stop = threading.Event()
        if database_url is not None:
            threading.Thread(target=listen, name=name, daemon=True, kwargs={
                "database_url": database_url, "channel": channel, "wake": self._changed, "stop": self._stop,
                "on_connect": self._connected, "on_lost": self._lost}).start()

    def forget(self, payload: Optional[str]) -> None:
        raise NotImplementedError

    def keep(self, generation: int, store: Callable[[], None]) -> None:
        with self.lock:
            if self._live and generation == self.generation:
                store()

    def close(self) -> None:
        self._stop.set()

    def _changed(self, payload: str) -> None:
        with self.lock:
            self.generation += 1
            self.forget(payload)

    def _connected(self) -> None:
        with self.lock:
            self.generation += 1
            self.forget(None)
            self._live = True

    def _lost(self) -> None:
        with self.lock:
            self._live = False
            self.generation += 1
            self.forget(None)
