"""People who sign in to the dashboard (docs/dashboard.md).

A person is kept apart from API clients: an email, a name, and either a workspace with a role
(owner, developer, viewer) or a place in the operator team.  They set their password through a
one-time link: only the SHA-256 of its token is kept, with its expiry (24 h on the service clock).
The password is kept as an argon2id hash (the hasher is a port, domain/ports.py).

The aggregate's id is derived from the normalised email, so one email is one person: a second
`user add` of it finds the first instead of making a twin.
"""
from __future__ import annotations

import hashlib
import re
import secrets
from typing import Any

from eventsourcing.domain import event

from .aggregate import Aggregate
from .credentials import same_secret, sha256_hex
from .errors import InvalidInput, InvalidTransition
from .said import Said, _

OWNER, DEVELOPER, VIEWER, OPERATOR = "owner", "developer", "viewer", "operator"
SENDER = "sender"  # sends from the dashboard and sees what was sent, nothing else (docs/dashboard.md, "Sending")
WORKSPACE_ROLES = (OWNER, DEVELOPER, SENDER, VIEWER)
# The sections of a workspace's dashboard a sender sees; everyone else of the workspace sees them all.
SENDER_SECTIONS = ("send", "campaigns", "contacts", "templates", "messages")
LINK_HOURS = 24  # a set-password link is valid this long
MIN_PASSWORD, MAX_PASSWORD = 12, 1024  # characters; the upper bound keeps hashing cheap to refuse
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


def normalise_email(text: str) -> str:
    """The email as it is kept and compared: trimmed, lower case; InvalidInput when it is not one."""
    email = text.strip().lower()
    if len(email) > 254 or not _EMAIL.match(email):
        raise InvalidInput(_("%(typed)s is not an email address", typed=repr(text)))
    return email


def person_id(email: str) -> str:
    """The aggregate of one (normalised) email."""
    return "person_" + hashlib.sha256(email.encode()).hexdigest()[:32]


def actor_of(email: str) -> str:
    """How a person's changes read in the audit trail (docs/dashboard.md, "People")."""
    return f"user:{email}"


def check_name(name: str) -> str:
    if not name.strip() or len(name.strip()) > 200:
        raise InvalidInput(_("a name must be 1 to 200 characters"))
    return name.strip()


def check_role(role: str) -> str:
    if role not in WORKSPACE_ROLES:
        raise InvalidInput(_("role must be one of %(roles)s, not %(typed)s", roles=", ".join(WORKSPACE_ROLES),
                             typed=repr(role)))
    return role


def password_problem(password: str) -> Said | None:
    """Why a new password is refused, in words fit to show beside the field; None when it is fine."""
    if len(password) < MIN_PASSWORD:
        return _("Use at least %(count)s characters.", count=MIN_PASSWORD)
    if len(password) > MAX_PASSWORD:
        return _("Use at most %(count)s characters.", count=MAX_PASSWORD)
    return None


def new_link_token(person: str) -> str:
    """A set-password token: the person's id (to find them in the log) and 32 random bytes."""
    return f"{person}.{secrets.token_urlsafe(32)}"


def person_of_token(token: str) -> str:
    return token.partition(".")[0]


# The languages the dashboard is written in (api/dashboard/i18n.py); the release whose finalized
# log every process reads a person's choice of one in.
LANGUAGES = ("en", "ne")
LANGUAGE_FROM = "0.4.0"


