"""Dashboard sessions and failed sign-ins (docs/dashboard.md): state kept outside the log, on
the service clock, like the request rate (request_rate.py).

Owns `dashboard_sessions` (only the SHA-256 of a session id is kept; the id itself lives in the
person's cookie) and `sign_in_failures` (one row per failed try and key: an account or a calling
IP; read by the throttle of domain/signin.py).  Reads `people` (people.py) to know who a session
is and whether they are still enabled."""
from __future__ import annotations

import secrets
from typing import Any, Callable, ContextManager

from sandesh.domain.credentials import sha256_hex
from sandesh.domain.signin import FAILURE_WINDOW, SESSION_ABSOLUTE, SESSION_IDLE, session_alive

DDL = """
CREATE TABLE IF NOT EXISTS dashboard_sessions (
    id_hash text PRIMARY KEY, person_id text NOT NULL,
    created_at double precision NOT NULL, last_seen double precision NOT NULL);
CREATE INDEX IF NOT EXISTS dashboard_sessions_person ON dashboard_sessions (person_id);
ALTER TABLE dashboard_sessions ADD COLUMN IF NOT EXISTS stage text NOT NULL DEFAULT 'signed_in';
CREATE TABLE IF NOT EXISTS sign_in_failures (key text NOT NULL, at double precision NOT NULL);
CREATE INDEX IF NOT EXISTS sign_in_failures_key ON sign_in_failures (key, at);
"""


SIGNED_IN = "signed_in"  # else the second factor the person still owes: "code" or "enroll" (usecases/people.py)


def begin(conn: Any, person_id: str, now: float, stage: str = SIGNED_IN) -> str:
    """A new session of the person, signed in or waiting for their second factor (`stage`);
    returns its id (shown once, in the cookie).  Ended sessions go."""
    session_id = secrets.token_urlsafe(32)
    conn.execute("DELETE FROM dashboard_sessions WHERE last_seen <= %s OR created_at <= %s",
                 (now - SESSION_IDLE, now - SESSION_ABSOLUTE))
    conn.execute("INSERT INTO dashboard_sessions (id_hash, person_id, created_at, last_seen, stage) "
                 "VALUES (%s, %s, %s, %s, %s)", (sha256_hex(session_id), person_id, now, now, stage))
    return session_id


def touch(conn: Any, session_id: str, now: float, used: bool = True) -> dict[str, Any] | None:
    """The session's person (their `people` row, with the session's `stage`) while the session
    lives and they are enabled, its last use moved to now when the person `used` it (a page's own
    refresh is not a use); None otherwise (an ended session is deleted)."""
    id_hash = sha256_hex(session_id)
    row = conn.execute("SELECT p.*, s.created_at AS session_began, s.last_seen AS session_seen, s.stage "
                       "FROM dashboard_sessions s JOIN people p ON p.id = s.person_id WHERE s.id_hash = %s",
                       (id_hash,)).fetchone()
    if row is None:
        return None
    if row["disabled"] or not session_alive(row["session_began"], row["session_seen"], now):
        conn.execute("DELETE FROM dashboard_sessions WHERE id_hash = %s", (id_hash,))
        return None
    if used:
        conn.execute("UPDATE dashboard_sessions SET last_seen = %s WHERE id_hash = %s", (now, id_hash))
    return row


def end(conn: Any, session_id: str) -> None:
    conn.execute("DELETE FROM dashboard_sessions WHERE id_hash = %s", (sha256_hex(session_id),))


def end_all(conn: Any, person_id: str) -> int:
    """"Sign out everywhere": every session of the person ends; returns how many."""
    return conn.execute("DELETE FROM dashboard_sessions WHERE person_id = %s", (person_id,)).rowcount


class Sessions:
    """The application's Sessions port (domain/ports.py) on pooled connections."""

    def __init__(self, connection: Callable[[], ContextManager[Any]]):
        self.connection = connection

    def end_all(self, person_id: str) -> int:
        with self.connection() as conn:
            return end_all(conn, person_id)


class SignInFailures:
    """The application's SignInFailures port (domain/ports.py) on pooled connections."""

    def __init__(self, connection: Callable[[], ContextManager[Any]]):
        self.connection = connection

    def recent(self, keys: list[str], now: float) -> dict[str, list[float]]:
        with self.connection() as conn:
            rows = conn.execute("SELECT key, at FROM sign_in_failures WHERE key = ANY(%s) AND at > %s",
                                (keys, now - FAILURE_WINDOW)).fetchall()
        found: dict[str, list[float]] = {key: [] for key in keys}
        for row in rows:
            found[row["key"]].append(row["at"])
        return found

    def record(self, keys: list[str], now: float) -> None:
        with self.connection() as conn:
            conn.execute("DELETE FROM sign_in_failures WHERE key = ANY(%s) AND at <= %s", (keys, now - FAILURE_WINDOW))
            conn.execute("INSERT INTO sign_in_failures (key, at) SELECT unnest(%s::text[]), %s", (keys, now))
