"""Authenticator-app codes for the dashboard's second factor: TOTP (RFC 6238) over HOTP
(RFC 4226) with SHA-1, 6 digits and 30-second steps, the parameters every authenticator app
uses.  Time is a parameter (the service clock); a code is accepted one step early or late, and
never twice: the step it matched is returned, to be recorded, and no later code may use it."""
from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import struct
from urllib.parse import quote

from .credentials import same_secret

STEP, DIGITS, DRIFT = 30, 6, 1
ISSUER = "Sandesh"


def new_secret(random: bytes | None = None) -> str:
    """A secret of 20 bytes (RFC 4226's recommended length), as authenticator apps take it: base32."""
    return base64.b32encode(random or secrets.token_bytes(20)).decode().rstrip("=")


def hotp(secret: str, counter: int) -> str:
    key = base64.b32decode(secret + "=" * (-len(secret) % 8))
    digest = hmac.new(key, struct.pack(">Q", counter), hashlib.sha1).digest()
    offset = digest[-1] & 0x0F
    number = struct.unpack(">I", digest[offset:offset + 4])[0] & 0x7FFFFFFF
    return str(number % 10 ** DIGITS).zfill(DIGITS)


def step_of(now: float) -> int:
    return int(now // STEP)


def matching_step(secret: str, code: str, now: float, after: int) -> int | None:
    """The step whose code `code` is, within one step of now and later than `after` (the step
    last used); None when there is none."""
    code = code.strip().replace(" ", "")
    if len(code) != DIGITS or not (code.isascii() and code.isdigit()):
        return None
    for step in range(step_of(now) - DRIFT, step_of(now) + DRIFT + 1):
        if step > after and same_secret(code, hotp(secret, step)):
            return step
    return None


def provisioning_uri(secret: str, email: str) -> str:
    """What the QR code holds (the otpauth URI of Google Authenticator's key format)."""
    label = quote(f"{ISSUER}:{email}")
    return f"otpauth://totp/{label}?secret={secret}&issuer={ISSUER}&algorithm=SHA1&digits={DIGITS}&period={STEP}"
