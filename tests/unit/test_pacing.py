"""SIM pacing: 30 parts in any rolling 30 minutes; a part of the pool's window held for OTP."""
from sandesh.domain.pacing import capacity, otp_reserve


def test_capacity_counts_parts_in_the_rolling_window_only():
    now = 10_000.0
    assert capacity([], now) == 30
    assert capacity([now - 1800 - 1] * 10 + [now - 10] * 12, now) == 18


def test_the_pool_holds_one_part_per_four_sims_for_otp():
    assert [otp_reserve(n) for n in (0, 1, 4, 5, 8, 9)] == [0, 1, 1, 2, 2, 3]


# What becomes of a refused message (domain/routing.py, after_refusal)

from sandesh.domain.routing import FAIL, MAX_ATTEMPTS, REJECT, REQUEUE, after_refusal  # noqa: E402


def test_a_refusal_that_proves_nothing_was_sent_goes_on_to_another_sim():
    assert after_refusal("retry_elsewhere", attempts=0, ever_accepted=False, tried={"a"}, usable={"a", "b"})[0] == REQUEUE


def test_a_message_ends_failed_after_the_attempt_limit_even_with_sims_left_to_try():
    usable = {f"s{i}" for i in range(10)}
    assert MAX_ATTEMPTS == 5
    assert after_refusal("retry", attempts=3, ever_accepted=False, tried={"s1"}, usable=usable)[0] == REQUEUE
    outcome, why = after_refusal("retry", attempts=4, ever_accepted=False, tried={"s1"}, usable=usable)
    assert (outcome, why) == (FAIL, "refused 5 times")


def test_a_message_refused_on_every_usable_sim_ends_failed():
    assert after_refusal("retry", attempts=1, ever_accepted=False, tried={"a", "b"}, usable={"a", "b"})[0] == FAIL
    # a pool with nothing usable left keeps the message waiting for a route
    assert after_refusal("retry", attempts=1, ever_accepted=False, tried={"a"}, usable=set())[0] == REQUEUE


def test_a_refused_number_is_rejected_and_a_partly_sent_message_is_never_resent():
    assert after_refusal("reject", attempts=0, ever_accepted=False, tried={"a"}, usable={"a", "b"})[0] == REJECT
    assert after_refusal("retry", attempts=0, ever_accepted=True, tried={"a"}, usable={"a", "b"})[0] == FAIL
