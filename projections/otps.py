"""Read model of OTP codes for operators and counters: state and attempts, never the code.

Owns `otps`, a followed projection (follower.py)."""
from __future__ import annotations

from typing import Any, Callable

from sandesh.domain.otp import ACTIVE, EXPIRED, LOCKED, USED, Otp

from .rows import Add, Rows, Table

NAME = "otps"
TABLES = ("otps",)
DDL = """
CREATE TABLE IF NOT EXISTS otps (
    id text PRIMARY KEY, client_id text NOT NULL, "to" text NOT NULL, purpose text NOT NULL, state text,
    wrong_attempts integer NOT NULL DEFAULT 0, message_id text, issued_at double precision,
    expires_at double precision, updated_at double precision);
CREATE INDEX IF NOT EXISTS otps_client ON otps (client_id, "to");
"""

ROWS = {"otps": Table("otps", ("id",))}
HANDLERS: dict[type, Callable[[Rows, Any], None]] = {}


def _opened(rows: Rows, e: Any) -> None:
    rows.insert("otps", {"id": e.originator_id, "client_id": e.client_id, "to": e.to, "purpose": e.purpose})


def _issued(rows: Rows, e: Any) -> None:
    rows.update("otps", (e.originator_id,), {"state": ACTIVE, "wrong_attempts": 0, "message_id": e.message_id,
                                             "issued_at": e.at, "expires_at": e.at + 300, "updated_at": e.at})


def _attempt_failed(rows: Rows, e: Any) -> None:
    rows.update("otps", (e.originator_id,), {"wrong_attempts": Add(1), "updated_at": e.at})


def _locked(rows: Rows, e: Any) -> None:
    rows.update("otps", (e.originator_id,), {"wrong_attempts": Add(1), "state": LOCKED, "updated_at": e.at})


def _state(state: str) -> Callable[[Rows, Any], None]:
    def handler(rows: Rows, e: Any) -> None:
        rows.update("otps", (e.originator_id,), {"state": state, "updated_at": e.at})
    return handler


HANDLERS.update({Otp.Opened: _opened, Otp.Issued: _issued, Otp.AttemptFailed: _attempt_failed,
                 Otp.Locked: _locked, Otp.Verified: _state(USED), Otp.Expired: _state(EXPIRED)})
