"""API client: key, brand, webhook URL and secret, request rate, enabled (docs/api.md, "Workspaces and API clients"),
and what the drop-in for Sparrow and Aakash needs (docs/api.md, "Moving from Sparrow or Aakash"):
the message type of its compat sends, its keywords, reply URL and default reply.

Its brand is the operator team's to set, like a registered sender ID: a workspace asks for one
(BrandRequested), and the team sets it (Updated, which settles the request) or dismisses the
request (docs/dashboard.md, "API clients").

Only the key's SHA-256 and short prefix are kept. The webhook secret is kept sealed
(encrypted with the server key) because it must sign, plus its SHA-256 (docs/design.md, "Decisions: webhooks").
"""
from __future__ import annotations

import re
import unicodedata
from urllib.parse import urlsplit

from eventsourcing.domain import event

from . import phishing
from .aggregate import Aggregate, Switched

from .credentials import new_id
from .errors import InvalidInput, InvalidTransition
from .said import Said, _
from .segments import SINGLE_PART_CAPACITY, segment
from .types import MESSAGE_TYPES

DEFAULT_RATE_LIMIT = 20
MAX_GRACE_HOURS = 168
DEFAULT_GRACE_HOURS = 24
BRAND_MAX = 64
# The release whose finalized log every process reads a brand request in (domain/events.py).
BRAND_REQUESTS_FROM = "0.4.0"
# The release whose finalized log every process reads a client's drop-in settings (compat_type,
# keywords, reply_url, default_reply) in Updated, and a keyword's reply in (domain/inbound.py).
SERVICES_FROM = "0.4.0"
KEYWORD = re.compile(r"[A-Z0-9]{2,20}")
# Words a reply already means something by (domain/optout.py), never a client's keyword.
RESERVED_WORDS = frozenset({"STOP", "UNSUBSCRIBE", "START", "HELP", "BAND", "RADDA", "SURU", "SAHAYOG", "INFO"})


def check_webhook_url(url: str | None, reply: bool = False) -> str | None:
    """A webhook URL, or a keyword's reply URL (`reply`: it may be http://, which the guard allows
    only where private addresses are, workers/webhook_guard.py); None for none."""
    if url is None or url == "":
        return None
    parts = urlsplit(url)
    if parts.scheme not in (("https", "http") if reply else ("https",)) or not parts.hostname:
        raise InvalidInput(_("reply URL must begin with https:// or http:// and name a host") if reply
                           else _("webhook URL must begin with https:// and name a host"))
    return url


def check_rate_limit(rate: int) -> int:
    if rate < 1:
        raise InvalidInput("request rate must be a whole number of requests per second, at least 1")
    return rate


def brand_problem(brand: str) -> Said | None:
    """Why a brand may not go out in a code's message (domain/phishing.py), or None."""
    if not 1 <= len(brand) <= BRAND_MAX:
        return _("brand name must be 1 to %(most)s characters", most=BRAND_MAX)
    return phishing.problem(brand, _("the brand"))


def check_brand(brand: str) -> str:
    brand = brand.strip()
    problem = brand_problem(brand)
    if problem:
        raise InvalidInput(problem)
    return brand


def check_keyword(word: str) -> str:
    """A keyword as it is kept: one word of capitals and digits."""
    kept = word.strip().upper()
    if not KEYWORD.fullmatch(kept):
        raise InvalidInput(_("keyword %(typed)s must be one word of 2 to 20 letters A-Z or digits", typed=repr(word)))
    if kept in RESERVED_WORDS:
        raise InvalidInput(_("%(word)s is a word Sandesh answers itself (opt-out and help words); choose another "
                             "keyword", word=kept))
    return kept


def first_word(text: str) -> str | None:
    """The first word of an SMS, as keywords are kept (capitals), or None."""
    words = unicodedata.normalize("NFC", text).split(None, 1)
    return words[0].upper() if words else None


