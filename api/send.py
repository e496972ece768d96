"""POST /v1/sms/send, POST /v1/sms/send/batch and POST /v1/sms/preview (docs/api.md,
"POST /v1/sms/send", "Batch sends", "POST /v1/sms/preview"; the checks in the order of
docs/api.md, "Order of checks"): parse the body and the Idempotency-Key header, call the use
case (domain/usecases/sending.py), render its answer (answers.py)."""
from __future__ import annotations

from typing import Any

import falcon
import falcon.asgi

from sandesh.domain import sending
import orjson

from sandesh.domain.application import Sandesh
from sandesh.domain.usecases.sending import Accepted, BatchAccepted, Replayed
from sandesh.domain.batch import MAX_ITEMS

from .body import json_object, parsed
from .answers import accepted as accepted_body, batch_answer, preview as preview_body
from .errors import ApiError, detail, invalid
from .waiting import Blocking, Commit, drive

MAX_IDEMPOTENCY_KEY = 255
# 1,000 items of the longest text a send takes, written with JSON escapes, fit.
MAX_BATCH_BODY_BYTES = 4 * 1024 * 1024


def idempotency_key(req: falcon.asgi.Request) -> str | None:
    key = req.get_header("Idempotency-Key")
    if key is not None and (not 1 <= len(key) <= MAX_IDEMPOTENCY_KEY or not key.isascii() or not key.isprintable()):
        raise invalid(["Idempotency-Key"], f"Idempotency-Key must be 1 to {MAX_IDEMPOTENCY_KEY} printable ASCII "
                      "characters", "invalid_idempotency_key")
    return key


def accepted(resp: falcon.asgi.Response, sent: Accepted | BatchAccepted | Replayed) -> None:
    resp.status = falcon.HTTP_202
    resp.content_type = falcon.MEDIA_JSON
    if isinstance(sent, Replayed):
        resp.data = sent.response.encode()
        resp.set_header("Idempotent-Replayed", "true")
    elif isinstance(sent, Accepted):
        resp.data = orjson.dumps(accepted_body(sent.message))
    else:
        resp.data = batch_answer(sent.results).encode()


class Send:
    def __init__(self, sandesh: Sandesh, blocking: Blocking, commit: Commit):
        self.sandesh, self.blocking, self.commit = sandesh, blocking, commit

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        body = await json_object(req)
        req.context.message_type = body.get("messageType", "transactional")  # the sends metric's type
        now = self.sandesh.clock.now()
        request = parsed(lambda b: sending.parse_send(b, now), body)
        key = idempotency_key(req)
        steps = self.sandesh.sending.send_sms_steps(req.context.caller, request, key,
                                        sending.request_hash(body) if key is not None else None)
        accepted(resp, await drive(steps, self.blocking, self.commit))


class Preview:
    """Nothing is charged, stored or refused but by the body's validation; the request counts toward the
    rate like any other (authentication, api/auth.py)."""

    def __init__(self, sandesh: Sandesh):
        self.sandesh = sandesh

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        body = await json_object(req)
        now = self.sandesh.clock.now()
        request = parsed(lambda b: sending.parse_preview(b, now), body)
        resp.media = preview_body(request.message_type, self.sandesh.sending.preview(req.context.caller, request))


BATCH_FIELDS = ("messages",)


class SendBatch:
    def __init__(self, sandesh: Sandesh, blocking: Blocking, commit: Commit):
        self.sandesh, self.blocking, self.commit = sandesh, blocking, commit

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        body = await json_object(req, MAX_BATCH_BODY_BYTES)
        items = _items(body)
        now = self.sandesh.clock.now()
        requests: list[Any] = []
        for index, item in enumerate(items):
            if not isinstance(item, dict):
                requests.append([sending.Problem(["messages", index], "each item must be a JSON object with to and "
                                                 "text", "invalid_type")])
                continue
            request, problems = sending.parse_send(item, now)
            requests.append(request if request is not None else
                            [sending.Problem(["messages", index, *p.path], p.message, p.code) for p in problems])
        key = idempotency_key(req)
        steps = self.sandesh.sending.send_batch_steps(req.context.caller, requests, key,
                                          sending.request_hash(body) if key is not None else None)
        accepted(resp, await drive(steps, self.blocking, self.commit))


def _items(body: dict[str, Any]) -> list[Any]:
    """The body's own rules: `messages` alone, an array of 1 to 1,000 items (each is judged later, alone)."""
    unknown = sending.unknown_fields(body, BATCH_FIELDS)
    if unknown:
        raise ApiError("invalid_request", unknown[0].message,
                       details=[detail(p.path, p.message, p.code) for p in unknown])
    items = body.get("messages")
    if items is None:
        raise invalid(["messages"], "messages is required", "required")
    if not isinstance(items, list):
        raise invalid(["messages"], "messages must be an array of messages", "invalid_type")
    if not 1 <= len(items) <= MAX_ITEMS:
        raise invalid(["messages"], f"messages must hold 1 to {MAX_ITEMS:,} items; this one holds {len(items):,}",
                      "invalid_length")
    return items
