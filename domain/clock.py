"""The one clock every time rule reads (docs/design.md, "Decisions: the test clock").

System mode is the wall clock. Test mode is the wall clock plus an offset that is kept in the
database, so every process sees the same moved time; the offset source is passed in.
"""
from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from typing import Callable, Protocol

# Nepal Time, UTC+05:45 since 1986, with no daylight saving time: every day the service speaks of
# (a SIM's daily plan, promotional hours, the dashboard's dates) is a Nepal day.
NEPAL = timezone(timedelta(hours=5, minutes=45), "NPT")
NEPAL_OFFSET = 5 * 3600 + 45 * 60  # the same, in seconds


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch, UTC."""


class SystemClock:
    def now(self) -> float:
        return time.time()


class OffsetClock:
    """Real time plus an offset read from `offset()` (the database in production)."""

    def __init__(self, offset: Callable[[], float]):
        self._offset = offset

    def now(self) -> float:
        return time.time() + self._offset()


class FixedClock:
    """A clock for unit tests of pure rules."""

    def __init__(self, at: float = 1_800_000_000.0):
        self.at = at

    def now(self) -> float:
        return self.at

    def advance(self, seconds: float) -> None:
        self.at += seconds


def iso(ts: float) -> str:
    """ISO 8601 UTC with `Z`, millisecond precision (docs/api.md, "Requests and responses")."""
    return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_iso(text: str) -> float:
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.timestamp()


def nepal_moment(text: str) -> float | None:
    """`2026-12-01T09:30` (a datetime-local field) in Nepal time, as epoch seconds; None if it is not one."""
    try:
        return datetime.fromisoformat(text.strip()).replace(tzinfo=NEPAL).timestamp()
    except ValueError:
        return None
