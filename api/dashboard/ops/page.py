"""What the operator team's pages share (docs/dashboard.md, "The operator team's console"):
they open for a member of the operator team only; anyone else signed in gets 404, as for a
page that is not there."""
from __future__ import annotations

from typing import Any

import falcon.asgi

from sandesh.domain.person import OPERATOR, actor_of

from ..pages import SIGN_IN, Page, Posted


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

    async def operator_change(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> Posted | None:
        """A form posted by an operator (asked before its body is read, as every form of the
        dashboard); else None, the page answered: sign-in, 404, or 403 without a valid CSRF token."""
        return await self.posted(req, resp, self.operator(req, resp))

    @staticmethod
    def actor(person: dict[str, Any]) -> str:
        return actor_of(person["email"])
