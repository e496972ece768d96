"""The second factor (docs/dashboard.md, "Authentication codes"): the code page of signing in,
setting up an authenticator app (with its QR code, an SVG made here: nothing from elsewhere),
and an owner's switch that makes the workspace's owners use one."""
from __future__ import annotations

import functools
from typing import Any

import falcon.asgi
import segno

from sandesh.domain.errors import InvalidInput, InvalidTransition
from sandesh.domain.person import actor_of, may_manage_people
from sandesh.domain.signin import SignInRefused
from sandesh.domain.totp import new_secret, provisioning_uri
from sandesh.domain.usecases.people import SECOND_FACTOR_CODE, SECOND_FACTOR_ENROLL
from sandesh.projections.storage import sessions

from ..waiting import Busy
from .pages import SIGN_IN, Page, too_busy, too_many_sign_ins, too_many_tries
from .web import TOTP_USE
from .i18n import _, told

WRONG_CODE = _("That code is not right: type the 6 digits the app shows now.")


class Code(Page):
    """GET and POST /dashboard/sign-in/code: the code of the person's app, after their password."""

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        if await self.waiting(req, SECOND_FACTOR_CODE) is None:
            return self.web.redirect(resp, SIGN_IN)
        self.web.page(req, resp, "code.html", title=_("Authentication code"), error=None)

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        posted = await self.sign_in_form(req, resp)
        if posted is None:
            return
        form = posted.fields
        person = await self.waiting(req, SECOND_FACTOR_CODE)
        if person is None:
            return self.web.redirect(resp, SIGN_IN)
        ip = self.web.calling_ip(req)
        try:
            attempt = await self.blocking(self.sandesh.people.try_code, person["id"], ip,
                                          self.web.device_of(req, person["email"]))
            await self.turn(attempt)
            signed = await self.blocking(self.sandesh.people.verify_code, person["id"], form.get("code", ""), ip,
                                         attempt)
        except SignInRefused as refused:
            error = too_many_sign_ins(refused.wait) if refused.wait else WRONG_CODE
            if refused.wait:
                resp.set_header("Retry-After", str(refused.wait))
            return self.web.page(req, resp, "code.html", status=429 if refused.wait else 200,
                                 title=_("Authentication code"), error=error)
        # An app set up before a rotation for a leaked key is set up again before the session begins.
        due = await self.blocking(self.sandesh.secrets.app_due, signed)
        await self.begin(req, resp, person["id"], person["email"], SECOND_FACTOR_ENROLL if due else sessions.SIGNED_IN)


class Enroll(Page):
    """Setting up an authenticator app: GET and POST /dashboard/sign-in/enroll for an owner whose
    workspace requires codes (after their password), or /dashboard/authenticator for anyone
    signed in (`signing_in` False), where one set up already is replaced only with a code of it
    or the password.  The secret derives from the session id, so nothing is stored until a code
    proves the app holds it."""

    def __init__(self, *args: Any, signing_in: bool):
        super().__init__(*args)
        self.signing_in = signing_in

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        person = await self._person(req)
        if person is None:
            return self.web.redirect(resp, SIGN_IN)
        await self._show(req, resp, person)

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        posted = await self.sign_in_form(req, resp)
        if posted is None:
            return
        form = posted.fields
        person = await self._person(req)
        if person is None:
            return self.web.redirect(resp, SIGN_IN)
        try:
            await self.hashing(functools.partial(self.sandesh.people.enroll_totp, person["id"], self._secret(req),
                                                 form.get("code", ""), proof=form.get("current", ""),
                                                 ip=self.web.calling_ip(req), after_password=self.signing_in))
        except Busy as busy:
            resp.set_header("Retry-After", str(busy.retry_after))
            return await self._show(req, resp, person, status=503, error=too_busy(busy.retry_after))
        except SignInRefused as refused:
            resp.set_header("Retry-After", str(max(1, refused.wait)))
            return await self._show(req, resp, person, status=429,
                                    error=too_many_tries(refused.wait))
        except (InvalidInput, InvalidTransition) as problem:
            return await self._show(req, resp, person, status=400, error=told(problem))
        if self.signing_in:
            return await self.begin(req, resp, person["id"], person["email"])
        self.web.redirect(resp, "/dashboard")

    async def _person(self, req: falcon.asgi.Request) -> dict[str, Any] | None:
        return await (self.waiting(req, SECOND_FACTOR_ENROLL) if self.signing_in else self.signed_in(req))

    async def _show(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, person: dict[str, Any], *,
                    status: int = 200, error: str | None = None) -> None:
        enrolled, due = await self.blocking(self._enrolled, person["id"])
        secret = self._secret(req)
        qr = segno.make(provisioning_uri(secret, person["email"]), error="m").svg_data_uri(scale=4)
        self.web.page(req, resp, "enroll.html", status=status, title=_("Set up an authenticator app"),
                      person=None if self.signing_in else person, enrolled=enrolled, secret=secret, qr=qr,
                      error=error, password_asked=not (enrolled or self.signing_in), due=due)

    def _enrolled(self, person_id: str) -> tuple[bool, bool]:
        """Whether the person has an app, and whether it is due to be set up again (a leaked key)."""
        found = self.sandesh.people.person(person_id)
        enrolled = found is not None and found.totp_sealed is not None
        return enrolled, enrolled and found is not None and self.sandesh.secrets.app_due(found)

    def _secret(self, req: falcon.asgi.Request) -> str:
        session_id = self.web.session_id(req) or ""
        return new_secret(bytes.fromhex(self.web.mac(self.web.keys(TOTP_USE)[0], session_id))[:20])


class Requirement(Page):
    """POST /dashboard/w/{workspace_id}/authentication-codes: an owner makes the workspace's
    owners sign in with a code too (`required` on), or no longer."""
    section = "overview"

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str) -> None:
        posted = await self.change(req, resp, workspace_id, may_manage_people,
                                   _("Only an owner of the workspace decides this."))
        if posted is None:
            return
        form, person = posted.fields, posted.person
        try:
            await self.blocking(self.sandesh.operators.require_totp, workspace_id, form.get("required") == "on",
                                actor_of(person["email"]))
        except InvalidTransition:
            pass  # as it was asked already: nothing to change
        self.web.redirect(resp, f"/dashboard/w/{workspace_id}/overview")


