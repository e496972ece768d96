"""The operators' Workspaces pages (docs/dashboard.md, "Workspaces"): the list with status,
balance and last activity, the brands workspaces ask for (Grant, Dismiss), Create workspace,
and one workspace's Activate, Suspend, Reinstate, Credit, rates, allowed types, promotional
hours, Erase texts and its clients' rate limits, through the use cases of `sandesh workspace`
and `sandesh client update`."""
from __future__ import annotations

from typing import Any

import falcon.asgi

from sandesh.domain.errors import DomainError, InvalidInput
from sandesh.domain.types import MESSAGE_TYPES, parse_npr
from sandesh.projections import console, registry

from .page import OpsPage

ROOT = "/dashboard/ops/workspaces"


def typed_types(form: dict[str, str]) -> list[str]:
    """The allowed types ticked on a form (one checkbox `type-<name>` each)."""
    types = [t for t in MESSAGE_TYPES if form.get(f"type-{t}")]
    if not types:
        raise InvalidInput("tick at least one message type")
    return types


def typed_rates(form: dict[str, str]) -> tuple[dict[str, int], dict[str, str]]:
    """The rates in NPR per segment typed on a form (`rate-<type>`), as paisa, and the problem
    of each field; an empty field leaves its rate as it is (a new workspace's: NPR 1.00)."""
    rates, errors = {}, {}
    for t in MESSAGE_TYPES:
        text = form.get(f"rate-{t}", "").strip()
        if not text:
            continue
        try:
            rates[t] = parse_npr(text)
        except InvalidInput as problem:
            errors[f"rate-{t}"] = str(problem)
    return rates, errors


class Workspaces(OpsPage):
    """GET /dashboard/ops/workspaces, and POST: Create workspace."""

    async def on_get_home(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        if await self.operator(req, resp) is not None:
            self.web.redirect(resp, ROOT)

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        person = await self.operator(req, resp)
        if person is not None:
            await self.show(req, resp, person)

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        posted = await self.operator_change(req, resp)
        if posted is None:
            return
        form, person = posted.fields, posted.person
        rates, errors = typed_rates(form)
        types = None
        try:
            types = typed_types(form)
        except InvalidInput as problem:
            errors["types"] = str(problem)
        if not form.get("name", "").strip():
            errors["name"] = "a workspace needs a name"
        if errors:
            return await self.show(req, resp, person, status=400, errors=errors, typed=form)
        workspace = await self.blocking(self.sandesh.operators.create_workspace, form["name"], types, rates,
                                        self.actor(person))
        self.web.redirect(resp, f"{ROOT}/{workspace.id}")

    async def show(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, person: dict[str, Any], *,
                   status: int = 200, errors: dict[str, str] | None = None,
                   typed: dict[str, str] | None = None) -> None:
        workspaces, asked = await self.blocking(self._workspaces)
        self.web.page(req, resp, "ops/workspaces.html", status=status, title="Workspaces", person=person,
                        workspaces=workspaces, brand_requests=asked, types=MESSAGE_TYPES, errors=errors or {},
                        typed=typed or {})

    def _workspaces(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        with self.connection() as conn:
            rows, last, asked = registry.workspaces(conn), console.last_activity(conn), registry.brand_requests(conn)
        return ([{**registry.workspace_view(r), "lastActivity": last.get(r["id"])} for r in rows],
                [{**registry.client_view(c), "workspaceName": c["workspace_name"]} for c in asked])


class BrandRequest(Workspaces):
    """POST /dashboard/ops/workspaces/{workspace_id}/clients/{client_id}/brand: `decision` grant
    (the client's brand becomes the one asked for, as `sandesh client update --brand` sets it)
    or dismiss; `brand` is the one the operator saw, so a request asked again since is not decided
    unseen."""

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str,
                      client_id: str) -> None:
        posted = await self.operator_change(req, resp)
        if posted is None:
            return
        form, person = posted.fields, posted.person
        decide = {"grant": self.sandesh.operators.grant_brand,
                  "dismiss": self.sandesh.operators.dismiss_brand_request}.get(form.get("decision", ""))
        client = await self.blocking(self._client, client_id)
        if decide is None or client is None or client["workspace_id"] != workspace_id:
            return self.web.not_found(req, resp, person)
        try:
            await self.blocking(decide, client_id, form.get("brand", ""), self.actor(person))
        except DomainError as problem:
            return await self.show(req, resp, person, status=400, errors={f"brand-{client_id}": str(problem)})
        self.web.redirect(resp, ROOT)

    def _client(self, client_id: str) -> dict[str, Any] | None:
        with self.connection() as conn:
            return registry.fetch_one(conn, "clients", "id", client_id)


class WorkspaceDetail(OpsPage):
    """GET /dashboard/ops/workspaces/{workspace_id}: its state, forms, and its clients."""

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str) -> None:
        person = await self.operator(req, resp)
        if person is not None:
            erased = req.get_param_as_int("erased", min_value=0)  # after Erase texts: the keys destroyed
            await self.show(req, resp, person, workspace_id, erased=erased)

    async def show(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, person: dict[str, Any],
                   workspace_id: str, *, status: int = 200, errors: dict[str, str] | None = None,
                   typed: dict[str, str] | None = None, erased: int | None = None) -> None:
        found = await self.blocking(self._workspace, workspace_id)
        if found is None:
            return self.web.not_found(req, resp, person)
        workspace, clients = found
        totp_required = await self.blocking(self.sandesh.people.totp_required, workspace_id)
        self.web.page(req, resp, "ops/workspace.html", status=status, title=workspace["name"], person=person,
                      workspace=workspace, clients=clients, types=MESSAGE_TYPES, totp_required=totp_required,
                      errors=errors or {}, typed=typed or {}, erased=erased)

    def _workspace(self, workspace_id: str) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
        with self.connection() as conn:
            row = registry.fetch_one(conn, "workspaces", "id", workspace_id)
            if row is None:
                return None
            return registry.workspace_view(row), [registry.client_view(c) for c in registry.clients(conn, workspace_id)]


