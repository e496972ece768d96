"""The dashboard's pages (docs/dashboard.md): each parses the request, calls one use case or
one read-model query on the app's blocking threads (api/waiting.py), and renders a template.

Every resource is `dashboard = True`: the API's key check leaves it alone (api/auth.py); people
sign in here instead, and an API key never opens a page."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, ContextManager

import falcon
import falcon.asgi

from sandesh.domain.application import Sandesh
from sandesh.domain.errors import InvalidInput, InvalidTransition
from sandesh.domain.person import OPERATOR, SENDER, sees
from sandesh.domain.signin import SignInRefused
from sandesh.domain.usecases.people import SignInTry
from sandesh.projections.storage import sessions

from ..waiting import Blocking, Busy, Hashing
from . import i18n
from .web import HERE, SESSION, TooLarge, Upload, Web
from .i18n import Said, _, told

SIGN_IN = "/dashboard/sign-in"
WRONG = _("Email or password is wrong.")


def landing(role: str) -> str:
    """The page of their workspace a person lands on."""
    return "send" if role == SENDER else "overview"


def too_busy(seconds: int) -> str:
    """What a sign-in form says when every thread that checks passwords is busy (`Page.busy`)."""
    return _("Many people are signing in just now. Try again in %(seconds)s seconds.", seconds=seconds)


# A throttle's refusal, by what it refuses: its wait in seconds, in one minute, in minutes
SIGN_INS = (_("Too many failed sign-ins. Wait %(seconds)s seconds and try again."),
            _("Too many failed sign-ins. Wait 1 minute and try again."),
            _("Too many failed sign-ins. Wait %(minutes)s minutes and try again."))
TRIES = (_("Too many failed tries. Wait %(seconds)s seconds and try again."),
         _("Too many failed tries. Wait 1 minute and try again."),
         _("Too many failed tries. Wait %(minutes)s minutes and try again."))


def _wait_said(sentences: tuple[Said, Said, Said], seconds: int) -> Said:
    """Wait `seconds`, said in seconds under a minute, else in whole minutes rounded up."""
    in_seconds, one_minute, in_minutes = sentences
    minutes = -(-seconds // 60)
    if seconds < 60:
        return Said(in_seconds.english, seconds=seconds)
    return one_minute if minutes == 1 else Said(in_minutes.english, minutes=minutes)


def too_many_sign_ins(seconds: int) -> str:
    """The throttle's refusal of a password or a code (domain/signin.py)."""
    return _wait_said(SIGN_INS, seconds)


def too_many_tries(seconds: int) -> str:
    """The throttle's refusal of setting up an authenticator app."""
    return _wait_said(TRIES, seconds)


SENDERS_SEE = _("Senders see the Send, Campaigns, Contacts, Templates and Messages pages of their workspace.")
# What a viewer is told when a form changes what only owners and developers may.
VIEWERS_READ = _("Viewers read only: ask an owner or a developer of the workspace.")


@dataclass(frozen=True)
class Posted:
    """A posted form (`Page.posted`): who posted it, its fields and files, and what is wrong
    with a form with a file (then the parts before the fault only)."""
    person: dict[str, Any]  # {} for the forms of signing in and out
    fields: dict[str, str]
    files: dict[str, tuple[str, bytes]] = field(default_factory=dict)  # name -> (filename, bytes)
    fault: str | None = None
    too_large: TooLarge | None = None  # the body passed its cap: answer 413; it was not read, nor its token


