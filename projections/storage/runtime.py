"""The handle every process holds on the running store: settings, the use cases over the log,
the service clock, pooled connections and the database's health.  It is built by the wiring in
`scripts/service/bootstrap.py`; code here and in the workers only uses it."""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, ContextManager, Iterator

from sandesh.domain.application import Sandesh
from sandesh.domain.clock import Clock
from sandesh.domain.settings import Settings
from sandesh.domain.usecases.log import Log

from .group_commit import GroupCommit
from .health import DatabaseHealth
from .keys import KeyRing
from .releases import Watch


def pooled_connections(log: Log) -> Callable[[], ContextManager[Any]]:
    """Pooled autocommit connections (dict rows), shared with the event store."""
    datastore = log.recorder.datastore  # type: ignore[attr-defined]

    @contextmanager
    def connection() -> Iterator[Any]:
        with datastore.get_connection() as conn:
            yield conn
    return connection


@dataclass
class Runtime:
    settings: Settings
    sandesh: Sandesh
    clock: Clock
    connection: Callable[[], ContextManager[Any]]  # runtime.connection(): a pooled connection
    health: DatabaseHealth
    commits: GroupCommit | None = None  # the process's group commit, in the API
    watch: Watch | None = None  # a long-running process's report of its release, and its read of the gate
    keys: KeyRing | None = None  # the server keys this process holds (projections/storage/keys.py)

    @property
    def log(self) -> Log:
        return self.sandesh.log

    def close(self) -> None:
        if self.watch is not None:
            self.watch.stop()
        self.sandesh.close()
