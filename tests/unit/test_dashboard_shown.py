"""How the dashboard writes times and money (docs/dashboard.md, "Times and money"): Nepal time
with UTC on hover, amounts in NPR, and times typed in a form read as Nepal time."""
from __future__ import annotations

from sandesh.api.dashboard.shown import details, npr, typed_moment
from sandesh.api.dashboard.web import TEMPLATES

MIDNIGHT_UTC = 1795478400.0  # 2026-11-24T00:00:00Z, 05:45 in Nepal


def test_an_amount_of_paisa_reads_as_npr():
    assert [npr(p) for p in (0, 5, 100, 123456, 100_000_000, -250)] == [
        "NPR 0.00", "NPR 0.05", "NPR 1.00", "NPR 1,234.56", "NPR 10,00,000.00", "NPR -2.50"]


def test_a_time_reads_in_nepal_time_with_utc_in_its_title():
    """The same instant, given as the read models give it (ISO 8601 UTC) or as epoch seconds,
    with its Nepal day in Bikram Sambat beside it."""
    shown = TEMPLATES.from_string("{{ at | nepal }}")
    expected = ('<time datetime="2026-11-24T00:00:00.000Z" title="2026-11-24 00:00:00 UTC">'
                '2026-11-24 05:45:00</time> <span class="bs">8 Mangsir 2083</span>')
    assert shown.render(at="2026-11-24T00:00:00.000Z") == expected
    assert shown.render(at=MIDNIGHT_UTC) == expected


def test_nepal_time_crosses_the_date_line_of_utc_at_18_15():
    shown = TEMPLATES.from_string("{{ at | nepal }}").render(at=MIDNIGHT_UTC - 6 * 3600 + 15 * 60)
    assert ">2026-11-24 00:00:00</time>" in shown and 'title="2026-11-23 18:15:00 UTC"' in shown


def test_a_time_typed_in_a_form_is_nepal_time():
    assert typed_moment("2026-11-24T05:45") == MIDNIGHT_UTC
    assert typed_moment("2026-11-24T00:00+00:00") == MIDNIGHT_UTC  # an offset, when given, is kept


def test_details_show_paisa_in_npr_and_times_in_nepal_time():
    shown = details({"amount": 50050, "note": "<b>top-up</b>", "rates": {"otp": 150},
                     "changes": {"min_credit": 1000, "daily_cap": 300}, "segments": 2,
                     "notBefore": "2026-11-24T00:00:00.000Z", "error": None})
    assert shown.startswith("amount: NPR 500.50, note: &lt;b&gt;top-up&lt;/b&gt;, rates: {otp: NPR 1.50}, "
                            "changes: {min_credit: NPR 10.00, daily_cap: 300}, segments: 2, notBefore: <time ")
    assert ">2026-11-24 05:45:00</time>" in shown and "error" not in shown
