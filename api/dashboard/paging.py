"""What the pages with filters share (docs/dashboard.md, "Messages"): the options of their
selects; and for Messages and the Audit log, a date range typed in date fields (whole Nepal
calendar days) and keyset pages of 50, newest first, with Previous (newer) and Next (older)
links that keep the filters."""
from __future__ import annotations

from sandesh.domain.bs import typed_day
from typing import Any, Callable
from urllib.parse import urlencode

import falcon.asgi

from .i18n import told
from .shown import day_start, next_day_start

PAGE = 50


def day_range(typed: dict[str, str]) -> tuple[float | None, float | None, dict[str, str]]:
    """The `from` and `to` dates, Nepal calendar days typed in AD or BS (domain/bs.py), as
    [since, until) in epoch seconds (`to` counts its whole day), and the problem of each field
    that is not a date."""
    bounds: dict[str, float | None] = {"from": None, "to": None}
    errors = {}
    for name in bounds:
        if typed.get(name):
            try:
                day = typed_day(typed[name])
            except ValueError as problem:
                errors[name] = told(problem)
                continue
            bounds[name] = next_day_start(day) if name == "to" else day_start(day)
    return bounds["from"], bounds["to"], errors


def requested(req: falcon.asgi.Request) -> tuple[str, str] | None:
    """The page asked for: ("before", key) for older rows, ("after", key) for newer, else None."""
    for side in ("before", "after"):
        key = req.get_param(side)
        if key:
            return side, key
    return None


def key_of(row: dict[str, Any], order: tuple[str, ...]) -> str:
    """A row's place in the newest-first order, for the page links: its `order` columns joined
    by commas (a time first, exactly; only the last may hold a comma)."""
    return ",".join(repr(row[column]) if isinstance(row[column], float) else str(row[column]) for column in order)


def parse_key(text: str, kinds: tuple[type, ...]) -> tuple[Any, ...] | None:
    """The values of a `key_of` key as `kinds`, or None when it is not one."""
    parts = text.split(",", len(kinds) - 1)
    try:
        return tuple(kind(part) for kind, part in zip(kinds, parts, strict=True))
    except ValueError:
        return None


def choices(values: Any) -> list[tuple[str, str]]:
    """A select's options, (value, text), of values shown as they are."""
    return [(value, value) for value in values]


def client_choices(clients: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """A select's options of the workspace's clients: each by its brand."""
    return [(client["id"], client["brand"]) for client in clients]


class Paged:
    """A page of rows, newest first, fetched as PAGE + 1 rows in the direction of travel (the
    extra one says whether there are more that way), and the links to the pages around it."""

    def __init__(self, rows: list[Any], page: tuple[str, Any] | None, key: Callable[[Any], str]):
        more = len(rows) > PAGE
        if page is not None and page[0] == "after":  # the extra row is the newest
            self.rows = rows[1:] if more else rows
            self.newer, self.older = more, True
        else:
            self.rows = rows[:PAGE]
            self.newer, self.older = page is not None, more
        self.key = key

    def links(self, base: str, typed: dict[str, str]) -> dict[str, str | None]:
        kept = {name: value for name, value in typed.items() if value}
        if not self.rows:
            return {"previous": None, "next": None}
        return {"previous": f"{base}?{urlencode({**kept, 'after': self.key(self.rows[0])})}" if self.newer else None,
                "next": f"{base}?{urlencode({**kept, 'before': self.key(self.rows[-1])})}" if self.older else None}
