"""The Messages page of a workspace (docs/dashboard.md, "Messages"): its messages newest first,
searched by message id or number, and each message's timeline, the same use case as `sandesh
message history` (History.message_history).  Every person of the workspace may read them."""
from __future__ import annotations

from typing import Any

import falcon.asgi

from sandesh.domain import phone
from sandesh.projections import inbound, messages, registry

from .pages import Page

SHOWN = 100


class Messages(Page):
    """GET /dashboard/w/{workspace_id}/messages?q=: a message id or a number."""

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str) -> None:
        person = await self.member(req, resp, workspace_id)
        if person is None:
            return
        query = (req.get_param("q") or "").strip()
        found = await self.blocking(self._search, workspace_id, query)
        self.web.page(req, resp, "messages.html", title="Messages", person=person, workspace_id=workspace_id,
                      query=query, messages=found)

    def _search(self, workspace_id: str, query: str) -> list[dict[str, Any]]:
        message_id = query if query.startswith("msg_") else None
        number = (phone.normalise(query) or query) if query and message_id is None else None
        with self.connection() as conn:
            return [messages.view(row) for row in messages.search(conn, workspace_id, message_id, number, SHOWN)]


class Timeline(Page):
    """GET /dashboard/w/{workspace_id}/messages/{message_id}: the message's whole life, oldest first."""

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str,
                     message_id: str) -> None:
        person = await self.member(req, resp, workspace_id)
        if person is None:
            return
        history = await self.blocking(self._history, workspace_id, message_id)
        if history is None:
            return self.web.not_found(req, resp, person)
        self.web.page(req, resp, "timeline.html", title="Message timeline", person=person,
                      workspace_id=workspace_id, history=history, described=described)

    def _history(self, workspace_id: str, message_id: str) -> dict[str, Any] | None:
        message = self.app.history.message(message_id)
        if message is None or message.workspace_id != workspace_id:
            return None
        with self.connection() as conn:
            return self.app.history.message_history(message_id, inbound.replies_to(conn, message_id),
                                                    lambda client_id: registry.webhook_url(conn, client_id))


def described(entry: dict[str, Any]) -> str:
    """An entry's details as `name: value` text (its time and type are shown apart)."""
    return ", ".join(f"{name}: {value}" for name, value in entry.items()
                     if name not in ("at", "type") and value is not None)
