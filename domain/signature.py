"""Webhook signatures (docs/api.md, "Headers" and "Verifying a signature").

`x-service-signature: t=<unix seconds>,v1=<hex>[,v1=<hex>]`: HMAC-SHA256 of `<t>.<raw body>`
keyed with the whole `whsec_…` secret as UTF-8 (docs/design.md, "Decisions: webhooks").  During a
secret rotation's grace period the new secret's `v1` comes first, the previous one's second.

`verify_signature` is the receiver's side.  It uses the standard library only, so a receiver
can import it (`from domain.signature import verify_signature`) or copy this file.
"""
from __future__ import annotations

import hashlib
import hmac
import time
from typing import Iterable

TOLERANCE = 300


class SignatureError(ValueError):
    """The request is not from the service, or too old: answer it 400 and ignore it."""


def signature(secret: str, timestamp: int, raw_body: bytes) -> str:
    return hmac.new(secret.encode(), b"%d." % timestamp + raw_body, hashlib.sha256).hexdigest()


def sign(secrets: Iterable[str], timestamp: int, raw_body: bytes) -> str:
    """The header value for `raw_body` signed at `timestamp` with each secret, in order."""
    return ",".join([f"t={timestamp}", *(f"v1={signature(s, timestamp, raw_body)}" for s in secrets)])


def verify_signature(secret_or_secrets: str | Iterable[str], header: str | None, raw_body: bytes | str,
                     tolerance: int = TOLERANCE, now: float | None = None) -> int:
    """Check `x-service-signature` against the raw, unparsed body; returns its `t`.

    Accepts when any `v1` matches any of the secrets (give the old and the new one while you
    rotate) and `t` is within `tolerance` seconds of `now` (default: this machine's clock).
    Raises SignatureError otherwise.
    """
    secrets = [secret_or_secrets] if isinstance(secret_or_secrets, str) else list(secret_or_secrets)
    body = raw_body.encode() if isinstance(raw_body, str) else raw_body
    timestamp, candidates = _parse(header)
    current = time.time() if now is None else now
    if abs(current - timestamp) > tolerance:
        raise SignatureError(f"timestamp {timestamp} is more than {tolerance} s from now")
    for secret in secrets:
        expected = signature(secret, timestamp, body)
        if any(hmac.compare_digest(expected.encode(), candidate.encode()) for candidate in candidates):
            return timestamp
    raise SignatureError("no v1 signature matches")


def _parse(header: str | None) -> tuple[int, list[str]]:
    if not header:
        raise SignatureError("no x-service-signature header")
    timestamp, candidates = None, []
    for item in header.split(","):
        name, _, value = item.strip().partition("=")
        if name == "t" and value.isdigit():
            timestamp = int(value)
        elif name == "v1" and value:
            candidates.append(value)
    if timestamp is None or not candidates:
        raise SignatureError("x-service-signature must hold t=<unix seconds> and at least one v1=<hex>")
    return timestamp, candidates
