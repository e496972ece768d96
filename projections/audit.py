"""The audit trail of the operators' changes, for the dashboard's Audit log (docs/dashboard.md,
"Audit log"): one row per change, keyed by its event, with its workspace, client and SIM.
Which events are operator changes, and how each reads, is domain/audit.py's.

Owns `audit_lines` and `audit_clients` (the workspace of each client, for the client's events
that do not carry it), a followed projection (`PROJECTION`, follower.py)."""
from __future__ import annotations

from typing import Any

from psycopg.types.json import Jsonb

from sandesh.domain.aggregate import Event
from sandesh.domain.audit import ACTIONS, audit_line, operator_change
from sandesh.domain.client import Client
from sandesh.domain.clock import iso
from sandesh.domain.person import actor_of

from . import keyset
from .contract import Projection
from .rows import Rows, Table

# Each index leads with the workspace and a filter's column and ends with ORDER, so a page of
# any filter is an index scan that stops at its last row (keyset.py).  The person filter reads
# two of them: the changes a person made (actor), and those made to them (`person.*`).
DDL = """
CREATE TABLE IF NOT EXISTS audit_lines (
    originator_id text NOT NULL, originator_version bigint NOT NULL, at double precision NOT NULL,
    actor text, action text NOT NULL, workspace_id text, client_id text, sim_id text, details jsonb NOT NULL,
    PRIMARY KEY (originator_id, originator_version));
CREATE INDEX IF NOT EXISTS audit_lines_workspace ON audit_lines (workspace_id, at, originator_id, originator_version);
CREATE INDEX IF NOT EXISTS audit_lines_action
    ON audit_lines (workspace_id, action, at, originator_id, originator_version);
CREATE INDEX IF NOT EXISTS audit_lines_client
    ON audit_lines (workspace_id, client_id, at, originator_id, originator_version);
CREATE INDEX IF NOT EXISTS audit_lines_actor ON audit_lines (workspace_id, actor, at, originator_id, originator_version);
CREATE INDEX IF NOT EXISTS audit_lines_person
    ON audit_lines (workspace_id, (details->>'email'), at, originator_id, originator_version)
    WHERE action LIKE 'person.%';
CREATE TABLE IF NOT EXISTS audit_clients (client_id text PRIMARY KEY, workspace_id text NOT NULL);
"""

PROJECTION = Projection(name="audit", tables={"audit_lines": Table("audit_lines", ("originator_id", "originator_version")),
                                              "audit_clients": Table("audit_clients", ("client_id",))}, ddl=DDL)

ORDER = ("at", "originator_id", "originator_version")  # a line's place, newest first: the page links' key


@PROJECTION.on(*ACTIONS)
def _changed(rows: Rows, e: Event) -> None:
    if isinstance(e, Client.Created):
        rows.insert("audit_clients", {"client_id": e.originator_id, "workspace_id": e.workspace_id})
    if not operator_change(e):
        return
    line = audit_line(e, lambda client_id: rows.get("audit_clients", (client_id,), "workspace_id"))
    rows.insert("audit_lines", {
        "originator_id": e.originator_id, "originator_version": e.originator_version, "at": line["at"],
        "actor": line["actor"], "action": line["action"], "workspace_id": line["workspaceId"],
        "client_id": line["clientId"], "sim_id": line["simId"], "details": Jsonb(line["details"])})


def query(workspace_id: str | None, action: str | None, client_id: str | None, person: str | None,
          since: float | None, until: float | None, page: tuple[str, tuple[Any, ...]] | None,
          limit: int) -> tuple[str, list[Any]]:
    """The SQL of a page of the workspace's lines, newest first (`search`); workspace None: the
    lines of no workspace (SIMs, the SMS switch), on the same indexes."""
    where, params = (["workspace_id = %s"], [workspace_id]) if workspace_id else (["workspace_id IS NULL"], [])
    for column, value in (("action", action), ("client_id", client_id)):
        if value:
            where.append(f"{column} = %s")
            params.append(value)
    either = [keyset.EVERY_ROW]
    if person:  # disjoint: what they did, and what was done to them by someone else
        either = [(["actor = %s"], [actor_of(person)]),
                  (["action LIKE 'person.%%'", "(details->>'email') = %s", "actor IS DISTINCT FROM %s"],
                   [person, actor_of(person)])]
    return keyset.newest_first_query("audit_lines", ORDER, (where, params), since, until, page, limit, either)


def search(conn: Any, workspace_id: str | None, action: str | None, client_id: str | None, person: str | None,
           since: float | None, until: float | None, page: tuple[str, tuple[Any, ...]] | None,
           limit: int) -> list[dict[str, Any]]:
    """A page of the workspace's audit lines (None: the service's own, of SIMs and the SMS
    switch), newest first (the dashboard's Audit logs): of this
    action, of this client, and made by or to this person (an email) when given, at a time in
    [since, until).  `page` is ("before", key) or ("after", key) of a line's ORDER key."""
    return keyset.read_page(conn, query(workspace_id, action, client_id, person, since, until, page, limit), page)


def line(row: dict[str, Any]) -> dict[str, Any]:
    """A row as `sandesh audit` prints a line."""
    return {"at": iso(row["at"]), "actor": row["actor"], "action": row["action"], "workspaceId": row["workspace_id"],
            "clientId": row["client_id"], "simId": row["sim_id"], "details": row["details"]}
