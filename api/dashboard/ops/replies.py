"""The Replies page (docs/dashboard.md, "Replies"): what recipients answered, newest first, 50 a
page, as `sandesh inbound list` reads them (projections/inbound.py, `received`), with each
reply's text while its workspace's texts can still be read and the message it answers."""
from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import falcon.asgi

from sandesh.domain.clock import iso
from sandesh.projections import inbound

from ..paging import PAGE, key_of, parse_key
from .page import OpsPage

ROOT = "/dashboard/ops/replies"
ORDER = ("received_at", "id")  # newest first, on the index replies_received


class Replies(OpsPage):
    """GET /dashboard/ops/replies?unattributed=on&before=<received_at,id>."""

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        person = await self.operator(req, resp)
        if person is None:
            return
        unattributed = req.get_param("unattributed") == "on"
        before = parse_key(req.get_param("before") or "", (float, str))
        rows = await self.blocking(self._replies, unattributed, before)
        kept = {"unattributed": "on"} if unattributed else {}
        last = rows[PAGE - 1] if len(rows) > PAGE else None
        older = f"{ROOT}?{urlencode({**kept, 'before': key_of(last, ORDER)})}" if last else None
        self.web.page(req, resp, "ops/replies.html", title="Replies", person=person, replies=rows[:PAGE],
                      unattributed=unattributed, older=older, newest=f"{ROOT}?{urlencode(kept)}" if before else None)

    def _replies(self, unattributed: bool, before: tuple[float, str] | None) -> list[dict[str, Any]]:
        with self.connection() as conn:
            rows = inbound.received(conn, unattributed, PAGE + 1, before)
        for row in rows[:PAGE]:
            row["text"] = self.sandesh.texts.open(self.sandesh.dispatch.reply(row["id"]).text)
            row["at"] = iso(row["received_at"])
        return rows

