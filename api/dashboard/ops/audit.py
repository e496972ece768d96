"""The service's audit log (docs/dashboard.md, "Service audit log"): the changes of no workspace,
to SIMs, the SMS switch and the operator team's people, as `sandesh audit` lists them, on the
workspace Audit log's page."""
from __future__ import annotations

import falcon.asgi

from ..audit import AuditLog
from .page import OpsPage

ROOT = "/dashboard/ops/audit"


class ServiceAudit(OpsPage, AuditLog):
    """GET /dashboard/ops/audit?action=&person=&from=&to=, and before= or after= a line's key."""

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:  # type: ignore[override]
        person = await self.operator(req, resp)
        if person is not None:
            await self.show(req, resp, person, None, ROOT)
