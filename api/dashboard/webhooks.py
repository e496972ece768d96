"""The Webhooks page of a workspace (docs/dashboard.md, "Webhooks"): the deliveries of the last
7 days to its clients with their last attempt, filtered by state and client; a delivery's page
with every attempt; and Redeliver (owners and developers), the same use case as `sandesh
webhooks redeliver`, audited as the person; Redeliver an outage (`Outage`, owners and
developers), the use case of `sandesh webhooks redeliver --client`."""
from __future__ import annotations

from typing import Any

import falcon.asgi

from sandesh.domain.errors import InvalidInput, NotFound
from sandesh.domain.person import actor_of, may_manage_clients
from sandesh.domain.webhook import ATTEMPTING, DEAD, DELIVERED, REDELIVERABLE, WAITING
from sandesh.projections import registry, webhooks

from .pages import VIEWERS_READ, Page
from .paging import choices, client_choices
from .shown import typed_moment
from .i18n import _, told

SHOWN = 200
STATES = (ATTEMPTING, WAITING, DELIVERED, DEAD)
OUTAGE_FIELDS = ("outage_client", "since", "until", "outage_state")
# The states' names, as the page shows them (`said(delivery.state)`: domain/webhook.py), for the catalog
NAMES = (_("attempting"), _("waiting"), _("delivered"), _("dead"))


class Webhooks(Page):
    """GET /dashboard/w/{workspace_id}/webhooks?state=&client=."""
    section = "webhooks"

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str) -> None:
        person = await self.member(req, resp, workspace_id)
        if person is None:
            return
        typed = {name: (req.get_param(name) or "").strip() for name in ("state", "client")}
        await self.show(req, resp, person, workspace_id, typed, redelivered=req.get_param_as_int("redelivered"))

    async def show(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, person: dict[str, Any],
                   workspace_id: str, typed: dict[str, str], *, status: int = 200, redelivered: int | None = None,
                   outage: dict[str, str] | None = None, errors: dict[str, str] | None = None) -> None:
        deliveries, clients = await self.blocking(self._deliveries, workspace_id, typed)
        outage = outage or {name: "" for name in OUTAGE_FIELDS}
        self.web.page(req, resp, "webhooks.html", status=status, title=_("Webhooks"), person=person,
                      workspace_id=workspace_id, deliveries=deliveries, manages=may_manage_clients(person["role"]),
                      typed={**typed, **outage}, redelivered=redelivered, errors=errors or {},
                      options={"state": choices(STATES), "client": client_choices(clients),
                               "outage_state": choices(REDELIVERABLE)})

    def _deliveries(self, workspace_id: str,
                    typed: dict[str, str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        with self.connection() as conn:
            return (webhooks.of_workspace(conn, self.sandesh.clock.now(), workspace_id, typed["client"] or None,
                                          typed["state"] or None, SHOWN),
                    registry.clients(conn, workspace_id))


class Delivery(Page):
    """GET /dashboard/w/{workspace_id}/webhooks/{delivery_id}: the delivery and each of its
    attempts.  Another workspace's delivery is not found."""
    section = "webhooks"

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str,
                     delivery_id: str) -> None:
        person = await self.member(req, resp, workspace_id)
        if person is None:
            return
        delivery = await self.blocking(self._delivery, workspace_id, delivery_id)
        if delivery is None:
            return self.web.not_found(req, resp, person)
        self.web.page(req, resp, "delivery.html", title=_("Webhook delivery"), person=person, workspace_id=workspace_id,
                      delivery=delivery, manages=may_manage_clients(person["role"]))

    def _delivery(self, workspace_id: str, delivery_id: str) -> dict[str, Any] | None:
        now = self.sandesh.clock.now()
        with self.connection() as conn:
            row = webhooks.find(conn, delivery_id, now)
            if row is None or webhooks.workspace_of(conn, delivery_id, now) != workspace_id:
                return None
            return webhooks.view(row, attempts=True)


class Redeliver(Page):
    """POST /dashboard/w/{workspace_id}/webhooks/{delivery_id}/redeliver: a new delivery of the
    same body.  Another workspace's delivery is not found."""
    section = "webhooks"

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str,
                      delivery_id: str) -> None:
        posted = await self.change(req, resp, workspace_id, may_manage_clients, VIEWERS_READ)
        if posted is None:
            return
        person = posted.person
        if await self.blocking(self._workspace_of, delivery_id) != workspace_id:
            return self.web.not_found(req, resp, person)
        await self.blocking(self.sandesh.webhooks.redeliver, delivery_id, actor_of(person["email"]))
        self.web.redirect(resp, f"/dashboard/w/{workspace_id}/webhooks")

    def _workspace_of(self, delivery_id: str) -> str | None:
        with self.connection() as conn:
            return webhooks.workspace_of(conn, delivery_id, self.sandesh.clock.now())


class Outage(Webhooks):
    """POST /dashboard/w/{workspace_id}/webhooks/outage: every dead or waiting delivery of one of
    the workspace's clients created from `since` to `until` (Nepal time; until: now when empty) sent
    again (Webhooks.redeliver_outage), audited once as the person; the page then says how many."""

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str) -> None:
        posted = await self.change(req, resp, workspace_id, may_manage_clients, VIEWERS_READ)
        if posted is None:
            return
        form, person = posted.fields, posted.person
        typed = {name: form.get(name, "").strip() for name in OUTAGE_FIELDS}
        errors = {} if typed["outage_client"] else {"outage_client": _("choose the client whose receiver was down")}
        since, until = (_moment(typed, name, errors) for name in ("since", "until"))
        if since is None and "since" not in errors:
            errors["since"] = _("give the time the outage began (Nepal time)")
        if not errors:
            try:
                count = await self.blocking(self.sandesh.webhooks.redeliver_outage, typed["outage_client"], since, until,
                                            typed["outage_state"] or None, actor_of(person["email"]), workspace_id)
                return self.web.redirect(resp, f"/dashboard/w/{workspace_id}/webhooks?redelivered={count}")
            except NotFound:
                errors["outage_client"] = _("no such client in this workspace")
            except InvalidInput as problem:
                errors["outage_state" if "state" in str(problem) else "until"] = told(problem)
        await self.show(req, resp, person, workspace_id, {"state": "", "client": ""}, status=400, outage=typed,
                        errors=errors)


def _moment(typed: dict[str, str], name: str, errors: dict[str, str]) -> float | None:
    """A `datetime-local` field read as Nepal time; None when empty, a problem in `errors` when not a time."""
    if not typed[name]:
        return None
    try:
        return typed_moment(typed[name])
    except ValueError:
        errors[name] = _("%(typed)s is not a time (YYYY-MM-DDTHH:MM, Nepal time)", typed=repr(typed[name]))
        return None
