"""A SIM's plan and credit, as pure rules of state and time (domain/sim_plan.py, domain/sim.py)."""
from datetime import datetime, timedelta, timezone

import pytest

from sandesh.domain.errors import InvalidInput
from sandesh.domain.sim import CLEAR, CREDIT, Sim, check_pin, check_settings
from sandesh.domain.sim_plan import (CREDIT_EVERY, Plan, Usage, credit_due, credit_of, day_start, days_left,
                                     month_start, next_day, next_month, validity_of)

NEPAL = timezone(timedelta(hours=5, minutes=45))


def at(*fields):
    return datetime(*fields, tzinfo=NEPAL).timestamp()


def test_days_and_months_are_nepal_time_not_utc():
    late = at(2026, 11, 30, 23, 50)  # 18:05 UTC on the 30th
    assert day_start(late) == at(2026, 11, 30) and next_day(late) == at(2026, 12, 1)
    assert month_start(late) == at(2026, 11, 1) and next_month(late) == at(2026, 12, 1)
    assert next_month(at(2026, 12, 31, 23, 59)) == at(2027, 1, 1)
    just_after = at(2026, 12, 1, 0, 5)  # still 30 November in UTC
    assert datetime.fromtimestamp(just_after, timezone.utc).day == 30 and day_start(just_after) == at(2026, 12, 1)


def test_a_sim_rests_at_its_daily_cap_until_midnight_and_its_monthly_cap_until_the_first():
    plan, now = Plan(daily_cap=2, monthly_cap=3), at(2026, 11, 30, 22, 0)
    usage = Usage(day_start(now), 0, month_start(now), 1)
    assert usage.room(plan, now) == 2 and usage.resting(plan, now) == (None, None)
    usage.add(now)
    usage.add(now)
    assert usage.room(plan, now) == 0
    assert usage.resting(plan, now) == (at(2026, 12, 1), "monthly cap of 3 parts reached")
    tomorrow = at(2026, 12, 1, 0, 1)
    assert usage.resting(plan, tomorrow) == (None, None) and (usage.today, usage.this_month) == (0, 0)
    usage = Usage(day_start(now), 2, month_start(now), 2)
    assert usage.resting(Plan(daily_cap=2), now) == (at(2026, 12, 1), "daily cap of 2 parts reached")


def test_a_plan_without_caps_leaves_the_pacing_window_to_decide():
    usage = Usage(0, 10_000, 0, 10_000)
    assert usage.room(Plan(), 1.0) is None and Plan().parts_per_window == 30 and Plan(pace=5).parts_per_window == 5


def test_the_balance_query_is_due_at_once_every_4_hours_after_n_parts_and_every_15_minutes_while_low():
    assert credit_due(checked_at=None, parts_since=0, every_parts=None, low=False, now=0)
    assert not credit_due(checked_at=0, parts_since=49, every_parts=None, low=False, now=CREDIT_EVERY - 1)
    assert credit_due(checked_at=0, parts_since=50, every_parts=None, low=False, now=1)
    assert credit_due(checked_at=0, parts_since=2, every_parts=2, low=False, now=1)
    assert credit_due(checked_at=0, parts_since=0, every_parts=None, low=False, now=CREDIT_EVERY)
    assert not credit_due(checked_at=0, parts_since=99, every_parts=2, low=True, now=899)
    assert credit_due(checked_at=0, parts_since=0, every_parts=2, low=True, now=900)


@pytest.mark.parametrize("reply, paisa", [
    ("Your balance is Rs. 123.45. Valid till 2027-12-31.", 12345),
    ("Main balance: NPR 1,250.5 valid till 12/12/2027", 125050),
    ("Balance Rs 7 expiring on 2027-01-01", 700),
    ("balance is 55.10 Rs", 5510),
    ("Available Balance: R 96.45 .", None),  # no currency Sandesh knows and no amount right after "balance"
    ("Dear customer, the service is not available", None),
])
def test_the_credit_is_the_first_amount_after_rs_npr_or_balance(reply, paisa):
    assert credit_of(reply) == paisa


def test_low_credit_quarantines_and_enough_credit_releases_only_a_credit_quarantine():
    sim = Sim(name="ntc-1", port="/dev/ttyUSB0", baud=115200, host=None, actor="op", at=0.0)
    sim.update({"balance_ussd": "*400#", "min_credit": 1000}, actor="op", at=1.0)
    sim.credit_checked(1500, "Rs. 15", actor="d", at=2.0)
    assert sim.quarantine is None
    sim.credit_checked(999, "Rs. 9.99", actor="d", at=3.0)
    assert sim.quarantine == CREDIT
    sim.credit_checked(1000, "Rs. 10", actor="d", at=4.0)
    assert sim.quarantine is None
    sim.quarantine_for("failures", "barred", actor="d", at=5.0)
    sim.credit_checked(5000, "Rs. 50", actor="d", at=6.0)
    assert sim.quarantine == "failures"  # only an operator lifts that one


def test_a_new_pin_ends_a_quarantine_for_a_refused_pin_and_is_tried_again():
    sim = Sim(name="ntc-2", port="/dev/ttyUSB1", baud=115200, host=None, actor="op", at=0.0)
    sim.set_pin("sealed-1", actor="op", at=1.0)
    sim.quarantine_for("pin", "the SIM refused its PIN", actor="d", at=2.0)
    assert sim.pin_refused and sim.quarantine == "pin"
    sim.set_pin("sealed-2", actor="op", at=3.0)
    assert not sim.pin_refused and sim.quarantine is None


@pytest.mark.parametrize("changes, message", [
    ({"pace": 31}, "at most 30"), ({"pace": 0}, "positive"), ({"daily_cap": -1}, "positive"),
    ({"balance_ussd": "400"}, "USSD code"), ({"balance_ussd": "*400#; rm"}, "USSD code"),
    ({"colour": "red"}, "not a SIM setting"),
])
def test_settings_are_checked(changes, message):
    with pytest.raises(InvalidInput, match=message):
        check_settings(changes)


def test_a_setting_can_be_removed_and_a_pin_is_4_to_8_digits():
    assert check_settings({"daily_cap": None, "pace": 12, "balance_ussd": "*101#"}) == {
        "daily_cap": None, "pace": 12, "balance_ussd": "*101#"}
    assert CLEAR is not None and check_pin("0042") == "0042"
    for bad in ("123", "123456789", "12a4", None):
        with pytest.raises(InvalidInput):
            check_pin(bad)


@pytest.mark.parametrize("reply, day", [
    ("Your balance is Rs. 500.00. Valid till 2027-12-31.", "2027-12-31"),
    ("Bal Rs 45.60, expiry date 15/01/2027", "2027-01-15"),
    ("Main balance: Rs 10. Validity: 05-Feb-2027", "2027-02-05"),
    ("Rs 5 valid until 31.12.2026", "2026-12-31"),
    ("Your balance is Rs 20", None),        # no date
    ("Valid till 2027-02-30", None),        # no such day
    ("Call 2027-01-01 for offers", None),   # a date, not of validity
])
def test_the_validity_is_read_from_a_balance_answer(reply, day):
    found = validity_of(reply)
    assert (found.isoformat() if found else None) == day


def test_days_left_count_in_nepal():
    from datetime import date
    # 2026-12-07 18:30 UTC is 2026-12-08 00:15 in Nepal: a validity ending on the 8th ends today
    now = datetime(2026, 12, 7, 18, 30, tzinfo=timezone.utc).timestamp()
    assert (days_left(date(2026, 12, 8), now), days_left(date(2026, 12, 11), now)) == (0, 3)
