"""What the operator team's pages share (docs/dashboard.md, "The operator team's console"):
they open for a member of the operator team only; anyone else signed in gets 404, as for a
page that is not there."""
from __future__ import annotations

from typing import Any

import falcon.asgi

from sandesh.domain.person import OPERATOR, actor_of

from ..pages import SIGN_IN, Page


class OpsPage(Page):
    async def operator(self, req: falcon.asgi.Request, resp: falcon.asgi.Response,
                       used: bool = True) -> dict[str, Any] | None:
        """The signed-in operator; else the page answered is sign-in or 404.  `used` False: the
        request is a page refreshing itself, which does not keep the session from ending idle."""
        person = await self.signed_in(req, used)
        if person is None:
            self.web.redirect(resp, SIGN_IN)
            return None
        if person["role"] != OPERATOR:
            self.web.not_found(req, resp, person)
            return None
        return person

    async def operator_change(self, req: falcon.asgi.Request,
                              resp: falcon.asgi.Response) -> tuple[dict[str, str], dict[str, Any] | None]:
        """The posted form and the operator who posts it; else the page answered is 403 (no
        valid CSRF token), sign-in or 404."""
        form = await self.web.form(req)
        if not self.web.csrf_ok(req, form):
            self.web.forbidden(req, resp)
            return form, None
        return form, await self.operator(req, resp)

    @staticmethod
    def actor(person: dict[str, Any]) -> str:
        return actor_of(person["email"])
