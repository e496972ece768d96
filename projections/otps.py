"""Read model of OTP codes for operators and counters: state and attempts, never the code.

Owns `otps`, a followed projection (`PROJECTION`, follower.py)."""
from __future__ import annotations

from sandesh.domain.otp import ACTIVE, EXPIRED, LOCKED, USED, Otp

from .contract import Projection
from .rows import Add, Rows, Table

DDL = """
CREATE TABLE IF NOT EXISTS otps (
    id text PRIMARY KEY, client_id text NOT NULL, "to" text NOT NULL, purpose text NOT NULL, state text,
    wrong_attempts integer NOT NULL DEFAULT 0, message_id text, issued_at double precision,
    expires_at double precision, updated_at double precision);
CREATE INDEX IF NOT EXISTS otps_client ON otps (client_id, "to");
"""

PROJECTION = Projection(name="otps", tables={"otps": Table("otps", ("id",))}, ddl=DDL)


@PROJECTION.on(Otp.Opened)
def _opened(rows: Rows, e: Otp.Opened) -> None:
    rows.insert("otps", {"id": e.originator_id, "client_id": e.client_id, "to": e.to, "purpose": e.purpose})


@PROJECTION.on(Otp.Issued)
def _issued(rows: Rows, e: Otp.Issued) -> None:
    rows.update("otps", (e.originator_id,), {"state": ACTIVE, "wrong_attempts": 0, "message_id": e.message_id,
                                             "issued_at": e.at, "expires_at": e.at + 300, "updated_at": e.at})


@PROJECTION.on(Otp.AttemptFailed)
def _attempt_failed(rows: Rows, e: Otp.AttemptFailed) -> None:
    rows.update("otps", (e.originator_id,), {"wrong_attempts": Add(1), "updated_at": e.at})


@PROJECTION.on(Otp.Locked)
def _locked(rows: Rows, e: Otp.Locked) -> None:
    rows.update("otps", (e.originator_id,), {"wrong_attempts": Add(1), "state": LOCKED, "updated_at": e.at})


_STATE = {Otp.Verified: USED, Otp.Expired: EXPIRED}


@PROJECTION.on(*_STATE)
def _ended(rows: Rows, e: Otp.Verified | Otp.Expired) -> None:
    rows.update("otps", (e.originator_id,), {"state": _STATE[type(e)], "updated_at": e.at})
