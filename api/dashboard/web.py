"""What every dashboard page shares (docs/dashboard.md, "Security"): the templates, the headers
that keep a page from being framed, cached or given another origin's script, the cookies, the
CSRF token of every form, and reading a posted form."""
from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncIterator, Callable
from urllib.parse import parse_qs

import falcon
import falcon.asgi
import orjson
from jinja2 import Environment, FileSystemLoader, select_autoescape

from sandesh.domain.clock import Clock
from sandesh.domain.credentials import same_secret
from sandesh.projections.storage.keys import labelled

from ..peers import calling_ip, over_tls
from ..uploads.limits import MAX_UPLOAD
from . import i18n
from .gate import Gate
from .shown import long_id, nepal, nepal_day, npr
from .i18n import _

HERE = Path(__file__).resolve().parent


def environment(language: str) -> Environment:
    """The templates drawn in `language`: its catalog's gettext, its money."""
    made = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(["html"]),
                       extensions=["jinja2.ext.i18n"])
    made.install_gettext_translations(i18n.CATALOGS[language], newstyle=True)  # type: ignore[attr-defined]
    made.policies["ext.i18n.trimmed"] = True  # a {% trans %} block's lines are one line, as the catalog has it
    # every amount, time and long id a page shows
    made.filters.update(npr=lambda paisa: npr(paisa, language), nepal=lambda at: nepal(at, language),
                        nepal_day=lambda at: nepal_day(at, language), long_id=long_id)
    made.globals.update(lang=language, language_names=i18n.NAMES, said=i18n.sayer(i18n.CATALOGS[language]))
    return made


ENVIRONMENTS = {language: environment(language) for language in i18n.CATALOGS}
TEMPLATES = ENVIRONMENTS[i18n.ENGLISH]

# No inline script or style, nothing from another origin, never inside a frame.
POLICY = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
          "frame-ancestors 'none'; base-uri 'none'; object-src 'none'")
SESSION, NONCE, DEVICE = "sandesh_session", "sandesh_csrf", "sandesh_device"
DEVICE_DAYS = 180
CSRF_USE, DEVICE_USE, TOTP_USE = "dashboard/csrf", "dashboard/device", "dashboard/totp-setup"  # labelled keys
MAX_FORM = 16 * 1024  # bytes
MAX_MULTIPART = 6 * 2**20  # bytes of a form with a file: a file of 5 MB, and the fields beside it
MULTIPART = falcon.media.MultipartFormHandler()
MULTIPART.parse_options.max_body_part_count = 16  # our largest form has 9 fields


TITLES = {404: _("Not found"), 405: _("Not allowed"), 500: _("Something went wrong"), 503: _("Unavailable")}
NOT_FOUND = _("There is no such page, or it is not yours to see.")


@dataclass(frozen=True)
class Upload:
    """The caps of a form with a file, besides its body's (MAX_MULTIPART): the file's and each field's."""
    max_file: int
    max_field: int = MAX_FORM


# A list of recipients (Send, Contacts): a file, or numbers typed in a field of at most 1 MiB.
LIST_FORM = Upload(MAX_UPLOAD, 1 << 20)


