"""POST /v1/sms/send (interface §POST /sms/send; check order of decisions §1)."""
from __future__ import annotations

import hashlib
from typing import Any

import falcon
import orjson

from sandesh.domain import sending
from sandesh.domain.application import Sandesh
from sandesh.domain.errors import IdempotencyKeyTaken, InsufficientBalance
from sandesh.domain.message import accepted_reply
from sandesh.projections import idempotency

from .body import json_object
from .errors import ApiError, detail, invalid

MAX_IDEMPOTENCY_KEY = 255


def _request_hash(body: dict[str, Any]) -> str:
    """"The same body" is the same JSON value: key order and white space do not matter."""
    return hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()


def _replay(resp: falcon.Response, prior: idempotency.Prior) -> None:
    resp.status = falcon.HTTP_202
    resp.set_header("Idempotent-Replayed", "true")
    resp.content_type = falcon.MEDIA_JSON
    resp.data = prior.response.encode()


class Send:
    def __init__(self, app: Sandesh, connection: Any):
        self.app = app
        self.connection = connection

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        caller = req.context.caller
        body = json_object(req)
        request, problems = sending.parse_send(body)
        if problems:
            raise ApiError("invalid_request", problems[0].message,
                           details=[detail(p.path, p.message, p.code) for p in problems])
        assert request is not None
        key = req.get_header("Idempotency-Key")
        if key is None:
            resp.data = orjson.dumps(self._accept(caller, request))
            resp.status = falcon.HTTP_202
            return
        if not 1 <= len(key) <= MAX_IDEMPOTENCY_KEY or not key.isprintable():
            raise invalid(["Idempotency-Key"], f"Idempotency-Key must be 1 to {MAX_IDEMPOTENCY_KEY} printable "
                          "characters", "invalid_idempotency_key")
        request_hash = _request_hash(body)
        with idempotency.claim(self.connection, caller.client_id, key, self.app.clock.now()) as claim:
            if claim.running_elsewhere:
                raise ApiError("idempotency_conflict", "A request with this Idempotency-Key is still running; "
                               "retry in a second.")
            if claim.prior is not None:
                return self._replay_or_conflict(resp, claim.prior, request_hash)
            try:
                resp.data = orjson.dumps(self._accept(caller, request, key, request_hash))
                resp.status = falcon.HTTP_202
            except IdempotencyKeyTaken:
                with self.connection() as conn:
                    taken = idempotency.prior(conn, caller.client_id, key, self.app.clock.now())
                if taken is None:
                    raise
                self._replay_or_conflict(resp, taken, request_hash)

    def _replay_or_conflict(self, resp: falcon.Response, prior: idempotency.Prior, request_hash: str) -> None:
        if prior.request_hash != request_hash:
            raise ApiError("idempotency_conflict", "This Idempotency-Key was used with a different body; "
                           "use a new key for a new message.")
        _replay(resp, prior)

    def _accept(self, caller: Any, request: sending.SendRequest, key: str | None = None,
                request_hash: str | None = None) -> dict[str, Any]:
        code = sending.refusal(request.message_type, caller.allowed_types, caller.sms_enabled, caller.has_route)
        if code:
            raise ApiError(code)
        cost = sending.cost(caller.rates, request.message_type, request.segments)
        try:
            message = self.app.send(caller.client_id, caller.workspace_id, request, cost, key, request_hash)
        except InsufficientBalance:
            raise ApiError("insufficient_balance", f"The workspace balance is lower than the message cost "
                           f"({cost} paisa).") from None
        return accepted_reply(message.id, message.message_type, message.segments, message.encoding, message.cost,
                              message.expires_at)
