"""Bikram Sambat (BS), Nepal's calendar, beside the Gregorian (AD) one (docs/dashboard.md,
"Times and money"): a Nepal day as BS, and a day typed in either calendar.  The calendar is
nepali-datetime's table; nothing here computes a month's length."""
from __future__ import annotations

import re
from datetime import date, datetime

import nepali_datetime

from .clock import NEPAL
from .said import _

# A typed year from this one on is a BS year: no AD date that late is in any log (2060 BS is 2003 AD).
BS_YEARS_FROM = 2060
DEVANAGARI_DIGITS = str.maketrans("०१२३४५६७८९", "0123456789")
TYPED_DAY = re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2})(?:\s*(BS|B\.S\.|AD|A\.D\.))?", re.I)


def bs_day(day: date) -> nepali_datetime.date:
    return nepali_datetime.date.from_datetime_date(day)


def nepal_day(at: float) -> date:
    """The Nepal calendar day (AD) of an instant."""
    return datetime.fromtimestamp(at, NEPAL).date()


def bs_text(at: float, language: str = "en") -> str:
    """The BS date of an instant's Nepal day: "13 Mangsir 2083", or in Nepali "13 मंसिर 2083"
    (the month in Devanagari, the digits 0-9: docs/dashboard.md, "Languages")."""
    return bs_day_text(nepal_day(at), language)


def bs_day_text(day: date, language: str = "en") -> str:
    """A Nepal day (AD) in BS, as bs_text writes it."""
    found = bs_day(day)
    return f"{found.day} {found.strftime('%N' if language == 'ne' else '%B')} {found.year}"


def bs_iso(at: float) -> str:
    """The BS date of an instant's Nepal day, as "2083-08-13"."""
    found = bs_day(nepal_day(at))
    return f"{found.year:04d}-{found.month:02d}-{found.day:02d}"


def typed_day(text: str) -> date:
    """A day typed as YYYY-MM-DD, in AD, or in BS: with BS after it, in Devanagari digits, or
    with a year of BS_YEARS_FROM or later.  ValueError when it is no day of either calendar."""
    plain = text.strip().translate(DEVANAGARI_DIGITS)
    found = TYPED_DAY.fullmatch(plain)
    if found is None:
        raise ValueError(_("%(typed)s is not a date (YYYY-MM-DD, AD or BS)", typed=repr(text)))
    year, month, day = (int(n) for n in found.groups()[:3])
    era = (found.group(4) or "").upper().replace(".", "")
    bs = era == "BS" or (era != "AD" and (plain != text.strip() or year >= BS_YEARS_FROM))
    try:
        return nepali_datetime.date(year, month, day).to_datetime_date() if bs else date(year, month, day)
    except (ValueError, OverflowError):
        raise ValueError(_("%(typed)s is no day of the BS calendar", typed=repr(text)) if bs
                         else _("%(typed)s is no day of the AD calendar", typed=repr(text))) from None
