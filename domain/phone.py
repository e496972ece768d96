"""Nepal mobile numbers as the API accepts them (decisions §1 Numbers)."""
from __future__ import annotations

import re

_NEPAL_MOBILE = re.compile(r"\+?(977(?:96|97|98)\d{8})")


def normalise(to: str) -> str | None:
    """`9779812345678` for an accepted number (optional leading +), else None."""
    match = _NEPAL_MOBILE.fullmatch(to)
    return match.group(1) if match else None


def with_plus(number: str) -> str:
    """Inbound `from` carries the plus (interface §message.inbound)."""
    return number if number.startswith("+") else "+" + number
