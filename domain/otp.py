"""One-time passwords (docs/api.md, "OTP"; docs/design.md, "Decisions: OTP").

One aggregate per client + number + purpose holds the current code as a keyed hash, never in
clear.  A new code replaces the active one.  Concurrent verifies of one code race on the
aggregate's version, so exactly one of them can record `Verified`.
"""
from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

from eventsourcing.domain import event

from .aggregate import Aggregate
from .credentials import same_secret

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


def code_text(code: str, brand: str) -> str:
    return f"{code} is your {brand} verification code. It expires in 5 minutes."


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
