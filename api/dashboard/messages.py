"""The Messages page of a workspace (docs/dashboard.md, "Messages"): its messages newest first,
50 a page, searched by message id or number and filtered by status, type, client and dates, and
all that match as a CSV file; and each message's timeline, the same use case as `sandesh message history`
(History.message_history).  Every person of the workspace may read them."""
from __future__ import annotations

import csv
import io
from typing import Any, AsyncIterator

import falcon.asgi
from markupsafe import Markup

from sandesh.domain import phone
from sandesh.domain.bs import bs_iso
from sandesh.domain.clock import iso
from sandesh.domain.message import (CANCELED, DELIVERED, FAILED, QUEUED, REJECTED, SCHEDULED, SENT, SUBMITTED,
                                    UNDELIVERED)
from sandesh.domain.types import MESSAGE_TYPES
from sandesh.projections import inbound, messages, registry

from .pages import Page
from .paging import PAGE, Paged, choices, client_choices, day_range, key_of, parse_key, requested
from .shown import details
from .i18n import _

STATUSES = (SCHEDULED, QUEUED, SUBMITTED, SENT, DELIVERED, UNDELIVERED, FAILED, REJECTED, CANCELED)
FIELDS = ("q", "status", "type", "client", "from", "to")
CSV_PAGE = 1000  # rows read at a time for the CSV file: its cost grows with the rows, never held at once
CSV_COLUMNS = ("number", "message id", "client", "type", "status", "error", "segments", "cost (NPR)",
               "created (UTC)", "created (BS, Nepal day)")
# The statuses' and the types' names, as the page shows them (`said(message.status)`): the
# names themselves are the domain's (domain/message.py, domain/types.py)
NAMES = (_("scheduled"), _("queued"), _("submitted"), _("sent"), _("delivered"), _("undelivered"), _("failed"),
         _("rejected"), _("canceled"), _("transactional"), _("otp"), _("promotional"))


class Messages(Page):
    """GET /dashboard/w/{workspace_id}/messages?q=&status=&type=&client=&from=&to=, and
    before= or after= a row's key for the next or previous page."""
    section = "messages"

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str) -> None:
        person = await self.member(req, resp, workspace_id)
        if person is None:
            return
        typed, since, until, errors = asked(req)
        found, clients = await self.blocking(self._search, workspace_id, typed, since, until, requested(req))
        self.web.page(req, resp, "messages.html", status=400 if errors else 200, title=_("Messages"), person=person,
                      workspace_id=workspace_id, typed=typed, errors=errors, page_size=PAGE,
                      options={"status": choices(STATUSES), "type": choices(MESSAGE_TYPES),
                               "client": client_choices(clients)},
                      messages=[messages.view(row) for row in found.rows],
                      pages=found.links(f"/dashboard/w/{workspace_id}/messages", typed))

    def _search(self, workspace_id: str, typed: dict[str, str], since: float | None, until: float | None,
                page: tuple[str, str] | None) -> tuple[Paged, list[dict[str, Any]]]:
        keyed = parse_key(page[1], (float, str)) if page else None
        page = (page[0], keyed) if keyed else None
        with self.connection() as conn:
            rows = messages.search(conn, workspace_id, filters(typed), since, until, page, PAGE + 1)
            clients = [registry.client_view(row) for row in registry.clients(conn, workspace_id)]
        return Paged(rows, page, lambda row: key_of(row, messages.ORDER)), clients


def asked(req: falcon.asgi.Request) -> tuple[dict[str, str], float | None, float | None, dict[str, str]]:
    """The form's fields as typed, and its days as [since, until) with the problem of each that
    is not a date (paging.day_range)."""
    typed = {name: (req.get_param(name) or "").strip() for name in FIELDS}
    return (typed, *day_range(typed))


def filters(typed: dict[str, str]) -> dict[str, str]:
    """The read model's filters of what the form asks: the search box is a message id or a number."""
    found = {"status": typed["status"], "message_type": typed["type"], "client_id": typed["client"]}
    query = typed["q"]
    if query.startswith("msg_"):
        found["message_id"] = query
    elif query:
        found["number"] = phone.normalise(query) or query
    return {k: v for k, v in found.items() if v}


class MessagesCsv(Messages):
    """GET /dashboard/w/{workspace_id}/messages.csv?q=&status=&type=&client=&from=&to=: every
    message the page's filters match, newest first, with its BS day beside its time; written as
    it is read, a thousand rows at a time, so a long history costs no memory."""
    section = "messages"

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str) -> None:
        person = await self.member(req, resp, workspace_id)
        if person is None:
            return
        typed, since, until, errors = asked(req)
        if errors:
            return await super().on_get(req, resp, workspace_id)  # the page says what is wrong
        brands = await self.blocking(self._brands, workspace_id)
        resp.content_type = "text/csv; charset=utf-8"
        resp.set_header("Content-Disposition", f'attachment; filename="messages-{workspace_id}.csv"')
        resp.stream = self._rows(workspace_id, filters(typed), since, until, brands)

    async def _rows(self, workspace_id: str, wanted: dict[str, str], since: float | None, until: float | None,
                    brands: dict[str, str]) -> AsyncIterator[bytes]:
        yield ("\ufeff" + line(CSV_COLUMNS)).encode()  # Excel opens UTF-8 with its BOM
        page = None
        while True:
            rows = await self.blocking(self._page, workspace_id, wanted, since, until, page)
            if not rows:
                return
            yield "".join(line((row["to"], row["id"], brands.get(row["client_id"], row["client_id"]),
                                row["message_type"], row["status"], row["error"] or "", row["segments"],
                                f"{row['cost'] / 100:.2f}", iso(row["created_at"]), bs_iso(row["created_at"])))
                          for row in rows).encode()
            page = ("before", tuple(rows[-1][column] for column in messages.ORDER))

    def _page(self, workspace_id: str, wanted: dict[str, str], since: float | None, until: float | None,
              page: tuple[str, tuple[float, str]] | None) -> list[dict[str, Any]]:
        with self.connection() as conn:
            return messages.search(conn, workspace_id, wanted, since, until, page, CSV_PAGE)

    def _brands(self, workspace_id: str) -> dict[str, str]:
        with self.connection() as conn:
            return {row["id"]: row["brand"] for row in registry.clients(conn, workspace_id)}


def line(values: Any) -> str:
    out = io.StringIO()
    csv.writer(out).writerow(values)
    return out.getvalue()


class Timeline(Page):
    """GET /dashboard/w/{workspace_id}/messages/{message_id}: the message's whole life, oldest first."""
    section = "messages"

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str,
                     message_id: str) -> None:
        person = await self.member(req, resp, workspace_id)
        if person is None:
            return
        history = await self.blocking(self._history, workspace_id, message_id)
        if history is None:
            return self.web.not_found(req, resp, person)
        self.web.page(req, resp, "timeline.html", title=_("Message timeline"), person=person,
                      workspace_id=workspace_id, history=history, described=described)

    def _history(self, workspace_id: str, message_id: str) -> dict[str, Any] | None:
        message = self.sandesh.history.message(message_id)
        if message is None or message.workspace_id != workspace_id:
            return None
        with self.connection() as conn:
            return self.sandesh.history.message_history(message_id, inbound.replies_to(conn, message_id),
                                                    lambda client_id: registry.webhook_url(conn, client_id))


def described(entry: dict[str, Any]) -> Markup:
    """An entry's details as `name: value` text (its time and type are shown apart)."""
    return details({name: value for name, value in entry.items() if name not in ("at", "type")})