class TooLarge(Exception):
    """A form's body is larger than its cap (`most` bytes): it is answered 413, unread."""

    def __init__(self, most: int):
        self.message = _("The form is larger than %(megabytes)s MB: upload a smaller file.", megabytes=most // 2**20)
        super().__init__(self.message)
        self.most = most

    def __str__(self) -> str:
        return self.message  # the Said itself: a page shows it in its language (i18n.py, `said`)


async def _at_most(stream: AsyncIterator[bytes], most: int) -> AsyncIterator[bytes]:
    """A body's chunks as they come, TooLarge once they pass `most` bytes."""
    seen = 0
    async for chunk in stream:
        seen += len(chunk)
        if seen > most:
            raise TooLarge(most)
        yield chunk


def is_dashboard(path: str) -> bool:
    return path == "/dashboard" or path.startswith("/dashboard/")


def error_page(resp: falcon.Response, status: int, text: str, headers: dict[str, str]) -> None:
    """What the app's error handlers (api/app.py) answer under /dashboard: a page, not the API's
    JSON (an unknown path, an outage of the database, an unexpected error)."""
    resp.status = status
    resp.content_type = falcon.MEDIA_HTML
    resp.text = TEMPLATES.get_template("message.html").render(
        title=TITLES.get(status, _("Error")), text=NOT_FOUND if status == 404 else text, person=None, csrf="")
    for name, value in headers.items():
        resp.set_header(name, value)
    Web.secure_headers(resp)


class Web:
    """Given at construction: the keys the dashboard's MACs are made with, the proxies whose
    X-Forwarded-For and X-Forwarded-Proto are believed (behind the TLS proxy), and the clock."""

    def __init__(self, csrf_keys: Callable[[], tuple[bytes, ...]], trusted_proxies: tuple[str, ...], public_url: str,
                 clock: Clock):
        # The dashboard's data keys, the one that makes values first; the others (a key rotation's
        # older ones) still check them, unless the rotation was for a leaked key (docs/operations.md,
        # "Rotating the key").
        self.csrf_keys, self.trusted_proxies, self.public_url = csrf_keys, trusted_proxies, public_url
        self.clock = clock
        self.gate = Gate(time.monotonic)  # the sign-in forms' allowance per address and network

    # Pages
    def page(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, template: str, *,
             status: int = 200, **values: Any) -> None:
        """A page, with a CSRF token for its forms (the browser's nonce cookie is set when missing)."""
        nonce = req.cookies.get(self.cookie(req, NONCE)) or self._new_nonce(req, resp)
        values.setdefault("person", None)
        language = self.language(req, values["person"])
        resp.status = status
        resp.content_type = falcon.MEDIA_HTML
        resp.text = ENVIRONMENTS[language].get_template(template).render(
            csrf=self.csrf_token(nonce, req), here=req.relative_uri, **values)
        resp.set_header("Content-Language", language)
        resp.append_header("Vary", "Accept-Language, Cookie")
        self.secure_headers(resp)

    def language(self, req: falcon.asgi.Request, person: Any) -> str:
        """The language the page is drawn in (i18n.py): the person's choice, the browser's switch, its Accept-Language."""
        return i18n.language_of(person if isinstance(person, dict) else None,
                                req.cookies.get(self.cookie(req, i18n.LANGUAGE_COOKIE)), req.get_header("Accept-Language"))

    def not_found(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, person: Any = None) -> None:
        self.page(req, resp, "message.html", status=404, title=_("Not found"), person=person, text=NOT_FOUND)

    def forbidden(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        self.page(req, resp, "message.html", status=403, title=_("Forbidden"),
                  text=_("This form had no valid security token. Go back, reload the page and try again."))

    @staticmethod
    def redirect(resp: falcon.asgi.Response, to: str) -> None:
        resp.status = falcon.HTTP_303
        resp.set_header("Location", to)
        Web.secure_headers(resp)

    @staticmethod
    def secure_headers(resp: falcon.asgi.Response) -> None:
        resp.set_header("Content-Security-Policy", POLICY)
        resp.set_header("X-Frame-Options", "DENY")
        resp.set_header("X-Content-Type-Options", "nosniff")
        resp.set_header("Referrer-Policy", "no-referrer")  # a set-password link never leaves in a Referer
        resp.set_header("Cache-Control", "no-store")  # pages show balances and, later, keys

    # Cookies: HttpOnly, SameSite=Strict; over HTTPS also Secure with the __Host- prefix
    def https(self, req: falcon.asgi.Request) -> bool:
        return over_tls(req, self.trusted_proxies)

    def link(self, path: str) -> str:
        """A link a person passes on (a set-password link), at SANDESH_PUBLIC_URL: never at the
        request's Host header, which whoever asks for the link writes."""
        return f"{self.public_url}{path}"

    def cookie(self, req: falcon.asgi.Request, name: str) -> str:
        return f"__Host-{name}" if self.https(req) else name

    def set_cookie(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, name: str, value: str,
                   max_age: int | None = None) -> None:
        """A session cookie (no Max-Age: gone when the browser closes), unless `max_age` is given."""
        resp.set_cookie(self.cookie(req, name), value, max_age=max_age, path="/", secure=self.https(req),
                        http_only=True, same_site="Strict")

    def clear_cookie(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, name: str) -> None:
        self.set_cookie(req, resp, name, "", max_age=0)

    def session_id(self, req: falcon.asgi.Request) -> str | None:
        return req.cookies.get(self.cookie(req, SESSION)) or None

    # Each use MACs with its own key (projections/storage/keys.py, `labelled`) over a JSON array, so that
    # no value made for one use, nor from other fields, checks as another.
    def keys(self, use: str) -> tuple[bytes, ...]:
        """The keys of one use (CSRF, DEVICE_USE, TOTP_USE): the one that makes values first."""
        return tuple(labelled(material, use) for material in self.csrf_keys())

    @staticmethod
    def mac(key: bytes, *fields: str | int) -> str:
        return hmac.new(key, orjson.dumps(fields), hashlib.sha256).hexdigest()

    # CSRF: a token bound to the browser's nonce cookie and its session
    def csrf_token(self, nonce: str, req: falcon.asgi.Request, key: bytes | None = None) -> str:
        return self.mac(key or self.keys(CSRF_USE)[0], nonce, self.session_id(req) or "")

    def csrf_ok(self, req: falcon.asgi.Request, form: dict[str, str]) -> bool:
        nonce = req.cookies.get(self.cookie(req, NONCE))
        given = form.get("csrf", "")
        return bool(nonce) and any(same_secret(given, self.csrf_token(nonce, req, key))
                                   for key in self.keys(CSRF_USE))

    # Device cookies (OWASP's authentication cheat sheet): a browser that signed in to an account,
    # its second factor included, is given one: `<device>.<issued>.<MAC of email, device, issued>`.
    # With it, its tries of that account are counted apart from everyone else's (domain/signin.py,
    # TryKeys) and go first to be checked, for DEVICE_DAYS after it was issued.
    def give_device(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, email: str) -> None:
        """Keeps the browser's device id for this account, or gives it one; issued now."""
        device = self.device_of(req, email) or secrets.token_urlsafe(16)
        issued = int(self.clock.now())
        mac = self.mac(self.keys(DEVICE_USE)[0], email.strip().lower(), device, issued)
        self.set_cookie(req, resp, DEVICE, f"{device}.{issued}.{mac}", max_age=DEVICE_DAYS * 86400)

    def device_of(self, req: falcon.asgi.Request, email: str) -> str | None:
        """The browser's device id when its cookie was given for this account and has not
        expired, else None."""
        device, issued, mac = ((req.cookies.get(self.cookie(req, DEVICE)) or "").split(".") + ["", ""])[:3]
        if not (device and issued.isdigit() and mac):
            return None
        age = self.clock.now() - int(issued)
        if not -60 <= age < DEVICE_DAYS * 86400:
            return None
        return device if any(same_secret(mac, self.mac(key, email.strip().lower(), device, int(issued)))
                             for key in self.keys(DEVICE_USE)) else None

    def _new_nonce(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> str:
        nonce = secrets.token_urlsafe(24)
        self.set_cookie(req, resp, NONCE, nonce)
        return nonce

    # Requests
    @staticmethod
    async def form(req: falcon.asgi.Request) -> dict[str, str]:
        """The posted form's fields (the first value of each); {} for anything else."""
        if (req.content_type or "").split(";")[0].strip() != falcon.MEDIA_URLENCODED:
            return {}
        body = await req.bounded_stream.read(MAX_FORM + 1)
        if len(body) > MAX_FORM:
            return {}
        fields = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
        return {name: values[0] for name, values in fields.items()}

    @staticmethod
    async def multipart(req: falcon.asgi.Request, max_file: int, max_field: int = MAX_FORM,
                        max_body: int = MAX_MULTIPART
                        ) -> tuple[dict[str, str], dict[str, tuple[str, bytes]], str | None]:
        """A multipart form's fields and files (name -> (filename, bytes)), and what is wrong with
        it (a file over `max_file` bytes, a field over `max_field`, a form that is not one): then
        the parts before the fault only (the CSRF token comes first in every form of ours).
        TooLarge, unread, when Content-Length says more than `max_body`; as soon as the bytes
        read pass it, when the body gives no length."""
        if (req.content_type or "").split(";")[0].strip() != falcon.MEDIA_MULTIPART:
            return await Web.form(req), {}, None
        if (req.content_length or 0) > max_body:
            raise TooLarge(max_body)
        fields: dict[str, str] = {}
        files: dict[str, tuple[str, bytes]] = {}
        try:
            form = await MULTIPART.deserialize_async(_at_most(req.stream, max_body), req.content_type,
                                                     req.content_length)
            async for part in form:
                if part.filename:
                    data = await part.stream.read(max_file + 1)
                    if len(data) > max_file:
                        return fields, files, _("The file is larger than %(megabytes)s MB.", megabytes=max_file // 2**20)
                    files[part.name] = (part.filename, data)
                else:
                    data = await part.stream.read(max_field + 1)
                    if len(data) > max_field:
                        return fields, files, _("The field %(name)s is too long.", name=repr(part.name))
                    fields.setdefault(part.name, data.decode("utf-8", "replace"))
        except falcon.HTTPError as error:  # a malformed form: the parser's 400, said as a problem of the form
            return fields, files, _("The form could not be read: %(problem)s.", problem=error.title)
        return fields, files, None

    def calling_ip(self, req: falcon.asgi.Request) -> str:
        return calling_ip(req, self.trusted_proxies)
