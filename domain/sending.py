"""The rules of POST /v1/sms/send that do not need storage (docs/api.md, "POST /v1/sms/send";
docs/design.md, "Decisions: send"): validation of the body and the refusals after idempotency, in order."""
from __future__ import annotations

import hashlib
import ipaddress
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from . import phone
from .otp import APP_HASH, PURPOSE_MAX
from .segments import MAX_SEGMENTS, segment
from .types import MESSAGE_TYPES


@dataclass(frozen=True)
class Problem:
    path: list[str]
    message: str
    code: str


@dataclass(frozen=True)
class ItemRefused:
    """A batch item judged alone and refused: `code` is the error code a single send would get
    (invalid_request with its `problems`, forbidden, recipient_opted_out, ...)."""
    code: str
    problems: tuple[Problem, ...] = ()


@dataclass(frozen=True)
class SendRequest:
    to: str
    text: str
    message_type: str
    segments: int
    encoding: str
    valid_for: int | None = None  # seconds after acceptance (or after send_at); not handed to a modem later
    send_at: float | None = None  # scheduled: released to the queue at this time (docs/api.md, "Scheduled sends")


VALID_FOR_MIN, VALID_FOR_MAX = 60, 86_400
SCHEDULE_AHEAD_MAX = 30 * 86_400  # sendAt at most 30 days ahead


def _send_at(send_at: Any, now: float | None) -> tuple[float | None, list[Problem]]:
    """`sendAt`: ISO 8601 with an offset (`Z` or `+05:45`), not in the past (service clock) and
    at most 30 days ahead."""
    if send_at is None:
        return None, []
    at, problems = instant("sendAt", send_at)
    if at is None:
        return None, problems
    if now is not None and at < now:
        return None, [Problem(["sendAt"], "sendAt is in the past", "in_the_past")]
    if now is not None and at > now + SCHEDULE_AHEAD_MAX:
        return None, [Problem(["sendAt"], f"sendAt must be at most {SCHEDULE_AHEAD_MAX // 86_400} days ahead",
                              "too_far_ahead")]
    return at, []


def instant(name: str, value: Any) -> tuple[float | None, list[Problem]]:
    """A date and time the API is given (`sendAt`, a list's `since` and `until`): ISO 8601 with
    an offset (`Z` or `+05:45`), as a POSIX time, or the problem with it."""
    if not isinstance(value, str):
        return None, [Problem([name], f"{name} must be a string: ISO 8601 with an offset", "invalid_type")]
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        when = None
    if when is None or "T" not in value.upper():
        return None, [Problem([name], f"{name} must be an ISO 8601 date and time with an offset, "
                                      "e.g. 2026-12-01T09:00:00+05:45", "invalid_datetime")]
    if when.tzinfo is None:
        return None, [Problem([name], f"{name} must carry an offset (Z or +05:45): a time without one is "
                                      "ambiguous", "missing_offset")]
    return when.timestamp(), []


def _valid_for_problems(valid_for: Any) -> list[Problem]:
    """`validFor`: whole seconds from 60 to 86,400 (docs/api.md, "Validity")."""
    if valid_for is None:
        return []
    if isinstance(valid_for, bool) or not isinstance(valid_for, (int, float)) or valid_for != int(valid_for):
        return [Problem(["validFor"], "validFor must be a whole number of seconds", "invalid_type")]
    if not VALID_FOR_MIN <= valid_for <= VALID_FOR_MAX:
        return [Problem(["validFor"], f"validFor must be from {VALID_FOR_MIN} to {VALID_FOR_MAX:,} seconds",
                        "out_of_range")]
    return []


def _text_problems(text: Any) -> list[Problem]:
    if text is None:
        return [Problem(["text"], "text is required", "required")]
    if not isinstance(text, str):
        return [Problem(["text"], "text must be a string", "invalid_type")]
    if not text.strip():
        return [Problem(["text"], "text must not be empty", "empty")]
    if "\x00" in text:
        return [Problem(["text"], "text must not contain NUL characters", "invalid_characters")]
    return []


def _to_problems(to: Any) -> list[Problem]:
    if to is None:
        return [Problem(["to"], "to is required", "required")]
    if not isinstance(to, str):
        return [Problem(["to"], "to must be a string", "invalid_type")]
    if phone.normalise(to) is None:
        return [Problem(["to"], "to must be a Nepal mobile number: 977 and 10 digits starting 96, 97 or 98, "
                                "e.g. 9779812345678", "invalid_phone_number")]
    return []


SEND_FIELDS = ("to", "text", "messageType", "validFor", "sendAt")
OTP_SEND_FIELDS = ("to", "purpose", "ip", "appHash")
OTP_VERIFY_FIELDS = ("to", "purpose", "code")


def unknown_fields(body: dict[str, Any], known: tuple[str, ...]) -> list[Problem]:
    """A field the endpoint does not know is refused (docs/design.md, "Decisions: HTTP interface"),
    so that a misspelt one (`type` for `messageType`) never changes what is sent silently."""
    return [Problem([name], f"unknown field {name!r}; this endpoint takes {', '.join(known)}", "unknown_field")
            for name in body if name not in known]


def parse_send(body: dict[str, Any], now: float | None = None) -> tuple[SendRequest | None, list[Problem]]:
    """The request, or every problem found (a 400 lists them all).  `now` (the service clock)
    bounds `sendAt`; the API always gives it."""
    request, problems = _parsed(body, now, to_required=True)
    if request is not None and request.segments > MAX_SEGMENTS:
        return None, [Problem(["text"], f"text needs {request.segments} segments ({request.encoding}); at most "
                                        f"{MAX_SEGMENTS} are allowed", "too_long")]
    return request, problems


