"""The API clients page of a workspace (docs/dashboard.md, "API clients"): the list, and
Create client, Rotate key, Rotate webhook secret, Disable, Enable, Ask for a brand (the brand is
the operator team's to set) and each client's OTP message (its template and web domain, shown as
a phone gets it) through the operators' use cases, audited as the person (`user:<email>`).  A
new key or secret is shown once, in the answer to the form that made it (never in a URL), on a
page that is not stored."""
from __future__ import annotations

from typing import Any

import falcon
import falcon.asgi

from sandesh.domain.client import BRAND_MAX, DEFAULT_GRACE_HOURS, MAX_GRACE_HOURS, brand_problem
from sandesh.domain.errors import DomainError, InvalidInput
from sandesh.domain.otp import DEFAULT_TEMPLATE, TEMPLATE_MAX, code_text, template_problem
from sandesh.domain.segments import segment
from sandesh.domain.usecases.operators import Services
from sandesh.domain.person import actor_of, may_manage_clients
from sandesh.projections import registry

from .pages import VIEWERS_READ, Page
from .i18n import _, told


class ClientsPage(Page):
    """What the pages of a workspace's clients share: the page with its list."""
    section = "clients"

    async def show(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, person: dict[str, Any],
                   workspace_id: str, *, status: int = 200, errors: dict[str, str] | None = None,
                   typed: dict[str, str] | None = None, shown: dict[str, str] | None = None) -> None:
        clients, workspace = await self.blocking(self._clients, workspace_id)
        self.web.page(req, resp, "clients.html", status=status, title=_("API clients"), person=person,
                      workspace_id=workspace_id, clients=clients, errors=errors or {}, typed=typed or {},
                      shown=shown, manages=may_manage_clients(person["role"]), max_grace=MAX_GRACE_HOURS,
                      default_grace=DEFAULT_GRACE_HOURS, default_template=DEFAULT_TEMPLATE,
                      template_max=TEMPLATE_MAX, brand_max=BRAND_MAX, workspace_name=workspace["name"])

    def _clients(self, workspace_id: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        with self.connection() as conn:
            rows = registry.clients(conn, workspace_id)
            workspace = registry.fetch_one(conn, "workspaces", "id", workspace_id)
        # a secret sealed before a rotation for a leaked key (docs/operations.md, "A leaked key")
        return [{**registry.client_view(row), "secretDue": self.sandesh.secrets.sealed_due(row["secret_sealed"]),
                 "otp": otp_example(row["brand"], row["otp_template"], row["otp_web_domain"],
                                    workspace["rates"]["otp"])} for row in rows], workspace


class Clients(ClientsPage):
    """GET and POST (Create client) /dashboard/w/{workspace_id}/clients."""

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str) -> None:
        person = await self.member(req, resp, workspace_id)
        if person is not None:
            await self.show(req, resp, person, workspace_id)

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str) -> None:
        posted = await self.change(req, resp, workspace_id, may_manage_clients, VIEWERS_READ)
        if posted is None:
            return
        form, person = posted.fields, posted.person
        webhook_url = form.get("webhook_url", "").strip() or None
        try:  # its brand: the workspace's name, until the operator team grants the one asked for
            client, key, secret = await self.blocking(self.sandesh.operators.create_client, workspace_id, None,
                                                      webhook_url, None, actor_of(person["email"]))
        except DomainError as problem:  # the URL's; or the workspace's name, which cannot be a brand
            field = "webhook_url" if isinstance(problem, InvalidInput) else "create"
            return await self.show(req, resp, person, workspace_id, status=400, errors={field: told(problem)},
                                   typed=form)
        await self.show(req, resp, person, workspace_id, shown={"title": _("%(brand)s: new client", brand=client.brand),
                                                                 _("API key"): key, _("Webhook secret"): secret})


