"""OTP limits that span clients or processes (docs/api.md, "OTP"), on rolling windows read from
the one clock.

Per number (all workspaces, 3 per 10 min) and per client + end-user IP (10 per 10 min) count
the `Issued` events, through the inline table `otp_issues`; the guard runs inside the append
that issues the code, under a transaction advisory lock per number / per client + IP, so two
processes cannot both take the last place.  Per client + calling IP (60 per minute, sends and
verifies together) is a hit log like the request rate: not events, one guarded statement.
"""
from __future__ import annotations

import math
from typing import Any, Callable, ContextManager

from sandesh.domain.otp import Otp

from .contract import ReadModel
from .rows import Ordered, Rows, Table

NUMBER_LIMIT, NUMBER_WINDOW = 3, 600
END_USER_IP_LIMIT, END_USER_IP_WINDOW = 10, 600
CALLER_IP_LIMIT, CALLER_IP_WINDOW = 60, 60

# The inline table of issued codes (`MODEL`), part of registry.py's projection (rebuilt by
# `sandesh replay registry`), written by `guard_issue`.
ISSUES_DDL = """
CREATE TABLE IF NOT EXISTS otp_issues (
    otp_id text NOT NULL, number text NOT NULL, client_id text NOT NULL, ip text, at double precision NOT NULL);
CREATE INDEX IF NOT EXISTS otp_issues_number ON otp_issues (number, at);
CREATE INDEX IF NOT EXISTS otp_issues_client_ip ON otp_issues (client_id, ip, at);
"""

DDL = """
CREATE OR REPLACE FUNCTION sandesh_guard(ok boolean, code text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF NOT ok THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = code, MESSAGE = 'sandesh_guard: ' || code;
    END IF;
END $$;
CREATE UNLOGGED TABLE IF NOT EXISTS otp_caller_hits (client_id text NOT NULL, ip text NOT NULL, at double precision NOT NULL);
CREATE INDEX IF NOT EXISTS otp_caller_hits_key ON otp_caller_hits (client_id, ip, at);
"""

_CALLER_HIT = """
WITH locked AS (SELECT pg_advisory_xact_lock(hashtextextended('otp-caller ' || %(client)s || ' ' || %(ip)s, 0))),
pruned AS (DELETE FROM otp_caller_hits WHERE client_id = %(client)s AND ip = %(ip)s AND at <= %(since)s
           AND EXISTS (SELECT 1 FROM locked)),
recent AS (SELECT count(*) AS n, min(at) AS oldest FROM otp_caller_hits
           WHERE client_id = %(client)s AND ip = %(ip)s AND at > %(since)s AND EXISTS (SELECT 1 FROM locked)),
hit AS (INSERT INTO otp_caller_hits (client_id, ip, at) SELECT %(client)s, %(ip)s, %(now)s FROM recent
        WHERE recent.n < %(limit)s RETURNING at)
SELECT (SELECT count(*) FROM hit) AS counted, (SELECT oldest FROM recent) AS oldest
"""


def wait_seconds(oldest: float | None, window: int, now: float) -> int:
    """Whole seconds, rounded up, until the oldest hit leaves the rolling window."""
    if oldest is None:
        return 1
    return max(1, math.ceil(oldest + window - now))


def hit_caller_ip(conn: Any, client_id: str, ip: str, now: float) -> int | None:
    """Count one OTP request from this calling IP. None when allowed, else Retry-After."""
    with conn.transaction():
        row = conn.execute(_CALLER_HIT, {"client": client_id, "ip": ip, "now": now, "since": now - CALLER_IP_WINDOW,
                                         "limit": CALLER_IP_LIMIT}).fetchone()
    if row["counted"]:
        return None
    return wait_seconds(row["oldest"], CALLER_IP_WINDOW, now)


MODEL = ReadModel(tables={"otp_issues": Table("otp_issues", (), (Ordered("by_number", ("number",), "at"),))},
                  ddl=ISSUES_DDL)


def guard_issue(rows: Rows, e: Otp.Issued) -> None:
    """Inside the append of an `Issued` event: refuse it when a window is full, then count it."""
    rows.guard("SELECT pg_advisory_xact_lock(hashtextextended('otp-number ' || %s, 0))", (e.to,))
    rows.delete_upto("otp_issues", "by_number", (e.to,), e.at - NUMBER_WINDOW)
    rows.guard("SELECT public.sandesh_guard((SELECT count(*) FROM otp_issues WHERE number = %s AND at > %s) < %s,"
               " 'otp_number_limit')", (e.to, e.at - NUMBER_WINDOW, NUMBER_LIMIT))
    if e.ip is not None:
        rows.guard("SELECT pg_advisory_xact_lock(hashtextextended('otp-ip ' || %s || ' ' || %s, 0))",
                   (e.client_id, e.ip))
        rows.guard("SELECT public.sandesh_guard((SELECT count(*) FROM otp_issues WHERE client_id = %s AND ip = %s"
                   " AND at > %s) < %s, 'otp_ip_limit')", (e.client_id, e.ip, e.at - END_USER_IP_WINDOW,
                                                           END_USER_IP_LIMIT))
    rows.insert("otp_issues", {"otp_id": e.originator_id, "number": e.to, "client_id": e.client_id, "ip": e.ip,
                               "at": e.at})


def retry_after_number(conn: Any, number: str, now: float) -> int:
    row = conn.execute("SELECT min(at) AS oldest FROM otp_issues WHERE number = %s AND at > %s",
                       (number, now - NUMBER_WINDOW)).fetchone()
    return wait_seconds(row["oldest"], NUMBER_WINDOW, now)


def retry_after_ip(conn: Any, client_id: str, ip: str, now: float) -> int:
    row = conn.execute("SELECT min(at) AS oldest FROM otp_issues WHERE client_id = %s AND ip = %s AND at > %s",
                       (client_id, ip, now - END_USER_IP_WINDOW)).fetchone()
    return wait_seconds(row["oldest"], END_USER_IP_WINDOW, now)


class Windows:
    """The application's OtpWindows port (domain/ports.py) on pooled connections."""

    def __init__(self, connection: Callable[[], ContextManager[Any]]):
        self.connection = connection

    def hit_caller_ip(self, client_id: str, ip: str, now: float) -> int | None:
        with self.connection() as conn:
            return hit_caller_ip(conn, client_id, ip, now)

    def retry_after_number(self, number: str, now: float) -> int:
        with self.connection() as conn:
            return retry_after_number(conn, number, now)

    def retry_after_ip(self, client_id: str, ip: str, now: float) -> int:
        with self.connection() as conn:
            return retry_after_ip(conn, client_id, ip, now)