def parse_preview(body: dict[str, Any], now: float | None = None) -> tuple[SendRequest | None, list[Problem]]:
    """POST /v1/sms/preview: the body of a send, judged by the same rules, but `to` may be left
    out (then it is "") and a text over MAX_SEGMENTS is still answered (docs/api.md, "POST /v1/sms/preview")."""
    return _parsed(body, now, to_required=False)


def _parsed(body: dict[str, Any], now: float | None, to_required: bool) -> tuple[SendRequest | None, list[Problem]]:
    problems = unknown_fields(body, SEND_FIELDS)
    if to_required or body.get("to") is not None:
        problems += _to_problems(body.get("to"))
    problems += _text_problems(body.get("text"))
    problems += _valid_for_problems(body.get("validFor"))
    send_at, send_at_problems = _send_at(body.get("sendAt"), now)
    problems += send_at_problems
    message_type = body.get("messageType", "transactional")
    if message_type not in MESSAGE_TYPES:
        problems.append(Problem(["messageType"], f"messageType must be one of {', '.join(MESSAGE_TYPES)}",
                                "invalid_enum"))
    if problems:
        return None, problems
    seg = segment(body["text"])
    valid_for = int(body["validFor"]) if body.get("validFor") is not None else None
    return SendRequest(phone.normalise(body.get("to") or "") or "", body["text"], message_type, seg.segments,
                       seg.encoding, valid_for, send_at), []


def refusal(message_type: str, allowed_types: list[str], sms_enabled: bool, has_route: bool) -> str | None:
    """After validation and idempotency: type allowed -> SMS switch -> route (docs/api.md, "Order of checks").
    The balance comes last and is checked by the guarded debit itself."""
    if message_type not in allowed_types:
        return "forbidden"
    if not sms_enabled:
        return "sms_disabled"
    if not has_route:
        return "unavailable"
    return None


def request_hash(body: dict[str, Any]) -> str:
    """Identifies a send's body for its Idempotency-Key: "the same body" is the same JSON
    value, whatever the key order and white space."""
    return hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()


def cost(rates: dict[str, int], message_type: str, segments: int) -> int:
    """A rate is a price per segment per message type (docs/design.md, "Decisions: money")."""
    return rates[message_type] * segments


# OTP requests (docs/api.md, "OTP"; docs/design.md, "Decisions: OTP")

@dataclass(frozen=True)
class OtpSendRequest:
    to: str
    purpose: str
    ip: str | None
    app_hash: str | None = None  # Android's SMS Retriever: a line of its own in the message (domain/otp.py)


@dataclass(frozen=True)
class OtpVerifyRequest:
    to: str
    purpose: str
    code: str


def _purpose_problems(purpose: Any) -> list[Problem]:
    if purpose is None:
        return [Problem(["purpose"], "purpose is required", "required")]
    if not isinstance(purpose, str):
        return [Problem(["purpose"], "purpose must be a string", "invalid_type")]
    if not 1 <= len(purpose) <= PURPOSE_MAX or not purpose.strip():
        return [Problem(["purpose"], f"purpose must be 1 to {PURPOSE_MAX} characters", "invalid_length")]
    return []


def _ip_problems(ip: Any) -> list[Problem]:

    if ip is None:
        return []
    if not isinstance(ip, str):
        return [Problem(["ip"], "ip must be a string", "invalid_type")]
    try:
        ipaddress.ip_address(ip)
    except ValueError:
        return [Problem(["ip"], "ip must be an IPv4 or IPv6 address, e.g. 203.0.113.7", "invalid_ip")]
    return []


def _code_problems(code: Any) -> list[Problem]:
    if code is None:
        return [Problem(["code"], "code is required", "required")]
    if not isinstance(code, str):
        return [Problem(["code"], "code must be a string of the digits the user typed", "invalid_type")]
    if not 1 <= len(code) <= 32:
        return [Problem(["code"], "code must be 1 to 32 characters", "invalid_length")]
    return []


def parse_otp_send(body: dict[str, Any]) -> tuple[OtpSendRequest | None, list[Problem]]:
    problems = unknown_fields(body, OTP_SEND_FIELDS)
    problems += _to_problems(body.get("to")) + _purpose_problems(body.get("purpose")) + _ip_problems(body.get("ip"))
    app_hash = body.get("appHash")
    if app_hash is not None and not (isinstance(app_hash, str) and APP_HASH.fullmatch(app_hash)):
        problems.append(Problem(["appHash"], "appHash must be the 11 characters (A-Z, a-z, 0-9, + and /) of your "
                                             "Android app's hash for the SMS Retriever API", "invalid_app_hash"))
    if problems:
        return None, problems
    ip = str(ipaddress.ip_address(body["ip"])) if body.get("ip") is not None else None
    return OtpSendRequest(phone.normalise(body["to"]) or "", body["purpose"], ip, app_hash), []


def parse_otp_verify(body: dict[str, Any]) -> tuple[OtpVerifyRequest | None, list[Problem]]:
    problems = unknown_fields(body, OTP_VERIFY_FIELDS)
    problems += _to_problems(body.get("to")) + _purpose_problems(body.get("purpose")) + _code_problems(body.get("code"))
    if problems:
        return None, problems
    return OtpVerifyRequest(phone.normalise(body["to"]) or "", body["purpose"], body["code"]), []
