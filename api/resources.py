"""The endpoints (docs/api.md, "Endpoints"): parse, call one use case or read model, render."""
from __future__ import annotations

from typing import Any, Callable, ContextManager

import falcon.asgi

from sandesh.projections import counters, registry

from .waiting import Blocking


class Balance:
    """GET /v1/sms/balance (docs/design.md, "Decisions: balance")."""

    def __init__(self, connection: Callable[[], ContextManager[Any]], blocking: Blocking):
        self.connection = connection
        self.blocking = blocking

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        workspace, client_counters = await self.blocking(self._read, req.context.caller)
        resp.media = {
            "workspaceStatus": workspace["status"],
            "balance": {"amount": workspace["balance"], "currency": "NPR"},
            "rates": workspace["rates"],
            "allowedTypes": workspace["types"],
            "promotionalHours": registry.promotional_hours(workspace["promo_hours"]),
            "counters": client_counters,
        }

    def _read(self, caller: Any) -> tuple[dict[str, Any], dict[str, int]]:
        with self.connection() as conn:
            return registry.workspace_balance(conn, caller.workspace_id), counters.for_client(conn, caller.client_id)
