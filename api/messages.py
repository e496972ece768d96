"""GET /v1/sms/messages/:id (docs/api.md, "GET /v1/sms/messages/{id}"; read-your-writes:
docs/design.md, "Decisions: message lookup"), GET /v1/sms/messages (docs/api.md,
"GET /v1/sms/messages") and POST /v1/sms/messages/:id/cancel (docs/api.md, "Scheduled sends")."""
from __future__ import annotations

from typing import Any

import falcon.asgi

from sandesh.domain.application import Sandesh
from sandesh.domain.listing import MessageQuery, parse_message_query
from sandesh.projections import messages

from .answers import cursor_key, page_answer
from .body import parsed
from .errors import ApiError
from .waiting import Blocking, Commit, drive


class MessageStatus:
    def __init__(self, sandesh: Sandesh, connection: Any, blocking: Blocking):
        self.sandesh = sandesh
        self.connection = connection
        self.blocking = blocking

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, message_id: str) -> None:
        _check_id(message_id)
        resp.media = await self.blocking(self._read, message_id, req.context.caller.client_id)

    def _read(self, message_id: str, client_id: str) -> dict[str, Any]:
        with self.connection() as conn:
            row = messages.find(conn, message_id, client_id)
        if row is not None:
            return messages.view(row)
        # Not projected yet: the log is the truth, and a 202 means the message is in it.
        message = self.sandesh.history.message(message_id)
        if message is None or message.client_id != client_id:
            raise ApiError("not_found", "No message with this id.")
        return messages.from_aggregate(message)


class MessageList:
    """GET /v1/sms/messages: a page of the client's messages, newest first, from the `messages`
    read model (a message shows once the projections have applied it)."""

    def __init__(self, connection: Any, blocking: Blocking):
        self.connection = connection
        self.blocking = blocking

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        query = parsed(parse_message_query, req.params)
        resp.media = await self.blocking(self._read, query, req.context.caller.client_id)

    def _read(self, query: MessageQuery, client_id: str) -> dict[str, Any]:
        filters = {name: value for name, value in
                   (("status", query.status), ("message_type", query.message_type), ("to", query.to))
                   if value is not None}
        with self.connection() as conn:
            before = cursor_key(messages.find(conn, query.cursor, client_id), messages.ORDER, "messages") \
                if query.cursor is not None else None
            rows = messages.for_client(conn, client_id, filters, query.since, query.until, before, query.limit + 1)
        return page_answer(rows, query.limit, messages.view)


def _check_id(message_id: str) -> None:
    if not message_id.startswith("msg_") or len(message_id) > 64:
        raise ApiError("not_found", "No message with this id.")


class CancelMessage:
    """POST /v1/sms/messages/:id/cancel: 200 with the canceled message, as a lookup shows it."""

    def __init__(self, sandesh: Sandesh, blocking: Blocking, commit: Commit):
        self.sandesh, self.blocking, self.commit = sandesh, blocking, commit

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, message_id: str) -> None:
        _check_id(message_id)
        steps = self.sandesh.sending.cancel_message_steps(req.context.caller.client_id, message_id)
        resp.media = messages.from_aggregate(await drive(steps, self.blocking, self.commit))
