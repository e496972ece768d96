"""SIM pacing: 30 parts in any rolling 30 minutes, 5 of them held for OTP (decisions §3)."""
from domain.pacing import capacity, fits


def test_capacity_counts_parts_in_the_rolling_window_only():
    now = 10_000.0
    assert capacity([], now) == 30
    assert capacity([now - 1800 - 1] * 10 + [now - 10] * 12, now) == 18


def test_the_last_five_parts_of_a_window_are_held_for_otp():
    assert fits("promotional", 1, 6) and not fits("promotional", 1, 5)
    assert fits("otp", 5, 5) and not fits("otp", 6, 5)
    assert not fits("transactional", 3, 7)
