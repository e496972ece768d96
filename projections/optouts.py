"""Opt-outs of promotional messages (docs/design.md, "Opt-outs"): the `opt_outs` table.

Owns `opt_outs` (`MODEL`): one row per workspace + number opted out now, an inline read model
written by the handlers below in the transaction that appends the opt-out's events (part of
registry.py's projection, rebuilt by `sandesh replay registry`), and the queries on it: the
check of every promotional send (`OptOuts`, the application's port) and the operator's list.
"""
from __future__ import annotations

from typing import Any, Callable, ContextManager

from sandesh.domain.clock import iso
from sandesh.domain.optout import OptOut

from .contract import ReadModel
from .rows import Rows, Table

DDL = """
CREATE TABLE IF NOT EXISTS opt_outs (
    workspace_id text NOT NULL, number text NOT NULL, since double precision NOT NULL, source text NOT NULL,
    reply_id text, CONSTRAINT opt_outs_pkey PRIMARY KEY (workspace_id, number));
"""
MODEL = ReadModel(tables={"opt_outs": Table("opt_outs", ("workspace_id", "number"))}, ddl=DDL)


@MODEL.on(OptOut.OptedOut)
def _opted_out(rows: Rows, e: OptOut.OptedOut) -> None:
    rows.insert("opt_outs", {"workspace_id": e.workspace_id, "number": e.number, "since": e.at, "source": e.source,
                             "reply_id": e.reply_id}, on_conflict="update")


@MODEL.on(OptOut.OptedIn)
def _opted_in(rows: Rows, e: OptOut.OptedIn) -> None:
    rows.delete("opt_outs", (e.workspace_id, e.number))


def opted_out(conn: Any, workspace_id: str, numbers: list[str]) -> set[str]:
    """Those of `numbers` opted out of the workspace's promotional messages (one query for a batch)."""
    rows = conn.execute("SELECT number FROM opt_outs WHERE workspace_id = %s AND number = ANY(%s)",
                        (workspace_id, numbers), prepare=True).fetchall()
    return {r["number"] for r in rows}


def list_for(conn: Any, workspace_id: str) -> list[dict[str, Any]]:
    """The workspace's opted-out numbers, oldest first."""
    return conn.execute("SELECT * FROM opt_outs WHERE workspace_id = %s ORDER BY since, number",
                        (workspace_id,)).fetchall()


def find(conn: Any, workspace_id: str, number: str) -> dict[str, Any] | None:
    return conn.execute("SELECT * FROM opt_outs WHERE workspace_id = %s AND number = %s",
                        (workspace_id, number)).fetchone()


def view(row: dict[str, Any]) -> dict[str, Any]:
    return {"workspaceId": row["workspace_id"], "number": row["number"], "since": iso(row["since"]),
            "source": row["source"], "replyId": row["reply_id"]}


class OptOuts:
    """The application's OptOuts port (domain/ports.py) on pooled connections."""

    def __init__(self, connection: Callable[[], ContextManager[Any]]):
        self.connection = connection

    def opted_out(self, workspace_id: str, numbers: list[str]) -> set[str]:
        if not numbers:
            return set()
        with self.connection() as conn:
            return opted_out(conn, workspace_id, numbers)
