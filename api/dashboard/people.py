"""The People page of a workspace (docs/dashboard.md, "People page"): everyone of the workspace
reads the list; owners invite (the one-time link is shown once, to be sent to the person),
change roles and remove, through the people use cases, audited as the owner."""
from __future__ import annotations

from typing import Any

import falcon.asgi

from sandesh.domain.errors import DomainError, InvalidInput, NameTaken, NotFound
from sandesh.domain.person import (WORKSPACE_ROLES, actor_of, check_name, check_role, may_manage_people,
                                   normalise_email)
from sandesh.projections import people

from .pages import Page
from .i18n import _, told

OWNERS_ONLY = _("Only an owner of the workspace manages its people.")
# Whether the address is of this workspace, of another or of the operator team is not said: an
# owner learns nothing of other workspaces' people (docs/dashboard.md, "People page").
TAKEN = _("This address cannot be invited. Use another address, or ask the operator team.")


class PeoplePage(Page):
    section = "people"

    async def show(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, person: dict[str, Any],
                   workspace_id: str, *, status: int = 200, errors: dict[str, str] | None = None,
                   typed: dict[str, str] | None = None, link: dict[str, str] | None = None) -> None:
        listed = await self.blocking(self._people, workspace_id)
        self.web.page(req, resp, "people.html", status=status, title=_("People"), person=person,
                      workspace_id=workspace_id, people=listed, roles=WORKSPACE_ROLES, errors=errors or {},
                      typed=typed or {}, link=link, manages=may_manage_people(person["role"]))

    def _people(self, workspace_id: str) -> list[dict[str, Any]]:
        with self.connection() as conn:
            return [people.view(row) for row in people.listed(conn, workspace_id)]


class People(PeoplePage):
    """GET and POST (Invite) /dashboard/w/{workspace_id}/people."""

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str) -> None:
        person = await self.member(req, resp, workspace_id)
        if person is not None:
            await self.show(req, resp, person, workspace_id)

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str) -> None:
        posted = await self.change(req, resp, workspace_id, may_manage_people, OWNERS_ONLY)
        if posted is None:
            return
        form, person = posted.fields, posted.person
        errors = problems(form)
        if errors:
            return await self.show(req, resp, person, workspace_id, status=400, errors=errors, typed=form)
        try:
            invited, token = await self.blocking(self.sandesh.people.add_person, form["email"], form["name"],
                                                 workspace_id, form["role"], False,
                                                 actor_of(person["email"]))
        except NameTaken:  # the same words whichever workspace the address is of: none is named
            return await self.show(req, resp, person, workspace_id, status=400, errors={"email": TAKEN}, typed=form)
        except DomainError as problem:
            return await self.show(req, resp, person, workspace_id, status=400, errors={"email": told(problem)},
                                   typed=form)
        link = self.web.link(f"/dashboard/set-password/{token}")
        await self.show(req, resp, person, workspace_id, link={"email": invited.email, "url": link})


class PersonAction(PeoplePage):
    """POST /dashboard/w/{workspace_id}/people/{person_id}/{action}: role (with the new role) or
    remove.  A person of another workspace is not found."""

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str,
                      person_id: str, action: str) -> None:
        posted = await self.change(req, resp, workspace_id, may_manage_people, OWNERS_ONLY)
        if posted is None:
            return
        form, person = posted.fields, posted.person
        use_cases = self.sandesh.people
        try:
            if action == "role":
                await self.blocking(use_cases.change_role, person_id, workspace_id, form.get("role", ""),
                                    person["email"])
            elif action == "remove":
                await self.blocking(use_cases.remove_person, person_id, workspace_id, person["email"])
            else:
                return self.web.not_found(req, resp, person)
        except NotFound:
            return self.web.not_found(req, resp, person)
        except DomainError as problem:
            return await self.show(req, resp, person, workspace_id, status=400,
                                   errors={f"{person_id}:{action}": told(problem)})
        self.web.redirect(resp, f"/dashboard/w/{workspace_id}/people")


def problems(form: dict[str, str]) -> dict[str, str]:
    """What is wrong with an invitation, by field."""
    found = {}
    for field, check in (("email", normalise_email), ("name", check_name), ("role", check_role)):
        try:
            check(form.get(field, ""))
        except InvalidInput as problem:
            found[field] = told(problem)
    return found