class Person(Aggregate):
    language: str | None = None  # the dashboard's language they chose (None: their browser's)

    @staticmethod
    def create_id(email: str, **_: object) -> str:
        return person_id(email)

    # Every event carries the email and the workspace, for the audit trail and the read model.
    @event("Added")
    def __init__(self, email: str, name: str, workspace_id: str | None, role: str, token_hash: str,
                 token_expires: float, actor: str, at: float):
        self.email, self.name = email, name
        self.workspace_id, self.role = workspace_id, role
        self.token_hash, self.token_expires = token_hash, token_expires
        self.password_hash: str | None = None
        self.disabled = False
        self.removed = False
        self.totp_sealed: str | None = None  # the authenticator app's secret, sealed (domain/totp.py)
        self.totp_step = 0  # the last step a code was accepted for: no code is accepted twice

    @property
    def operator(self) -> bool:
        return self.role == OPERATOR

    @property
    def may_sign_in(self) -> bool:
        return self.password_hash is not None and not self.disabled and not self.removed

    def issue_link(self, token: str, actor: str, at: float) -> None:
        """A new set-password link (`sandesh user reset`); the previous one stops at once."""
        self._link_issued(email=self.email, workspace_id=self.workspace_id, token_hash=sha256_hex(token),
                          token_expires=at + LINK_HOURS * 3600, actor=actor, at=at)

    def link_valid(self, token: str, now: float) -> bool:
        return (self.token_hash is not None and same_secret(sha256_hex(token), self.token_hash)
                and now < self.token_expires and not self.disabled and not self.removed)

    def set_password(self, token: str, password_hash: str, at: float) -> None:
        """Through a valid link, once: the link is spent."""
        if not self.link_valid(token, at):
            raise InvalidTransition(_("this link is not valid: it was used, replaced or is older than 24 hours"))
        self._password_set(email=self.email, workspace_id=self.workspace_id, password_hash=password_hash,
                           actor=actor_of(self.email), at=at)

    class LanguageChosen(Aggregate.Event):
        """The person chose the dashboard's language: it holds in every browser they sign in on."""
        written_from = LANGUAGE_FROM

        language: str
        at: float

    def choose_language(self, language: str, at: float) -> None:
        if language not in LANGUAGES:
            raise InvalidInput(f"language must be one of {', '.join(LANGUAGES)}")
        if language != self.language:
            self._language_chosen(language=language, at=at)

    @event(LanguageChosen)
    def _language_chosen(self, language: str, at: float) -> None:
        self.language = language

    def disable(self, actor: str, at: float) -> None:
        if self.disabled:
            raise InvalidTransition(f"{self.email} is already disabled")
        self._disabled(email=self.email, workspace_id=self.workspace_id, actor=actor, at=at)

    def enable(self, actor: str, at: float) -> None:
        if not self.disabled:
            raise InvalidTransition(f"{self.email} is not disabled")
        self._enabled(email=self.email, workspace_id=self.workspace_id, actor=actor, at=at)

    def change_role(self, role: str, actor: str, at: float) -> None:
        """Another role in the same workspace (an owner's People page)."""
        role = check_role(role)
        if self.operator:
            raise InvalidTransition(_("%(email)s is of the operator team, which has no workspace role",
                                      email=self.email))
        if role == self.role:  # the role said in the page's language: the catalog has its name
            raise InvalidTransition(_("%(email)s is %(role)s already", email=self.email, role=Said(role)))
        self._role_changed(email=self.email, workspace_id=self.workspace_id, role=role, actor=actor, at=at)

    def remove(self, actor: str, at: float) -> None:
        """Out of the workspace: no sign-in, no link; the email may be added again (`rejoin`)."""
        if self.removed:
            raise InvalidTransition(_("%(email)s was removed already", email=self.email))
        self._removed(email=self.email, workspace_id=self.workspace_id, actor=actor, at=at)

    def rejoin(self, name: str, workspace_id: str | None, role: str, token: str, actor: str, at: float) -> None:
        """A removed person added again: a new start, with a new link, no password and no
        authenticator app."""
        if not self.removed:
            raise InvalidTransition(f"{self.email} is a person already")
        self._rejoined(email=self.email, name=name, workspace_id=workspace_id, role=role,
                       token_hash=sha256_hex(token), token_expires=at + LINK_HOURS * 3600, actor=actor, at=at,
                       authenticator_reset=True)

    def enroll_totp(self, secret_sealed: str, step: int, at: float) -> None:
        """An authenticator app, proven by a code of its secret (at `step`)."""
        self._totp_enrolled(email=self.email, workspace_id=self.workspace_id, secret_sealed=secret_sealed, step=step,
                            actor=actor_of(self.email), at=at)

    def use_totp(self, step: int, at: float) -> None:
        """A code accepted at sign-in; an earlier or equal step is never accepted again."""
        if step <= self.totp_step:
            raise InvalidTransition(_("this code was used already"))
        self._totp_used(step=step, actor=actor_of(self.email), at=at)

    @event("TotpEnrolled")
    def _totp_enrolled(self, email: str, workspace_id: str | None, secret_sealed: str, step: int, actor: str,
                       at: float) -> None:
        self.totp_sealed, self.totp_step = secret_sealed, step

    @event("TotpUsed")
    def _totp_used(self, step: int, actor: str, at: float) -> None:
        self.totp_step = step

    @event("RoleChanged")
    def _role_changed(self, email: str, workspace_id: str | None, role: str, actor: str, at: float) -> None:
        self.role = role

    @event("Removed")
    def _removed(self, email: str, workspace_id: str | None, actor: str, at: float) -> None:
        self.removed = True

    class Rejoined(Aggregate.Event):
        """Version 2 says whether the person's authenticator app was reset with the rest (a new
        start: a new link, no password, no app).  Version 1 (0.2.0) kept the app: upcast, it
        says so.  Written once the upgrade is finalized at 0.3.0, as 0.2.0 would read the reset
        as nothing and still ask for the old app's codes (docs/design.md, "Event versions")."""
        class_version = 2
        written_from = "0.3.0"

        email: str
        name: str
        workspace_id: str | None
        role: str
        token_hash: str
        token_expires: float
        actor: str
        at: float
        authenticator_reset: bool

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            state["authenticator_reset"] = False

        @staticmethod
        def downcast_v2_v1(state: dict[str, Any]) -> None:
            del state["authenticator_reset"]

    @event(Rejoined)
    def _rejoined(self, email: str, name: str, workspace_id: str | None, role: str, token_hash: str,
                  token_expires: float, actor: str, at: float, authenticator_reset: bool) -> None:
        self.name, self.workspace_id, self.role = name, workspace_id, role
        self.token_hash, self.token_expires = token_hash, token_expires
        self.password_hash, self.disabled, self.removed = None, False, False
        if authenticator_reset:
            self.totp_sealed = None

    class TotpResealed(Aggregate.Event):
        """The authenticator app's secret, the same one, sealed again by 0.3.0's key rotation.
        Read in logs of 0.3.0; nothing writes it now (docs/design.md, "Keys")."""
        written_from = "0.3.0"

        totp_sealed: str
        at: float

    @event(TotpResealed)
    def _totp_resealed(self, totp_sealed: str, at: float) -> None:
        self.totp_sealed = totp_sealed

    @event("LinkIssued")
    def _link_issued(self, email: str, workspace_id: str | None, token_hash: str, token_expires: float, actor: str,
                     at: float) -> None:
        self.token_hash, self.token_expires = token_hash, token_expires

    @event("PasswordSet")
    def _password_set(self, email: str, workspace_id: str | None, password_hash: str, actor: str, at: float) -> None:
        self.password_hash = password_hash
        self.token_hash = None

    @event("Disabled")
    def _disabled(self, email: str, workspace_id: str | None, actor: str, at: float) -> None:
        self.disabled = True

    @event("Enabled")
    def _enabled(self, email: str, workspace_id: str | None, actor: str, at: float) -> None:
        self.disabled = False


def may_manage_people(role: str) -> bool:
    """Owners (and the operator team) invite a workspace's people, change their roles, remove them."""
    return role in (OWNER, OPERATOR)


def may_send(role: str) -> bool:
    """Owners, developers and senders send from the dashboard; viewers (and the operator team) do not."""
    return role in (OWNER, DEVELOPER, SENDER)


def sees(role: str, section: str) -> bool:
    """Whether a person of this role sees this section of their workspace's dashboard."""
    return role != SENDER or section in SENDER_SECTIONS


def may_manage_clients(role: str) -> bool:
    """Owners and developers manage clients, keys, webhooks and opt-outs; viewers only read."""
    return role in (OWNER, DEVELOPER, OPERATOR)
