"""The schemas of the contract (api/openapi.py): the request and answer bodies of every
endpoint and webhook, built from the same constants the code checks with."""
from __future__ import annotations

from typing import Any

from sandesh.domain import sending
from sandesh.domain.batch import MAX_ITEMS
from sandesh.domain.otp import PURPOSE_MAX
from sandesh.domain.segments import MAX_SEGMENTS, PART_CAPACITY, SINGLE_PART_CAPACITY
from sandesh.domain.message import STATUSES
from sandesh.domain.types import MESSAGE_TYPES

from .errors import ERRORS

MESSAGE_STATUSES = list(STATUSES)
WEBHOOK_STATUSES = ["queued", "sent", "delivered", "undelivered", "failed", "canceled"]
NUMBER_PATTERN = "^\\+?977(96|97|98)[0-9]{8}$"  # domain/phone.py
# Not blank: some character that Python's str.isspace() does not count as space (the server strips).
VISIBLE = ("[^\\t\\n\\v\\f\\r\\u001c-\\u001f \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029"
           "\\u202f\\u205f\\u3000]")
TIME = {"type": "string", "format": "date-time", "description": "ISO 8601, UTC, ending in Z."}


def ref(kind: str, name: str) -> dict[str, str]:
    return {"$ref": f"#/components/{kind}/{name}"}


