"""What the use cases (domain/usecases/) need from storage besides the log, as
protocols; their PostgreSQL side lives in projections/ (idempotency.Keys, otp_limits.Windows,
optouts.OptOuts, ...) and is plugged in by the wiring (scripts/service/bootstrap.py), their
in-memory side in tests/memory.py."""
from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol

from .promo_hours import PromoHours
from .signin import Turn, TryKeys


@dataclass(frozen=True)
class Caller:
    """Who is calling, and the workspace state a send is decided on (read in one query at
    authentication, api/auth.py)."""
    client_id: str
    workspace_id: str
    brand: str
    workspace_status: str
    rates: dict[str, int]
    allowed_types: list[str]
    sms_enabled: bool
    has_route: bool
    promo_hours: PromoHours | None  # the workspace's promotional hours; None: off (domain/promo_hours.py)
    otp_template: str | None = None  # the client's OTP message (domain/otp.py); None: the default
    otp_web_domain: str | None = None
    compat_type: str = "transactional"  # the message type of its Sparrow and Aakash sends (api/compat.py)


@dataclass(frozen=True)
class Prior:
    """What an earlier request with the same Idempotency-Key left."""
    request_hash: str
    response: str  # the original 202 body, byte for byte


@dataclass
class Claim:
    running_elsewhere: bool  # a twin request holds the key right now
    prior: Prior | None


class IdempotencyKeys(Protocol):
    def claim(self, client_id: str, key: str, now: float) -> AbstractContextManager[Claim]:
        """Hold (client, key) while the request runs; says whether a twin holds it, and what a
        committed earlier request left."""

    def prior(self, client_id: str, key: str, now: float) -> Prior | None: ...


class OtpWindows(Protocol):
    """The rolling OTP windows (docs/api.md, "OTP") that are counted outside the log."""

    def hit_caller_ip(self, client_id: str, ip: str, now: float) -> int | None:
        """Count one OTP request from a calling IP: None when allowed, else seconds to wait."""

    def retry_after_number(self, number: str, now: float) -> int: ...

    def retry_after_ip(self, client_id: str, ip: str, now: float) -> int: ...


class Sealer(Protocol):
    """Seals small secrets at rest (webhook secrets, SIM PINs, TOTP secrets) under the server's
    data keys: the current one seals, every one opens."""

    def seal(self, plaintext: str) -> str: ...

    def open(self, sealed: str) -> str: ...

    def compromised(self, sealed: str | None) -> bool:
        """Whether `sealed` was sealed before a rotation for a leaked key, and is due for
        replacement (docs/operations.md, "A leaked key")."""
        ...


class Texts(Protocol):
    """Message and reply texts, encrypted under a key of their owner (a workspace, or a reply
    still gathering parts) that is kept outside the log, so destroying the key erases every
    copy of the text: the log, read models and backups keep only what no one can open
    (docs/design.md, "Erasing texts")."""

    def seal(self, owner: str, text: str) -> str:
        """The text as it goes into an event, under the owner's current key."""

    def key(self, owner: str) -> Any:
        """The owner's current key, for `seal_with` (it may read the database)."""

    def cached_key(self, owner: str) -> Any:
        """The owner's current key when a cache holds it fresh, else None (no database read)."""

    def seal_with(self, key: Any, text: str) -> str:
        """The text sealed under a key that `key` or `cached_key` gave."""

    def open(self, sealed: str | None) -> str | None:
        """The text, or None when its key was destroyed (a text from before texts were sealed
        is returned as it is)."""

    def shred(self, owner: str) -> int:
        """Destroy the owner's keys; returns how many.  The owner's next text gets a new key."""


class OptOuts(Protocol):
    """The numbers that opted out of a workspace's promotional messages (docs/api.md, "Opt-out"),
    read at every promotional send so an operator's change acts at once."""

    def opted_out(self, workspace_id: str, numbers: list[str]) -> set[str]:
        """Those of `numbers` (as domain/phone.py normalises them) that are opted out, in one read."""


class WebhookHistory(Protocol):
    """The webhook deliveries of the last 7 days (projections/webhooks.py), as an operator redelivers them."""

    def of_client(self, client_id: str, states: tuple[str, ...], since: float, until: float, now: float) -> list[str]:
        """The ids of the client's deliveries created from `since` to `until` and within 7 days
        of `now`, in the order they were created; those in `states` (an adapter may return more:
        the use case checks each delivery's state)."""


class PasswordHasher(Protocol):
    """Hashes dashboard passwords (argon2id; projections/storage/passwords.py)."""

    def hash(self, password: str) -> str: ...

    def verify(self, password_hash: str, password: str) -> bool:
        """True when the password matches; never raises for a wrong one."""


class Sessions(Protocol):
    """The dashboard's sessions, kept outside the log (their ids live in people's cookies)."""

    def end_all(self, person_id: str) -> int:
        """Every session of the person ends now; how many there were."""


class SignInTries(Protocol):
    """Tries to sign in to the dashboard (a password, or an authenticator code), kept outside the
    log on the service clock, counted per key (domain/signin.py, `TryKeys`)."""

    def take(self, keys: TryKeys, now: float,
             turn: Callable[[Mapping[str, list[float]], float | None], Turn]) -> tuple[str, Turn]:
        """Atomically for these keys: the times of the tries recorded under each (in the last
        hour) and the account's next free turn are given to `turn` (`turn_of`), which says when
        this try may be checked or refuses it (SignInRefused); a try taken is recorded under
        every key, and a paced one moves the account's next turn on by PACE.  Returns the try's
        id and its turn."""

    def succeeded(self, try_id: str) -> None:
        """The try was right: it is no failure."""

@dataclass(frozen=True)
class SendingState:
    """A workspace as a send from the dashboard is decided on (projections/registry.py, `SendingStates`)."""
    workspace_id: str
    status: str
    balance: int
    rates: dict[str, int]
    allowed_types: list[str]
    promo_hours: PromoHours | None
    sms_enabled: bool
    route_until: float | None  # a SIM is a route until then (its last healthy heartbeat and the route window)


class SendingStates(Protocol):
    def of(self, workspace_id: str) -> SendingState | None:
        """None: no such workspace."""


class Drafts(Protocol):
    """What a person previewed on the Send page, sealed, kept for an hour under the token of the
    form that sends it (projections/storage/drafts.py)."""

    def keep(self, token: str, workspace_id: str, person_id: str, sealed: str, now: float) -> None: ...

    def find(self, token: str, workspace_id: str, person_id: str, now: float) -> str | None:
        """The sealed draft of this person in this workspace, while it is kept."""


@dataclass(frozen=True)
class Contact:
    number: str
    fields: str  # its columns as JSON, sealed under the workspace's key of texts; "" for none


@dataclass(frozen=True)
class KeptList:
    name: str
    contacts: list[Contact]  # in the order they came


@dataclass(frozen=True)
class KeptTemplate:
    name: str
    text: str  # sealed under the workspace's key of texts


class ContactBook(Protocol):
    """A workspace's contact lists and templates as their read model keeps them (projections/contacts.py)."""

    def contact_list(self, workspace_id: str, list_id: str) -> KeptList | None: ...

    def template(self, workspace_id: str, template_id: str) -> KeptTemplate | None: ...


class CampaignProgress(Protocol):
    """How far a campaign's messages went, as the followed read model has seen (projections/campaigns.py)."""

    def gone(self, campaign_id: str) -> set[str]:
        """Its messages past scheduled and queued: a modem had them, or they ended."""
