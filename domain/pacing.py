"""SIM pacing and the choice of SIM (interface §Limits; decisions §3 Scheduling).

A SIM submits at most 30 parts in any rolling 30 minutes.  Part of every SIM's window is held
for OTP, so a promotional backlog never delays a code.
"""
from __future__ import annotations

from dataclasses import dataclass

WINDOW_SECONDS = 30 * 60
PARTS_PER_WINDOW = 30
OTP_RESERVE = 5  # parts of each SIM's window that only OTP may use

PRIORITY = {"otp": 0, "transactional": 1, "promotional": 2}


def capacity(part_times: list[float], now: float) -> int:
    """Parts this SIM may still submit now."""
    return PARTS_PER_WINDOW - sum(1 for t in part_times if t > now - WINDOW_SECONDS)


def fits(message_type: str, parts: int, left: int) -> bool:
    """Whether a message of this type and size may use a SIM with `left` parts of window."""
    reserve = 0 if message_type == "otp" else OTP_RESERVE
    return parts + reserve <= left


@dataclass(frozen=True)
class SimState:
    sim_id: str
    healthy: bool
    left: int


def choose_sim(sims: list[SimState], message_type: str, parts: int) -> str | None:
    """The healthy SIM with most capacity left that the message fits, or None (it waits)."""
    usable = [s for s in sims if s.healthy and fits(message_type, parts, s.left)]
    return max(usable, key=lambda s: (s.left, s.sim_id)).sim_id if usable else None


def free_at(part_times: list[float], needed: int, now: float) -> float:
    """When the window will have `needed` free parts (for Retry of a deferred message)."""
    recent = sorted(t for t in part_times if t > now - WINDOW_SECONDS)
    excess = len(recent) + needed - PARTS_PER_WINDOW
    return now if excess <= 0 else recent[excess - 1] + WINDOW_SECONDS