class ClientAction(ClientsPage):
    """POST /dashboard/w/{workspace_id}/clients/{client_id}/{action}: rotate-key, rotate-secret,
    disable, enable, update (the webhook URL; an empty URL removes it), brand (a brand asked of
    the operator team), otp (the OTP template and web domain; an empty one restores the
    default), replies (the keyword services' reply URL and default reply; empty: none).  A client of another workspace is not found."""

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str,
                      client_id: str, action: str) -> None:
        posted = await self.change(req, resp, workspace_id, may_manage_clients, VIEWERS_READ)
        if posted is None:
            return
        form, person = posted.fields, posted.person
        client = await self.blocking(self._client, client_id)
        if client is None or client["workspace_id"] != workspace_id or action not in ACTIONS:
            return self.web.not_found(req, resp, person)
        actor, operators = actor_of(person["email"]), self.sandesh.operators
        shown = None
        try:
            if action == "rotate-key":
                changed, key = await self.blocking(operators.rotate_key, client_id, actor)
                shown = {"title": _("%(brand)s: new API key (the old one stopped)", brand=changed.brand),
                         _("API key"): key}
            elif action == "rotate-secret":
                grace = grace_hours(form.get("grace_hours", ""))
                changed, secret = await self.blocking(operators.rotate_secret, client_id, grace, actor)
                shown = {"title": _("%(brand)s: new webhook secret (the old one signs for %(hours)s h)",
                                    brand=changed.brand, hours=format(grace, "g")),
                         _("Webhook secret"): secret}
            elif action == "update":
                await self.blocking(operators.update_client, client_id, None, form.get("webhook_url", "").strip(),
                                    None, actor)
            elif action == "brand":
                await self.blocking(operators.request_brand, client_id, form.get("brand", ""), actor)
            elif action == "replies":
                await self.blocking(operators.update_client, client_id, None, None, None, actor, None, None,
                                    Services(reply_url=form.get("reply_url", "").strip(),
                                             default_reply=form.get("default_reply", "").strip()))
            elif action == "otp":
                await self.blocking(operators.update_client, client_id, None, None, None, actor,
                                    form.get("otp_template", ""), form.get("otp_web_domain", ""))
            else:
                await self.blocking(operators.disable_client if action == "disable" else operators.enable_client,
                                    client_id, actor)
        except DomainError as problem:
            return await self.show(req, resp, person, workspace_id, status=400,
                                   errors={f"{client_id}:{action}": told(problem)})
        if shown is None:  # nothing to show once: back to the list, so a reload posts nothing again
            return self.web.redirect(resp, f"/dashboard/w/{workspace_id}/clients")
        await self.show(req, resp, person, workspace_id, shown=shown)

    def _client(self, client_id: str) -> dict[str, Any] | None:
        with self.connection() as conn:
            return registry.fetch_one(conn, "clients", "id", client_id)


ACTIONS = ("rotate-key", "rotate-secret", "disable", "enable", "update", "brand", "otp", "replies")


def otp_example(brand: str, template: str | None, web_domain: str | None, rate: int) -> dict[str, Any]:
    """A client's OTP message as a phone gets it (with the code 123456 and no app hash), its
    segments, encoding and cost at the workspace's `otp` rate; and why its template or brand is
    not sent, when today's rules refuse one kept from before them (domain/otp.py, `code_text`)."""
    text = code_text("123456", brand, template, web_domain)
    parts = segment(text)
    return {"text": text, "segments": parts.segments, "encoding": parts.encoding, "cost": rate * parts.segments,
            "notSent": brand_problem(brand) or (template and template_problem(template)) or None}


def grace_hours(text: str) -> float:
    """The hours typed (none: the default); the domain checks they are 0 to MAX_GRACE_HOURS."""
    try:
        return float(text.strip() or DEFAULT_GRACE_HOURS)
    except ValueError:
        raise InvalidInput(_("grace period must be a number of hours from 0 to %(most)s",
                             most=MAX_GRACE_HOURS)) from None
