"""The audit log page of a workspace (docs/dashboard.md, "Audit log"): the changes made to it
and its clients and people, newest first, as `sandesh audit --workspace` lists them (the same
use case, History.audit).  Every person of the workspace may read it."""
from __future__ import annotations

from typing import Any

import falcon.asgi

from .pages import Page

SHOWN = 200  # the most recent changes on the page; `sandesh audit` has them all


class AuditLog(Page):
    """GET /dashboard/w/{workspace_id}/audit."""

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str) -> None:
        person = await self.member(req, resp, workspace_id)
        if person is None:
            return
        lines = await self.blocking(self.app.history.audit, workspace_id, None, None, SHOWN)
        self.web.page(req, resp, "audit.html", title="Audit log", person=person,
                      lines=[readable(line) for line in reversed(lines)])


def readable(line: dict[str, Any]) -> dict[str, Any]:
    """An audit line with its details as `name: value` text."""
    details = ", ".join(f"{name}: {value}" for name, value in line["details"].items())
    subject = line["clientId"] or ""
    return {**line, "details": details, "subject": subject}
