"""The webhook sender's schedule: which leased deliveries take its places, how many to lease,
and whose turn it is to lease (docs/design.md, "Webhook sender").

A delivery the sender has leased is in one of three states here:
- waiting: leased ahead, for a place (docs/performance.md, "Leased ahead");
- in a place: given to a thread less than `slow` seconds ago;
- slow: given to a thread longer ago. It keeps its thread but gives up its place, as far as the
  threads kept for slow attempts hold such attempts
  (docs/performance.md, "Slow attempts give up their places").
An attempt that ends leaves the schedule.  A client holds at most `per_client` places and slow
attempts together (docs/performance.md, "The per-client share"), and a workspace at most
`per_workspace` over all its clients, so that one tenant's receivers, however many, leave the
others most of the threads.

No thread, clock or I/O in here: the sender calls every method under its one lock and passes
the time in.  `now` is the service clock, on which the database measures leases; `tick` is the
monotonic clock, on which an attempt's running time is measured.
"""
from __future__ import annotations

import collections
from typing import Any, NamedTuple

from sandesh.domain.webhook import TIMEOUT

PER_CLIENT = 8     # running attempts of one client, slow ones too: a receiver that hangs holds at most this many threads
PER_WORKSPACE = 16  # running attempts of one workspace's clients together: the rest of the threads stay with the others
SLOW = 0.5         # seconds: an attempt running longer gives up its place, keeping its thread
SLOW_THREADS = 48  # threads beyond the places, for slow attempts: the shares of 6 receivers that hang
LEASE = 60.0       # seconds: longer than an attempt (TIMEOUT) and its recording
AHEAD = 2          # leased at most: places (and per client, its share) times this; the rest wait behind

# Whose turn it is to lease: one lease at a time, so no place is leased twice.
IDLE = "idle"
LEASING = "leasing"
LEASING_THEN_AGAIN = "leasing, then again"  # an attempt ended while a lease ran: one more lease after it
CLOSED = "closed"                           # leases nothing more and starts nothing more


class Leased(NamedTuple):
    """A delivery leased ahead, waiting for a place: leased `at` (service clock), with the
    delivery as read with its lease (None: the attempt reads it)."""
    delivery_id: str
    client_id: str
    workspace_id: str
    delivery: Any
    at: float


class Room(NamedTuple):
    """What the next lease may take: `deliveries` in all, for each client `per_client` less what
    it `held` already (in places, slow or waiting), and for each workspace `per_workspace` less
    what its clients hold (`held_workspaces`)."""
    deliveries: int
    held: dict[str, int]
    per_client: int
    held_workspaces: dict[str, int]
    per_workspace: int


class Starts(NamedTuple):
    """What `WebhookSchedule.start` decided: the attempts to give to threads now, the leases to
    end now (due again at once), and in how many seconds to start again when the next running
    attempt turns slow (None: no wake-up)."""
    attempts: list[Leased]
    hand_back: list[str]
    wake_in: float | None


