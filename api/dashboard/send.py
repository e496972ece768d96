"""The Send page of a workspace (docs/dashboard.md, "Sending"): recipients pasted or uploaded (a
CSV file or an XLSX workbook), a message with `{column}` placeholders, a type and an optional
time; Preview shows what would go, to whom, at what cost, and what is refused and why; "Send N
messages" sends the preview as one campaign (domain/usecases/campaigns.py).

The preview's recipients and text are kept sealed between the two steps (projections/drafts.py)
under a token the confirming form carries: the campaign's id comes from it, so the same form
posted twice sends once."""
from __future__ import annotations

import secrets
from datetime import datetime
from typing import Any

import falcon.asgi
import orjson

from sandesh.domain.clock import NEPAL
from sandesh.domain.errors import InsufficientBalance, InvalidRequest, InvalidTransition, Refused
from sandesh.domain.person import actor_of, may_send
from sandesh.domain.ports import Caller
from sandesh.domain.preview import preview
from sandesh.domain.promo_hours import parse as parse_promo_hours
from sandesh.domain.recipients import MAX_ROWS, Recipient, Refusal, placeholders
from sandesh.domain.sending import SCHEDULE_AHEAD_MAX
from sandesh.domain.usecases.campaigns import SHOWN, Plan, dashboard_client_id
from sandesh.projections import contacts, drafts, registry

from ..uploads.children import Readers
from ..uploads.files import Read, read_typed
from ..uploads.limits import MAX_COLUMNS, MAX_UPLOAD
from .pages import Page, Posted
from .shown import npr
from .web import LIST_FORM, Upload

TYPES = ("transactional", "promotional")
SENDERS_ONLY = "Owners, developers and senders send from the dashboard; viewers read only."
REFUSED = {"forbidden": "This workspace may not send {type} messages: ask the operators.",
           "sms_disabled": "Sending is switched off for now by the operators. Try again later.",
           "unavailable": "No SIM can send right now. Try again in a few minutes."}


