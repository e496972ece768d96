"""The Send page of a workspace (docs/dashboard.md, "Sending"): recipients pasted or uploaded (a
CSV file or an XLSX workbook), a message with `{column}` placeholders, a type and an optional
time; Preview shows what would go, to whom, at what cost, and what is refused and why; "Send N
messages" sends the preview as one campaign.  Each request reads its form, calls one use case of
domain/usecases/campaigns.py, and renders what it returns."""
from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

import falcon.asgi
import orjson

from sandesh.domain.campaign_plan import FILE, TYPES, Plan, SendForm
from sandesh.domain.clock import NEPAL
from sandesh.domain.errors import NotFound
from sandesh.domain.person import actor_of, may_send
from sandesh.domain.recipients import MAX_ROWS
from sandesh.domain.usecases.campaigns import Sent
from sandesh.projections import contacts

from ..uploads.children import Readers
from ..uploads.limits import MAX_COLUMNS, MAX_UPLOAD
from .pages import Page, Posted
from .shown import npr
from .web import LIST_FORM
from . import i18n
from .i18n import _

SHOWN = 10  # messages shown in a preview, exactly as they will be sent
SHOWN_REFUSED = 200
SENDERS_ONLY = _("Owners, developers and senders send from the dashboard; viewers read only.")
# The types' names, as the form offers them (`said(t)`): the catalog's copy of TYPES
TYPE_NAMES = (_("transactional"), _("promotional"))
FIELDS = ("recipients", "text", "type", "send_at", "number_column", "list", "template")


class SendingPage(Page):
    section = "send"

    async def show(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, person: dict[str, Any],
                   workspace_id: str, *, status: int = 200, typed: dict[str, str] | None = None,
                   errors: dict[str, str] | None = None, plan: Plan | None = None, token: str | None = None,
                   columns: list[str] | None = None, source: str = "") -> None:
        """The form (with the workspace's lists and templates to choose from), or a preview."""
        lists, templates = ([], []) if plan else await self.blocking(self._choices, workspace_id)
        self.web.page(req, resp, "send.html", status=status, title=_("Send"), person=person, workspace_id=workspace_id,
                      typed=typed or {"type": TYPES[0]}, errors=errors or {}, types=TYPES, plan=plan,
                      shown=plan.messages[:SHOWN] if plan else (), refused=plan.refused[:SHOWN_REFUSED] if plan else (),
                      token=token, columns=columns or [], source=source, npr=npr, nepal_input=nepal_input,
                      max_rows=MAX_ROWS, max_mb=MAX_UPLOAD // 2**20, max_columns=MAX_COLUMNS, lists=lists,
                      templates=templates)

    def _choices(self, workspace_id: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The workspace's contact lists, and its templates with their texts (erased ones left out)."""
        with self.connection() as conn:
            lists = contacts.lists_of(conn, workspace_id)
            templates = contacts.templates_of(conn, workspace_id)
        opened = [{"id": t["id"], "name": t["name"], "text": self.sandesh.texts.open(t["text"])} for t in templates]
        return lists, [t for t in opened if t["text"] is not None]


class Send(SendingPage):
    """GET /dashboard/w/{workspace_id}/send: the form; POST: its preview (an uploaded list read
    by `readers`)."""

    def __init__(self, *parts: Any, readers: Readers):
        super().__init__(*parts)
        self.readers = readers

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str) -> None:
        person = await self.permitted(req, resp, workspace_id, may_send, SENDERS_ONLY)
        if person is not None:
            await self.show(req, resp, person, workspace_id)

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str) -> None:
        posted = await self.change(req, resp, workspace_id, may_send, SENDERS_ONLY, LIST_FORM)
        if posted is None:
            return
        if posted.too_large is not None:
            return await self.show(req, resp, posted.person, workspace_id, status=413,
                                   errors={"file": str(posted.too_large)})
        typed = {name: posted.fields.get(name, "") for name in FIELDS}
        if posted.fault:
            return await self.show(req, resp, posted.person, workspace_id, status=400, typed=typed,
                                   errors={"file": posted.fault})
        form = await self._form(posted, typed)
        found = await self.blocking(self.sandesh.campaigns.preview, workspace_id, posted.person["id"], form)
        await self.show(req, resp, posted.person, workspace_id, status=400 if found.errors else 200,
                        typed={**typed, "text": found.text}, errors=found.errors, plan=found.plan, token=found.token,
                        columns=found.columns, source=found.source)

    async def _form(self, posted: Posted, typed: dict[str, str]) -> SendForm:
        """The form as the use case takes it; an uploaded list is read here, on a child process,
        when it is where the recipients come from."""
        upload = posted.files.get("file")
        form = SendForm(typed["recipients"], typed["text"], typed["type"], typed["send_at"], typed["list"],
                        typed["template"], uploaded=upload is not None and bool(upload[1]))
        if upload is None or form.sources != [FILE]:
            return form
        return replace(form, file=await self.readers.read(upload[0], upload[1], typed["number_column"]))


