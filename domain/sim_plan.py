"""A SIM's plan: daily and monthly caps of parts in Nepal time, a pace slower than the interface's
30 parts per 30 minutes, and when its credit is asked (docs/operations.md, "Modems").

A SIM at a cap rests until the next Nepal midnight or the first of the next month; the pool
works around it.  Days and months are read on the service clock, so the test clock moves them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from .clock import NEPAL
from .pacing import PARTS_PER_WINDOW


CREDIT_EVERY = 4 * 3600          # seconds between balance queries
CREDIT_EVERY_PARTS = 50          # ... or after this many parts, whichever comes first
CREDIT_RECHECK_WHILE_LOW = 900   # seconds between queries while the SIM is quarantined for credit


def _nepal(moment: float) -> datetime:
    return datetime.fromtimestamp(moment, NEPAL)


def day_start(now: float) -> float:
    return _nepal(now).replace(hour=0, minute=0, second=0, microsecond=0).timestamp()


def next_day(now: float) -> float:
    return (datetime.fromtimestamp(day_start(now), NEPAL) + timedelta(days=1)).timestamp()


def month_start(now: float) -> float:
    return _nepal(now).replace(day=1, hour=0, minute=0, second=0, microsecond=0).timestamp()


def next_month(now: float) -> float:
    start = _nepal(month_start(now))
    return start.replace(year=start.year + start.month // 12, month=start.month % 12 + 1).timestamp()


@dataclass(frozen=True)
class Plan:
    daily_cap: int | None = None
    monthly_cap: int | None = None
    pace: int | None = None

    @property
    def parts_per_window(self) -> int:
        return min(self.pace or PARTS_PER_WINDOW, PARTS_PER_WINDOW)


@dataclass
class Usage:
    """Parts a SIM sent today and this month (Nepal time), kept by its dispatcher and rolled over
    at midnight and at the first of the month."""
    day: float
    today: int
    month: float
    this_month: int

    def __post_init__(self) -> None:
        self._day_end, self._month_end = next_day(self.day), next_month(self.month)

    def roll(self, now: float) -> None:
        if now >= self._day_end:
            self.day, self.today, self._day_end = day_start(now), 0, next_day(now)
        if now >= self._month_end:
            self.month, self.this_month, self._month_end = month_start(now), 0, next_month(now)

    def add(self, at: float) -> None:
        self.roll(at)
        self.today += 1
        self.this_month += 1

    def room(self, plan: Plan, now: float) -> int | None:
        """Parts the caps leave today (None: no cap)."""
        self.roll(now)
        left = [cap - used for cap, used in ((plan.daily_cap, self.today), (plan.monthly_cap, self.this_month))
                if cap is not None]
        return max(0, min(left)) if left else None

    def resting(self, plan: Plan, now: float) -> tuple[float | None, str | None]:
        """(until when, why) the SIM rests at a cap, or (None, None)."""
        self.roll(now)
        if plan.monthly_cap is not None and self.this_month >= plan.monthly_cap:
            return self._month_end, f"monthly cap of {plan.monthly_cap} parts reached"
        if plan.daily_cap is not None and self.today >= plan.daily_cap:
            return self._day_end, f"daily cap of {plan.daily_cap} parts reached"
        return None, None


def credit_due(*, checked_at: float | None, parts_since: int, every_parts: int | None, low: bool, now: float) -> bool:
    """Whether the SIM's balance query is due: never asked, every 4 hours, after every N parts, and
    every 15 minutes while it is quarantined for credit."""
    if checked_at is None:
        return True
    if low:
        return now - checked_at >= CREDIT_RECHECK_WHILE_LOW
    return now - checked_at >= CREDIT_EVERY or parts_since >= (every_parts or CREDIT_EVERY_PARTS)


# An amount after "Rs", "NPR" or "balance" (with "is", ":" or "of" between): the first one is the credit.
_AMOUNT = re.compile(r"(?:\bRs\.?|\bNPR|\bbalance(?:\s+(?:is|of))?\s*:?)\s*([0-9][0-9,]*(?:\.[0-9]{1,2})?)",
                     re.IGNORECASE)


def credit_of(reply: str) -> int | None:
    """The credit in paisa read from a balance query's answer, or None when it names no amount."""
    match = _AMOUNT.search(reply)
    if not match:
        return None
    rupees, _, paisa = match.group(1).replace(",", "").partition(".")
    return int(rupees) * 100 + int((paisa + "00")[:2])


# A date after "valid", "validity", "expiry", "expires" or "till"/"until" (a few words between at
# most): year first (2027-12-31, 2027/12/31) or day first (31-12-2027, 31/12/2027, 31.12.2027,
# 31-Dec-2027), as Nepal writes dates; the answers' wording is the operators' and not published.
_MONTHS = {m: n for n, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov",
                                       "dec"), 1)}
_VALIDITY = re.compile(
    r"\b(?:valid(?:ity)?|expir(?:y|es|ing)|exp|till|until)\b[^0-9]{0,30}?"
    r"(?:(?P<y1>[0-9]{4})[-/.](?P<m1>[0-9]{1,2})[-/.](?P<d1>[0-9]{1,2})"
    r"|(?P<d2>[0-9]{1,2})[-/. ](?P<m2>[0-9]{1,2}|[A-Za-z]{3})[A-Za-z]*[-/. ,]+(?P<y2>[0-9]{4}))",
    re.IGNORECASE)


def validity_of(reply: str) -> date | None:
    """The day a SIM's validity ends, read from a balance query's answer; None when it names none."""
    match = _VALIDITY.search(reply)
    if not match:
        return None
    if match["y1"]:
        year, month, day = int(match["y1"]), int(match["m1"]), int(match["d1"])
    else:
        month_text = match["m2"].lower()
        month = int(month_text) if month_text.isdigit() else _MONTHS.get(month_text[:3], 0)
        year, day = int(match["y2"]), int(match["d2"])
    try:
        return date(year, month, day)
    except ValueError:
        return None


def days_left(valid_until: date, now: float) -> int:
    """Whole days from today in Nepal to the last day of validity (0: it ends today)."""
    return (valid_until - datetime.fromtimestamp(now, NEPAL).date()).days