class WorkspaceAction(WorkspaceDetail):
    """POST /dashboard/ops/workspaces/{workspace_id}/{action}: activate, suspend, reinstate,
    credit (NPR and a note), rates (NPR per segment), types, promo-hours (HH:MM-HH:MM or off),
    shred-texts (the workspace's name typed to confirm)."""

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str,
                      action: str) -> None:
        posted = await self.operator_change(req, resp)
        if posted is None:
            return
        form, person = posted.fields, posted.person
        if action not in ACTIONS:
            return self.web.not_found(req, resp, person)
        ops, actor = self.sandesh.operators, self.actor(person)
        try:
            if action == "credit":
                amount = _field("amount", parse_npr, form.get("amount", ""))
                await self.blocking(ops.credit_workspace, workspace_id, amount, form.get("note", "").strip() or None,
                                    actor)
            elif action == "rates":
                rates, errors = typed_rates(form)
                if errors:
                    return await self.show(req, resp, person, workspace_id, status=400, errors=errors, typed=form)
                await self.blocking(ops.set_rates, workspace_id, rates, actor)
            elif action == "types":
                await self.blocking(ops.set_types, workspace_id, _field("types", typed_types, form), actor)
            elif action == "promo-hours":
                await self.blocking(ops.set_promo_hours, workspace_id, form.get("hours", ""), actor)
            elif action == "shred-texts":
                return await self._shred(req, resp, person, workspace_id, form)
            else:
                await self.blocking(getattr(ops, f"{action}_workspace"), workspace_id, actor)
        except FieldProblem as problem:
            return await self.show(req, resp, person, workspace_id, status=400, errors={problem.field: problem.text},
                                   typed=form)
        except DomainError as problem:
            return await self.show(req, resp, person, workspace_id, status=400,
                                   errors={FIELDS.get(action, action): str(problem)}, typed=form)
        self.web.redirect(resp, f"{ROOT}/{workspace_id}")

    async def _shred(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, person: dict[str, Any],
                     workspace_id: str, form: dict[str, str]) -> None:
        """Erase texts, once the operator typed the workspace's name: it cannot be undone."""
        found = await self.blocking(self._workspace, workspace_id)
        if found is None:
            return self.web.not_found(req, resp, person)
        if form.get("confirm", "").strip() != found[0]["name"]:
            return await self.show(req, resp, person, workspace_id, status=400,
                                   errors={"confirm": "type the workspace's name exactly to erase its texts"})
        keys = await self.blocking(self.sandesh.operators.shred_texts, workspace_id, self.actor(person))
        self.web.redirect(resp, f"{ROOT}/{workspace_id}?erased={keys}")  # a reload does not post it again


class ClientRateLimit(WorkspaceDetail):
    """POST /dashboard/ops/workspaces/{workspace_id}/clients/{client_id}/rate-limit: requests
    per second, the same use case as `sandesh client update --rate-limit`."""

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str,
                      client_id: str) -> None:
        posted = await self.operator_change(req, resp)
        if posted is None:
            return
        form, person = posted.fields, posted.person
        field = f"rate-limit-{client_id}"
        text = form.get("rate_limit", "").strip()
        try:
            if not text.isdigit():
                raise InvalidInput(f"{text!r} is not a whole number of requests per second")
            client = await self.blocking(self._client, client_id)
            if client is None or client["workspace_id"] != workspace_id:
                return self.web.not_found(req, resp, person)
            await self.blocking(self.sandesh.operators.update_client, client_id, None, None, int(text), self.actor(person))
        except DomainError as problem:
            return await self.show(req, resp, person, workspace_id, status=400, errors={field: str(problem)})
        self.web.redirect(resp, f"{ROOT}/{workspace_id}")

    def _client(self, client_id: str) -> dict[str, Any] | None:
        with self.connection() as conn:
            return registry.fetch_one(conn, "clients", "id", client_id)


ACTIONS = ("activate", "suspend", "reinstate", "credit", "rates", "types", "promo-hours", "shred-texts")
FIELDS = {"credit": "amount", "promo-hours": "hours"}  # the field a refusal of the use case is said beside


class FieldProblem(Exception):
    def __init__(self, field: str, text: str):
        super().__init__(text)
        self.field, self.text = field, text


def _field(name: str, parse: Any, value: Any) -> Any:
    """`parse(value)`, its InvalidInput said beside the field `name`."""
    try:
        return parse(value)
    except InvalidInput as problem:
        raise FieldProblem(name, str(problem)) from None
