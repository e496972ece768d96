"""Quiet hours for promotional messages (docs/api.md, "Promotional hours"): each workspace has
hours in Nepal time (UTC+05:45 all year) when its promotional messages may go out, 08:00-20:00
unless an operator sets others or `off`.  A promotional message accepted outside them is
charged at once and scheduled for the next opening; OTP and transactional messages never wait.
Pure functions of the hours, the request and the time: the clock is the caller's."""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import lru_cache

from .clock import NEPAL_OFFSET
from .errors import InvalidInput, InvalidRequest
from .sending import SendRequest

DAY = 86_400
PROMOTIONAL = "promotional"
OFF = "off"
_HOURS = re.compile(r"^([01][0-9]|2[0-3]):([0-5][0-9])-([01][0-9]|2[0-3]):([0-5][0-9])$")


@dataclass(frozen=True)
class PromoHours:
    """From `start` to `end`, in seconds after Nepal midnight; an `end` before `start` crosses midnight."""
    start: int
    end: int

    def __str__(self) -> str:
        return f"{_clock(self.start)}-{_clock(self.end)}"

    def is_open(self, at: float) -> bool:
        second = (at + NEPAL_OFFSET) % DAY
        if self.start < self.end:
            return self.start <= second < self.end
        return second >= self.start or second < self.end

    def next_opening(self, at: float) -> float:
        """`at` itself when the hours are open then; else the next time they open."""
        if self.is_open(at):
            return at
        local = at + NEPAL_OFFSET
        opening = local - local % DAY + self.start
        if opening <= local:
            opening += DAY
        return opening - NEPAL_OFFSET


DEFAULT = PromoHours(8 * 3600, 20 * 3600)


def _clock(second: int) -> str:
    return f"{second // 3600:02d}:{second % 3600 // 60:02d}"


@lru_cache(maxsize=256)
def parse(text: str) -> PromoHours | None:
    """`HH:MM-HH:MM` (Nepal time, 24-hour clock), or `off` (None: promotions never wait)."""
    if text.strip().lower() == OFF:
        return None
    found = _HOURS.match(text.strip())
    if found is None:
        raise InvalidInput(f"promotional hours {text!r} must be HH:MM-HH:MM in Nepal time (e.g. 08:00-20:00) or off")
    start_h, start_m, end_h, end_m = (int(part) for part in found.groups())
    hours = PromoHours(start_h * 3600 + start_m * 60, end_h * 3600 + end_m * 60)
    if hours.start == hours.end:
        raise InvalidInput(f"promotional hours {text!r} open and close at the same minute; use off for no quiet hours")
    return hours


def shown(hours: PromoHours | None) -> str:
    """As the read model keeps them and `parse` reads them back."""
    return OFF if hours is None else str(hours)


def scheduled(request: SendRequest, hours: PromoHours | None, now: float) -> SendRequest:
    """The request as it is accepted: a promotional one due outside `hours` (now, or at its own
    `sendAt`) is scheduled for the next opening, its validity still ending when it would have;
    InvalidRequest (400, naming validFor) when that comes before the opening."""
    start = request.send_at if request.send_at is not None else now
    if request.message_type != PROMOTIONAL or hours is None or hours.is_open(start):
        return request
    opening = hours.next_opening(start)
    if request.valid_for is None:
        return replace(request, send_at=opening)
    left = start + request.valid_for - opening
    if left <= 0:
        raise InvalidRequest(["validFor"], f"validFor ends before the workspace's promotional hours ({hours}, Nepal "
                                           "time) open again; a promotional message accepted outside them waits for "
                                           "the opening", "ends_before_promotional_hours")
    return replace(request, send_at=opening, valid_for=left)