def json_content(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def closed(required: list[str], properties: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"type": "object", "required": required, "properties": properties, "additionalProperties": False, **more}


SCHEMAS: dict[str, Any] = {
    "Error": closed(["error", "code"], {
        "error": {"type": "string", "description": "For people; the wording may change."},
        "code": {"type": "string", "enum": sorted(ERRORS), "description": "Stable: branch on this and the status."},
        "details": {"type": "array", "items": ref("schemas", "Detail"),
                    "description": "For 400 invalid_request: one item for each problem found."},
    }),
    "Detail": closed(["path", "message", "code"], {
        "path": {"type": "array", "items": {"type": ["string", "integer"]},
                 "description": "The field, e.g. [\"to\"]; [\"Idempotency-Key\"] for that header; [] for the body."},
        "message": {"type": "string"},
        "code": {"type": "string", "description": "e.g. required, invalid_type, unknown_field, too_long."},
    }),
    "MessageType": {"type": "string", "enum": list(MESSAGE_TYPES)},
    "Encoding": {"type": "string", "enum": ["GSM-7", "UCS-2"]},
    "SendRequest": closed(["to", "text"], {
        "to": {"type": "string", "pattern": NUMBER_PATTERN, "examples": ["9779812345678"],
               "description": "977 and 10 digits starting 96, 97 or 98; a leading + is allowed."},
        "text": {"type": "string", "minLength": 1, "pattern": f"^[^\\u0000]*{VISIBLE[:-1]}\\u0000][^\\u0000]*$",
                 "description": f"Not blank; at most {MAX_SEGMENTS} segments (160/153 GSM-7 characters, "
                                "70/67 UCS-2 code units a segment)."},
        "messageType": {**ref("schemas", "MessageType"), "default": "transactional"},
        "validFor": {"type": "integer", "minimum": sending.VALID_FOR_MIN, "maximum": sending.VALID_FOR_MAX,
                     "description": "Seconds after acceptance (after sendAt, when scheduled) after which the "
                                    "message is no longer handed to a modem; it then ends failed and is refunded."},
        "sendAt": {"type": "string", "format": "date-time", "examples": ["2026-12-01T09:00:00+05:45"],
                   "description": "Schedule the message: ISO 8601 with an offset, not in the past, at most "
                                  f"{sending.SCHEDULE_AHEAD_MAX // 86_400} days ahead. Charged now; `scheduled` "
                                  "until then."},
    }),
    "SendAccepted": closed(["messageId", "status", "messageType", "segments", "encoding", "cost"], {
        "messageId": {"type": "string", "pattern": "^msg_"},
        "status": {"type": "string", "enum": ["queued", "scheduled"]},
        "messageType": ref("schemas", "MessageType"),
        "segments": {"type": "integer", "minimum": 1, "maximum": MAX_SEGMENTS},
        "encoding": ref("schemas", "Encoding"),
        "cost": {"type": "integer", "minimum": 0, "description": "Paisa: rate × segments."},
        "expiresAt": {**TIME, "description": "When the send asked for validFor."},
        "sendAt": {**TIME, "description": "When the send was scheduled."},
    }),
    "Preview": closed(["messageType", "segments", "encoding", "characters", "charactersPerSegment", "cost",
                        "sendable"], {
        "messageType": ref("schemas", "MessageType"),
        "segments": {"type": "integer", "minimum": 1, "description": "What a send of this text is charged; may "
                                                                     f"exceed {MAX_SEGMENTS} (then sendable is false)."},
        "encoding": ref("schemas", "Encoding"),
        "characters": {"type": "integer", "minimum": 0,
                       "description": "Septets for GSM-7 (an extension character counts two), UTF-16 code units "
                                      "for UCS-2."},
        "charactersPerSegment": {"type": "integer", "enum": sorted({*SINGLE_PART_CAPACITY.values(),
                                                                     *PART_CAPACITY.values()}),
                                 "description": "160 or 153 (split) for GSM-7, 70 or 67 for UCS-2."},
        "cost": {"type": "integer", "minimum": 0, "description": "Paisa at the workspace's rate: rate × segments."},
        "sendable": {"type": "boolean", "description": f"false when the text needs more than {MAX_SEGMENTS} "
                                                       "segments: a send of it would be 400."},
        "ucs2Characters": {"type": "array", "items": closed(["position", "character", "replacement"], {
            "position": {"type": "integer", "minimum": 0, "description": "Index in Unicode code points, from 0."},
            "character": {"type": "string"},
            "replacement": {"type": ["string", "null"], "description": "Its GSM-7 stand-in, when one exists."}}),
            "description": "When the text is UCS-2 only because of a few characters: each of them."},
        "gsm7Text": {"type": "string", "description": "The text with every such character replaced: GSM-7."},
        "gsm7Segments": {"type": "integer", "minimum": 1},
        "gsm7Cost": {"type": "integer", "minimum": 0},
    }),
    "BatchRequest": closed(["messages"], {
        "messages": {"type": "array", "minItems": 1, "maxItems": MAX_ITEMS,
                     "items": {"description": "The body of a single send (SendRequest). Each item is judged "
                                              "alone: an invalid one gets an error in its place in the results, "
                                              "and the others are still sent."}},
    }),
    "BatchAccepted": closed(["results"], {
        "results": {"type": "array", "items": {"oneOf": [ref("schemas", "SendAccepted"), ref("schemas", "Error")]},
                    "description": "One per item, in the request's order: its 202 body, or its error."},
    }),
    "Message": closed(["id", "to", "status", "route", "messageType", "segments", "encoding", "cost",
                        "createdAt", "updatedAt", "expiresAt", "sendAt", "error"], {
        "id": {"type": "string", "pattern": "^msg_"},
        "to": {"type": "string", "pattern": "^977(96|97|98)[0-9]{8}$"},
        "status": {"type": "string", "enum": MESSAGE_STATUSES},
        "route": {"const": "device"},
        "messageType": ref("schemas", "MessageType"),
        "segments": {"type": "integer", "minimum": 1, "maximum": MAX_SEGMENTS},
        "encoding": ref("schemas", "Encoding"),
        "cost": {"type": "integer", "minimum": 0},
        "createdAt": TIME, "updatedAt": TIME,
        "expiresAt": {"oneOf": [TIME, {"type": "null"}]},
        "sendAt": {"oneOf": [TIME, {"type": "null"}], "description": "When a scheduled message is released."},
        "error": {"type": ["string", "null"], "description": "Why it failed, was rejected, undelivered or requeued."},
    }),
    "MessagePage": closed(["data", "nextCursor"], {
        "data": {"type": "array", "items": ref("schemas", "Message"), "maxItems": 100},
        "nextCursor": {"type": ["string", "null"], "pattern": "^msg_",
                       "description": "Pass as `cursor` for the next, older page; null on the last page."},
    }),
    "InboundReply": closed(["id", "from", "text", "at", "inReplyTo"], {
        "id": {"type": "string", "pattern": "^in_"},
        "from": {"type": "string", "pattern": "^\\+"},
        "text": {"type": ["string", "null"], "description": "null once the workspace's texts were erased."},
        "at": TIME,
        "inReplyTo": {"type": ["string", "null"], "pattern": "^msg_", "description": "The message answered."},
    }, description="A reply, with the fields of its message.inbound webhook."),
    "ReplyPage": closed(["data", "nextCursor"], {
        "data": {"type": "array", "items": ref("schemas", "InboundReply"), "maxItems": 100},
        "nextCursor": {"type": ["string", "null"], "pattern": "^in_",
                       "description": "Pass as `cursor` for the next, older page; null on the last page."},
    }),
    "FeedEvent": {"oneOf": [
        closed(["id", "type", "createdAt", "data"], {
            "id": {"type": "string", "pattern": "^evt_[0-9a-f]{32}$"}, "type": {"const": "message.status"},
            "createdAt": TIME, "data": ref("schemas", "StatusEvent")}),
        closed(["id", "type", "createdAt", "data"], {
            "id": {"type": "string", "pattern": "^evt_[0-9a-f]{32}$"}, "type": {"const": "message.inbound"},
            "createdAt": TIME, "data": ref("schemas", "InboundEvent")}),
    ], "description": "An event, as its webhook would carry it in `data`; the delivery of it, if any, has the "
                      "same 32 hex digits after whd_ (x-service-delivery)."},
    "EventPage": closed(["data", "hasMore"], {
        "data": {"type": "array", "items": ref("schemas", "FeedEvent"), "maxItems": 100},
        "hasMore": {"type": "boolean", "description": "More events follow the last one: ask again at once."},
    }),
    "PromotionalHours": closed(["start", "end", "timeZone"], {
        "start": {"type": "string", "pattern": "^[0-2][0-9]:[0-5][0-9]$", "examples": ["08:00"]},
        "end": {"type": "string", "pattern": "^[0-2][0-9]:[0-5][0-9]$", "examples": ["20:00"],
                "description": "Closed from this minute; an end before the start crosses midnight."},
        "timeZone": {"const": "Asia/Kathmandu"},
    }, description="When the workspace's promotional messages go out; one accepted outside them waits as "
                   "`scheduled` for the next opening."),
    "Balance": closed(["workspaceStatus", "balance", "rates", "allowedTypes", "promotionalHours", "counters"], {
        "workspaceStatus": {"type": "string", "enum": ["pending", "active", "suspended"]},
        "balance": closed(["amount", "currency"], {"amount": {"type": "integer", "description": "Paisa."},
                                                    "currency": {"const": "NPR"}}),
        "rates": closed(list(MESSAGE_TYPES), {t: {"type": "integer", "minimum": 0} for t in MESSAGE_TYPES},
                         description="Paisa per segment."),
        "allowedTypes": {"type": "array", "items": ref("schemas", "MessageType"), "uniqueItems": True},
        "promotionalHours": {"oneOf": [ref("schemas", "PromotionalHours"), {"type": "null"}],
                             "description": "null: off, promotional messages go out at any time."},
        "counters": closed(["sent", "delivered", "undelivered", "failed", "segments", "spent", "otpSent",
                             "otpVerified"],
                            {name: {"type": "integer", "minimum": 0} for name in
                             ("sent", "delivered", "undelivered", "failed", "segments", "spent", "otpSent",
                              "otpVerified")}, description="The calling client's."),
    }),
    "OtpSendRequest": closed(["to", "purpose"], {
        "to": {"type": "string", "pattern": NUMBER_PATTERN},
        "purpose": {"type": "string", "minLength": 1, "maxLength": PURPOSE_MAX, "pattern": VISIBLE,
                    "examples": ["login"]},
        "ip": {"type": "string", "anyOf": [{"format": "ipv4"}, {"format": "ipv6"}],
               "description": "The end user's address; when given, the per-end-user-IP limit applies."},
        "appHash": {"type": "string", "pattern": "^[A-Za-z0-9+/]{11}$", "examples": ["FA+9qCX9VSu"],
                    "description": "Your Android app's hash for the SMS Retriever API: put on a line of its own "
                                   "after the text, before the WebOTP line."},
    }),
    "OtpSent": closed(["success", "messageId", "expiresAt"], {
        "success": {"const": True}, "messageId": {"type": "string", "pattern": "^msg_"}, "expiresAt": TIME}),
    "OtpVerifyRequest": closed(["to", "purpose", "code"], {
        "to": {"type": "string", "pattern": NUMBER_PATTERN},
        "purpose": {"type": "string", "minLength": 1, "maxLength": PURPOSE_MAX, "pattern": "\\S"},
        "code": {"type": "string", "minLength": 1, "maxLength": 32},
    }),
    "OtpVerifyResult": closed(["success", "verified"], {
        "success": {"const": True},
        "verified": {"type": "boolean"},
        "reason": {"type": "string", "enum": ["invalid_code", "too_many_attempts", "no_active_otp"],
                   "description": "Only when verified is false."},
    }),
    "Health": closed(["status", "version"], {
        "status": {"const": "ok"},
        "version": {"type": "string", "examples": ["0.3.0"],
                    "description": "The release this process runs (docs/operations.md, \"Upgrading\")"}}),
    "Ready": closed(["ready", "reasons", "checks"], {
        "ready": {"type": "boolean"},
        "reasons": {"type": "array", "items": {"type": "string"}},
        "checks": closed(["database", "projectionLag", "route"], {
            "database": {"type": "string", "enum": ["ok", "unreachable"]},
            "projectionLag": {"type": ["object", "null"], "additionalProperties": {"type": "integer"},
                              "description": "Events each followed projection is behind the log (counted up to "
                                             "a cap)."},
            "route": {"type": ["boolean", "null"]},
        }),
    }),
    "StatusEvent": closed(["type", "id", "status", "to", "at", "route", "messageType", "segments"], {
        "type": {"const": "message.status"},
        "id": {"type": "string", "pattern": "^msg_"},
        "status": {"type": "string", "enum": WEBHOOK_STATUSES},
        "to": {"type": "string", "pattern": "^977(96|97|98)[0-9]{8}$"},
        "at": TIME,
        "route": {"const": "device"},
        "messageType": ref("schemas", "MessageType"),
        "segments": {"type": "integer", "minimum": 1, "maximum": MAX_SEGMENTS},
        "error": {"type": "string", "description": "Only with failed, undelivered or queued, when known."},
    }),
    "InboundEvent": closed(["type", "id", "from", "text", "at"], {
        "type": {"const": "message.inbound"},
        "id": {"type": "string"},
        "from": {"type": "string", "pattern": "^\\+"},
        "text": {"type": ["string", "null"], "description": "null once the workspace's texts were erased."},
        "at": TIME,
        "inReplyTo": {"type": "string", "pattern": "^msg_", "description": "The message answered, when known."},
    }),
}

def _nullable(spec: dict[str, Any]) -> dict[str, Any]:
    """A field whose null is taken as the field left out (domain/sending.py reads a missing
    field and a null one alike)."""
    return {**spec, "type": [spec["type"], "null"]}


_SEND_FIELDS = SCHEMAS["SendRequest"]["properties"]
_SEND_FIELDS.update({name: _nullable(_SEND_FIELDS[name]) for name in ("validFor", "sendAt")})
SCHEMAS["PreviewRequest"] = {
    **SCHEMAS["SendRequest"], "required": ["text"],
    "properties": {**_SEND_FIELDS, "to": _nullable(_SEND_FIELDS["to"])},
    "description": f"The body of a send; `to` may be left out, and a text over {MAX_SEGMENTS} segments is still "
                   "answered."}
