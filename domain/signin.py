"""The rules of signing in to the dashboard and of its sessions (docs/dashboard.md), pure
functions of what was recorded and the service clock.

Failed sign-ins are throttled per account and per calling IP in rolling windows: past the
limit, the next try waits until the oldest failure in the window has left it.  Nothing locks
for good: waiting always ends.  A session ends 30 minutes after it was last used or 12 hours
after it began, whichever comes first."""
from __future__ import annotations

import math

from .errors import DomainError

FAILURE_WINDOW = 15 * 60  # seconds
FAILURES_PER_ACCOUNT = 5
FAILURES_PER_IP = 20

SESSION_IDLE = 30 * 60
SESSION_ABSOLUTE = 12 * 3600


def account_key(email: str) -> str:
    return f"account:{email}"


def ip_key(ip: str) -> str:
    return f"ip:{ip}"


def wait_after(failures: list[float], limit: int, now: float, window: float = FAILURE_WINDOW) -> int:
    """Whole seconds (rounded up) before another try, given the failure times of one key; 0 when
    fewer than `limit` failures are in the window."""
    recent = sorted(at for at in failures if now - window < at <= now)
    if len(recent) < limit:
        return 0
    return max(1, math.ceil(recent[-limit] + window - now))


class SignInRefused(DomainError):
    """Email and password did not match a person who may sign in (the same answer whether the
    email exists or not), or `wait` seconds must pass first."""

    def __init__(self, wait: int = 0):
        super().__init__("throttled" if wait else "refused")
        self.wait = wait


def session_alive(created: float, last_seen: float, now: float) -> bool:
    return now - last_seen < SESSION_IDLE and now - created < SESSION_ABSOLUTE