class WebhookSchedule:
    def __init__(self, places: int, per_client: int = PER_CLIENT, *, per_workspace: int = PER_WORKSPACE,
                 slow: float = SLOW, slow_threads: int = SLOW_THREADS, ahead: int = AHEAD, lease: float = LEASE):
        self.places, self.per_client, self.per_workspace = places, per_client, per_workspace
        self.slow, self.slow_threads, self.ahead, self.lease = slow, slow_threads, ahead, lease
        self.running: dict[str, str] = {}   # delivery id -> its client: attempts given to a thread
        self.workspaces: dict[str, str] = {}  # delivery id -> its client's workspace, of those running
        self.since: dict[str, float] = {}   # delivery id -> when it was given to a thread (tick)
        self.waiting: collections.deque[Leased] = collections.deque()  # replaced, never changed in place
        self.turn = IDLE
        self.waking = False  # a wake-up is set for when the next running attempt turns slow

    def places_taken(self, tick: float) -> int:
        """Running attempts less the slow ones, as far as the threads for slow attempts hold them."""
        slow = sum(1 for at in self.since.values() if at < tick - self.slow)
        return len(self.running) - min(slow, self.slow_threads)

    def room(self, tick: float) -> Room:
        """Leased at most: `ahead` times the places, and `ahead` times its share per client and
        per workspace."""
        held = collections.Counter(self.running.values())
        held.update(leased.client_id for leased in self.waiting)
        held_workspaces = collections.Counter(self.workspaces.values())
        held_workspaces.update(leased.workspace_id for leased in self.waiting)
        free = self.ahead * self.places - self.places_taken(tick) - len(self.waiting)
        return Room(free, dict(held), self.ahead * self.per_client, dict(held_workspaces),
                    self.ahead * self.per_workspace)

    def leased(self, due: list[tuple[str, str, str, Any]], now: float) -> None:
        """(delivery id, client id, workspace id, delivery or None) leased at `now`, to wait for a place."""
        self.waiting = collections.deque([*self.waiting, *(Leased(*one, now) for one in due)])

    def start(self, now: float, tick: float) -> Starts:
        """Oldest lease first, the waiting deliveries that have a place, whose client has fewer
        than `per_client` running and whose workspace fewer than `per_workspace`; they are
        running from `tick` on.

        One that waited so long that its attempt (TIMEOUT at most, and its recording) might
        outlast its lease is not started: another sender may lease it once the lease ends.
        While the lease is surely still ours it is handed back, else left."""
        attempts: list[Leased] = []
        hand_back: list[str] = []
        if self.turn == CLOSED or not self.waiting:
            return Starts(attempts, hand_back, None)
        running = collections.Counter(self.running.values())
        running_workspaces = collections.Counter(self.workspaces.values())
        taken = self.places_taken(tick)
        waiting: collections.deque[Leased] = collections.deque()
        for leased in self.waiting:
            if leased.at + self.lease - 2 * TIMEOUT < now:
                if leased.at + self.lease - TIMEOUT > now:
                    hand_back.append(leased.delivery_id)
            elif (taken >= self.places or running[leased.client_id] >= self.per_client
                  or running_workspaces[leased.workspace_id] >= self.per_workspace):
                waiting.append(leased)
            else:
                running[leased.client_id] += 1
                running_workspaces[leased.workspace_id] += 1
                taken += 1
                self.running[leased.delivery_id] = leased.client_id
                self.workspaces[leased.delivery_id] = leased.workspace_id
                self.since[leased.delivery_id] = tick
                attempts.append(leased)
        self.waiting = waiting
        return Starts(attempts, hand_back, self._wake_in(taken, tick))

    def _wake_in(self, taken: int, tick: float) -> float | None:
        """While the places are full and deliveries wait: when the next running attempt turns
        slow, unless a wake-up is set already."""
        if not self.waiting or taken < self.places or self.waking:
            return None
        fresh = [at for at in self.since.values() if at >= tick - self.slow]
        if not fresh:
            return None
        self.waking = True
        return min(fresh) + self.slow - tick

    def woken(self) -> None:
        self.waking = False

    def ended(self, delivery_id: str) -> None:
        """The attempt ended (recorded or not): its thread and its place are free."""
        self.running.pop(delivery_id, None)
        self.workspaces.pop(delivery_id, None)
        self.since.pop(delivery_id, None)

    # Turns to lease: the loop waits for its turn; a thread that ended an attempt asks, and
    # when a lease runs already, has the thread holding the turn lease once more after it
    # (docs/performance.md, "Leased ahead").
    @property
    def leasing(self) -> bool:
        return self.turn in (LEASING, LEASING_THEN_AGAIN)

    def take_turn(self) -> bool:
        """The loop's turn, once no lease runs: False when closed."""
        assert not self.leasing, "one lease at a time"
        if self.turn == CLOSED:
            return False
        self.turn = LEASING
        return True

    def ask_turn(self) -> bool:
        """A thread that ended an attempt: True if it leases now; False if closed, or if a lease
        runs (which then runs once more, if a thread holds the turn)."""
        if self.turn == IDLE:
            self.turn = LEASING
            return True
        if self.turn == LEASING:
            self.turn = LEASING_THEN_AGAIN
        return False

    def end_turn(self, again: bool = True) -> bool:
        """The lease is done: True if the same caller leases once more (`again` and an attempt
        ended meanwhile); the turn is then still its own.  The loop passes again=False: it
        leases again at its next wake-up."""
        assert self.leasing, "ends a turn it does not hold"
        if again and self.turn == LEASING_THEN_AGAIN:
            self.turn = LEASING
            return True
        self.turn = IDLE
        return False

    def close(self) -> list[str]:
        """Once no lease runs: leases and starts nothing more; returns the deliveries leased
        ahead, whose leases are to be handed back."""
        assert not self.leasing, "closes while a lease runs"
        self.turn = CLOSED
        leased_ahead = [leased.delivery_id for leased in self.waiting]
        self.waiting = collections.deque()
        return leased_ahead
