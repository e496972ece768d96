"""The contract: an OpenAPI 3.1 document of every endpoint and of the webhooks, served at
GET /v1/openapi.json without a key (docs/api.md, "The contract").

It is built from the same constants the code checks with (the error table, the message types,
the number pattern, the field lists), and the test suite validates every response it receives
and every webhook its receiver gets against it (tests/contract.py), so it cannot drift from
what the service answers."""
from __future__ import annotations

from typing import Any

import falcon
import falcon.asgi
import orjson

from sandesh.domain.listing import CURSOR, EVENT_ID, EVENTS_LIMIT, LIMIT_MAX, MESSAGES_LIMIT, REPLY_CURSOR, WAIT_MAX
from sandesh.domain.webhook import FEED_HISTORY, USER_AGENT

from .body import MAX_BODY_BYTES
from .errors import ERRORS
from .schemas import MESSAGE_STATUSES, NUMBER_PATTERN, ref, json_content, SCHEMAS
from .send import MAX_IDEMPOTENCY_KEY

_REQUEST_ID = {"description": "The caller's x-request-id, or one made for this request.",
               "schema": {"type": "string"}, "required": True}
HEADERS: dict[str, Any] = {
    "x-request-id": _REQUEST_ID,
    "Retry-After": {"description": "Seconds to wait before retrying.", "schema": {"type": "string",
                                                                                   "pattern": "^[0-9]+$"}},
    "Idempotent-Replayed": {"description": "`true` when this is the stored answer to an earlier request with the "
                                           "same Idempotency-Key and body: nothing was sent or charged again.",
                            "schema": {"const": "true"}},
}

# The error answers, by status, with the codes each can carry.
_ERROR_STATUSES: dict[str, list[str]] = {}
for _code, (_status, _text) in ERRORS.items():
    _ERROR_STATUSES.setdefault(str(_status), []).append(_code)


def _error_response(status: str) -> dict[str, Any]:
    codes = _ERROR_STATUSES[status]
    headers: dict[str, Any] = {"x-request-id": ref("headers", "x-request-id")}
    if status in ("429", "503"):
        headers["Retry-After"] = ref("headers", "Retry-After")
    if status == "405":
        headers["Allow"] = {"schema": {"type": "string"}, "description": "The methods this path takes."}
    return {"description": ", ".join(f"`{code}`" for code in codes) + ".", "headers": headers,
            "content": json_content(ref("schemas", "Error"))}


RESPONSES = {status: _error_response(status) for status in _ERROR_STATUSES}


def _ok(description: str, schema: str, *, headers: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"description": description,
            "headers": {"x-request-id": ref("headers", "x-request-id"), **(headers or {})},
            "content": json_content(ref("schemas", schema))}


def _errors(*statuses: int) -> dict[str, Any]:
    return {str(status): ref("responses", str(status)) for status in (*statuses, 500)}


_KEYED = (401, 403, 429, 503)  # a key, a disabled client or workspace, the request rate, the database away
_POSTED = (400, *_KEYED)


def _post(operation_id: str, summary: str, request: str, answer: dict[str, Any], *more_statuses: int,
          description: str = "", parameters: list[Any] | None = None) -> dict[str, Any]:
    return {"post": {
        "operationId": operation_id, "summary": summary, "description": description, "security": [{"apiKey": []}],
        "parameters": [ref("parameters", "x-request-id"), *(parameters or [])],
        "requestBody": {"required": True, "content": json_content(ref("schemas", request))},
        "responses": {**answer, **_errors(*_POSTED, *more_statuses)},
    }}


def _public(operation_id: str, summary: str, answers: dict[str, Any], description: str = "") -> dict[str, Any]:
    return {"get": {"operationId": operation_id, "summary": summary, "description": description, "security": [],
                    "parameters": [ref("parameters", "x-request-id")], "responses": answers}}


