"""How a request waits without holding the event loop or a thread (docs/design.md, "The event loop").

Falcon's ASGI app serves every request of a worker process as a coroutine on one event loop.
Two kinds of waiting leave that loop:

- `Blocking`: work that reads PostgreSQL through the store's pooled, blocking connections runs
  on a bounded pool of threads (as many as the process has connections), with the request's
  log context;
- `Commit`: a use case's appends (domain/steps.py) go to the process's group commit, and the
  request awaits a future that the committer thread resolves: no thread waits for a request
  while its events commit;
- `Hashing`: the dashboard's use cases that hash or check a password (argon2id, which runs on a
  child process: projections/storage/passwords.py) run on a thread of their own, one start a second
  after a burst of three, with a bounded queue: sign-ins never take the threads the API's requests need, nor more
  of the machine than that, and past the queue they are told to come back (`Busy`: a 503 with
  Retry-After).

`drive` runs a use case (domain/steps.py) with both: the code between two of its effects runs
on the loop, each read it yields on a blocking thread (unless a cache answers it), each append
is awaited on the group commit.
"""
from __future__ import annotations

import asyncio
import contextvars
import math
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

from sandesh.domain.steps import Append, Effect, Read, Steps
from sandesh.projections.storage.group_commit import GroupCommit

T = TypeVar("T")


class Blocking:
    """`await blocking(fn, *args)`: fn(*args) on one of `threads` threads, in the caller's context."""

    def __init__(self, threads: int):
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix="api-blocking")

    async def __call__(self, fn: Callable[..., T], *args: Any) -> T:
        context = contextvars.copy_context()
        return await asyncio.get_running_loop().run_in_executor(self._executor, context.run, fn, *args)

    def close(self) -> None:
        self._executor.shutdown(wait=False)


class Busy(Exception):
    """Every thread of a bounded executor is busy and its queue is full: come back later."""

    def __init__(self, retry_after: int):
        super().__init__(f"busy: retry after {retry_after} s")
        self.retry_after = retry_after


class Hashing:
    """`await hashing(fn, *args)`: fn(*args) (a use case that hashes or checks a password) on
    one of `threads` threads, at most one start every `spacing` seconds after a burst of `burst`
    (GCRA, as the request rate: docs/design.md), or Busy at once when
    `threads` run and `queue` more wait already.  A try from a trusted device (a browser that
    signed in to the account before: docs/dashboard.md, "Signing in") goes before the others,
    and is refused only when `queue` trusted tries wait already."""

    def __init__(self, threads: int = 1, queue: int = 8, spacing: float = 1.0, burst: int = 3):
        self.threads, self.queue, self.spacing, self.burst = threads, queue, spacing, burst
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix="api-hashing")
        # On the event loop only: the calls running, and the ones waiting for a thread, in two lines
        self._running = 0
        self._trusted: deque[asyncio.Future[None]] = deque()
        self._others: deque[asyncio.Future[None]] = deque()
        self._theoretical = 0.0  # GCRA's theoretical arrival time of the next start

    def check(self, trusted: bool = False) -> None:
        """Busy now, when a call would be: asked before a try is recorded, so a try that is
        told to come back counts as no failure."""
        taken = self._running + len(self._trusted) + len(self._others)
        ahead = len(self._trusted) if trusted else taken - self.threads  # who would wait before it
        if ahead >= self.queue:
            raise Busy(retry_after=max(1, math.ceil((taken + 1 - self.threads) * self.spacing / self.threads)))

    async def __call__(self, fn: Callable[..., T], *args: Any, trusted: bool = False) -> T:
        self.check(trusted)
        loop = asyncio.get_running_loop()
        await self._thread(loop, trusted)
        try:
            now = time.monotonic()
            start = max(now, self._theoretical - (self.burst - 1) * self.spacing)
            self._theoretical = max(self._theoretical, now) + self.spacing
            await asyncio.sleep(start - now)
            work = self._executor.submit(contextvars.copy_context().run, fn, *args)
        except BaseException:
            self._release()
            raise
        # the thread is given back when the work ends, not when a request that left stops waiting
        work.add_done_callback(lambda _: loop.call_soon_threadsafe(self._release))
        return await asyncio.wrap_future(work)

    async def _thread(self, loop: asyncio.AbstractEventLoop, trusted: bool) -> None:
        if self._running < self.threads and not (self._trusted or self._others):
            self._running += 1
            return
        turn: asyncio.Future[None] = loop.create_future()
        line = self._trusted if trusted else self._others
        line.append(turn)
        try:
            await turn  # _release counts the thread as ours before it sets the result
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self._release()
            elif turn in line:
                line.remove(turn)
            raise

    def _release(self) -> None:
        self._running -= 1
        for line in (self._trusted, self._others):
            while line:
                turn = line.popleft()
                if not turn.done():
                    self._running += 1
                    turn.set_result(None)
                    return

    def close(self) -> None:
        self._executor.shutdown(wait=False)


class Commit:
    """`await commit(aggregates)`: their events appended by the group commit; raises what it raised."""

    def __init__(self, commits: GroupCommit):
        self._commits = commits

    async def __call__(self, aggregates: tuple[Any, ...]) -> None:
        loop = asyncio.get_running_loop()
        done = loop.create_future()

        def resolve(error: BaseException | None) -> None:
            if done.done():  # the request was cancelled meanwhile (its client went away)
                return
            if error is None:
                done.set_result(None)
            else:
                done.set_exception(error)

        self._commits.submit(*aggregates, then=lambda error: loop.call_soon_threadsafe(resolve, error))
        await done


@dataclass(frozen=True)
class _Done:
    value: Any


def _advance(steps: Steps[Any], result: Any, error: BaseException | None) -> Effect | _Done:
    try:
        return steps.throw(error) if error is not None else steps.send(result)
    except StopIteration as done:
        return _Done(done.value)


async def drive(steps: Steps[T], blocking: Blocking, commit: Commit) -> T:
    """A use case to its end (domain/steps.py): its code on the loop, each read on a blocking
    thread unless a cache answers it, each append awaited on the group commit.  After `Blocks`,
    its code runs on a blocking thread too."""
    result: Any = None
    error: BaseException | None = None
    on_thread = False
    try:
        while True:
            if on_thread:
                effect = await blocking(_advance, steps, result, error)
            else:
                effect = _advance(steps, result, error)
            result, error = None, None
            if isinstance(effect, _Done):
                return effect.value
            try:
                if isinstance(effect, Append):
                    await commit(effect.aggregates)
                elif isinstance(effect, Read):
                    result = effect.cached(*effect.args) if effect.cached is not None else None
                    if result is None:
                        result = await blocking(effect.fn, *effect.args)
                else:
                    on_thread = True
            except Exception as failed:  # thrown into the use case where it asked: it may act on it
                error = failed
    finally:
        if steps.gi_frame is not None:  # left before its end (the client went away): let it clean up
            asyncio.get_running_loop().run_in_executor(None, _close, steps)


def _close(steps: Steps[Any]) -> None:
    try:
        steps.close()  # its `with` blocks end (an Idempotency-Key's lock is released)
    except ValueError:  # still running on a blocking thread: it ends by itself
        pass
