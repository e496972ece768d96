"""The audit log page of a workspace (docs/dashboard.md, "Audit log"): the changes made to it
and its clients and people, newest first, 50 a page, filtered by action, client, person and
dates; the lines are those `sandesh audit --workspace` lists, read from the `audit_lines` read
model (projections/audit.py).  Every person of the workspace may read it.  The operator team's
console shows the service's own lines (SIMs, the SMS switch, the operator team's people) on the
same page (`ops/audit.py`)."""
from __future__ import annotations

from typing import Any

import falcon.asgi

from sandesh.domain.audit import ACTIONS
from sandesh.domain.person import OPERATOR
from sandesh.projections import audit, people, registry

from .pages import Page
from .paging import PAGE, Paged, choices, client_choices, day_range, key_of, parse_key, requested
from .shown import details
from .i18n import _

FIELDS = ("action", "client", "person", "from", "to")
KEY = (float, str, int)  # audit.ORDER's kinds
SERVICE = ("sim.", "sms.", "person.")  # the actions the service's own audit log offers


class AuditLog(Page):
    """GET /dashboard/w/{workspace_id}/audit?action=&client=&person=&from=&to=, and before= or
    after= a line's key for the next or previous page."""
    section = "audit"

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str) -> None:
        person = await self.member(req, resp, workspace_id)
        if person is not None:
            await self.show(req, resp, person, workspace_id, f"/dashboard/w/{workspace_id}/audit")

    async def show(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, person: dict[str, Any],
                   workspace_id: str | None, root: str, **values: Any) -> None:
        """The page of a workspace's lines, or (None) of the service's own: SIMs and the SMS switch."""
        typed = {name: (req.get_param(name) or "").strip() for name in FIELDS}
        since, until, errors = day_range(typed)
        found, clients, persons = await self.blocking(self._search, workspace_id, typed, since, until, requested(req))
        actions = sorted({name for name in ACTIONS.values()
                          if name.startswith("person.") or (workspace_id is None) == name.startswith(SERVICE)})
        self.web.page(req, resp, "audit.html", status=400 if errors else 200, title=_("Audit log"), person=person,
                      workspace_id=workspace_id, root=root, typed=typed, errors=errors,
                      lines=[readable(audit.line(row)) for row in found.rows], pages=found.links(root, typed),
                      options={"action": choices(actions), "client": client_choices(clients),
                               "person": choices(p["email"] for p in persons)}, **values)

    def _search(self, workspace_id: str | None, typed: dict[str, str], since: float | None, until: float | None,
                page: tuple[str, str] | None) -> tuple[Paged, list[dict[str, Any]], list[dict[str, Any]]]:
        keyed = parse_key(page[1], KEY) if page else None
        at = (page[0], keyed) if page and keyed else None
        with self.connection() as conn:
            rows = audit.search(conn, workspace_id, typed["action"], typed["client"], typed["person"], since, until,
                                at, PAGE + 1)
            clients = registry.clients(conn, workspace_id) if workspace_id else []
            persons = [p for p in people.listed(conn, workspace_id) if workspace_id or p["role"] == OPERATOR]
        return Paged(rows, at, lambda row: key_of(row, audit.ORDER)), clients, persons


def readable(line: dict[str, Any]) -> dict[str, Any]:
    """An audit line with its details as `name: value` text."""
    subject = line["clientId"] or line["simId"] or ""
    return {**line, "details": details(line["details"]), "subject": subject}
