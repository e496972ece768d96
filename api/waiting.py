"""How a request waits without holding the event loop or a thread (docs/design.md, "The event loop").

Falcon's ASGI app serves every request of a worker process as a coroutine on one event loop.
Two kinds of waiting leave that loop:

- `Blocking`: work that reads PostgreSQL through the store's pooled, blocking connections runs
  on a bounded pool of threads (as many as the process has connections), with the request's
  log context;
- `Commit`: a use case's appends (domain/steps.py) go to the process's group commit, and the
  request awaits a future that the committer thread resolves: no thread waits for a request
  while its events commit.

`drive` runs a use case (domain/steps.py) with both: the code between two of its effects runs
on the loop, each read it yields on a blocking thread (unless a cache answers it), each append
is awaited on the group commit.
"""
from __future__ import annotations

import asyncio
import contextvars
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

from sandesh.domain.steps import Append, Effect, Read, Steps
from sandesh.projections.group_commit import GroupCommit

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