class SendConfirm(SendingPage):
    """POST /dashboard/w/{workspace_id}/send/confirm: the previewed campaign sent, once."""

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str) -> None:
        posted = await self.change(req, resp, workspace_id, may_send, SENDERS_ONLY)
        if posted is None:
            return
        person, token = posted.person, posted.fields.get("token", "")
        done = await self.blocking(self.sandesh.campaigns.send, workspace_id, person["id"], token,
                                   actor_of(person["email"]))
        if isinstance(done, Sent):
            return self.web.redirect(resp, f"/dashboard/w/{workspace_id}/campaigns/{done.campaign_id}")
        if done.plan is not None:  # the balance is short: the preview again, with why
            return await self.show(req, resp, person, workspace_id, status=402, plan=done.plan, token=token,
                                   typed={"text": done.plan.text, "type": done.plan.message_type},
                                   errors={"balance": done.reason})
        await self.show(req, resp, person, workspace_id, status=400, errors={"recipients": done.reason})


class Hints(SendingPage):
    """POST /dashboard/w/{workspace_id}/send/hints (JSON, from the page's script as one types):
    the segments, encoding and cost of the text for one recipient, and the GSM-7 stand-ins of the
    few characters that make it UCS-2, as POST /v1/sms/preview answers them."""

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str) -> None:
        posted = await self.change(req, resp, workspace_id, may_send, SENDERS_ONLY)
        if posted is None:
            return
        try:
            found = await self.blocking(self.sandesh.campaigns.hints, workspace_id, posted.fields.get("text", ""),
                                        posted.fields.get("type", ""))
        except NotFound:
            return self.web.not_found(req, resp, posted.person)
        language = self.web.language(req, posted.person)
        resp.content_type = falcon.MEDIA_JSON
        resp.data = orjson.dumps({
            "segments": found.segmentation.segments, "encoding": found.segmentation.encoding,
            "cost": npr(found.cost), "sendable": found.sendable,
            "characters": [{"position": c.position, "character": c.character, "replacement": c.replacement}
                           for c in found.characters],
            "gsm7Segments": found.gsm7.segments if found.gsm7 else None,
            "said": hint_said(found, language)})


def hint_said(found: Any, language: str) -> str:
    """The hint under the message, as the page shows it, in the page's language: segments,
    encoding and cost, whether it is too long, and the stand-ins that would make it GSM-7."""
    said = i18n.CATALOGS[language]
    segments = found.segmentation.segments
    text = " · ".join((said.ngettext("%(n)s segment", "%(n)s segments", segments) % {"n": segments},
                       found.segmentation.encoding,
                       said.gettext("%(cost)s a recipient") % {"cost": npr(found.cost, language)}))
    if not found.sendable:
        text += " · " + said.gettext("over 6 segments: shorten it")
    stand_ins = [c for c in found.characters if c.replacement is not None]
    if stand_ins:
        pairs = ", ".join(f"“{c.character}” → “{c.replacement}”" for c in stand_ins)
        text += " · " + said.gettext("%(pairs)s would make it GSM-7") % {"pairs": pairs}
        if found.gsm7:
            n = found.gsm7.segments
            text += " (" + said.ngettext("%(n)s segment", "%(n)s segments", n) % {"n": n} + ")"
    return text


def nepal_input(moment: float) -> str:
    return datetime.fromtimestamp(moment, NEPAL).strftime("%Y-%m-%dT%H:%M")
