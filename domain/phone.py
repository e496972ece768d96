"""Nepal mobile numbers as the API accepts them (docs/api.md, "Numbers")."""
from __future__ import annotations

import re

_NEPAL_MOBILE = re.compile(r"\+?(977(?:96|97|98)[0-9]{8})")  # [0-9]: Python's \d also takes other scripts' digits


def normalise(to: str) -> str | None:
    """`9779812345678` for an accepted number (optional leading +), else None."""
    match = _NEPAL_MOBILE.fullmatch(to)
    return match.group(1) if match else None


def with_plus(number: str) -> str:
    """Inbound `from` carries the plus (docs/api.md, "Numbers")."""
    return number if number.startswith("+") else "+" + number
