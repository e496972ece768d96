"""One-time passwords (docs/api.md, "OTP"; docs/design.md, "Decisions: OTP").

One aggregate per client + number + purpose holds the current code as a keyed hash, never in
clear.  A new code replaces the active one.  Concurrent verifies of one code race on the
aggregate's version, so exactly one of them can record `Verified`.
"""
from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

from eventsourcing.domain import event

from . import phishing
from .aggregate import Aggregate
from .client import brand_problem
from .credentials import same_secret
from .errors import InvalidInput
from .said import Said, _
from .segments import MAX_SEGMENTS, segment

LIFETIME = 5 * 60
MAX_WRONG_ATTEMPTS = 5
RESEND_COOLDOWN = 60
PURPOSE_MAX = 64

ACTIVE, LOCKED, USED, EXPIRED = "active", "locked", "used", "expired"
INVALID_CODE, TOO_MANY_ATTEMPTS, NO_ACTIVE_OTP = "invalid_code", "too_many_attempts", "no_active_otp"


def otp_id(client_id: str, to: str, purpose: str) -> str:
    """The aggregate of one client + number + purpose (its identity: docs/api.md, "OTP")."""
    return "otp_" + hashlib.sha256(f"{client_id}\x1f{to}\x1f{purpose}".encode()).hexdigest()[:32]


def new_code() -> str:
    return f"{secrets.randbelow(10**6):06d}"


# The OTP message (docs/api.md, "OTP messages that apps fill in"): a client's template, or this
# one; then the app hash on a line of its own (Android's SMS Retriever); then the WebOTP line.
DEFAULT_TEMPLATE = "{code} is your {brand} verification code. It expires in {minutes} minutes."
# What goes out for a client whose brand today's rules refuse (one kept from before them).
NO_BRAND_TEMPLATE = "{code} is your verification code. It expires in {minutes} minutes."
OTP_MESSAGE_FROM = "0.4.0"  # the release whose finalized log carries a client's OTP settings in Client.Updated
PLACEHOLDERS = ("code", "brand", "minutes")
TEMPLATE_MAX = 160
APP_HASH = re.compile(r"[A-Za-z0-9+/]{11}")
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
# A host name as WebOTP's origin bound line names it: labels of letters, digits and hyphens.
_HOST = re.compile(r"(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*")
# The origin bound line of WebOTP, `@shop.example.com #123456`: Sandesh writes it, from the web domain.
_WEBOTP_LINE = re.compile(r"@[^#]*#")
# Seven digits or more, with spaces, hyphens, dots, slashes or brackets between them: a phone number
# (9779812345678, 01-4412345), in any script's digits.
_PHONE = re.compile(r"\+?\d(?:[ ./()-]*\d){6,}")


