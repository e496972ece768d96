"""The Webhooks page of a workspace (docs/dashboard.md, "Webhooks"): the deliveries of the last
7 days to its clients with their last attempt, filtered by state and client; a delivery's page
with every attempt; and Redeliver (owners and developers), the same use case as `sandesh
webhooks redeliver`, audited as the person."""
from __future__ import annotations

from typing import Any

import falcon.asgi

from sandesh.domain.person import actor_of, may_manage_clients
from sandesh.domain.webhook import ATTEMPTING, DEAD, DELIVERED, WAITING
from sandesh.projections import registry, webhooks

from .pages import VIEWERS_READ, Page
from .paging import choices, client_choices

SHOWN = 200
STATES = (ATTEMPTING, WAITING, DELIVERED, DEAD)


class Webhooks(Page):
    """GET /dashboard/w/{workspace_id}/webhooks?state=&client=."""

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str) -> None:
        person = await self.member(req, resp, workspace_id)
        if person is None:
            return
        typed = {name: (req.get_param(name) or "").strip() for name in ("state", "client")}
        deliveries, clients = await self.blocking(self._deliveries, workspace_id, typed)
        self.web.page(req, resp, "webhooks.html", title="Webhooks", person=person, workspace_id=workspace_id,
                      deliveries=deliveries, manages=may_manage_clients(person["role"]), typed=typed,
                      options={"state": choices(STATES), "client": client_choices(clients)})

    def _deliveries(self, workspace_id: str,
                    typed: dict[str, str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        with self.connection() as conn:
            return (webhooks.of_workspace(conn, self.app.clock.now(), workspace_id, typed["client"] or None,
                                          typed["state"] or None, SHOWN),
                    registry.clients(conn, workspace_id))


class Delivery(Page):
    """GET /dashboard/w/{workspace_id}/webhooks/{delivery_id}: the delivery and each of its
    attempts.  Another workspace's delivery is not found."""

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str,
                     delivery_id: str) -> None:
        person = await self.member(req, resp, workspace_id)
        if person is None:
            return
        delivery = await self.blocking(self._delivery, workspace_id, delivery_id)
        if delivery is None:
            return self.web.not_found(req, resp, person)
        self.web.page(req, resp, "delivery.html", title="Webhook delivery", person=person, workspace_id=workspace_id,
                      delivery=delivery, manages=may_manage_clients(person["role"]))

    def _delivery(self, workspace_id: str, delivery_id: str) -> dict[str, Any] | None:
        now = self.app.clock.now()
        with self.connection() as conn:
            row = webhooks.find(conn, delivery_id, now)
            if row is None or webhooks.workspace_of(conn, delivery_id, now) != workspace_id:
                return None
            return webhooks.view(row, attempts=True)


class Redeliver(Page):
    """POST /dashboard/w/{workspace_id}/webhooks/{delivery_id}/redeliver: a new delivery of the
    same body.  Another workspace's delivery is not found."""

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str,
                      delivery_id: str) -> None:
        form, person = await self.change(req, resp, workspace_id, may_manage_clients, VIEWERS_READ)
        if person is None:
            return
        if await self.blocking(self._workspace_of, delivery_id) != workspace_id:
            return self.web.not_found(req, resp, person)
        await self.blocking(self.app.webhooks.redeliver, delivery_id, actor_of(person["email"]))
        self.web.redirect(resp, f"/dashboard/w/{workspace_id}/webhooks")

    def _workspace_of(self, delivery_id: str) -> str | None:
        with self.connection() as conn:
            return webhooks.workspace_of(conn, delivery_id, self.app.clock.now())
