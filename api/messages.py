"""GET /v1/sms/messages/:id (docs/api.md, "GET /v1/sms/messages/{id}"; read-your-writes:
docs/design.md, "Decisions: message lookup") and POST /v1/sms/messages/:id/cancel (docs/api.md,
"Scheduled sends")."""
from __future__ import annotations

from typing import Any

import falcon

from sandesh.domain.application import Sandesh
from sandesh.projections import messages

from .errors import ApiError


class MessageStatus:
    def __init__(self, app: Sandesh, connection: Any):
        self.app = app
        self.connection = connection

    def on_get(self, req: falcon.Request, resp: falcon.Response, message_id: str) -> None:
        caller = req.context.caller
        _check_id(message_id)
        with self.connection() as conn:
            row = messages.find(conn, message_id, caller.client_id)
        if row is not None:
            resp.media = messages.view(row)
            return
        # Not projected yet: the log is the truth, and a 202 means the message is in it.
        message = self.app.message(message_id)
        if message is None or message.client_id != caller.client_id:
            raise ApiError("not_found", "No message with this id.")
        resp.media = messages.from_aggregate(message)


def _check_id(message_id: str) -> None:
    if not message_id.startswith("msg_") or len(message_id) > 64:
        raise ApiError("not_found", "No message with this id.")


class CancelMessage:
    """POST /v1/sms/messages/:id/cancel: 200 with the canceled message, as a lookup shows it."""

    def __init__(self, app: Sandesh):
        self.app = app

    def on_post(self, req: falcon.Request, resp: falcon.Response, message_id: str) -> None:
        _check_id(message_id)
        resp.media = messages.from_aggregate(self.app.cancel_message(req.context.caller.client_id, message_id))
