"""Whether this process can reach PostgreSQL, told once when it goes and once when it is back
(docs/reliability.md).

An outage is noticed by whoever fails first (a request, a worker loop) and reported here.  A
watcher thread then tries a fresh connection with capped backoff; when one succeeds it checks
the pooled connections (the ones that died with the server are replaced, never handed out
again) and logs how long the database was away.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any

import psycopg
import psycopg_pool
from eventsourcing.persistence import InterfaceError, OperationalError

logger = logging.getLogger("sandesh.database")

# What "the database is away" looks like from here: the server refused or dropped the connection,
# the pool had none to give within its timeout, or a statement was cancelled by a timeout.
OUTAGE_ERRORS = (psycopg.OperationalError, psycopg.InterfaceError, psycopg_pool.PoolTimeout,
                 OperationalError, InterfaceError)


# A statement the database refused for another transaction's sake (a deadlock, a serialization
# failure, a lock not granted in time, as under a migration: projections/storage/db.py): the
# database is there, and the same request may be made again at once.
CONTENTION_ERRORS = (psycopg.errors.TransactionRollback, psycopg.errors.LockNotAvailable)


class DatabaseUnavailable(Exception):
    """PostgreSQL cannot be reached; the message says where and what to do."""


def is_outage(error: BaseException | None) -> bool:
    return _caused_by(error, (*OUTAGE_ERRORS, DatabaseUnavailable))


def is_contention(error: BaseException | None) -> bool:
    return _caused_by(error, CONTENTION_ERRORS)


def _caused_by(error: BaseException | None, kinds: tuple[type[BaseException], ...]) -> bool:
    while error is not None:
        if isinstance(error, kinds):
            return True
        error = error.__cause__ or error.__context__
    return False


class DatabaseHealth:
    def __init__(self, conninfo: str, pool: Any = None, name: str = "sandesh"):
        self.conninfo = conninfo
        self.pool = pool
        self.name = name
        self.down = False
        self._since = 0.0
        self._lock = threading.Lock()

    def failed(self, error: BaseException) -> None:
        """Something could not reach the database: say so once, and watch for its return."""
        with self._lock:
            if self.down:
                return
            self.down, self._since = True, time.monotonic()
        logger.warning("%s: database unavailable (%s); retrying with backoff", self.name, _first_line(error))
        threading.Thread(target=self._watch, name="database watch", daemon=True).start()

    def _watch(self) -> None:
        delay = 0.2
        while True:
            try:
                psycopg.connect(self.conninfo, connect_timeout=2).close()
                break
            except psycopg.Error:
                time.sleep(delay)
                delay = min(delay * 2, 2.0)
        if self.pool is not None:
            try:
                self.pool.check()  # discard the connections that died with the server, open new ones
            except Exception as error:  # the next failure starts a new watch
                logger.info("%s: checking pooled connections failed: %s", self.name, _first_line(error))
        with self._lock:
            self.down = False
            away = time.monotonic() - self._since
        logger.warning("%s: database reachable again after %.1f s", self.name, away)


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
