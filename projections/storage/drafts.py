"""What a person previewed on the Send page, kept until they send it (docs/dashboard.md,
"Sending"): the recipients and the text, sealed under the workspace's key of texts (erasing
the workspace's texts erases them), for an hour at most.  Not a read model: nothing in the log
makes it, and a replay never touches it.

Owns `send_drafts`; `Drafts` is the application's port (domain/ports.py) on it."""
from __future__ import annotations

from typing import Any, Callable, ContextManager

DDL = """
CREATE TABLE IF NOT EXISTS send_drafts (
    token text PRIMARY KEY, workspace_id text NOT NULL, person_id text NOT NULL, sealed text NOT NULL,
    created_at double precision NOT NULL);
CREATE INDEX IF NOT EXISTS send_drafts_created ON send_drafts (created_at);
"""
KEPT_SECONDS = 3600


def keep(conn: Any, token: str, workspace_id: str, person_id: str, sealed: str, now: float) -> None:
    """Keep a draft under its token; drafts older than an hour go."""
    conn.execute("DELETE FROM send_drafts WHERE created_at < %s", (now - KEPT_SECONDS,))
    conn.execute("INSERT INTO send_drafts (token, workspace_id, person_id, sealed, created_at) VALUES (%s, %s, %s, %s, %s)"
                 " ON CONFLICT (token) DO NOTHING", (token, workspace_id, person_id, sealed, now))


def find(conn: Any, token: str, workspace_id: str, person_id: str, now: float) -> str | None:
    """The sealed draft of this person in this workspace, while it is kept."""
    row = conn.execute("SELECT sealed FROM send_drafts WHERE token = %s AND workspace_id = %s AND person_id = %s"
                       " AND created_at >= %s", (token, workspace_id, person_id, now - KEPT_SECONDS)).fetchone()
    return row["sealed"] if row else None


class Drafts:
    """The application's Drafts port (domain/ports.py) on pooled connections."""

    def __init__(self, connection: Callable[[], ContextManager[Any]]):
        self.connection = connection

    def keep(self, token: str, workspace_id: str, person_id: str, sealed: str, now: float) -> None:
        with self.connection() as conn:
            keep(conn, token, workspace_id, person_id, sealed, now)

    def find(self, token: str, workspace_id: str, person_id: str, now: float) -> str | None:
        with self.connection() as conn:
            return find(conn, token, workspace_id, person_id, now)
