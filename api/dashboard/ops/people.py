"""The operator team's People page (docs/dashboard.md, "Operator team"): everyone who may sign
in, of every workspace and of the team; **Add operator** (the link shown once), and for anyone
**Disable**, **Enable** and **New link**: the use cases of `sandesh user add --operator`,
`disable`, `enable` and `reset`, audited as the operator."""
from __future__ import annotations

from typing import Any

import falcon.asgi

from sandesh.domain.errors import DomainError, InvalidInput
from sandesh.domain.person import check_name, normalise_email
from sandesh.projections import people

from .page import OpsPage

ROOT = "/dashboard/ops/people"
ACTIONS = ("disable", "enable", "reset")


class TeamPage(OpsPage):
    """The page, shown by the list and by each action."""

    async def show(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, person: dict[str, Any], *,
                   status: int = 200, typed: dict[str, str] | None = None, errors: dict[str, str] | None = None,
                   link: dict[str, str] | None = None) -> None:
        listed = await self.blocking(self._everyone)
        self.web.page(req, resp, "ops/people.html", status=status, title="People of the service", person=person,
                      people=listed, typed=typed or {}, errors=errors or {}, link=link)

    def link(self, req: falcon.asgi.Request, email: str, token: str) -> dict[str, str]:
        return {"email": email, "url": self.web.link(f"/dashboard/set-password/{token}")}

    def _everyone(self) -> list[dict[str, Any]]:
        with self.connection() as conn:
            return [people.view(row) for row in people.listed(conn, None)]


class Team(TeamPage):
    """GET and POST (Add operator) /dashboard/ops/people."""

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        person = await self.operator(req, resp)
        if person is not None:
            await self.show(req, resp, person)

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        posted = await self.operator_change(req, resp)
        if posted is None:
            return
        form, person = posted.fields, posted.person
        typed = {name: form.get(name, "").strip() for name in ("email", "name")}
        errors = {}
        for name, check in (("email", normalise_email), ("name", check_name)):
            try:
                check(typed[name])
            except InvalidInput as problem:
                errors[name] = str(problem)
        if not errors:
            try:
                added, token = await self.blocking(self.sandesh.people.add_person, typed["email"], typed["name"], None,
                                                   None, True, self.actor(person))
                return await self.show(req, resp, person, link=self.link(req, added.email, token))
            except DomainError as problem:
                errors["email"] = str(problem)
        await self.show(req, resp, person, status=400, typed=typed, errors=errors)


class TeamAction(TeamPage):
    """POST /dashboard/ops/people/{person_id}/{action}: disable, enable, or reset (a new one-time
    link, shown once; the old one stops)."""

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, person_id: str,
                      action: str) -> None:
        posted = await self.operator_change(req, resp)
        if posted is None:
            return
        person = posted.person
        target = await self.blocking(self._find, person_id)
        if target is None or action not in ACTIONS:
            return self.web.not_found(req, resp, person)
        if action == "disable" and target["email"] == person["email"]:
            return await self.show(req, resp, person, status=400,
                                   errors={person_id: "you cannot disable yourself: ask another operator"})
        use_case = {"disable": self.sandesh.people.disable_person, "enable": self.sandesh.people.enable_person,
                    "reset": self.sandesh.people.reset_password}[action]
        try:
            done = await self.blocking(use_case, target["email"], self.actor(person))
        except DomainError as problem:
            return await self.show(req, resp, person, status=400, errors={person_id: str(problem)})
        if action == "reset":
            return await self.show(req, resp, person, link=self.link(req, target["email"], done[1]))
        self.web.redirect(resp, ROOT)

    def _find(self, person_id: str) -> dict[str, Any] | None:
        with self.connection() as conn:
            return people.find(conn, person_id)