def code_text(code: str, brand: str, template: str | None = None, web_domain: str | None = None,
              app_hash: str | None = None) -> str:
    """The text of a code's message: the client's template (or DEFAULT_TEMPLATE) filled in,
    the app hash on its own line when given, and `@<domain> #<code>` last when the client has
    a web domain.  A template or brand kept from before today's rules that they refuse is not
    sent: DEFAULT_TEMPLATE stands in for such a template, NO_BRAND_TEMPLATE for such a brand."""
    if template and template_problem(template):
        template = None
    if brand_problem(brand):
        template = NO_BRAND_TEMPLATE
    values = {"code": code, "brand": brand, "minutes": str(LIFETIME // 60)}
    text = _PLACEHOLDER.sub(lambda m: values[m.group(1)], template or DEFAULT_TEMPLATE)
    if app_hash:
        text += "\n" + app_hash
    if web_domain:
        text += f"\n@{web_domain} #{code}"
    return text


def template_problem(template: str) -> Said | None:
    """Why a client's OTP template may not go out, or None: it is one line of at most
    TEMPLATE_MAX characters, holds `{code}` exactly once and only PLACEHOLDERS, and nothing a
    phishing message is made of (domain/phishing.py): no link, no WebOTP line of its own (a
    browser would hand the code to the site it names), no phone number to call."""
    if not template.strip():
        return _("the OTP template is empty: give an empty value to use the default")
    if len(template) > TEMPLATE_MAX:
        return _("the OTP template must be at most %(most)s characters (it has %(count)s)", most=TEMPLATE_MAX,
                 count=len(template))
    names = _PLACEHOLDER.findall(template)
    unknown = sorted({n for n in names if n not in PLACEHOLDERS})
    allowed = ", ".join(f"{{{n}}}" for n in PLACEHOLDERS)
    if unknown:
        return _("unknown placeholder %(name)s in the OTP template: it may hold %(allowed)s",
                 name="{" + unknown[0] + "}", allowed=allowed)
    if "{" in _PLACEHOLDER.sub("", template) or "}" in _PLACEHOLDER.sub("", template):
        return _("a brace in the OTP template that is not a placeholder: it may hold %(allowed)s", allowed=allowed)
    if names.count("code") != 1:
        return _("the OTP template must hold {code} exactly once (it holds it %(count)s times)",
                 count=names.count("code"))
    lured = phishing.problem(template, _("the OTP template"),
                             _PLACEHOLDER.sub(lambda m: "a" * len(m.group(0)), template))
    if lured:
        return lured
    if _WEBOTP_LINE.search(template):
        return _("the OTP template holds '@' followed by '#', the line that tells a browser which site may read "
                 "the code (WebOTP): Sandesh adds it from the client's web domain")
    phone = _PHONE.search(_PLACEHOLDER.sub(lambda m: " " * len(m.group(0)), template))
    if phone:
        return _("the OTP template holds a phone number (%(number)s): a code's message asks no one to call",
                 number=repr(phone.group(0)))
    return None


def check_template(template: str, brand: str, web_domain: str | None) -> str:
    """A client's OTP template as `template_problem` allows it, whose longest message with the
    client's brand, its web domain's line and an app hash is at most MAX_SEGMENTS."""
    problem = template_problem(template)
    if problem:
        raise InvalidInput(problem)
    check_fits(template, brand, web_domain)
    return template


def check_web_domain(host: str) -> str:
    """A client's web domain for the WebOTP line: a host name, kept in lower case."""
    host = host.strip().lower()
    if not _HOST.fullmatch(host):
        raise InvalidInput(_("%(typed)s is not a host name: letters, digits, hyphens and dots, such as "
                             "shop.example.com", typed=repr(host)))
    return host


def check_fits(template: str | None, brand: str, web_domain: str | None) -> None:
    """The longest message of these settings (with an app hash) is at most MAX_SEGMENTS."""
    longest = segment(code_text("000000", brand, template, web_domain, "A" * 11))
    if longest.segments > MAX_SEGMENTS:
        raise InvalidInput(_("the OTP message would take %(segments)s segments (%(encoding)s) with the brand, the "
                             "web domain and an app hash; at most %(most)s are allowed", segments=longest.segments,
                             encoding=longest.encoding, most=MAX_SEGMENTS))


def hash_code(key: bytes, otp: str, code: str) -> str:
    """A keyed hash bound to its OTP, so equal codes of two numbers hash differently."""
    return hmac.new(key, f"{otp}:{code}".encode(), hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Outcome:
    verified: bool
    reason: str | None


class Otp(Aggregate):
    @staticmethod
    def create_id(client_id: str, to: str, purpose: str) -> str:
        return otp_id(client_id, to, purpose)

    @event("Opened")
    def __init__(self, client_id: str, to: str, purpose: str):
        self.client_id = client_id
        self.to = to
        self.purpose = purpose
        self.state: str | None = None
        self.code_hash = ""
        self.message_id: str | None = None
        self.ip: str | None = None
        self.issued_at = 0.0
        self.expires_at = 0.0
        self.wrong_attempts = 0

    def cooldown_left(self, now: float) -> float:
        """Seconds until a new code may be sent (1 per 60 s, docs/api.md, "OTP")."""
        if self.state is None:
            return 0.0
        return max(0.0, self.issued_at + RESEND_COOLDOWN - now)

    def issue(self, code_hash: str, message_id: str, ip: str | None, at: float) -> None:
        """A new code; it replaces the active one (docs/design.md, "Decisions: OTP")."""
        self._issued(client_id=self.client_id, to=self.to, code_hash=code_hash, message_id=message_id, ip=ip, at=at)

    @event("Issued")
    def _issued(self, client_id: str, to: str, code_hash: str, message_id: str, ip: str | None, at: float) -> None:
        self.state = ACTIVE
        self.code_hash = code_hash
        self.message_id = message_id
        self.ip = ip
        self.issued_at = at
        self.expires_at = at + LIFETIME
        self.wrong_attempts = 0

    def verify(self, code_hash: str, now: float) -> Outcome:
        """The check of docs/api.md, "OTP" (verify results); records what it decided."""
        if self.state == LOCKED:
            return Outcome(False, TOO_MANY_ATTEMPTS)
        if self.state != ACTIVE:
            return Outcome(False, NO_ACTIVE_OTP)
        if now >= self.expires_at:
            self._expired(at=now)
            return Outcome(False, NO_ACTIVE_OTP)
        if same_secret(code_hash, self.code_hash):
            self._verified(client_id=self.client_id, at=now)
            return Outcome(True, None)
        if self.wrong_attempts + 1 >= MAX_WRONG_ATTEMPTS:
            self._locked(at=now)
        else:
            self._attempt_failed(at=now)
        return Outcome(False, INVALID_CODE)

    @event("AttemptFailed")
    def _attempt_failed(self, at: float) -> None:
        self.wrong_attempts += 1

    @event("Locked")
    def _locked(self, at: float) -> None:
        self.wrong_attempts += 1
        self.state = LOCKED

    @event("Verified")
    def _verified(self, client_id: str, at: float) -> None:
        self.state = USED

    @event("Expired")
    def _expired(self, at: float) -> None:
        self.state = EXPIRED
