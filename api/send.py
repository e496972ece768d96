"""POST /v1/sms/send (docs/api.md, "POST /v1/sms/send"; the checks in the order of docs/api.md,
"Order of checks"): parse the body and the Idempotency-Key header, call the use case
(Sandesh.send_sms), render its 202."""
from __future__ import annotations

import falcon

from sandesh.domain import sending
from sandesh.domain.application import Sandesh

from .body import json_object, parsed
from .errors import invalid

MAX_IDEMPOTENCY_KEY = 255


class Send:
    def __init__(self, app: Sandesh):
        self.app = app

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = json_object(req)
        req.context.message_type = body.get("messageType", "transactional")  # the sends metric's type
        request = parsed(sending.parse_send, body)
        key = req.get_header("Idempotency-Key")
        if key is not None and (not 1 <= len(key) <= MAX_IDEMPOTENCY_KEY or not key.isascii() or not key.isprintable()):
            raise invalid(["Idempotency-Key"], f"Idempotency-Key must be 1 to {MAX_IDEMPOTENCY_KEY} printable ASCII "
                          "characters", "invalid_idempotency_key")
        sent = self.app.send_sms(req.context.caller, request, key,
                                 sending.request_hash(body) if key is not None else None)
        resp.status = falcon.HTTP_202
        resp.content_type = falcon.MEDIA_JSON
        resp.data = sent.body
        if sent.replayed:
            resp.set_header("Idempotent-Replayed", "true")
