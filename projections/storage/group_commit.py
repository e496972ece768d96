"""Group commit: many requests' appends in one transaction (every save takes the events table
lock, so events saved together cost far less than one save each:
docs/performance.md, "The group commit's append").

Callers hand their pending events to one committer thread per process and wait.  The
committer takes whatever has queued while the previous transaction ran (no added wait when the
process is idle), saves it in one append with one inline write, and wakes the requests.  When a
batch is refused (a balance guard, an idempotency key, a version conflict), each of its items is
saved on its own, so every request gets its own outcome and nothing is charged for a refused one.
Any other failure (the database is away) fails the whole batch at once.

`save` waits for the commit; `submit` does not, and is told the outcome on the committer thread
(an API request awaits a future it resolves, api/waiting.py; the webhook sender's threads go on
to their next POST while their attempts commit).
"""
from __future__ import annotations

import logging
import queue
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from eventsourcing.persistence import IntegrityError

from sandesh.domain.errors import GuardRefused

logger = logging.getLogger(__name__)

MAX_BATCH = 200


@dataclass
class _Pending:
    events: list[Any]
    then: Callable[[BaseException | None], None] | None = None
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None

    def finish(self) -> None:
        self.done.set()
        if self.then is not None:
            try:
                self.then(self.error)
            except Exception:
                logger.exception("a commit's follow-up failed")


class GroupCommit:
    def __init__(self, save: Callable[[list[Any]], Any], max_batch: int = MAX_BATCH):
        self._save = save
        self._max_batch = max_batch
        self._queue: queue.SimpleQueue[_Pending | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def save(self, *aggregates: Any) -> None:
        """Append the aggregates' pending events; returns once committed, raises what the save raised."""
        pending = _Pending([e for a in aggregates for e in a.collect_events()])
        self._start()
        self._queue.put(pending)
        pending.done.wait()
        if pending.error is not None:
            raise pending.error

    def submit(self, *aggregates: Any, then: Callable[[BaseException | None], None]) -> None:
        """Append the aggregates' pending events without waiting: `then(None)` runs once they
        are committed, `then(error)` if they are not, on the committer thread (keep it short)."""
        pending = _Pending([e for a in aggregates for e in a.collect_events()], then)
        self._start()
        self._queue.put(pending)

    def _start(self) -> None:
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="group-commit", daemon=True)
                    self._thread.start()

    def close(self, wait: bool = False) -> None:
        """End the committer thread once what is queued has been committed (a webhook sender
        closing); with `wait`, return only then."""
        if self._thread is not None:
            self._queue.put(None)
            if wait:
                self._thread.join()

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch = [first]
            while len(batch) < self._max_batch:
                try:
                    pending = self._queue.get_nowait()
                except queue.Empty:
                    break
                if pending is None:  # closing: this batch is the last
                    self._queue.put(None)
                    break
                batch.append(pending)
            self._commit(batch)

    def _commit(self, batch: list[_Pending]) -> None:
        try:
            self._save([e for p in batch for e in p.events])
        except BaseException as error:
            if len(batch) == 1 or not isinstance(error, (IntegrityError, GuardRefused)):
                for pending in batch:  # the database is away (or worse): no use trying each alone
                    pending.error = error
            else:
                for pending in batch:
                    self._commit([pending])
                return
        for pending in batch:
            pending.finish()
