"""Find a message (docs/dashboard.md, "Find a message"): the operators' "what happened to
message X?" from any page of the console.  The header's Message id box opens the message's
timeline in its workspace (the Messages page's, the use case of `sandesh message history`), or
says there is no such message."""
from __future__ import annotations

import falcon.asgi

from .page import OpsPage


class FindMessage(OpsPage):
    """GET /dashboard/ops/messages?id=msg_…: a GET like the Messages search (it changes nothing,
    and a CSRF token would end up in the URL)."""

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        person = await self.operator(req, resp)
        if person is None:
            return
        message_id = (req.get_param("id") or "").strip()
        if not message_id:
            return self.web.page(req, resp, "ops/find.html", title="Find a message", person=person, lookup="")
        workspace_id = await self.blocking(self._workspace_of, message_id)
        if workspace_id is None:
            return self.web.page(req, resp, "ops/find.html", status=404, title="Find a message", person=person,
                                 lookup=message_id, lookup_error=f"no such message: {message_id}")
        self.web.redirect(resp, f"/dashboard/w/{workspace_id}/messages/{message_id}")

    def _workspace_of(self, message_id: str) -> str | None:
        """The workspace of the message as the log has it (a message the projections worker has
        not reached yet is found too)."""
        message = self.sandesh.history.message(message_id)
        return message.workspace_id if message is not None else None
