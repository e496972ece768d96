"""Contact lists and message templates of the workspaces, for the dashboard's Contacts,
Templates and Send pages (docs/dashboard.md, "Contacts and templates").  A contact's columns and a
template's text stay sealed here as in the log: the pages open them.

Owns `contact_lists`, `contacts` and `message_templates` (`MODEL`): an inline read model, written
in the transaction that appends their events (part of registry.py's projection, rebuilt by
`sandesh replay registry`), so the page a change leads to shows it.  `ContactBook` is the
application's port (domain/ports.py) on them."""
from __future__ import annotations

from typing import Any, Callable, ContextManager

from sandesh.domain.contacts import ContactList, Template
from sandesh.domain.ports import Contact, KeptList, KeptTemplate

from .contract import ReadModel
from .rows import Rows, Table

DDL = """
CREATE TABLE IF NOT EXISTS contact_lists (
    id text PRIMARY KEY, workspace_id text NOT NULL, name text NOT NULL, created_at double precision NOT NULL,
    changed_at double precision NOT NULL);
CREATE INDEX IF NOT EXISTS contact_lists_workspace ON contact_lists (workspace_id, name);
CREATE TABLE IF NOT EXISTS contacts (
    list_id text NOT NULL, number text NOT NULL, fields text NOT NULL, added_at double precision NOT NULL,
    PRIMARY KEY (list_id, number));
CREATE TABLE IF NOT EXISTS message_templates (
    id text PRIMARY KEY, workspace_id text NOT NULL, name text NOT NULL, text text NOT NULL,
    changed_at double precision NOT NULL);
CREATE INDEX IF NOT EXISTS message_templates_workspace ON message_templates (workspace_id, name);
"""

MODEL = ReadModel(tables={
    "contact_lists": Table("contact_lists", ("id",)),
    "contacts": Table("contacts", ("list_id", "number")),
    "message_templates": Table("message_templates", ("id",))}, ddl=DDL)


@MODEL.on(ContactList.Created)
def _list_created(rows: Rows, e: ContactList.Created) -> None:
    rows.insert("contact_lists", {"id": e.originator_id, "workspace_id": e.workspace_id, "name": e.name,
                                  "created_at": e.at, "changed_at": e.at})


@MODEL.on(ContactList.Added)
def _added(rows: Rows, e: ContactList.Added) -> None:
    for number, fields in e.contacts:
        rows.insert("contacts", {"list_id": e.originator_id, "number": number, "fields": fields, "added_at": e.at},
                    on_conflict="update")
    rows.update("contact_lists", (e.originator_id,), {"changed_at": e.at})


@MODEL.on(ContactList.Removed)
def _removed(rows: Rows, e: ContactList.Removed) -> None:
    rows.delete("contacts", (e.originator_id, e.number))
    rows.update("contact_lists", (e.originator_id,), {"changed_at": e.at})


@MODEL.on(ContactList.Deleted)
def _list_deleted(rows: Rows, e: ContactList.Deleted) -> None:
    for number in e.numbers:
        rows.delete("contacts", (e.originator_id, number))
    rows.delete("contact_lists", (e.originator_id,))


@MODEL.on(Template.Saved, Template.Changed)
def _template_saved(rows: Rows, e: Template.Saved | Template.Changed) -> None:
    rows.insert("message_templates", {"id": e.originator_id, "workspace_id": e.workspace_id, "name": e.name,
                                      "text": e.text, "changed_at": e.at}, on_conflict="update")


@MODEL.on(Template.Deleted)
def _template_deleted(rows: Rows, e: Template.Deleted) -> None:
    rows.delete("message_templates", (e.originator_id,))


# Queries of the dashboard's pages

COUNTED = "SELECT l.*, (SELECT count(*) FROM contacts c WHERE c.list_id = l.id) AS contacts FROM contact_lists l"


def lists_of(conn: Any, workspace_id: str) -> list[dict[str, Any]]:
    """The workspace's lists by name, each with how many contacts it holds."""
    return conn.execute(COUNTED + " WHERE l.workspace_id = %s ORDER BY l.name, l.id", (workspace_id,)).fetchall()


def one_list(conn: Any, workspace_id: str, list_id: str) -> dict[str, Any] | None:
    return conn.execute(COUNTED + " WHERE l.id = %s AND l.workspace_id = %s", (list_id, workspace_id)).fetchone()


def contacts_of(conn: Any, list_id: str, limit: int | None = None) -> list[dict[str, Any]]:
    """The list's contacts in the order they came, each with whether it opted out of the
    workspace's promotional messages."""
    return conn.execute(
        "SELECT c.number, c.fields, c.added_at, o.number IS NOT NULL AS opted_out FROM contacts c"
        " JOIN contact_lists l ON l.id = c.list_id"
        " LEFT JOIN opt_outs o ON o.workspace_id = l.workspace_id AND o.number = c.number"
        " WHERE c.list_id = %s ORDER BY c.added_at, c.number" + (" LIMIT %s" if limit else ""),
        (list_id, limit) if limit else (list_id,)).fetchall()


def opted_out_count(conn: Any, list_id: str) -> int:
    return conn.execute(
        "SELECT count(*) AS n FROM contacts c JOIN contact_lists l ON l.id = c.list_id"
        " JOIN opt_outs o ON o.workspace_id = l.workspace_id AND o.number = c.number WHERE c.list_id = %s",
        (list_id,)).fetchone()["n"]


def templates_of(conn: Any, workspace_id: str) -> list[dict[str, Any]]:
    return conn.execute("SELECT * FROM message_templates WHERE workspace_id = %s ORDER BY name, id",
                        (workspace_id,)).fetchall()


def one_template(conn: Any, workspace_id: str, template_id: str) -> dict[str, Any] | None:
    return conn.execute("SELECT * FROM message_templates WHERE id = %s AND workspace_id = %s",
                        (template_id, workspace_id)).fetchone()


class ContactBook:
    """The application's ContactBook port (domain/ports.py) on pooled connections."""

    def __init__(self, connection: Callable[[], ContextManager[Any]]):
        self.connection = connection

    def contact_list(self, workspace_id: str, list_id: str) -> KeptList | None:
        with self.connection() as conn:
            found = one_list(conn, workspace_id, list_id)
            rows = contacts_of(conn, list_id) if found else []
        if found is None:
            return None
        return KeptList(found["name"], [Contact(row["number"], row["fields"]) for row in rows])

    def template(self, workspace_id: str, template_id: str) -> KeptTemplate | None:
        with self.connection() as conn:
            found = one_template(conn, workspace_id, template_id)
        return KeptTemplate(found["name"], found["text"]) if found else None