def _sparrow(operation_id: str, summary: str, methods: list[str], answers: dict[str, Any]) -> dict[str, Any]:
    """A path of the Sparrow drop-in (api/compat.py): its key is the `token` field, its refusals
    Sparrow's 403 `{response_code, response}`, the others /v1's."""
    refused = {"description": "Sparrow's refusal: `response_code` 1000, 1002, 1003, 1007, 1010, 1011 or 1013.",
               "content": json_content({"type": "object", "required": ["response_code", "response"]})}
    return {method: {"operationId": operation_id + method.title(), "summary": summary, "security": [],
                     "description": "docs/api.md, \"Moving from Sparrow or Aakash\".",
                     "parameters": [{"name": "token", "in": "query", "required": False, "schema": {"type": "string"}},
                                    ref("parameters", "x-request-id")],
                     "responses": {**answers, "403": refused, **_errors(400, 429, 503)}}
            for method in methods}


def _webhook(summary: str, event: str, schema: str) -> dict[str, Any]:
    return {"post": {
        "summary": summary,
        "description": "Sent to the client's https webhook URL. Verify the signature before trusting the body "
                       "(docs/api.md, \"Webhooks\").",
        "parameters": [
            {"name": "x-service-signature", "in": "header", "required": True,
             "description": "`t=<unix seconds>,v1=<hex>`: HMAC-SHA256 of `<t>.<raw body>` keyed with the whole "
                            "webhook secret (`whsec_...`). During a secret's grace period a second `v1` is made "
                            "with the previous secret.",
             "schema": {"type": "string", "pattern": "^t=[0-9]+(,v1=[0-9a-f]{64}){1,2}$"}},
            {"name": "x-service-event", "in": "header", "required": True, "schema": {"const": event}},
            {"name": "x-service-delivery", "in": "header", "required": True, "schema": {"type": "string"},
             "description": "The delivery's id; retries reuse it, so deduplicate on it."},
            {"name": "user-agent", "in": "header", "required": True, "schema": {"const": USER_AGENT}},
        ],
        "requestBody": {"required": True, "content": json_content(ref("schemas", schema))},
        "responses": {"2XX": {"description": "Received. Anything else within 10 s, or no answer, is retried: "
                                             "10 s, 30 s, 2 min, 10 min, 30 min, 1 h, 3 h; 8 attempts in all, "
                                             "3 on a 4xx other than 408 and 429."}},
    }}


def _page(what: str, verb: str, cursor: Any) -> list[dict[str, Any]]:
    """The query parameters every list takes (docs/api.md, "GET /v1/sms/messages")."""
    return [*({"name": name, "in": "query", "schema": {"type": "string", "format": "date-time"},
               "description": f"{verb} {when}: ISO 8601 with an offset."}
              for name, when in (("since", "at or after this time"), ("until", "before this time"))),
            {"name": "limit", "in": "query",
             "schema": {"type": "integer", "minimum": 1, "maximum": LIMIT_MAX, "default": MESSAGES_LIMIT},
             "description": f"How many {what} a page holds."},
            {"name": "cursor", "in": "query", "schema": {"type": "string", "pattern": f"^{cursor.pattern}$"},
             "description": "The `nextCursor` of the page before."}]


# A 202's messageId is the id to look the message up by (schemathesis follows it in CI).
_LOOKUP = {"operationId": "getMessage", "parameters": {"message_id": "$response.body#/messageId"}}


