"""SIM pacing and message priority (interface §Limits; decisions §3 Scheduling).

A SIM submits at most 30 parts in any rolling 30 minutes.  Part of every SIM's window is held
for OTP, so a promotional backlog never delays a code.
"""
from __future__ import annotations

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
