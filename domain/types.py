"""Message types, rates and allowed types (docs/api.md, "Message types"; docs/design.md, "Decisions: money")."""
from __future__ import annotations

from decimal import Decimal, InvalidOperation

from .errors import InvalidInput
from .said import _

MESSAGE_TYPES = ("transactional", "otp", "promotional")
DEFAULT_RATE_PAISA = 100  # NPR 1.00 per segment until the operator sets rates


def parse_types(text: str) -> list[str]:
    types = [t.strip() for t in text.split(",") if t.strip()]
    if not types:
        raise InvalidInput("at least one message type is needed")
    for t in types:
        if t not in MESSAGE_TYPES:
            raise InvalidInput(f"unknown message type {t!r}; expected one of {', '.join(MESSAGE_TYPES)}")
    return [t for t in MESSAGE_TYPES if t in types]


def parse_rates(pairs: list[str]) -> dict[str, int]:
    rates: dict[str, int] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or name not in MESSAGE_TYPES:
            raise InvalidInput(f"rate {pair!r} must be TYPE=PAISA with TYPE one of {', '.join(MESSAGE_TYPES)}")
        if not value.isdigit():
            raise InvalidInput(f"rate {pair!r}: PAISA must be a whole number of paisa, 0 or more")
        rates[name] = int(value)
    return rates


def default_rates() -> dict[str, int]:
    return {t: DEFAULT_RATE_PAISA for t in MESSAGE_TYPES}


def parse_npr(text: str) -> int:
    """An amount in NPR with at most two decimals ("10", "12.50"), as paisa."""
    try:
        value = Decimal(text.strip())
    except InvalidOperation:
        value = Decimal(-1)
    # adjusted(): the power of ten of its first digit; past 10**12 NPR no balance goes, and
    # quantize would raise on a value with more digits than its context holds (1e30)
    if not value.is_finite() or value < 0 or value.adjusted() > 12 or value != value.quantize(Decimal("0.01")):
        raise InvalidInput(_("%(typed)s is not an amount in NPR (e.g. 10 or 12.50)", typed=repr(text)))
    return int(value * 100)