class SendingPage(Page):
    section = "send"

    def __init__(self, *parts: Any, route_window: float):
        super().__init__(*parts)
        self.route_window = route_window

    async def sender(self, req: falcon.asgi.Request, resp: falcon.asgi.Response,
                     workspace_id: str) -> dict[str, Any] | None:
        return await self.permitted(req, resp, workspace_id, may_send, SENDERS_ONLY)

    async def sent_form(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str,
                        upload: Upload | None = None) -> Posted | None:
        """A posted form and the sender who posted it; None when the answer is given already
        (a person who may not send, or a form without its CSRF token)."""
        return await self.change(req, resp, workspace_id, may_send, SENDERS_ONLY, upload)

    def state(self, workspace_id: str) -> tuple[Caller, int]:
        """The workspace as a send of its Dashboard client is decided on, and its balance."""
        with self.connection() as conn:
            row = registry.sending_state(conn, workspace_id, self.route_window)
        if row is None:
            raise InvalidTransition("no such workspace")
        if row["status"] != "active":
            raise InvalidTransition(f"The workspace is {row['status']}: it sends once the operators activate it.")
        has_route = row["route_until"] is not None and self.sandesh.clock.now() < row["route_until"]
        caller = Caller(dashboard_client_id(workspace_id), workspace_id, "", row["status"], row["rates"], row["types"],
                        row["sms_enabled"], has_route, parse_promo_hours(row["promo_hours"]))
        return caller, row["balance"]

    async def show(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, person: dict[str, Any], workspace_id: str,
             *, status: int = 200, typed: dict[str, str] | None = None, errors: dict[str, str] | None = None,
             plan: Plan | None = None, token: str | None = None, columns: list[str] | None = None,
             source: str = "") -> None:
        lists, templates = ([], []) if plan else await self.blocking(self._choices, workspace_id)
        self.web.page(req, resp, "send.html", status=status, title="Send", person=person, workspace_id=workspace_id,
                      typed=typed or {"type": "transactional"}, errors=errors or {}, types=TYPES, plan=plan,
                      shown=plan.messages[:SHOWN] if plan else (), refused=plan.refused[:200] if plan else (),
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

    def __init__(self, *parts: Any, route_window: float, readers: Readers):
        super().__init__(*parts, route_window=route_window)
        self.readers = readers

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str) -> None:
        person = await self.sender(req, resp, workspace_id)
        if person is not None:
            await self.show(req, resp, person, workspace_id)

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str) -> None:
        posted = await self.sent_form(req, resp, workspace_id, LIST_FORM)
        if posted is None:
            return
        person, fields, files, fault = posted.person, posted.fields, posted.files, posted.fault
        if posted.too_large is not None:
            return await self.show(req, resp, person, workspace_id, status=413, errors={"file": str(posted.too_large)})
        typed = {name: fields.get(name, "") for name in ("recipients", "text", "type", "send_at", "number_column",
                                                         "list", "template")}
        if fault:
            return await self.show(req, resp, person, workspace_id, status=400, typed=typed, errors={"file": fault})
        upload = files.get("file")
        chosen = [name for name, given in (("the numbers typed", typed["recipients"].strip()),
                                           ("a file", upload is not None and upload[1]),
                                           ("a contact list", typed["list"])) if given]
        uploaded = None
        if chosen == ["a file"] and upload is not None:
            uploaded = await self.readers.read(upload[0], upload[1], typed["number_column"])
        found = await self.blocking(self._preview, workspace_id, person, typed, chosen, uploaded)
        errors, plan, token, columns, source = found
        await self.show(req, resp, person, workspace_id, status=400 if errors else 200, typed=typed, errors=errors,
                        plan=plan, token=token, columns=columns, source=source)

    def _preview(self, workspace_id: str, person: dict[str, Any], typed: dict[str, str], chosen: list[str],
                 uploaded: Read | None) -> tuple[dict[str, str], Plan | None, str | None, list[str], str]:
        """`chosen`: where the recipients come from; `uploaded`: the file's, read on a child."""
        if len(chosen) > 1:
            return {"recipients": f"Send to one of {', '.join(chosen)}, not to {len(chosen)} at once."}, None, None, \
                [], ""
        template = None
        if typed["template"]:
            template = self._template(workspace_id, typed["template"])
            if template is None:
                return {"template": "That template is gone: choose another."}, None, None, [], ""
            if not typed["text"].strip():
                typed["text"] = template["text"]
        if typed["list"]:
            read = self._contacts(workspace_id, typed["list"])
        elif uploaded is not None:
            read = uploaded
        else:
            read = read_typed(typed["recipients"]) if typed["recipients"].strip() else Read()
        errors, recipients, refused, columns, source = read.errors, read.recipients, read.refused, read.columns, \
            read.source
        if not chosen:
            errors["recipients"] = "Type or paste the numbers, upload a list, or choose a contact list."
        message_type = typed["type"] if typed["type"] in TYPES else ""
        if not message_type:
            errors["type"] = "Choose transactional or promotional."
        missing = [name for name in placeholders(typed["text"]) if name not in columns]
        if missing and "file" not in errors:
            errors["text"] = ("The list has no column " + ", ".join("{" + m + "}" for m in missing)
                              + (": the columns are " + ", ".join(columns) + "." if columns
                                 else ": placeholders need an uploaded list with columns."))
        send_at = None
        if typed["send_at"].strip():
            send_at = parse_nepal_time(typed["send_at"])
            now = self.sandesh.clock.now()
            if send_at is None:
                errors["send_at"] = "A date and time, Nepal time."
            elif send_at <= now or send_at > now + SCHEDULE_AHEAD_MAX:
                errors["send_at"] = "A time from now to 30 days ahead, Nepal time."
        if not typed["text"].strip():
            errors["text"] = "Type the message."
        if errors:
            return errors, None, None, columns, source
        try:
            caller, balance = self.state(workspace_id)
            plan = self.sandesh.campaigns.plan(caller, balance, recipients, refused, typed["text"], message_type, send_at)
        except Refused as refusal:
            return {"recipients": REFUSED.get(refusal.code, refusal.code).format(type=message_type)}, None, None, \
                columns, source
        except (InvalidTransition, InvalidRequest) as problem:
            return {"recipients": str(problem)}, None, None, columns, source
        token = secrets.token_urlsafe(18)
        draft = {"recipients": [[r.line, r.number, r.fields] for r in recipients],
                 "refused": [[r.line, r.given, r.reason] for r in refused],
                 "text": typed["text"], "type": message_type, "sendAt": send_at, "source": source,
                 "template": template["name"] if template and template["text"] == typed["text"] else None}
        sealed = self.sandesh.texts.seal(workspace_id, orjson.dumps(draft).decode())
        with self.connection() as conn:
            drafts.keep(conn, token, workspace_id, person["id"], sealed, self.sandesh.clock.now())
        return {}, plan, token, columns, source

    def _template(self, workspace_id: str, template_id: str) -> dict[str, Any] | None:
        """The template with its text opened; None when it is gone or erased."""
        with self.connection() as conn:
            found = contacts.one_template(conn, workspace_id, template_id)
        text = self.sandesh.texts.open(found["text"]) if found else None
        return {"name": found["name"], "text": text} if found and text is not None else None

    def _contacts(self, workspace_id: str, list_id: str) -> Read:
        """The recipients of a contact list, numbered as the list shows them, with their columns."""
        with self.connection() as conn:
            found = contacts.one_list(conn, workspace_id, list_id)
            rows = contacts.contacts_of(conn, list_id) if found else []
        if found is None:
            return Read(errors={"list": "That contact list is gone: choose another."})
        read = Read(source=f"the contact list {found['name']!r}")
        columns: dict[str, None] = {}
        for n, row in enumerate(rows, start=1):
            fields = self.sandesh.contacts.fields(row["fields"])
            columns.update(dict.fromkeys(fields))
            read.recipients.append(Recipient(n, row["number"], fields))
        read.columns = list(columns)
        return read


