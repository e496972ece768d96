"""The endpoints (docs/api.md, "Endpoints"): parse, call one use case or read model, render."""
from __future__ import annotations

from typing import Any, Callable, ContextManager

import falcon

from sandesh.projections import counters, registry


class Balance:
    """GET /v1/sms/balance (docs/design.md, "Decisions: balance")."""

    def __init__(self, connection: Callable[[], ContextManager[Any]]):
        self.connection = connection

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        caller = req.context.caller
        with self.connection() as conn:
            workspace = registry.workspace_balance(conn, caller.workspace_id)
            client_counters = counters.for_client(conn, caller.client_id)
        resp.media = {
            "workspaceStatus": workspace["status"],
            "balance": {"amount": workspace["balance"], "currency": "NPR"},
            "rates": workspace["rates"],
            "allowedTypes": workspace["types"],
            "counters": client_counters,
        }
