"""The state the dispatcher's loop and a SIM's thread share, each piece with one owner
(docs/design.md, "The dispatcher's threads").

`Load` is what a SIM has taken on: the parts it sent in its pacing window, its parts today and
this month, and the message in hand.  Its thread records each part the network accepts while
the loop reads the room left and hands it the next message; both go through `Load`'s methods,
which hold its lock, so neither ever sees the other halfway (a deque trimmed while it is
appended to, a count read between two writes).

`SimRecord` is what the dispatcher knows of a SIM: its row of the pool, whose settings the loop
refreshes at every read, and what its thread learns of the card (ICCID, IMSI, operator), of its
port (a move) and of its PIN.  Each writes only its own fields, in place, under the record's lock:
a copy taken by one and written back whole would undo what the other wrote meanwhile.

The jobs the loop and the modem's reader give a SIM's thread are typed: `Send`, `Report`,
`Stored`, `Heartbeat` and `Stop`.

`Wakeups` is why the loop should look again: the SIM threads' nudges and the channel's
notifications are added, and the loop takes them all at once; an addition after a take sets
the wake-up again, so none is lost.
"""
from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from sandesh.domain.pacing import WINDOW_SECONDS, capacity
from sandesh.domain.sim_plan import Plan, Usage


class Load:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._part_times: deque[float] = deque()
        self._usage: Usage | None = None  # known once the port is open
        self._busy = False
        self._inflight = 0                 # parts of the message in hand not yet accepted

    # The SIM's thread
    def opened(self, part_times: Iterable[float], usage: Usage) -> None:
        """What the log says the SIM sent in its window, today and this month."""
        with self._lock:
            self._part_times, self._usage = deque(part_times), usage

    def part_accepted(self, now: float) -> None:
        with self._lock:
            self._part_times.append(now)
            if self._usage is not None:
                self._usage.add(now)
            self._inflight = max(0, self._inflight - 1)

    def done(self) -> None:
        """The message in hand is sent, refused or handed back."""
        with self._lock:
            self._busy, self._inflight = False, 0

    # The dispatcher's loop
    def give(self, parts: int) -> None:
        with self._lock:
            self._busy, self._inflight = True, parts

    @property
    def busy(self) -> bool:
        with self._lock:
            return self._busy

    def left(self, plan: Plan, now: float) -> int:
        """Parts it may take now: its pacing window's room, within what its caps leave."""
        with self._lock:
            while self._part_times and self._part_times[0] <= now - WINDOW_SECONDS:
                self._part_times.popleft()
            room = capacity(self._part_times, now, plan.parts_per_window)
            capped = self._usage.room(plan, now) if self._usage is not None else None
            return (room if capped is None else min(room, capped)) - self._inflight

    # Either
    def resting(self, plan: Plan, now: float) -> tuple[float | None, str | None]:
        with self._lock:
            return self._usage.resting(plan, now) if self._usage is not None else (None, None)

    def used(self) -> tuple[int | None, int | None]:
        """Parts today and this month (None before the port opened)."""
        with self._lock:
            return (self._usage.today, self._usage.this_month) if self._usage is not None else (None, None)


# The settings an operator changes on a registered SIM that its thread takes without a restart
# (its port and baud restart the thread instead: docs/operations.md, "SIMs and modems").
LIVE_SETTINGS = ("name", "pin_sealed", "pin_refused", "daily_cap", "monthly_cap", "pace", "balance_ussd",
                 "min_credit", "balance_every")


class SimRecord:
    def __init__(self, row: Mapping[str, Any]):
        self._lock = threading.Lock()
        self._fields = dict(row)

    # Readers: one field, or a copy of them all that stays as it is
    def __getitem__(self, name: str) -> Any:
        with self._lock:
            return self._fields[name]

    def get(self, name: str, default: Any = None) -> Any:
        with self._lock:
            return self._fields.get(name, default)

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return dict(self._fields)

    # The dispatcher's loop
    def refresh(self, row: Mapping[str, Any]) -> bool:
        """The operator's settings as the pool read them; whether its balance query's code changed."""
        with self._lock:
            code = self._fields.get("balance_ussd")
            self._fields.update((name, row[name]) for name in LIVE_SETTINGS)
            return self._fields.get("balance_ussd") != code

    # The SIM's thread
    def identified(self, iccid: str | None, imsi: str | None, operator: str | None) -> None:
        with self._lock:
            self._fields.update(iccid=iccid, imsi=imsi, operator=operator)

    def moved(self, port: str) -> None:
        with self._lock:
            self._fields["port"] = port

    def pin_read(self, pin_sealed: str | None, pin_refused: str | None) -> dict[str, Any]:
        """The PIN as the log has it now; answers the copy the port is opened with, so that the
        PIN entered and the PIN judged are the same one."""
        with self._lock:
            self._fields.update(pin_sealed=pin_sealed, pin_refused=pin_refused)
            return dict(self._fields)


@dataclass(frozen=True)
class Send:
    """A message the loop leased to this SIM."""
    message_id: str


@dataclass(frozen=True)
class Report:
    """A status report the modem pushed (+CDS), recorded on the SIM's thread after its part."""
    pdu: str


@dataclass(frozen=True)
class Stored:
    """A reply or a report the modem stored (+CMTI, +CDSI): read from the store by the SIM's thread."""
    index: int
    store: str | None


@dataclass(frozen=True)
class Heartbeat:
    """Report the SIM's health now."""


@dataclass(frozen=True)
class Stop:
    """The thread is retiring: it finishes the message in hand and hands back the rest."""


Job = Send | Report | Stored | Heartbeat | Stop


class Wakeups:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reasons: set[str] = set()
        self._event = threading.Event()

    def add(self, reason: str) -> None:
        with self._lock:
            self._reasons.add(reason)
            self._event.set()

    def wait(self, timeout: float) -> None:
        self._event.wait(timeout)

    def take(self) -> set[str]:
        """Every reason added since the last take; the wake-up is cleared with them, so a reason
        added after this sets it again."""
        with self._lock:
            taken, self._reasons = self._reasons, set()
            self._event.clear()
            return taken
