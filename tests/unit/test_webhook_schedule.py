"""The webhook sender's schedule (docs/design.md, "Webhook sender"), with plain values: which
leased deliveries take the places, how many a client may hold, when an attempt turns slow and
gives up its place, how much a lease takes, and when a delivery leased ahead is too late to start."""
import pytest

from sandesh.domain.webhook import TIMEOUT
from sandesh.workers.webhook_schedule import (CLOSED, IDLE, LEASING, LEASING_THEN_AGAIN, Room, Starts,
                                              WebhookSchedule)

NOW = 1_800_000_000.0  # the service clock
TICK = 1_000.0         # the monotonic clock


def schedule(places=4, per_client=2, **rest):
    return WebhookSchedule(places, per_client, slow=0.5, slow_threads=48, ahead=2, lease=60.0, **rest)


def lease(s, *delivery_ids, now=NOW, workspaces=None):
    """These deliveries leased at `now`; each one's client is its id's letter (`a2`: client `a`),
    of workspace `w` unless `workspaces` says another."""
    s.leased([(delivery_id, delivery_id[0], (workspaces or {}).get(delivery_id[0], "w"), None)
              for delivery_id in delivery_ids], now)


def started(starts: Starts) -> list[str]:
    return [leased.delivery_id for leased in starts.attempts]


def waiting(s) -> list[str]:
    return [leased.delivery_id for leased in s.waiting]


# Places, and each client's share

def test_deliveries_leased_ahead_start_oldest_lease_first_while_a_place_is_free():
    s = schedule(places=4, per_client=4)
    lease(s, "a1", "b1")
    lease(s, "c1", "a2", "b2")
    starts = s.start(NOW, TICK)
    assert started(starts) == ["a1", "b1", "c1", "a2"]
    assert waiting(s) == ["b2"]
    assert s.places_taken(TICK) == 4


def test_a_client_runs_at_most_its_share_even_with_places_free():
    """A receiver that hangs holds at most `per_client` threads (docs/performance.md, "The per-client share")."""
    s = schedule(places=4, per_client=2)
    lease(s, "a1", "a2", "a3")
    assert started(s.start(NOW, TICK)) == ["a1", "a2"]
    assert waiting(s) == ["a3"] and s.places_taken(TICK) == 2
    lease(s, "b1")
    assert started(s.start(NOW, TICK)) == ["b1"], "another client takes a free place past the one waiting"
    assert waiting(s) == ["a3"]


def test_an_attempt_that_ends_frees_its_place_for_the_next_waiting_one_without_a_lease():
    s = schedule(places=2, per_client=2)
    lease(s, "a1", "a2", "a3")
    s.start(NOW, TICK)
    s.ended("a1")
    assert started(s.start(NOW, TICK + 0.1)) == ["a3"]
    assert s.running == {"a2": "a", "a3": "a"} and waiting(s) == []


def test_an_attempt_that_ends_twice_or_never_started_changes_nothing():
    s = schedule()
    lease(s, "a1")
    s.start(NOW, TICK)
    s.ended("a1")
    s.ended("a1")
    s.ended("z9")
    assert s.running == {} and s.since == {}


# Slow attempts give up their places

def test_an_attempt_running_past_slow_gives_up_its_place_but_keeps_counting_for_its_client():
    """docs/performance.md, "Slow attempts give up their places": a receiver that hangs takes
    its share of places for the first half second only, and its share of threads for good."""
    s = schedule(places=4, per_client=2)
    lease(s, "a1", "a2", "b1", "b2", "c1", "a3")
    assert started(s.start(NOW, TICK)) == ["a1", "a2", "b1", "b2"]
    assert s.places_taken(TICK + 0.5) == 4, "at SLOW exactly, still in their places"
    assert s.places_taken(TICK + 0.51) == 0
    assert started(s.start(NOW, TICK + 0.51)) == ["c1"], "a3 waits: its client holds its share"
    assert waiting(s) == ["a3"]
    assert len(s.running) == 5 and s.places_taken(TICK + 0.51) == 1


def test_slow_attempts_give_up_places_only_as_far_as_the_threads_kept_for_them():
    s = WebhookSchedule(2, 2, slow=0.5, slow_threads=1, ahead=2, lease=60.0)
    lease(s, "a1", "b1", "c1", "d1")
    assert started(s.start(NOW, TICK)) == ["a1", "b1"]
    assert s.places_taken(TICK + 1) == 1
    assert started(s.start(NOW, TICK + 1)) == ["c1"], "one thread for slow attempts: one place given up"
    assert waiting(s) == ["d1"] and s.places_taken(TICK + 1) == 2


def test_while_the_places_are_full_and_deliveries_wait_they_start_when_the_next_attempt_turns_slow():
    s = schedule(places=2, per_client=2)
    lease(s, "a1")
    s.start(NOW, TICK)
    lease(s, "a2", "b1", "b2")
    starts = s.start(NOW, TICK + 0.2)
    assert started(starts) == ["a2"] and waiting(s) == ["b1", "b2"]
    assert starts.wake_in == pytest.approx(0.3), "a1 turns slow 0.5 s after it started"
    assert s.start(NOW, TICK + 0.3).wake_in is None, "one wake-up at a time"
    s.woken()
    assert started(s.start(NOW, TICK + 0.51)) == ["b1"], "a1 is slow: its place is free"
    s.woken()
    assert s.start(NOW, TICK + 0.6).wake_in == pytest.approx(0.1), "a2 turns slow next"