class SendConfirm(SendingPage):
    """POST /dashboard/w/{workspace_id}/send/confirm: the previewed campaign sent, once."""

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str) -> None:
        posted = await self.sent_form(req, resp, workspace_id)
        if posted is None:
            return
        form, person = posted.fields, posted.person
        token = form.get("token", "")
        try:
            found = await self.blocking(self._send, workspace_id, person, token)
        except InsufficientBalance as short:
            plan, typed = await self.blocking(self._again, workspace_id, person, token)
            return await self.show(req, resp, person, workspace_id, status=402, typed=typed, plan=plan, token=token,
                             errors={"balance": str(short)})
        except (InvalidTransition, InvalidRequest, Refused) as problem:
            text = REFUSED.get(getattr(problem, "code", ""), str(problem))
            return await self.show(req, resp, person, workspace_id, status=400, errors={"recipients": text})
        if found is None:
            return await self.show(req, resp, person, workspace_id, status=400,
                             errors={"recipients": "This preview is older than an hour: preview again."})
        self.web.redirect(resp, f"/dashboard/w/{workspace_id}/campaigns/{found}")

    def _draft(self, workspace_id: str, person: dict[str, Any], token: str) -> dict[str, Any] | None:
        with self.connection() as conn:
            sealed = drafts.find(conn, token, workspace_id, person["id"], self.sandesh.clock.now())
        opened = self.sandesh.texts.open(sealed) if sealed else None
        return orjson.loads(opened) if opened else None

    def _plan(self, workspace_id: str, draft: dict[str, Any]) -> tuple[Caller, Plan]:
        caller, balance = self.state(workspace_id)
        recipients = [Recipient(line, number, fields) for line, number, fields in draft["recipients"]]
        refused = [Refusal(line, given, reason) for line, given, reason in draft["refused"]]
        return caller, self.sandesh.campaigns.plan(caller, balance, recipients, refused, draft["text"], draft["type"],
                                               draft["sendAt"])

    def _send(self, workspace_id: str, person: dict[str, Any], token: str) -> str | None:
        """The campaign's id; None when the draft is gone (sent already: its campaign)."""
        draft = self._draft(workspace_id, person, token)
        if draft is None:
            return self.sandesh.campaigns.sent(workspace_id, token)
        self.sandesh.campaigns.ready()
        actor = actor_of(person["email"])
        self.sandesh.campaigns.dashboard_client(workspace_id, actor)
        caller, plan = self._plan(workspace_id, draft)
        campaign, _ = self.sandesh.campaigns.send(caller, actor, plan, token, draft.get("template"))
        return campaign.id

    def _again(self, workspace_id: str, person: dict[str, Any], token: str) -> tuple[Plan | None, dict[str, str]]:
        draft = self._draft(workspace_id, person, token)
        if draft is None:
            return None, {}
        return self._plan(workspace_id, draft)[1], {"text": draft["text"], "type": draft["type"]}


class Hints(SendingPage):
    """POST /dashboard/w/{workspace_id}/send/hints (JSON, from the page's script as one types):
    the segments, encoding and cost of the text for one recipient, and the GSM-7 stand-ins of the
    few characters that make it UCS-2, as POST /v1/sms/preview answers them."""

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str) -> None:
        posted = await self.sent_form(req, resp, workspace_id)
        if posted is None:
            return
        form, person = posted.fields, posted.person
        with_rates = await self.blocking(self._rates, workspace_id)
        message_type = form.get("type") if form.get("type") in TYPES else "transactional"
        found = preview(form.get("text", ""), with_rates, message_type)
        resp.content_type = falcon.MEDIA_JSON
        resp.data = orjson.dumps({
            "segments": found.segmentation.segments, "encoding": found.segmentation.encoding,
            "cost": npr(found.cost), "sendable": found.sendable,
            "characters": [{"position": c.position, "character": c.character, "replacement": c.replacement}
                           for c in found.characters],
            "gsm7Segments": found.gsm7.segments if found.gsm7 else None})

    def _rates(self, workspace_id: str) -> dict[str, int]:
        with self.connection() as conn:
            row = registry.sending_state(conn, workspace_id, self.route_window)
        return row["rates"] if row else {}


def parse_nepal_time(text: str) -> float | None:
    """`2026-12-01T09:30` (a datetime-local field) in Nepal time, as epoch seconds; None if it is not one."""
    try:
        return datetime.fromisoformat(text.strip()).replace(tzinfo=NEPAL).timestamp()
    except ValueError:
        return None


def nepal_input(moment: float) -> str:
    return datetime.fromtimestamp(moment, NEPAL).strftime("%Y-%m-%dT%H:%M")

