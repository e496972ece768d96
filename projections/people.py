"""People of the dashboard (domain/person.py; docs/dashboard.md): the `people` table.

Owns `people` (`MODEL`): one row per person, an inline read model written in the transaction
that appends the person's events (part of registry.py's projection, rebuilt by `sandesh replay
registry`), so a disable ends their sessions' use at once.  No password hash and no link token
is kept here: signing in and setting a password read the person from the log."""
from __future__ import annotations

from typing import Any

from sandesh.domain.clock import iso
from sandesh.domain.person import Person

from .contract import ReadModel
from .rows import Rows, Table

DDL = """
CREATE TABLE IF NOT EXISTS people (
    id text PRIMARY KEY, email text NOT NULL UNIQUE, name text NOT NULL, workspace_id text, role text NOT NULL,
    has_password boolean NOT NULL, disabled boolean NOT NULL,
    created_at double precision NOT NULL, updated_at double precision NOT NULL);
CREATE INDEX IF NOT EXISTS people_workspace ON people (workspace_id);
ALTER TABLE people ADD COLUMN IF NOT EXISTS language text;
"""
MODEL = ReadModel(tables={"people": Table("people", ("id",))}, ddl=DDL)


@MODEL.on(Person.Added)
def _added(rows: Rows, e: Person.Added) -> None:
    rows.insert("people", {"id": e.originator_id, "email": e.email, "name": e.name, "workspace_id": e.workspace_id,
                           "role": e.role, "has_password": False, "disabled": False, "created_at": e.at,
                           "updated_at": e.at})


@MODEL.on(Person.PasswordSet)
def _password_set(rows: Rows, e: Person.PasswordSet) -> None:
    rows.update("people", (e.originator_id,), {"has_password": True, "updated_at": e.at})


@MODEL.on(Person.LanguageChosen)
def _language_chosen(rows: Rows, e: Person.LanguageChosen) -> None:
    rows.update("people", (e.originator_id,), {"language": e.language, "updated_at": e.at})


@MODEL.on(Person.LinkIssued)
def _link_issued(rows: Rows, e: Person.LinkIssued) -> None:
    rows.update("people", (e.originator_id,), {"updated_at": e.at})


@MODEL.on(Person.Disabled)
def _disabled(rows: Rows, e: Person.Disabled) -> None:
    rows.update("people", (e.originator_id,), {"disabled": True, "updated_at": e.at})


@MODEL.on(Person.Enabled)
def _enabled(rows: Rows, e: Person.Enabled) -> None:
    rows.update("people", (e.originator_id,), {"disabled": False, "updated_at": e.at})


@MODEL.on(Person.RoleChanged)
def _role_changed(rows: Rows, e: Person.RoleChanged) -> None:
    rows.update("people", (e.originator_id,), {"role": e.role, "updated_at": e.at})


@MODEL.on(Person.Removed)
def _removed(rows: Rows, e: Person.Removed) -> None:
    rows.delete("people", (e.originator_id,))  # its sessions end with it (sessions.py joins people)


@MODEL.on(Person.Rejoined)
def _rejoined(rows: Rows, e: Person.Rejoined) -> None:
    rows.insert("people", {"id": e.originator_id, "email": e.email, "name": e.name, "workspace_id": e.workspace_id,
                           "role": e.role, "has_password": False, "disabled": False, "created_at": e.at,
                           "updated_at": e.at})


def find(conn: Any, person_id: str) -> dict[str, Any] | None:
    return conn.execute("SELECT * FROM people WHERE id = %s", (person_id,)).fetchone()


def listed(conn: Any, workspace_id: str | None) -> list[dict[str, Any]]:
    """Everyone, or a workspace's people, oldest first."""
    return conn.execute("SELECT * FROM people WHERE %(ws)s::text IS NULL OR workspace_id = %(ws)s "
                        "ORDER BY created_at, email", {"ws": workspace_id}).fetchall()


def view(row: dict[str, Any]) -> dict[str, Any]:
    """A person as `sandesh user` prints them: never a hash or a token."""
    return {"id": row["id"], "email": row["email"], "name": row["name"], "workspaceId": row["workspace_id"],
            "role": row["role"], "passwordSet": row["has_password"], "disabled": row["disabled"],
            "createdAt": iso(row["created_at"]), "updatedAt": iso(row["updated_at"])}
