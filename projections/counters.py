"""Per-client counters returned by GET /v1/sms/balance (docs/design.md, "Decisions: balance").

`sent` counts accepted messages, `segments` their segments, `spent` the paisa charged net of
refunds (a canceled message's included); `delivered`, `undelivered` and `failed` count messages
that reached those statuses (`failed` includes `rejected`); `otpSent` and `otpVerified` count codes.

Owns `client_counters` and `counted_messages`, a followed projection (`PROJECTION`, follower.py);
reads `clients` (registry.py) to sum a workspace's.
"""
from __future__ import annotations

from typing import Any

from sandesh.domain.message import Message
from sandesh.domain.otp import Otp

from .contract import Projection
from .rows import Add, Rows, Table

COLUMNS = {"sent": "sent", "delivered": "delivered", "undelivered": "undelivered", "failed": "failed",
           "segments": "segments", "spent": "spent", "otpSent": "otp_sent", "otpVerified": "otp_verified"}
DDL = """
CREATE TABLE IF NOT EXISTS client_counters (
    client_id text PRIMARY KEY, sent bigint NOT NULL DEFAULT 0, delivered bigint NOT NULL DEFAULT 0,
    undelivered bigint NOT NULL DEFAULT 0, failed bigint NOT NULL DEFAULT 0, segments bigint NOT NULL DEFAULT 0,
    spent bigint NOT NULL DEFAULT 0, otp_sent bigint NOT NULL DEFAULT 0, otp_verified bigint NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS counted_messages (message_id text PRIMARY KEY, client_id text NOT NULL);
"""

PROJECTION = Projection(name="counters", tables={"client_counters": Table("client_counters", ("client_id",)),
                                                 "counted_messages": Table("counted_messages", ("message_id",))},
                        ddl=DDL)


def _add(rows: Rows, client_id: str, **amounts: int) -> None:
    rows.insert("client_counters", {"client_id": client_id, **{c: Add(n) for c, n in amounts.items()}},
                on_conflict="update")


@PROJECTION.on(Message.Accepted)
def _accepted(rows: Rows, e: Message.Accepted) -> None:
    _add(rows, e.client_id, sent=1, segments=e.segments, spent=e.cost)
    rows.insert("counted_messages", {"message_id": e.originator_id, "client_id": e.client_id})


@PROJECTION.on(Message.Delivered)
def _delivered(rows: Rows, e: Message.Delivered) -> None:
    _add(rows, _client_of(rows, e), delivered=1)


@PROJECTION.on(Message.Undelivered)
def _undelivered(rows: Rows, e: Message.Undelivered) -> None:
    _add(rows, _client_of(rows, e), undelivered=1)


@PROJECTION.on(Message.Failed, Message.Rejected)
def _failed(rows: Rows, e: Message.Failed | Message.Rejected) -> None:
    _add(rows, _client_of(rows, e), failed=1, spent=-e.refund)


@PROJECTION.on(Message.Canceled)
def _canceled(rows: Rows, e: Message.Canceled) -> None:
    _add(rows, _client_of(rows, e), spent=-e.refund)


@PROJECTION.on(Otp.Issued)
def _otp_issued(rows: Rows, e: Otp.Issued) -> None:
    _add(rows, e.client_id, otp_sent=1)


@PROJECTION.on(Otp.Verified)
def _otp_verified(rows: Rows, e: Otp.Verified) -> None:
    _add(rows, e.client_id, otp_verified=1)


def _client_of(rows: Rows, e: Message.Event) -> str:
    """Status events do not repeat the client: the counters keep who sent each message."""
    return rows.get("counted_messages", (e.originator_id,), "client_id")


def zero() -> dict[str, int]:
    return {name: 0 for name in COLUMNS}


def for_client(conn: Any, client_id: str) -> dict[str, int]:
    row = conn.execute("SELECT * FROM client_counters WHERE client_id = %s", (client_id,), prepare=True).fetchone()
    if row is None:
        return zero()
    return {name: int(row[column]) for name, column in COLUMNS.items()}


def for_workspace(conn: Any, workspace_id: str) -> dict[str, int]:
    """The counters of every client of the workspace, summed (joins `clients`, registry.py): the
    dashboard's Overview."""
    sums = ", ".join(f"COALESCE(sum(k.{column}), 0) AS {column}" for column in COLUMNS.values())
    row = conn.execute(f"SELECT {sums} FROM client_counters k JOIN clients c ON c.id = k.client_id"
                       " WHERE c.workspace_id = %s", (workspace_id,)).fetchone()
    return {name: int(row[column]) for name, column in COLUMNS.items()}
