"""API keys and webhook secrets (docs/api.md, "Authentication"; docs/design.md, "Decisions: webhooks")."""
from __future__ import annotations

import base64
import hashlib
import re
import secrets
import uuid

KEY_PREFIX = "sk_live_"
KEY_PATTERN = re.compile(r"^sk_live_[0-9a-f]{48}$")
SHOWN_PREFIX_LENGTH = len(KEY_PREFIX) + 4
SECRET_PREFIX = "whsec_"


def new_id(kind: str) -> str:
    return f"{kind}_{uuid.uuid4().hex}"


def new_api_key() -> str:
    return KEY_PREFIX + secrets.token_hex(24)


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def shown_prefix(key: str) -> str:
    """The short prefix an operator sees after creation: `sk_live_3f9a…`."""
    return key[:SHOWN_PREFIX_LENGTH]


def new_webhook_secret() -> str:
    return SECRET_PREFIX + base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode()
