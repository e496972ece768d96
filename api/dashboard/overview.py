"""The Overview page of a workspace (docs/dashboard.md, "Overview"): its state and rates from
the registry, its counters and the chart of the last 24 hours (chart.py) from the followed read models, the owners'
switch for authentication codes, and their balance alert (docs/operations.md, "Alerts")."""
from __future__ import annotations

from typing import Any

import falcon.asgi

from sandesh.domain.errors import DomainError
from sandesh.domain.person import actor_of, may_manage_people
from sandesh.projections import alerts, counters, messages, registry

from .chart import OUTCOMES, OTHER, delivery_rates, hourly
from .pages import Page, landing
from .i18n import _, told

# The words of a workspace's status and of its message types, as the Overview shows them (`said`)
SHOWN = (_("pending"), _("active"), _("suspended"), _("transactional"), _("promotional"), _("otp"))


class WorkspaceHome(Page):
    """GET /dashboard/w/{workspace_id}, with or without a trailing slash: the workspace's Overview,
    for whoever may see it (anyone else: sign-in or 404, as the Overview answers)."""

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str) -> None:
        person = await self.member(req, resp, workspace_id)
        if person is not None:
            self.web.redirect(resp, f"/dashboard/w/{workspace_id}/{landing(person['role'])}")


class Overview(Page):
    """GET /dashboard/w/{workspace_id}/overview: status, balance in NPR, rates, allowed types."""
    section = "overview"

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str) -> None:
        person = await self.member(req, resp, workspace_id)  # another workspace is not there for them
        if person is not None:
            await self.show(req, resp, person, workspace_id)

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str) -> None:
        """An owner sets the balance alert (`balance_alert`: NPR, or empty for none)."""
        posted = await self.change(req, resp, workspace_id, may_manage_people,
                                   _("Only an owner of the workspace decides this."))
        if posted is None:
            return
        form, person = posted.fields, posted.person
        try:
            await self.blocking(self.sandesh.operators.set_balance_alert, workspace_id,
                                form.get("balance_alert", ""), actor_of(person["email"]))
        except DomainError as problem:
            return await self.show(req, resp, person, workspace_id, status=400, alert_error=told(problem),
                                   typed=form.get("balance_alert", ""))
        self.web.redirect(resp, f"/dashboard/w/{workspace_id}/overview")

    async def show(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, person: dict[str, Any],
                   workspace_id: str, *, status: int = 200, alert_error: str | None = None,
                   typed: str | None = None) -> None:
        workspace, low = await self.blocking(self._workspace, workspace_id)
        if workspace is None:
            return self.web.not_found(req, resp, person)
        totp_required, enrolled = await self.blocking(self._codes, workspace_id, person["id"])
        totals, last_day = await self.blocking(self._activity, workspace_id)
        self.web.page(req, resp, "overview.html", status=status, title=_("Overview"), person=person,
                      workspace=workspace, totp_required=totp_required, enrolled=enrolled,
                      may_require=may_manage_people(person["role"]), counters=totals, chart=hourly(last_day),
                      outcomes=(*OUTCOMES, OTHER), rates=delivery_rates(last_day), now=self.sandesh.clock.now(),
                      low_balance=low, alert_error=alert_error, typed=typed)

    def _workspace(self, workspace_id: str) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """The workspace, and its balance alert when one holds."""
        with self.connection() as conn:
            row = registry.fetch_one(conn, "workspaces", "id", workspace_id)
            low = alerts.holding_for(conn, "balance_low", workspace_id)
        return (registry.workspace_view(row) if row is not None else None), low

    def _activity(self, workspace_id: str) -> tuple[dict[str, int], list[dict[str, Any]]]:
        with self.connection() as conn:
            return (counters.for_workspace(conn, workspace_id),
                    messages.last_day(conn, workspace_id, self.sandesh.clock.now()))

    def _codes(self, workspace_id: str, person_id: str) -> tuple[bool, bool]:
        """Whether the workspace's owners need authentication codes, and whether this person has an app."""
        person = self.sandesh.people.person(person_id)
        return self.sandesh.people.totp_required(workspace_id), person is not None and person.totp_sealed is not None

