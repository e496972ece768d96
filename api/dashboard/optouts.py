"""The Opt-outs page of a workspace (docs/dashboard.md, "Opt-outs"): the numbers that get no
promotional messages of it, and Opt out / Opt in by hand through the same use cases as
`sandesh optout add|remove`, audited as the person (`user:<email>`); and what the workspace
answers a recipient's words with (`sandesh workspace set-help-text|set-confirmations`).
Owners and developers change them; viewers read."""
from __future__ import annotations

from typing import Any

import falcon.asgi

from sandesh.domain.errors import DomainError, InvalidInput
from sandesh.domain.optout import OPERATOR
from sandesh.domain.person import actor_of, may_manage_clients
from sandesh.projections import optouts, registry

from .pages import VIEWERS_READ, Page
from .i18n import _, told

# Who made a change (domain/optout.py: REPLY, OPERATOR), as the page shows it (`said(optout.source)`)
SOURCES = (_("reply"), _("operator"))


class OptOuts(Page):
    """GET and POST /dashboard/w/{workspace_id}/opt-outs (`change`: out or in)."""
    section = "opt-outs"

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str) -> None:
        person = await self.member(req, resp, workspace_id)
        if person is not None:
            await self.show(req, resp, person, workspace_id)

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str) -> None:
        posted = await self.change(req, resp, workspace_id, may_manage_clients, VIEWERS_READ)
        if posted is None:
            return
        form, person = posted.fields, posted.person
        if form.get("change") == "replies":
            try:
                await self.blocking(self.sandesh.operators.set_replies, workspace_id, form.get("help_text", ""),
                                    form.get("confirmations") == "on", actor_of(person["email"]))
            except DomainError as problem:
                return await self.show(req, resp, person, workspace_id, status=400, replies_error=told(problem),
                                       typed=form)
            return self.web.redirect(resp, f"/dashboard/w/{workspace_id}/opt-outs")
        use_case = self.sandesh.operators.opt_in if form.get("change") == "in" else self.sandesh.operators.opt_out
        try:
            await self.blocking(use_case, workspace_id, form.get("number", ""), OPERATOR, actor_of(person["email"]))
        except InvalidInput as problem:
            return await self.show(req, resp, person, workspace_id, status=400, error=told(problem), typed=form)
        self.web.redirect(resp, f"/dashboard/w/{workspace_id}/opt-outs")

    async def show(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, person: dict[str, Any],
                   workspace_id: str, *, status: int = 200, error: str | None = None,
                   replies_error: str | None = None, typed: dict[str, str] | None = None) -> None:
        listed, workspace = await self.blocking(self._listed, workspace_id)
        self.web.page(req, resp, "optouts.html", status=status, title=_("Opt-outs"), person=person,
                      workspace_id=workspace_id, optouts=listed, error=error, typed=typed or {},
                      replies_error=replies_error, workspace=workspace, manages=may_manage_clients(person["role"]))

    def _listed(self, workspace_id: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        with self.connection() as conn:
            return ([optouts.view(row) for row in optouts.list_for(conn, workspace_id)],
                    registry.workspace_view(registry.fetch_one(conn, "workspaces", "id", workspace_id)))