def check_compat_type(message_type: str) -> str:
    if message_type not in MESSAGE_TYPES:
        raise InvalidInput(f"compat type must be one of {', '.join(MESSAGE_TYPES)}")
    return message_type


def one_sms_problem(text: str) -> Said | None:
    """Why `text` is not one SMS that a keyword's reply can be (None: it is)."""
    if not text.strip():
        return _("it is empty")
    parts = segment(text)
    if parts.segments > 1:
        return _("it is longer than one SMS (%(most)s characters in %(encoding)s)",
                 most=SINGLE_PART_CAPACITY[parts.encoding], encoding=parts.encoding)
    return None


def check_default_reply(text: str) -> str | None:
    if text == "":
        return None
    problem = one_sms_problem(text)
    if problem:
        raise InvalidInput(_("default reply: %(problem)s", problem=problem))
    return text


class Client(Switched, Aggregate):
    noun = "client"
    # The OTP message's settings (domain/otp.py), set by Updated; None: the default.
    otp_template: str | None = None
    otp_web_domain: str | None = None
    brand_requested: str | None = None  # the brand the workspace asked for, until the team decides
    # The drop-in's settings, set by Updated and KeywordsChanged (docs/api.md, "Moving from Sparrow or Aakash").
    compat_type = "transactional"
    keywords: tuple[str, ...] = ()
    reply_url: str | None = None
    default_reply: str | None = None

    @staticmethod
    def create_id(**_: object) -> str:
        return new_id("cl")

    @event("Created")
    def __init__(
        self, workspace_id: str, brand: str, webhook_url: str | None, rate_limit: int,
        key_hash: str, key_prefix: str, secret_sealed: str, secret_hash: str, actor: str, at: float,
    ):
        self.workspace_id = workspace_id
        self.brand = brand
        self.webhook_url = webhook_url
        self.rate_limit = rate_limit
        self.key_hash = key_hash
        self.key_prefix = key_prefix
        self.secret_sealed = secret_sealed
        self.secret_hash = secret_hash
        self.previous_secret_sealed: str | None = None
        self.previous_secret_until: float | None = None
        self.enabled = True

    def rotate_secret(self, sealed: str, secret_hash: str, grace_hours: float, actor: str, at: float) -> None:
        if not 0 <= grace_hours <= MAX_GRACE_HOURS:
            raise InvalidInput(_("grace period must be 0 to %(most)s hours", most=MAX_GRACE_HOURS))
        self._secret_rotated(
            secret_sealed=sealed, secret_hash=secret_hash, grace_hours=grace_hours,
            previous_until=at + grace_hours * 3600, actor=actor, at=at,
        )

    def update(self, changes: dict[str, object], actor: str, at: float) -> None:
        if not changes:
            raise InvalidInput("nothing to update: give --brand, --webhook-url, --rate-limit, --otp-template, "
                               "--otp-web-domain, --compat-type, --keyword, --no-keyword, --reply-url or "
                               "--default-reply")
        self._updated(changes=changes, actor=actor, at=at)

    class BrandRequested(Aggregate.Event):
        """A person of the workspace asks the operator team for this brand."""
        written_from = BRAND_REQUESTS_FROM

        brand: str
        actor: str
        at: float

    def request_brand(self, brand: str, actor: str, at: float) -> None:
        """Ask for `brand` (a request asked before is replaced)."""
        if brand == self.brand:
            raise InvalidInput(_("%(brand)s is the client's brand already", brand=repr(brand)))
        self._brand_requested(brand=brand, actor=actor, at=at)

    @event(BrandRequested)
    def _brand_requested(self, brand: str, actor: str, at: float) -> None:
        self.brand_requested = brand

    class BrandRequestDismissed(Aggregate.Event):
        """The operator team turns the request down; the brand stays as it is."""
        written_from = BRAND_REQUESTS_FROM

        brand: str
        actor: str
        at: float

    def dismiss_brand_request(self, brand: str, actor: str, at: float) -> None:
        """Dismiss the request for `brand`, the one the operator saw."""
        self._check_requested(brand)
        self._brand_request_dismissed(brand=brand, actor=actor, at=at)

    @event(BrandRequestDismissed)
    def _brand_request_dismissed(self, brand: str, actor: str, at: float) -> None:
        self.brand_requested = None

    def grant_brand(self, brand: str, actor: str, at: float) -> None:
        """Set the brand asked for, `brand`, the one the operator saw."""
        self._check_requested(brand)
        self._updated(changes={"brand": brand}, actor=actor, at=at)

    def _check_requested(self, brand: str) -> None:
        if self.brand_requested is None:
            raise InvalidTransition("no brand is asked for this client")
        if brand != self.brand_requested:
            raise InvalidTransition(f"the brand asked for is now {self.brand_requested!r}, not {brand!r}")

    class KeywordsChanged(Aggregate.Event):
        """The operator team gives the client keywords, or takes them back: an SMS whose first
        word is one of them is the client's (docs/api.md, "Keyword services")."""
        written_from = SERVICES_FROM

        keywords: list[str]  # all of them, after the change
        added: list[str]
        removed: list[str]
        actor: str
        at: float

    def change_keywords(self, add: list[str], remove: list[str], actor: str, at: float) -> None:
        added = [w for w in dict.fromkeys(map(check_keyword, add)) if w not in self.keywords]
        removed = [w for w in dict.fromkeys(map(check_keyword, remove)) if w in self.keywords and w not in added]
        unknown = [w for w in map(check_keyword, remove) if w not in self.keywords]
        if unknown:
            raise InvalidInput(_("%(words)s: not a keyword of this client", words=", ".join(unknown)))
        if not added and not removed:
            raise InvalidInput(_("the client has these keywords already"))
        keywords = [w for w in self.keywords if w not in removed] + added
        self._keywords_changed(keywords=keywords, added=added, removed=removed, actor=actor, at=at)

    @event(KeywordsChanged)
    def _keywords_changed(self, keywords: list[str], added: list[str], removed: list[str], actor: str,
                          at: float) -> None:
        self.keywords = tuple(keywords)

    @event("KeyRotated")
    def rotate_key(self, key_hash: str, key_prefix: str, actor: str, at: float) -> None:
        self.key_hash = key_hash
        self.key_prefix = key_prefix

    @event("SecretRotated")
    def _secret_rotated(
        self, secret_sealed: str, secret_hash: str, grace_hours: float, previous_until: float, actor: str, at: float
    ) -> None:
        self.previous_secret_sealed = self.secret_sealed if grace_hours > 0 else None
        self.previous_secret_until = previous_until if grace_hours > 0 else None
        self.secret_sealed = secret_sealed
        self.secret_hash = secret_hash

    class SecretsResealed(Aggregate.Event):
        """The webhook secrets, the same ones, sealed again under the key that wrote then: 0.3.0's
        key rotation, which sealed every secret again.  Read in logs of 0.3.0; a rotation of
        data keys seals nothing again (docs/design.md, "Keys"), so nothing writes it now."""
        written_from = "0.3.0"

        secret_sealed: str
        previous_secret_sealed: str | None
        at: float

    @event(SecretsResealed)
    def _secrets_resealed(self, secret_sealed: str, previous_secret_sealed: str | None, at: float) -> None:
        self.secret_sealed, self.previous_secret_sealed = secret_sealed, previous_secret_sealed

    @event("Disabled")
    def _disabled(self, actor: str, at: float) -> None:
        self.enabled = False

    @event("Enabled")
    def _enabled(self, actor: str, at: float) -> None:
        self.enabled = True

    @event("Updated")
    def _updated(self, changes: dict[str, object], actor: str, at: float) -> None:
        for name, value in changes.items():
            setattr(self, name, value)
        if "brand" in changes:  # the operator team set it: a request waiting is settled
            self.brand_requested = None
