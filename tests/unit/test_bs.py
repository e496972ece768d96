"""Bikram Sambat dates (domain/bs.py): nepali-datetime's calendar against a table of known
conversions, month and year boundaries among them, and a day typed in either calendar."""
from datetime import date, datetime

import pytest

from sandesh.domain.bs import bs_day, bs_iso, bs_text, typed_day
from sandesh.domain.clock import NEPAL

# (AD, BS): New Year's days (Baisakh 1), the last days of Chaitra before them, Constitution Day
# (Asoj 3, 2072), and a Mangsir day.
KNOWN = [
    (date(2015, 9, 20), (2072, 6, 3)),
    (date(2023, 4, 14), (2080, 1, 1)),
    (date(2024, 4, 12), (2080, 12, 30)),
    (date(2024, 4, 13), (2081, 1, 1)),
    (date(2025, 4, 14), (2082, 1, 1)),
    (date(2026, 4, 13), (2082, 12, 30)),
    (date(2026, 4, 14), (2083, 1, 1)),
    (date(2026, 11, 29), (2083, 8, 13)),
]


@pytest.mark.parametrize("ad, bs", KNOWN)
def test_the_calendar_gives_the_known_bs_day_and_back(ad, bs):
    found = bs_day(ad)
    assert (found.year, found.month, found.day) == bs
    assert typed_day("%04d-%02d-%02d BS" % bs) == ad


def test_an_instant_is_dated_by_its_nepal_day():
    late_evening = datetime(2026, 4, 13, 23, 59, tzinfo=NEPAL).timestamp()  # 18:14 UTC
    assert (bs_text(late_evening), bs_iso(late_evening)) == ("30 Chaitra 2082", "2082-12-30")
    assert bs_iso(late_evening + 60) == "2083-01-01", "Nepal's midnight, 18:15 UTC, begins Baisakh"


@pytest.mark.parametrize("typed, day", [
    ("2026-11-29", date(2026, 11, 29)), (" 2026-11-29 AD ", date(2026, 11, 29)),
    ("2083-08-13", date(2026, 11, 29)), ("2083-8-13 bs", date(2026, 11, 29)), ("२०८३-०८-१३", date(2026, 11, 29)),
])
def test_a_day_is_typed_in_either_calendar(typed, day):
    assert typed_day(typed) == day


def test_an_early_bs_year_is_bs_when_it_says_so():
    assert typed_day("2059-12-01 BS").year == 2003 and typed_day("2059-12-01") == date(2059, 12, 1)


@pytest.mark.parametrize("typed, problem", [
    ("29/11/2026", "is not a date"), ("2083-13-01", "no day of the BS calendar"),
    ("2083-08-33", "no day of the BS calendar"), ("2026-02-30", "no day of the AD calendar"), ("", "is not a date"),
])
def test_a_typed_day_of_neither_calendar_is_refused_with_a_sentence(typed, problem):
    with pytest.raises(ValueError, match=problem):
        typed_day(typed)
