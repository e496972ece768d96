"""The rules of the dashboard's chart and pages that need no browser (docs/dashboard.md,
"Overview" and "Messages"): outcomes stacked per hour, the delivery rate per operator, dates as
whole Nepal days, and keyset pages that know whether there is more either way."""
from __future__ import annotations

from sandesh.api.dashboard.chart import delivery_rates, hourly
from sandesh.api.dashboard.paging import PAGE, Paged, day_range, key_of, parse_key


def counted(hour: int, status: str, prefix: str, n: int) -> dict:
    return {"hour": hour, "status": status, "prefix": prefix, "n": n}


def test_each_hours_bar_stacks_its_outcomes_scaled_to_the_busiest_hour():
    chart = hourly([counted(23, "delivered", "977984", 3), counted(23, "failed", "977980", 1),
                    counted(0, "queued", "977984", 2), counted(0, "submitted", "977984", 2)])
    last, first = chart["bars"][23], chart["bars"][0]
    assert [(s["outcome"], s["count"], s["height"]) for s in last["segments"]] == [("delivered", 3, 90),
                                                                                   ("failed", 1, 30)]
    assert [s["y"] for s in last["segments"]] == [30, 0]  # bottom up, the busiest hour full height
    assert first["segments"] == [{"outcome": "other", "count": 4, "y": 0, "height": 120}]
    assert (first["ago"], last["ago"]) == (24, 1)
    assert chart["totals"] == {"delivered": 3, "sent": 0, "failed": 1, "undelivered": 0, "other": 4}
    assert chart["all"] == 8


def test_the_delivery_rate_is_per_operator_of_the_messages_with_an_outcome():
    rates = delivery_rates([counted(1, "delivered", "977984", 2), counted(2, "failed", "977985", 1),
                            counted(3, "delivered", "977980", 1), counted(3, "sent", "977981", 3),
                            counted(3, "queued", "977961", 5), counted(4, "undelivered", "977999", 1)])
    assert [(r["operator"], r["messages"], r["delivered"], round(r["rate"], 2)) for r in rates] == [
        ("Ncell", 4, 1, 0.25), ("Nepal Telecom", 3, 2, 0.67), ("Other numbers", 1, 0, 0.0)]


def test_dates_are_whole_nepal_days_and_a_bad_one_is_said():
    """A Nepal day begins at 18:15 UTC the day before (UTC+05:45)."""
    since, until, errors = day_range({"from": "2026-11-24", "to": "2026-11-24"})
    assert (since, until, errors) == (1795457700.0, 1795544100.0, {})  # 2026-11-23T18:15Z, 2026-11-24T18:15Z
    assert day_range({"from": "24/11/2026", "to": ""})[2] == {"from": "'24/11/2026' is not a date (YYYY-MM-DD, AD or BS)"}


def test_a_page_says_whether_there_are_newer_and_older_rows():
    rows = [{"n": n} for n in range(PAGE + 1, 0, -1)]  # newest first, one more than a page
    first = Paged(rows, None, lambda row: str(row["n"]))
    assert (len(first.rows), first.newer, first.older) == (PAGE, False, True)
    assert first.links("/x", {"status": "failed", "type": ""}) == {"previous": None,
                                                                   "next": "/x?status=failed&before=2"}
    back = Paged(rows[:PAGE], ("after", "0"), str)
    assert (back.newer, back.older) == (False, True)
    back = Paged(rows, ("after", "0"), lambda row: str(row["n"]))
    assert (back.rows[0]["n"], back.newer) == (PAGE, True)  # the extra row is the newest one


def test_a_page_link_names_its_row_by_its_exact_place_in_the_order():
    row = {"at": 1795478400.123456789, "originator_id": "cl_1f", "originator_version": 7}
    key = key_of(row, ("at", "originator_id", "originator_version"))
    assert parse_key(key, (float, str, int)) == (row["at"], "cl_1f", 7)  # the time exactly, not rounded
    assert parse_key("1795478400.5,msg_a,b", (float, str)) == (1795478400.5, "msg_a,b")
    assert parse_key("yesterday,cl_1f,7", (float, str, int)) is None
    assert parse_key("1795478400.5", (float, str, int)) is None
