"""Use cases written once for two kinds of caller: as generators that yield what they append.

A use case that appends yields `Append(aggregates)`; it gets back nothing when the events are
committed, or the error the append raised, thrown in at the yield, which it may catch and act
on (a version conflict: read again; a balance guard: say how much).  `run` drives one with a
blocking append (the `sandesh` command, the workers); the API drives the same generator on its
event loop and awaits the group commit instead, so no request holds a thread while its events
commit (api/asgi.py, `drive`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Generator, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Append:
    aggregates: tuple[Any, ...]


Steps = Generator[Append, None, T]


def run(steps: Steps[T], append: Callable[..., Any]) -> T:
    """Drive a use case to its end, each append done by `append(*aggregates)` before it goes on."""
    try:
        effect = next(steps)
        while True:
            try:
                append(*effect.aggregates)
            except Exception as error:
                effect = steps.throw(error)
            else:
                effect = steps.send(None)
    except StopIteration as done:
        return done.value
