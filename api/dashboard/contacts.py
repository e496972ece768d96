"""The Contacts and Templates pages of a workspace (docs/dashboard.md, "Contacts and templates"):
named contact lists, made from numbers typed or a CSV or XLSX file with any columns, added to
and trimmed, each contact shown with whether it opted out; and message templates saved by name.
Owners, developers and senders change them; viewers read.  The Send page sends to a list and
starts from a template (send.py)."""
from __future__ import annotations

from typing import Any

import falcon.asgi

from sandesh.domain.errors import InvalidInput, InvalidTransition, NotFound
from sandesh.domain.person import actor_of, may_send
from sandesh.domain.recipients import MAX_ROWS, Listed, read_typed
from sandesh.domain.usecases.contacts import open_fields
from sandesh.projections import contacts

from ..uploads.children import Readers
from ..uploads.limits import MAX_COLUMNS, MAX_UPLOAD
from .pages import Page, Posted
from .web import LIST_FORM
from .i18n import _, told

SENDERS_CHANGE = _("Owners, developers and senders change contact lists and templates; viewers read only.")
SHOWN_CONTACTS = 500


class ContactsPage(Page):
    """`readers` read an uploaded list (api/uploads/children.py)."""
    section = "contacts"

    def __init__(self, *parts: Any, readers: Readers):
        super().__init__(*parts)
        self.readers = readers

    async def listed(self, posted: Posted) -> Listed:
        """The posted form's recipients: the file's, read on a child process, or the numbers typed."""
        upload = posted.files.get("file")
        if upload is not None and upload[1]:
            read = await self.readers.read(upload[0], upload[1], posted.fields.get("number_column", ""))
        elif posted.fields.get("recipients", "").strip():
            read = await self.blocking(read_typed, posted.fields["recipients"])
        else:
            read = Listed()
        if posted.fault:
            read.errors["file"] = posted.fault
        return read


