"""The handle every process holds on the running store: settings, the application over the
log, the service clock and the database's health.  It is built by the wiring in
`scripts/bootstrap.py`; code here and in the workers only uses it."""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

from sandesh.domain.application import Sandesh
from sandesh.domain.clock import Clock
from sandesh.domain.settings import Settings

from .group_commit import GroupCommit
from .health import DatabaseHealth


@dataclass
class Runtime:
    settings: Settings
    app: Sandesh
    clock: Clock
    health: DatabaseHealth
    commits: GroupCommit | None = None  # the process's group commit, in the API
    @contextmanager
    def connection(self) -> Iterator[Any]:
        """A pooled autocommit connection (dict rows) shared with the event store."""
        with self.app.recorder.datastore.get_connection() as conn:  # type: ignore[attr-defined]
            yield conn

    def close(self) -> None:
        self.app.close()
