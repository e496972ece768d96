"""SIM pacing and message priority (docs/design.md, "Decisions: SIMs, modems and replies").

A SIM submits at most 30 parts in any rolling 30 minutes.  Some of the pool's window is held
for OTP, so a promotional backlog never delays a code: one part per four SIMs (at least one),
held on the pool as a whole rather than on each SIM.  A reserve per SIM would leave a sixth
of every window unused under a backlog; why the pool's is cheaper: docs/design.md, "Pacing".
"""
from __future__ import annotations

import math
from typing import Iterable

WINDOW_SECONDS = 30 * 60
PARTS_PER_WINDOW = 30
SIMS_PER_RESERVED_PART = 4

PRIORITY = {"otp": 0, "transactional": 1, "promotional": 2}


def capacity(part_times: Iterable[float], now: float, per_window: int = PARTS_PER_WINDOW) -> int:
    """Parts this SIM may still submit now, at `per_window` parts per window (a SIM's plan may
    set it slower than the interface's 30)."""
    return per_window - sum(1 for t in part_times if t > now - WINDOW_SECONDS)


def otp_reserve(usable_sims: int) -> int:
    """Parts of the pool's window that only OTP may use."""
    return math.ceil(usable_sims / SIMS_PER_RESERVED_PART)
