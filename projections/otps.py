"""Read model of OTP codes for operators and counters: state and attempts, never the code.

Owns `otps`, a followed projection (follower.py)."""
from __future__ import annotations

from typing import Any, Callable

from sandesh.domain.otp import ACTIVE, EXPIRED, LOCKED, USED, Otp

NAME = "otps"
TABLES = ("otps",)
DDL = """
CREATE TABLE IF NOT EXISTS otps (
    id text PRIMARY KEY, client_id text NOT NULL, "to" text NOT NULL, purpose text NOT NULL, state text,
    wrong_attempts integer NOT NULL DEFAULT 0, message_id text, issued_at double precision,
    expires_at double precision, updated_at double precision);
CREATE INDEX IF NOT EXISTS otps_client ON otps (client_id, "to");
"""

HANDLERS: dict[type, Callable[[Any, Any], None]] = {}


def _opened(cur: Any, e: Any) -> None:
    cur.execute('INSERT INTO otps (id, client_id, "to", purpose) VALUES (%s, %s, %s, %s)',
                (e.originator_id, e.client_id, e.to, e.purpose))


def _issued(cur: Any, e: Any) -> None:
    cur.execute("UPDATE otps SET state = %s, wrong_attempts = 0, message_id = %s, issued_at = %s, expires_at = %s,"
                " updated_at = %s WHERE id = %s", (ACTIVE, e.message_id, e.at, e.at + 300, e.at, e.originator_id))


def _attempt_failed(cur: Any, e: Any) -> None:
    cur.execute("UPDATE otps SET wrong_attempts = wrong_attempts + 1, updated_at = %s WHERE id = %s",
                (e.at, e.originator_id))


def _locked(cur: Any, e: Any) -> None:
    cur.execute("UPDATE otps SET wrong_attempts = wrong_attempts + 1, state = %s, updated_at = %s WHERE id = %s",
                (LOCKED, e.at, e.originator_id))


def _state(state: str) -> Callable[[Any, Any], None]:
    def handler(cur: Any, e: Any) -> None:
        cur.execute("UPDATE otps SET state = %s, updated_at = %s WHERE id = %s", (state, e.at, e.originator_id))
    return handler


HANDLERS.update({Otp.Opened: _opened, Otp.Issued: _issued, Otp.AttemptFailed: _attempt_failed,
                 Otp.Locked: _locked, Otp.Verified: _state(USED), Otp.Expired: _state(EXPIRED)})
