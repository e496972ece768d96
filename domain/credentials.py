"""API keys and webhook secrets (docs/api.md, "Authentication"; docs/design.md, "Decisions: webhooks")."""
from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import secrets
import uuid
from typing import Callable

KEY_PREFIX = "sk_live_"
KEY_PATTERN = re.compile(r"^sk_live_[0-9a-f]{48}$")
SHOWN_PREFIX_LENGTH = len(KEY_PREFIX) + 4
SECRET_PREFIX = "whsec_"


# Where new ids' random bytes come from.  os.urandom lets go of the GIL at every call, which costs
# a thread switch per id when many request threads wait for it; the wiring gives OpenSSL's
# generator instead (scripts/service/bootstrap.py; docs/performance.md, "Random bytes without a thread switch").
_random_bytes: Callable[[int], bytes] = os.urandom


def use_random_bytes(source: Callable[[int], bytes]) -> None:
    """Take new ids' randomness from `source`, a cryptographically secure generator."""
    global _random_bytes
    _random_bytes = source


def new_id(kind: str) -> str:
    return f"{kind}_{uuid.UUID(bytes=_random_bytes(16), version=4).hex}"


def new_api_key() -> str:
    return KEY_PREFIX + secrets.token_hex(24)


def same_secret(given: str, expected: str) -> bool:
    """Constant-time equality of two texts, compared as their UTF-8 bytes: `hmac.compare_digest`
    raises on a str with a non-ASCII character, which anyone can type into a form field."""
    return hmac.compare_digest(given.encode(), expected.encode())


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def shown_prefix(key: str) -> str:
    """The short prefix an operator sees after creation: `sk_live_3f9a…`."""
    return key[:SHOWN_PREFIX_LENGTH]


def new_webhook_secret() -> str:
    return SECRET_PREFIX + base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode()