class Contacts(ContactsPage):
    """GET /dashboard/w/{workspace_id}/contacts: the lists; POST: a new list."""

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str) -> None:
        person = await self.member(req, resp, workspace_id)
        if person is not None:
            await self.show(req, resp, person, workspace_id)

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str) -> None:
        posted = await self.change(req, resp, workspace_id, may_send, SENDERS_CHANGE, LIST_FORM)
        if posted is None:
            return
        form, person = posted.fields, posted.person
        if posted.too_large is not None:
            return await self.show(req, resp, person, workspace_id, status=413, errors={"file": str(posted.too_large)})
        read = await self.listed(posted)
        errors = dict(read.errors)
        if not read.recipients and not errors:
            errors["recipients"] = _("Type the numbers, or upload a list.") if not read.refused else \
                _("No number in it reads as a Nepal mobile number (line %(line)s: %(given)s).",
                  line=read.refused[0].line, given=repr(read.refused[0].given))
        if not errors:
            try:
                made = await self.blocking(self.sandesh.contacts.create_list, workspace_id, form.get("name", ""),
                                           read.recipients, actor_of(person["email"]))
            except InvalidInput as problem:
                errors["name"] = told(problem)
            except InvalidTransition as problem:
                errors["recipients"] = told(problem)
            else:
                return self.web.redirect(resp, f"/dashboard/w/{workspace_id}/contacts/{made.id}"
                                               f"?added={len(read.recipients)}&refused={len(read.refused)}")
        await self.show(req, resp, person, workspace_id, status=400, errors=errors, typed=form, columns=read.columns)

    async def show(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, person: dict[str, Any],
                   workspace_id: str, *, status: int = 200, errors: dict[str, str] | None = None,
                   typed: dict[str, str] | None = None, columns: list[str] | None = None) -> None:
        lists = await self.blocking(self._lists, workspace_id)
        self.web.page(req, resp, "contacts.html", status=status, title=_("Contacts"), person=person,
                      workspace_id=workspace_id, lists=lists, errors=errors or {}, typed=typed or {},
                      columns=columns or [], changes=may_send(person["role"]), max_rows=MAX_ROWS,
                      max_mb=MAX_UPLOAD // 2**20, max_columns=MAX_COLUMNS)

    def _lists(self, workspace_id: str) -> list[dict[str, Any]]:
        with self.connection() as conn:
            return contacts.lists_of(conn, workspace_id)


class ContactListPage(ContactsPage):
    """GET /dashboard/w/{workspace_id}/contacts/{list_id}: a list's contacts, their columns and
    which opted out; POST .../{action}: add, remove (a number) or delete (the list)."""

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str,
                     list_id: str, action: str = "") -> None:
        person = await self.member(req, resp, workspace_id)
        if person is not None and action:
            self.web.not_found(req, resp, person)
        elif person is not None:
            await self.show(req, resp, person, workspace_id, list_id)

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str,
                      list_id: str, action: str = "") -> None:
        if action not in ("add", "remove", "delete"):
            person = await self.member(req, resp, workspace_id)
            return self.web.not_found(req, resp, person) if person is not None else None
        if action == "add":
            return await self._add(req, resp, workspace_id, list_id)
        posted = await self.change(req, resp, workspace_id, may_send, SENDERS_CHANGE)
        if posted is None:
            return
        form, person = posted.fields, posted.person
        actor = actor_of(person["email"])
        try:
            if action == "remove":
                await self.blocking(self.sandesh.contacts.remove, workspace_id, list_id, form.get("number", ""), actor)
                return self.web.redirect(resp, f"/dashboard/w/{workspace_id}/contacts/{list_id}?removed=1")
            held = await self.blocking(self.sandesh.contacts.delete_list, workspace_id, list_id, actor)
        except NotFound:
            return self.web.not_found(req, resp, person)
        except (InvalidInput, InvalidTransition) as problem:
            return await self.show(req, resp, person, workspace_id, list_id, status=400,
                                   errors={"remove": told(problem)})
        self.web.redirect(resp, f"/dashboard/w/{workspace_id}/contacts?deleted={held}")

    async def _add(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str,
                   list_id: str) -> None:
        posted = await self.change(req, resp, workspace_id, may_send, SENDERS_CHANGE, LIST_FORM)
        if posted is None:
            return
        form, person = posted.fields, posted.person
        if posted.too_large is not None:
            return await self.show(req, resp, person, workspace_id, list_id, status=413,
                                   errors={"file": str(posted.too_large)})
        read = await self.listed(posted)
        errors = dict(read.errors)
        if not read.recipients and not errors:
            errors["recipients"] = _("Type the numbers, or upload a list.")
        if not errors:
            try:
                added = await self.blocking(self.sandesh.contacts.add, workspace_id, list_id, read.recipients,
                                            actor_of(person["email"]))
            except NotFound:
                return self.web.not_found(req, resp, person)
            except (InvalidInput, InvalidTransition) as problem:
                errors["recipients"] = told(problem)
            else:
                return self.web.redirect(resp, f"/dashboard/w/{workspace_id}/contacts/{list_id}"
                                               f"?added={added}&refused={len(read.refused)}")
        await self.show(req, resp, person, workspace_id, list_id, status=400, errors=errors, typed=form)

    async def show(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, person: dict[str, Any],
                   workspace_id: str, list_id: str, *, status: int = 200, errors: dict[str, str] | None = None,
                   typed: dict[str, str] | None = None) -> None:
        found = await self.blocking(self._list, workspace_id, list_id)
        if found is None:
            return self.web.not_found(req, resp, person)
        listed, people, columns, opted_out = found
        self.web.page(req, resp, "contact_list.html", status=status, title=listed["name"], person=person,
                      workspace_id=workspace_id, contact_list=listed, contacts=people, columns=columns,
                      opted_out=opted_out, errors=errors or {}, typed=typed or {}, changes=may_send(person["role"]),
                      shown_at_most=SHOWN_CONTACTS, added=req.get_param("added"), refused=req.get_param("refused"),
                      removed=req.get_param("removed"), max_mb=MAX_UPLOAD // 2**20)

    def _list(self, workspace_id: str,
              list_id: str) -> tuple[dict[str, Any], list[dict[str, Any]], list[str], int] | None:
        with self.connection() as conn:
            listed = contacts.one_list(conn, workspace_id, list_id)
            if listed is None:
                return None
            rows = contacts.contacts_of(conn, list_id, SHOWN_CONTACTS)
            opted_out = contacts.opted_out_count(conn, list_id)
        people, columns = [], {}
        for row in rows:
            fields = open_fields(self.sandesh.texts, row["fields"])
            columns.update(dict.fromkeys(fields))
            people.append({"number": row["number"], "fields": fields, "opted_out": row["opted_out"]})
        return listed, people, list(columns), opted_out


class Templates(Page):
    """GET /dashboard/w/{workspace_id}/templates: the templates; POST: one saved (made, or
    changed under its name); POST .../{template_id}/delete."""
    section = "templates"

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str) -> None:
        person = await self.member(req, resp, workspace_id)
        if person is not None:
            await self.show(req, resp, person, workspace_id)

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, workspace_id: str,
                      template_id: str = "") -> None:
        posted = await self.change(req, resp, workspace_id, may_send, SENDERS_CHANGE)
        if posted is None:
            return
        form, person = posted.fields, posted.person
        actor = actor_of(person["email"])
        try:
            if template_id:
                await self.blocking(self.sandesh.contacts.delete_template, workspace_id, template_id, actor)
                return self.web.redirect(resp, f"/dashboard/w/{workspace_id}/templates")
            await self.blocking(self.sandesh.contacts.save_template, workspace_id, form.get("name", ""),
                                form.get("text", ""), actor)
        except NotFound:
            return self.web.not_found(req, resp, person)
        except (InvalidInput, InvalidTransition) as problem:
            return await self.show(req, resp, person, workspace_id, status=400, error=told(problem), typed=form)
        self.web.redirect(resp, f"/dashboard/w/{workspace_id}/templates?saved=1")

    async def show(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, person: dict[str, Any],
                   workspace_id: str, *, status: int = 200, error: str | None = None,
                   typed: dict[str, str] | None = None) -> None:
        found = await self.blocking(self._templates, workspace_id)
        self.web.page(req, resp, "templates.html", status=status, title=_("Templates"), person=person,
                      workspace_id=workspace_id, templates=found, error=error, typed=typed or {},
                      changes=may_send(person["role"]), saved=req.get_param("saved"))

    def _templates(self, workspace_id: str) -> list[dict[str, Any]]:
        with self.connection() as conn:
            rows = contacts.templates_of(conn, workspace_id)
        return [{**row, "text": self.sandesh.texts.open(row["text"])} for row in rows]