def document() -> dict[str, Any]:
    """The OpenAPI 3.1 document."""
    idempotency_key = {
        "name": "Idempotency-Key", "in": "header", "required": False,
        "description": "Any stable string you choose, kept 24 hours: a retry with the same key and body answers "
                       "the first 202 again (Idempotent-Replayed: true) and sends and charges nothing; the same "
                       "key with another body, or while the first request runs, is 409.",
        "schema": {"type": "string", "minLength": 1, "maxLength": MAX_IDEMPOTENCY_KEY, "pattern": "^[ -~]+$"}}
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Sandesh SMS and OTP API", "version": "1",
            "description": "Send SMS and one-time passwords to Nepali mobile numbers. Amounts are integers in "
                           "paisa. Every response is JSON and carries x-request-id; every error has the Error "
                           f"shape. Request bodies are JSON objects of at most {MAX_BODY_BYTES} bytes, and a field "
                           "an endpoint does not know is refused (400, with a detail naming it). The guide is "
                           "docs/api.md.",
        },
        "servers": [{"url": "/", "description": "This service; its endpoints are under /v1."}],
        "paths": {
            "/v1/sms/send": _post(
                "sendMessage", "Send a message", "SendRequest",
                {"202": {**_ok("Accepted and queued; charged now.", "SendAccepted",
                               headers={"Idempotent-Replayed": ref("headers", "Idempotent-Replayed")}),
                         "links": {"GetMessage": _LOOKUP}}},
                402, 409,
                description="Checks, in order: key (401), client and workspace (403), request rate (429), body "
                            "(400), idempotency (409 or replay), type allowed (403 forbidden), SMS switch (503 "
                            "sms_disabled), a route (503 unavailable), for a promotional message a recipient who "
                            "opted out (403 recipient_opted_out; transactional and otp messages are never held "
                            "back), balance (402). Nothing is charged unless the answer is 202. A promotional "
                            "message outside its workspace's promotional hours (GET /v1/sms/balance) is accepted "
                            "`scheduled` for their next opening, or refused 400 at validFor when its validity "
                            "would end first.",
                parameters=[idempotency_key]),
            "/v1/sms/send/batch": _post(
                "sendBatch", "Send up to 1,000 messages", "BatchRequest",
                {"202": _ok("Each item accepted or refused on its own; the accepted ones are charged together.",
                            "BatchAccepted",
                            headers={"Idempotent-Replayed": ref("headers", "Idempotent-Replayed")})},
                402, 409,
                description="The batch counts as one request toward the rate. Each item is checked as a single "
                            "send is; when the balance cannot pay for every accepted item, none is sent (402).",
                parameters=[idempotency_key]),
            "/v1/sms/preview": _post(
                "previewMessage", "What a send would be charged, without sending", "PreviewRequest",
                {"200": _ok("The segments, encoding and cost a send of this body would be charged.", "Preview")},
                description="Nothing is charged or stored. The body is validated as a send's (400), `to` is "
                            "optional, and a text over 6 segments is answered with sendable: false. Counts "
                            "toward the request rate. When the text is UCS-2 because of a few characters (curly "
                            "quotes, dashes, an ellipsis, a no-break space), each is listed with its position "
                            "and GSM-7 stand-in, with the replaced text's segments and cost."),
            "/v1/sms/messages/{message_id}/cancel": {"post": {
                "operationId": "cancelMessage", "summary": "Cancel a scheduled or queued message",
                "description": "Only while it is scheduled, or queued and not yet handed to a modem: it becomes "
                               "`canceled` and is refunded in full. Later: 409 message_not_cancelable.",
                "security": [{"apiKey": []}],
                "parameters": [{"name": "message_id", "in": "path", "required": True, "schema": {"type": "string"}},
                               ref("parameters", "x-request-id")],
                "responses": {"200": _ok("Canceled and refunded.", "Message"), **_errors(*_KEYED, 404, 409)},
            }},
            "/v1/sms/messages": {"get": {
                "operationId": "listMessages", "summary": "List the client's messages, newest first",
                "description": "A page of the messages this client sent, from the read model (a message shows once "
                               "the projections have applied it, within a second). Pass a page's `nextCursor` as "
                               "`cursor` for the next, older page; pages are by key, so none is skipped or repeated "
                               "while messages arrive.",
                "security": [{"apiKey": []}],
                "parameters": [
                    ref("parameters", "x-request-id"),
                    {"name": "status", "in": "query", "schema": {"type": "string", "enum": MESSAGE_STATUSES}},
                    {"name": "messageType", "in": "query", "schema": ref("schemas", "MessageType")},
                    {"name": "to", "in": "query", "schema": {"type": "string", "pattern": NUMBER_PATTERN},
                     "description": "A recipient, as a send writes it (a leading + is %2B in a URL)."},
                    *_page("messages", "Created", CURSOR),
                ],
                "responses": {"200": _ok("A page of messages, newest first.", "MessagePage"), **_errors(400, *_KEYED)},
            }},
            "/v1/sms/inbound": {"get": {
                "operationId": "listReplies", "summary": "List the replies to the client's messages, newest first",
                "description": "The replies attributed to this client (the fields of their message.inbound webhook), "
                               "paged like the messages.",
                "security": [{"apiKey": []}],
                "parameters": [ref("parameters", "x-request-id"), *_page("replies", "Received", REPLY_CURSOR)],
                "responses": {"200": _ok("A page of replies, newest first.", "ReplyPage"), **_errors(400, *_KEYED)},
            }},
            "/v1/events": {"get": {
                "operationId": "listEvents", "summary": "The client's events, oldest first, with long polling",
                "description": "Every event a webhook would carry to this client (message.status, message.inbound), "
                               "in the order of the log, whether or not the client has a webhook URL; `data` is the "
                               f"webhook's body. Events are kept {FEED_HISTORY // 86_400} days. Keep the last "
                               "item's id and pass it as `after`. Counts toward the request rate.",
                "security": [{"apiKey": []}],
                "parameters": [
                    ref("parameters", "x-request-id"),
                    {"name": "after", "in": "query", "schema": {"type": "string", "pattern": f"^{EVENT_ID.pattern}$"},
                     "description": "The events strictly after this one; from the oldest kept without it. An id that "
                                    "is unknown, another client's or no longer kept is 400 on [\"after\"]."},
                    {"name": "limit", "in": "query",
                     "schema": {"type": "integer", "minimum": 1, "maximum": LIMIT_MAX, "default": EVENTS_LIMIT},
                     "description": "How many events a page holds."},
                    {"name": "wait", "in": "query",
                     "schema": {"type": "integer", "minimum": 0, "maximum": WAIT_MAX, "default": 0},
                     "description": "Seconds to wait for an event when none is after `after` yet; the answer comes "
                                    "as soon as one arrives, or with no events when the time is up."},
                ],
                "responses": {"200": _ok("The events after `after`, oldest first.", "EventPage"),
                              **_errors(400, *_KEYED)},
            }},
            "/v1/sms/inbound/{reply_id}": {"get": {
                "operationId": "getReply", "summary": "Look up a reply", "security": [{"apiKey": []}],
                "parameters": [{"name": "reply_id", "in": "path", "required": True, "schema": {"type": "string"}},
                               ref("parameters", "x-request-id")],
                "responses": {"200": _ok("The reply.", "InboundReply"), **_errors(*_KEYED, 404)},
            }},
            "/v1/sms/messages/{message_id}": {"get": {
                "operationId": "getMessage", "summary": "Look up a message", "security": [{"apiKey": []}],
                "parameters": [{"name": "message_id", "in": "path", "required": True, "schema": {"type": "string"}},
                               ref("parameters", "x-request-id")],
                "responses": {"200": _ok("The message, as soon as its send answered 202.", "Message"),
                              **_errors(*_KEYED, 404)},
            }},
            "/v1/sms/balance": {"get": {
                "operationId": "getBalance",
                "summary": "Balance, rates, allowed types and the calling client's counters",
                "security": [{"apiKey": []}], "parameters": [ref("parameters", "x-request-id")],
                "responses": {"200": _ok("The workspace's balance and the caller's counters.", "Balance"),
                              **_errors(*_KEYED)},
            }},
            "/v1/sms/otp/send": _post(
                "sendOtp", "Send a one-time code", "OtpSendRequest",
                {"202": {**_ok("The code is queued.", "OtpSent"), "links": {"GetMessage": _LOOKUP}}}, 402,
                description="A 6-digit code valid 5 minutes replaces the active one for this number and purpose. "
                            "Limits (429): 1 code a minute for a number and purpose, 3 per number in 10 minutes, "
                            "10 per end-user ip in 10 minutes, 60 OTP requests a minute from a calling address."),
            "/v1/sms/otp/verify": _post(
                "verifyOtp", "Check a one-time code", "OtpVerifyRequest",
                {"200": _ok("The check was made (also for a wrong code).", "OtpVerifyResult")}),
            "/v1/health": _public("health", "Liveness: the process answers", {
                "200": _ok("The process answers.", "Health"), **_errors()}),
            "/v1/ready": _public("ready", "Readiness: database, projections, a route", {
                "200": _ok("Ready.", "Ready"),
                "503": {"description": "Not ready; `reasons` says why.",
                        "headers": {"x-request-id": ref("headers", "x-request-id"),
                                    "Retry-After": ref("headers", "Retry-After")},
                        "content": json_content(ref("schemas", "Ready"))},
                "500": ref("responses", "500")}),
            "/v1/openapi.json": _public("openapi", "This document", {
                "200": {"description": "OpenAPI 3.1.", "headers": {"x-request-id": ref("headers", "x-request-id")},
                        "content": json_content({"type": "object"})}, **_errors()}),
            "/devices/{sim_id}/events": {"post": {
                "operationId": "postDeviceEvent", "summary": "A phone's webhook: what it received, a message's fate",
                "description": "For phones running SMS Gateway for Android whose SIM's port has a signing key "
                               "(docs/operations.md, \"Android phones\"): `X-Signature` is the hex HMAC-SHA256 of "
                               "the body and then `X-Timestamp`, keyed with it. Not for API clients.",
                "security": [],
                "parameters": [{"name": "sim_id", "in": "path", "required": True, "schema": {"type": "string"}},
                               {"name": "X-Signature", "in": "header", "required": True, "schema": {"type": "string"}},
                               {"name": "X-Timestamp", "in": "header", "required": True, "schema": {"type": "string"}},
                               ref("parameters", "x-request-id")],
                "requestBody": {"required": True, "content": json_content({"type": "object"})},
                "responses": {"204": {"description": "Taken (recorded once, whether or not it came before).",
                                      "headers": {"x-request-id": ref("headers", "x-request-id")}},
                              **_errors(400, 401, 404, 503)}}},
            **{path: _sparrow("sparrowSend" + suffix, "Send as Sparrow SMS's v2 API does", ["get", "post"], {
                "200": {"description": "Queued: `count` messages.", "content": json_content({"type": "object"})}})
               for path, suffix in (("/compat/sparrow/v2/sms/", ""), ("/compat/sparrow/v2/sms", "NoSlash"))},
            **{path: _sparrow("sparrowCredit" + suffix, "Credit as Sparrow SMS's v2 API tells it", ["get"], {
                "200": {"description": "`credits_available`, `credits_consumed`.",
                        "content": json_content({"type": "object"})}})
               for path, suffix in (("/compat/sparrow/v2/credit/", ""), ("/compat/sparrow/v2/credit", "NoSlash"))},
            "/compat/aakash/sms/v3/send": {"post": {
                "operationId": "aakashSend", "summary": "Send as Aakash SMS's v3 API does", "security": [],
                "description": "docs/api.md, \"Moving from Sparrow or Aakash\": the key is `auth_token`.",
                "parameters": [ref("parameters", "x-request-id")],
                "responses": {
                    "200": {"description": "`data.valid` queued, `data.invalid` aborted.",
                            "content": json_content({"type": "object", "required": ["error", "message", "data"]})},
                    **{status: {"description": "Aakash's refusal: `error` true and its `message`.",
                                "content": json_content({"type": "object", "required": ["error", "message", "data"]})}
                       for status in ("400", "403")},
                    **_errors(429, 503)}}},
            "/metrics": _public("metrics", "Prometheus metrics", {
                "200": {"description": "Prometheus text format (docs/operations.md, \"Metrics\").",
                        "content": {"text/plain": {"schema": {"type": "string"}}}},
                **_errors(401, 403)}, description="With SANDESH_METRICS_TOKEN set, only to `Authorization: Bearer "
                                                  "<token>` (401 otherwise); without it, only to callers on the "
                                                  "service's own machine (403 otherwise)."),
        },
        "webhooks": {
            "message.status": _webhook("A message's status changed", "message.status", "StatusEvent"),
            "message.inbound": _webhook("A recipient replied", "message.inbound", "InboundEvent"),
        },
        "components": {
            "securitySchemes": {"apiKey": {"type": "apiKey", "in": "header", "name": "x-api-key",
                                           "description": "`sk_live_` and 48 hex digits."}},
            "schemas": SCHEMAS,
            "headers": HEADERS,
            "parameters": {"x-request-id": {"name": "x-request-id", "in": "header", "required": False,
                                            "description": "Echoed on the response (first 128 characters).",
                                            "schema": {"type": "string"}}},
            "responses": RESPONSES,
        },
    }


class OpenApi:
    """GET /v1/openapi.json."""
    public = True

    def __init__(self) -> None:
        self.body = orjson.dumps(document())

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        resp.content_type = falcon.MEDIA_JSON
        resp.data = self.body