class Page:
    dashboard = True
    section = ""  # of a workspace's pages: which a person of a role sees (domain/person.py, `sees`)

    def __init__(self, sandesh: Sandesh, connection: Callable[[], ContextManager[Any]], blocking: Blocking, web: Web,
                 hashing: Hashing):
        self.sandesh, self.connection, self.blocking, self.web = sandesh, connection, blocking, web
        self.hashing = hashing  # the use cases that hash or verify a password run here, not on `blocking`

    async def signed_in(self, req: falcon.asgi.Request, used: bool = True) -> dict[str, Any] | None:
        """The person of the request's session while it lives (its last use moved to now, unless
        the request is a page refreshing itself: `used` False), else None."""
        session_id = self.web.session_id(req)
        if session_id is None:
            return None
        person = await self.blocking(self._touch, session_id, used)
        return person if person is not None and person["stage"] == sessions.SIGNED_IN else None

    async def waiting(self, req: falcon.asgi.Request, stage: str) -> dict[str, Any] | None:
        """The person of a session that gave the right password and still owes `stage`."""
        session_id = self.web.session_id(req)
        person = await self.blocking(self._touch, session_id) if session_id else None
        return person if person is not None and person["stage"] == stage else None

    async def begin(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, person_id: str, email: str,
                    stage: str = sessions.SIGNED_IN) -> None:
        """A new session (a new id at every step of signing in), its cookie, and where it goes next;
        once signed in, second factor included, the browser's device cookie for the account."""
        session_id = await self.blocking(self._begin, person_id, self.web.session_id(req), stage)
        self.web.set_cookie(req, resp, SESSION, session_id)
        if stage == sessions.SIGNED_IN:
            self.web.give_device(req, resp, email)
        self.web.redirect(resp, "/dashboard" if stage == sessions.SIGNED_IN else f"{SIGN_IN}/{stage}")

    def _begin(self, person_id: str, old: str | None, stage: str) -> str:
        with self.connection() as conn:
            if old:
                sessions.end(conn, old)
            return sessions.begin(conn, person_id, self.sandesh.clock.now(), stage)

    async def member(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str,
                     used: bool = True) -> dict[str, Any] | None:
        """The signed-in person when the workspace is theirs; else the page answered is sign-in or
        404.  `used`: as `signed_in` (a page refreshing itself is not a use of the session)."""
        person = await self.signed_in(req, used)
        if person is None:
            self.web.redirect(resp, SIGN_IN)
            return None
        if not self.sees(person, workspace_id):
            self.web.not_found(req, resp, person)
            return None
        if not sees(person["role"], self.section):
            self.web.page(req, resp, "message.html", status=403, title=_("Forbidden"), person=person, text=SENDERS_SEE)
            return None
        return person

    async def posted(self, req: falcon.asgi.Request, resp: falcon.asgi.Response,
                     who: Awaitable[dict[str, Any] | None] | None, upload: Upload | None = None) -> Posted | None:
        """A posted form, read in the order of docs/dashboard.md, "Security": who posts it, asked of
        the session before the body is read (`who`, which answers the page itself when it gives
        None; None for the forms of signing in and out, whose pages ask in their own ways); then
        the body, at most 16 KB, or a form with a file within `upload`'s caps (past them:
        `too_large`, unread); then its CSRF token (403).  None when the page is answered already."""
        person: dict[str, Any] = {}
        if who is not None:
            found = await who
            if found is None:
                return None
            person = found
        try:
            if upload is None:
                fields, files, fault = await self.web.form(req), {}, None
            else:
                fields, files, fault = await self.web.multipart(req, upload.max_file, upload.max_field)
        except TooLarge as too_large:
            return Posted(person, {}, too_large=too_large)
        if not self.web.csrf_ok(req, fields):
            self.web.forbidden(req, resp)
            return None
        return Posted(person, fields, files, fault)

    async def sign_in_form(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> Posted | None:
        """A form of signing in (password, code, app setup, set-password): its address within its
        allowance (`past_allowance`), then as `posted` reads it; None when the page is answered."""
        if self.past_allowance(req, resp):
            return None
        return await self.posted(req, resp, None)

    async def change(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str,
                     allowed: Callable[[str], bool], refusal: str, upload: Upload | None = None) -> Posted | None:
        """A form of a workspace's page, posted by a member whose role may make the change
        (`allowed(role)`: `permitted`); else None, the page answered."""
        return await self.posted(req, resp, self.permitted(req, resp, workspace_id, allowed, refusal), upload)

    async def permitted(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str,
                        allowed: Callable[[str], bool], refusal: str) -> dict[str, Any] | None:
        """The member whose role may use a form (`allowed(role)`), asked of the session before
        the body is read (docs/dashboard.md, "Security"); else the page answered is sign-in, 404,
        or 403 (`refusal` says why)."""
        person = await self.member(req, resp, workspace_id)
        if person is not None and not allowed(person["role"]):
            self.web.page(req, resp, "message.html", status=403, title=_("Forbidden"), person=person, text=refusal)
            return None
        return person

    def past_allowance(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> bool:
        """A sign-in form's post (counted), or its page (not counted), from an address or network
        past its allowance is answered here, before its body is read or a page rendered
        (api/dashboard/gate.py)."""
        ip = self.web.calling_ip(req)
        wait = self.web.gate.wait(ip) if req.method == "POST" else self.web.gate.waiting(ip)
        if wait:
            self.web.gate.refuse(resp, wait, self.web.language(req, None))
            self.web.secure_headers(resp)
        return bool(wait)

    def busy(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, busy: Busy, template: str,
             **fields: Any) -> None:
        """The form again, 503 with Retry-After: every thread that checks passwords is busy and
        more wait for one already (api/waiting.py, Hashing); nothing was tried or recorded."""
        resp.set_header("Retry-After", str(busy.retry_after))
        self.web.page(req, resp, template, status=503, error=too_busy(busy.retry_after), **fields)

    async def turn(self, attempt: SignInTry) -> None:
        """Wait for a paced try's turn (domain/signin.py): on the event loop, holding no thread."""
        early = attempt.at - self.sandesh.clock.now()
        if early > 0:
            await asyncio.sleep(early)

    @staticmethod
    def sees(person: dict[str, Any], workspace_id: str) -> bool:
        """A person sees their own workspace only; the operator team sees every one."""
        return person["role"] == OPERATOR or person["workspace_id"] == workspace_id

    def _touch(self, session_id: str, used: bool = True) -> dict[str, Any] | None:
        with self.connection() as conn:
            return sessions.touch(conn, session_id, self.sandesh.clock.now(), used)


class Home(Page):
    """GET /dashboard: the person's workspace (the operator team: the workspaces), or the sign-in page."""

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        person = await self.signed_in(req)
        if person is None:
            return self.web.redirect(resp, SIGN_IN)
        if person["role"] == OPERATOR:
            return self.web.redirect(resp, "/dashboard/ops/workspaces")
        self.web.redirect(resp, f"/dashboard/w/{person['workspace_id']}/{landing(person['role'])}")


class SignIn(Page):
    """GET and POST /dashboard/sign-in (docs/dashboard.md, "Signing in")."""

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        if self.past_allowance(req, resp):
            return
        if await self.signed_in(req) is not None:
            return self.web.redirect(resp, "/dashboard")
        notice = _("Your password is set. Sign in with it.") if req.get_param("password") == "set" else None
        self.web.page(req, resp, "sign_in.html", title=_("Sign in"), email="", error=None, notice=notice)

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        posted = await self.sign_in_form(req, resp)
        if posted is None:
            return
        form = posted.fields
        email, ip = form.get("email", ""), self.web.calling_ip(req)
        device = self.web.device_of(req, email)
        attempt = None
        try:
            self.hashing.check(trusted=device is not None)
            attempt = await self.blocking(self.sandesh.people.try_sign_in, email, ip, device)
            await self.turn(attempt)
            person = await self.hashing(self.sandesh.people.sign_in, email, form.get("password", ""), ip, attempt,
                                        trusted=device is not None)
        except Busy as busy:
            if attempt is not None:  # filled while the try waited its turn: it was no guess
                await self.blocking(self.sandesh.people.withdraw_try, attempt)
            return self.busy(req, resp, busy, "sign_in.html", title=_("Sign in"), email=email, notice=None)
        except SignInRefused as refused:
            error = too_many_sign_ins(refused.wait) if refused.wait else WRONG
            if refused.wait:
                resp.set_header("Retry-After", str(refused.wait))
            return self.web.page(req, resp, "sign_in.html", status=429 if refused.wait else 200, title=_("Sign in"),
                                 email=email, error=error, notice=None)
        owed = await self.blocking(self.sandesh.people.second_factor, person)
        await self.begin(req, resp, person.id, person.email, owed or sessions.SIGNED_IN)


class Language(Page):
    """POST /dashboard/language: the language the dashboard is drawn in (i18n.py), kept in the
    browser's cookie for a year and, for a person signed in, with them (every browser they sign
    in on); back to the page it was chosen on."""

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        posted = await self.posted(req, resp, None)
        if posted is None:
            return
        language = posted.fields.get("language", "")
        if language not in i18n.NAMES:
            return self.web.redirect(resp, "/dashboard")
        self.web.set_cookie(req, resp, i18n.LANGUAGE_COOKIE, language, max_age=365 * 86400)
        person = await self.signed_in(req)
        if person is not None:
            await self.blocking(self.sandesh.people.choose_language, person["id"], language)
        back = posted.fields.get("back", "")
        self.web.redirect(resp, back if back.startswith("/dashboard") and "//" not in back else "/dashboard")


class SignOut(Page):
    """POST /dashboard/sign-out, and /dashboard/sign-out-everywhere (`everywhere`): every
    session of the person ends."""

    def __init__(self, *args: Any, everywhere: bool = False):
        super().__init__(*args)
        self.everywhere = everywhere

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        if await self.posted(req, resp, None) is None:
            return
        session_id = self.web.session_id(req)
        if session_id:
            await self.blocking(self._end, session_id)
        self.web.clear_cookie(req, resp, SESSION)
        self.web.redirect(resp, SIGN_IN)

    def _end(self, session_id: str) -> None:
        """Everywhere only from a session that is fully signed in: one that gave the password but
        not yet the code ends itself alone, so the password alone cannot sign the person out."""
        with self.connection() as conn:
            person = sessions.touch(conn, session_id, self.sandesh.clock.now())
            if self.everywhere and person is not None and person["stage"] == sessions.SIGNED_IN:
                sessions.end_all(conn, person["id"])
            else:
                sessions.end(conn, session_id)


class SetPassword(Page):
    """GET and POST /dashboard/set-password/{token}: the one-time link of `sandesh user add|reset`."""

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, token: str) -> None:
        person = await self.blocking(self.sandesh.people.person_of_link, token)
        if person is None:
            return self._invalid(req, resp)
        self.web.page(req, resp, "set_password.html", title=_("Set your password"), email=person.email, error=None)

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, token: str) -> None:
        posted = await self.sign_in_form(req, resp)
        if posted is None:
            return
        form = posted.fields
        try:
            person = await self.hashing(self.sandesh.people.set_password, token, form.get("password", ""))
        except Busy as busy:
            found = await self.blocking(self.sandesh.people.person_of_link, token)
            return self.busy(req, resp, busy, "set_password.html", title=_("Set your password"),
                             email=found.email if found else "")
        except InvalidInput as problem:
            found = await self.blocking(self.sandesh.people.person_of_link, token)
            if found is None:
                return self._invalid(req, resp)
            return self.web.page(req, resp, "set_password.html", status=400, title=_("Set your password"),
                                 email=found.email, error=told(problem))
        except InvalidTransition:
            return self._invalid(req, resp)
        await self.blocking(self._end_all, person.id)  # a new password ends every session of the old one
        self.web.redirect(resp, SIGN_IN + "?password=set")

    def _invalid(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        self.web.page(req, resp, "message.html", status=404, title=_("Link not valid"),
                      text=_("This link was used, replaced or is older than 24 hours. Ask for a new one."))

    def _end_all(self, person_id: str) -> None:
        with self.connection() as conn:
            sessions.end_all(conn, person_id)


class Static:
    """GET /dashboard/static/{name}: the stylesheet and the scripts (the SIM pool's refresh, the
    Copy buttons), served from the package (nothing from a CDN)."""
    dashboard = True
    FILES = {"dashboard.css": "text/css; charset=utf-8", "live.js": "text/javascript; charset=utf-8",
             "copy.js": "text/javascript; charset=utf-8", "send.js": "text/javascript; charset=utf-8"}

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, name: str) -> None:
        if name not in self.FILES:
            raise falcon.HTTPNotFound()
        resp.content_type = self.FILES[name]
        resp.data = (HERE / "static" / name).read_bytes()
        resp.set_header("Cache-Control", "public, max-age=3600")
        resp.set_header("X-Content-Type-Options", "nosniff")
