"""The query of a list the API answers (docs/api.md, "GET /v1/sms/messages",
"GET /v1/sms/inbound" and "GET /v1/events"): its parameters read and judged, every problem named, before anything
is read."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from . import phone
from .message import STATUSES
from .sending import Problem, instant
from .types import MESSAGE_TYPES

LIMIT_MAX = 100
MESSAGES_LIMIT = 50  # a page of messages when `limit` is not given
MESSAGE_PARAMETERS = ("status", "messageType", "to", "since", "until", "limit", "cursor")
REPLY_PARAMETERS = ("since", "until", "limit", "cursor")
EVENT_PARAMETERS = ("after", "limit", "wait")
EVENTS_LIMIT = 100  # a page of events when `limit` is not given
WAIT_MAX = 30  # seconds a long poll may wait
CURSOR = re.compile(r"msg_[0-9a-f]{32}")
REPLY_CURSOR = re.compile(r"in_[0-9a-f]{32}")
EVENT_ID = re.compile(r"evt_[0-9a-f]{32}")
_WHOLE = re.compile(r"[0-9]{1,4}")  # [0-9]: Python's \d also takes other scripts' digits


@dataclass(frozen=True)
class MessageQuery:
    """GET /v1/sms/messages: equality filters, created in [since, until), `limit` a page,
    from after the message `cursor` names."""
    status: str | None = None
    message_type: str | None = None
    to: str | None = None
    since: float | None = None
    until: float | None = None
    limit: int = MESSAGES_LIMIT
    cursor: str | None = None


def parse_message_query(params: Mapping[str, Any]) -> tuple[MessageQuery | None, list[Problem]]:
    """The query of GET /v1/sms/messages from its query string's parameters (a repeated one
    comes as a list), or every problem found."""
    problems = _named(params, MESSAGE_PARAMETERS)
    if problems:
        return None, problems
    status, message_type, to = params.get("status"), params.get("messageType"), params.get("to")
    if status is not None and status not in STATUSES:
        problems.append(Problem(["status"], f"status must be one of {', '.join(STATUSES)}", "invalid_enum"))
    if message_type is not None and message_type not in MESSAGE_TYPES:
        problems.append(Problem(["messageType"], f"messageType must be one of {', '.join(MESSAGE_TYPES)}",
                                "invalid_enum"))
    number = phone.normalise(to) if to is not None else None
    if to is not None and number is None:
        problems.append(Problem(["to"], "to must be a Nepal mobile number: 977 and 10 digits starting 96, 97 or 98, "
                                        "e.g. 9779812345678 (a leading + is written %2B in a URL)",
                                "invalid_phone_number"))
    page = _page(params, CURSOR, problems)
    if problems:
        return None, problems
    return MessageQuery(status, message_type, number, *page), []


@dataclass(frozen=True)
class ReplyQuery:
    """GET /v1/sms/inbound: received in [since, until), `limit` a page, from after the reply
    `cursor` names."""
    since: float | None = None
    until: float | None = None
    limit: int = MESSAGES_LIMIT
    cursor: str | None = None


def parse_reply_query(params: Mapping[str, Any]) -> tuple[ReplyQuery | None, list[Problem]]:
    """The query of GET /v1/sms/inbound, or every problem found."""
    problems = _named(params, REPLY_PARAMETERS)
    if problems:
        return None, problems
    page = _page(params, REPLY_CURSOR, problems)
    if problems:
        return None, problems
    return ReplyQuery(*page), []


@dataclass(frozen=True)
class EventQuery:
    """GET /v1/events: `limit` events strictly after the event `after` (from the oldest kept
    without it), waiting up to `wait` seconds for one when none is there yet."""
    after: str | None = None
    limit: int = EVENTS_LIMIT
    wait: int = 0


def parse_event_query(params: Mapping[str, Any]) -> tuple[EventQuery | None, list[Problem]]:
    """The query of GET /v1/events, or every problem found.  Whether `after` names one of the
    caller's kept events is for the read model to say."""
    problems = _named(params, EVENT_PARAMETERS)
    if problems:
        return None, problems
    after = params.get("after")
    if after is not None and not EVENT_ID.fullmatch(after):
        problems.append(Problem(["after"], "after must be the id of an event of this feed (evt_ and 32 hex digits)",
                                "invalid_cursor"))
    limit = _whole(params, "limit", 1, LIMIT_MAX, EVENTS_LIMIT, problems)
    wait = _whole(params, "wait", 0, WAIT_MAX, 0, problems)
    if problems:
        return None, problems
    return EventQuery(after, limit, wait), []


def _whole(params: Mapping[str, Any], name: str, low: int, high: int, default: int, problems: list[Problem]) -> int:
    given = params.get(name)
    if given is None:
        return default
    value = int(given) if _WHOLE.fullmatch(given) else -1
    if not low <= value <= high:
        problems.append(Problem([name], f"{name} must be a whole number from {low} to {high}", "out_of_range"))
    return value


def _named(params: Mapping[str, Any], known: tuple[str, ...]) -> list[Problem]:
    return ([Problem([name], f"unknown parameter {name}; the list takes {', '.join(known)}", "unknown_parameter")
             for name in params if name not in known]
            + [Problem([name], f"{name} is given more than once", "repeated")
               for name, value in params.items() if isinstance(value, list)])


def _page(params: Mapping[str, Any], cursor_form: re.Pattern[str],
          problems: list[Problem]) -> tuple[float | None, float | None, int, str | None]:
    """since, until, limit and cursor, each judged; problems are added to `problems`."""
    since, until = _time(params, "since", problems), _time(params, "until", problems)
    if since is not None and until is not None and since >= until:
        problems.append(Problem(["until"], "until must be after since", "empty_range"))
    limit = _whole(params, "limit", 1, LIMIT_MAX, MESSAGES_LIMIT, problems)
    cursor = params.get("cursor")
    if cursor is not None and not cursor_form.fullmatch(cursor):
        problems.append(Problem(["cursor"], "cursor must be the nextCursor of an earlier page", "invalid_cursor"))
    return since, until, limit, cursor


def _time(params: Mapping[str, Any], name: str, problems: list[Problem]) -> float | None:
    if params.get(name) is None:
        return None
    at, found = instant(name, params[name])
    problems += found
    return at
