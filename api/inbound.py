"""GET /v1/sms/inbound and GET /v1/sms/inbound/:id (docs/api.md, "GET /v1/sms/inbound"): the
replies attributed to the calling client, from the `replies` read model, each with its text
opened from the log (where alone it is kept, sealed)."""
from __future__ import annotations

from typing import Any

import falcon.asgi

from sandesh.domain.application import Sandesh
from sandesh.domain.clock import iso
from sandesh.domain.inbound import sender_number
from sandesh.domain.listing import REPLY_CURSOR, ReplyQuery, parse_reply_query
from sandesh.projections import inbound

from .answers import cursor_key, page_answer
from .body import parsed
from .errors import ApiError
from .waiting import Blocking


class Replies:
    """The texts of a page of replies, each opened from its reply's events."""

    def __init__(self, sandesh: Sandesh, connection: Any, blocking: Blocking):
        self.sandesh = sandesh
        self.connection = connection
        self.blocking = blocking

    def view(self, row: dict[str, Any]) -> dict[str, Any]:
        """A reply as the API shows it: the fields of its message.inbound webhook; `text` is
        null once the workspace's texts were erased."""
        text = self.sandesh.texts.open(self.sandesh.dispatch.reply(row["id"]).text)
        return {"id": row["id"], "from": sender_number(row["sender"]), "text": text, "at": iso(row["received_at"]),
                "inReplyTo": row["in_reply_to"]}


class ReplyList(Replies):
    """GET /v1/sms/inbound: a page of the client's replies, newest first."""

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        query = parsed(parse_reply_query, req.params)
        resp.media = await self.blocking(self._read, query, req.context.caller.client_id)

    def _read(self, query: ReplyQuery, client_id: str) -> dict[str, Any]:
        with self.connection() as conn:
            before = cursor_key(inbound.client_reply(conn, query.cursor, client_id), inbound.ORDER, "replies") \
                if query.cursor is not None else None
            rows = inbound.for_client(conn, client_id, query.since, query.until, before, query.limit + 1)
        return page_answer(rows, query.limit, self.view)


class Reply(Replies):
    """GET /v1/sms/inbound/:id: one reply of the client; another client's is 404."""

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, reply_id: str) -> None:
        resp.media = await self.blocking(self._read, reply_id, req.context.caller.client_id)

    def _read(self, reply_id: str, client_id: str) -> dict[str, Any]:
        row = None
        if REPLY_CURSOR.fullmatch(reply_id):
            with self.connection() as conn:
                row = inbound.client_reply(conn, reply_id, client_id)
        if row is None:
            raise ApiError("not_found", "No reply with this id.")
        return self.view(row)
