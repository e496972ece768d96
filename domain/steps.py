"""Use cases written once for two kinds of caller: as generators that yield what they read and
what they append.

- `Append(aggregates)`: their pending events, to be appended; the use case gets back nothing
  when they are committed, or the error the append raised, thrown in at the yield, which it may
  catch and act on (a version conflict: read again; a balance guard: say how much).
- `Read(fn, args, cached)`: `fn(*args)`, work that reads the database (a port, the repository);
  its result is sent back, its error thrown in.  `cached(*args)`, when given, answers without
  the database when it can (None: it cannot).
- `Blocks()`: from here the use case holds a database resource across its steps (an
  Idempotency-Key's lock) and reads as it goes: the rest of it runs where blocking is allowed.

`run` drives a use case with blocking calls (the `sandesh` command, the workers).  The API drives
the same generator on its event loop (api/waiting.py, `drive`): the code between two effects
runs on the loop, a read on a bounded pool of threads (unless its cache answers), an append on
the group commit, awaited; so no request holds a thread while it commits, and no read blocks
the loop.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Generator, TypeVar

from eventsourcing.persistence import IntegrityError

from .errors import Contended

T = TypeVar("T")


@dataclass(frozen=True)
class Append:
    aggregates: tuple[Any, ...]


@dataclass(frozen=True)
class Read:
    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()
    cached: Callable[..., Any] | None = None


@dataclass(frozen=True)
class Blocks:
    pass


Effect = Append | Read | Blocks
Steps = Generator[Effect, Any, T]


def retried(attempt: Callable[[], Steps[tuple[tuple[Any, ...], T]]], what: str, tries: int = 10) -> Steps[T]:
    """Read, decide, append; when another writer appended to the same aggregate first (a version
    conflict), read again and decide again.  `attempt()` yields its reads and returns what to
    append (nothing: done, nothing to record) and the result."""
    for _ in range(tries):
        aggregates, result = yield from attempt()
        if not aggregates:
            return result
        try:
            yield Append(aggregates)
            return result
        except IntegrityError:
            continue
    raise Contended(f"could not record {what}: other writers changed it {tries} times in a row")


def run(steps: Steps[T], append: Callable[..., Any]) -> T:
    """Drive a use case to its end: each append done by `append(*aggregates)`, each read by a
    plain call, before it goes on."""
    try:
        effect = next(steps)
        while True:
            try:
                result = None
                if isinstance(effect, Append):
                    append(*effect.aggregates)
                elif isinstance(effect, Read):
                    result = effect.fn(*effect.args)
            except Exception as error:
                effect = steps.throw(error)
            else:
                effect = steps.send(result)
    except StopIteration as done:
        return done.value
