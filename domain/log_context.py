"""What a log line is about: the request, workspace, client, message and SIM the code is
working for, carried in a context variable so that every log call below picks it up
(scripts/service/logs.py puts them in each JSON line; docs/design.md, "Logs").  Only identifiers go
here: never a key, a secret, a code or a text."""
from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator

FIELDS = ("request_id", "workspace_id", "client_id", "message_id", "sim_id")
_current: ContextVar[dict[str, str]] = ContextVar("sandesh_log_context", default={})


def current() -> dict[str, str]:
    return _current.get()


def set_fields(**fields: str | None) -> None:
    """Add to the context of the work in progress (a request's caller, once authenticated)."""
    unknown = set(fields) - set(FIELDS)
    assert not unknown, f"not a log field: {unknown}"
    _current.set({**_current.get(), **{k: v for k, v in fields.items() if v is not None}})


def clear() -> None:
    _current.set({})


@contextmanager
def bound(**fields: str | None) -> Iterator[None]:
    """The fields for the duration of a block (a SIM sending one message)."""
    unknown = set(fields) - set(FIELDS)
    assert not unknown, f"not a log field: {unknown}"
    token = _current.set({**_current.get(), **{k: v for k, v in fields.items() if v is not None}})
    try:
        yield
    finally:
        _current.reset(token)