def test_no_wake_up_while_a_place_is_free_or_nothing_waits():
    s = schedule(places=2, per_client=1)
    lease(s, "a1", "a2")
    assert s.start(NOW, TICK).wake_in is None, "a2 waits for its client's share, not for a place"
    s = schedule(places=2, per_client=2)
    lease(s, "a1", "b1")
    assert s.start(NOW, TICK).wake_in is None


def test_a_workspace_holds_at_most_its_share_over_all_its_clients():
    """One tenant with many clients (each under its own share) leaves the others their places."""
    s = schedule(places=8, per_client=4, per_workspace=3)
    tenant = {"a": "x", "b": "x", "c": "x", "d": "y"}
    lease(s, "a1", "b1", "c1", "a2", "b2", "d1", workspaces=tenant)
    assert started(s.start(NOW, TICK)) == ["a1", "b1", "c1", "d1"]
    assert waiting(s) == ["a2", "b2"]
    room = s.room(TICK)
    assert (room.held_workspaces, room.per_workspace) == ({"x": 5, "y": 1}, 6)
    s.ended("b1")
    assert started(s.start(NOW, TICK)) == ["a2"]


# Leased ahead

def test_a_lease_takes_the_free_places_and_as_many_again_and_twice_the_share_per_client():
    """docs/performance.md, "Leased ahead"."""
    s = schedule(places=4, per_client=2)
    assert s.room(TICK) == Room(8, {}, 4, {}, 32)
    lease(s, "a1", "a2", "a3", "b1")
    assert s.room(TICK) == Room(4, {"a": 3, "b": 1}, 4, {"w": 4}, 32)
    s.start(NOW, TICK)
    assert s.room(TICK) == Room(4, {"a": 3, "b": 1}, 4, {"w": 4}, 32), \
        "running or waiting, each holds one of the eight"
    lease(s, "c1", "c2", "c3", "c4")
    assert s.room(TICK).deliveries == 0


def test_slow_attempts_leave_room_to_lease_for_the_places_they_gave_up():
    s = schedule(places=2, per_client=2)
    lease(s, "a1", "a2")
    s.start(NOW, TICK)
    assert s.room(TICK).deliveries == 2
    assert s.room(TICK + 1) == Room(4, {"a": 2}, 4, {"w": 2}, 32)


def test_a_delivery_leased_ahead_too_long_ago_is_handed_back_while_its_lease_is_surely_ours():
    """Waiting more than LEASE - 2 TIMEOUT (40 s), its attempt might outlast its 60 s lease:
    not started; handed back, so that it is due again at once."""
    s = schedule(places=1, per_client=1)
    lease(s, "a1", "a2")
    s.start(NOW, TICK)
    assert started(s.start(NOW + 60 - 2 * TIMEOUT, TICK + 1)) == [] and waiting(s) == ["a2"], "40 s: still waits"
    s.ended("a1")
    starts = s.start(NOW + 60 - 1.5 * TIMEOUT, TICK + 2)
    assert (started(starts), starts.hand_back, waiting(s)) == ([], ["a2"], [])


def test_a_delivery_leased_ahead_whose_lease_may_be_ending_is_left_to_whoever_leases_it_next():
    """Past LEASE - TIMEOUT (50 s), another sender may lease it before a hand-back arrives: it
    is neither started nor handed back; its lease runs out and it is due again then."""
    s = schedule(places=1, per_client=1)
    lease(s, "a1", "a2")
    s.start(NOW, TICK)
    s.ended("a1")
    starts = s.start(NOW + 60 - TIMEOUT, TICK + 2)
    assert (started(starts), starts.hand_back, waiting(s)) == ([], [], [])


# Turns to lease

def test_one_lease_at_a_time_and_a_thread_that_finds_one_running_has_it_run_once_more():
    s = schedule()
    assert s.turn == IDLE and s.ask_turn() and s.turn == LEASING
    assert not s.ask_turn() and s.turn == LEASING_THEN_AGAIN
    assert not s.ask_turn() and s.turn == LEASING_THEN_AGAIN, "asked twice, still once more"
    assert s.end_turn() and s.turn == LEASING
    assert not s.end_turn() and s.turn == IDLE


def test_the_loop_waits_for_its_turn_and_leases_again_only_at_its_next_wake_up():
    s = schedule()
    assert s.ask_turn()
    assert s.leasing, "the loop waits while this is so"
    assert not s.end_turn() and s.take_turn() and s.turn == LEASING
    assert not s.ask_turn()
    assert not s.end_turn(again=False) and s.turn == IDLE


def test_closed_it_leases_and_starts_nothing_and_gives_back_what_was_leased_ahead():
    s = schedule(places=1, per_client=1)
    lease(s, "a1", "a2", "b1")
    s.start(NOW, TICK)
    assert s.close() == ["a2", "b1"] and s.turn == CLOSED
    assert not s.ask_turn() and not s.take_turn() and not s.leasing
    assert s.start(NOW, TICK + 1) == Starts([], [], None)
