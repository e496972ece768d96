"""Per-client counters returned by GET /v1/sms/balance (decisions §1 Balance).

Until messages exist every counter is zero; the message projection fills `client_counters`.
"""
from __future__ import annotations

from typing import Any

COUNTERS = ("sent", "delivered", "undelivered", "failed", "segments", "spent", "otpSent", "otpVerified")


def zero() -> dict[str, int]:
    return {name: 0 for name in COUNTERS}


def for_client(conn: Any, client_id: str) -> dict[str, int]:
    return zero()
