"""A workspace's contact lists and message templates, made, added to, trimmed and deleted by
the people who send from the dashboard (docs/dashboard.md, "Contacts and templates"): each
change one append, audited with its counts (domain/audit.py).

A contact's columns and a template's text are sealed under the workspace's key of texts
(domain/contacts.py), so `shred-texts` erases them."""
from __future__ import annotations

from typing import Sequence

import orjson

from ..clock import Clock
from ..contacts import ContactList, Template, check_name, new_list, new_template, template_id
from ..errors import InvalidInput, InvalidTransition, NotFound
from ..ports import Texts
from ..recipients import Recipient
from ..said import _
from .log import Log

ADDED_EVENT = 1000  # contacts in one Added event; a list of 10,000 is ten of them in one append
MAX_TEMPLATE = 1_000  # characters: six segments of GSM-7 hold 918


class Contacts:
    def __init__(self, log: Log, clock: Clock, texts: Texts):
        self.log, self.clock, self.texts = log, clock, texts

    def ready(self) -> None:
        """InvalidTransition until every running process reads these events (the upgrade gate)."""
        if not self.log.writes(ContactList.Created):
            raise InvalidTransition(_("Contact lists and templates start once the upgrade to this release is "
                                      "finalized (`sandesh upgrade finalize`)."))

    def create_list(self, workspace_id: str, name: str, contacts: Sequence[Recipient], actor: str) -> ContactList:
        """A new list, with its first contacts in the same append."""
        self.ready()
        made = new_list(workspace_id, name, actor, self.clock.now())
        self._add(made, contacts, actor)
        self.log.save(made)
        return made

    def add(self, workspace_id: str, list_id: str, contacts: Sequence[Recipient], actor: str) -> int:
        """Contacts added to the list (a number in it already: its columns replaced); how many."""
        self.ready()
        found = self._list(workspace_id, list_id)
        self._add(found, contacts, actor)
        self.log.save(found)
        return len(contacts)

    def remove(self, workspace_id: str, list_id: str, number: str, actor: str) -> None:
        self.ready()
        found = self._list(workspace_id, list_id)
        found.remove(number, actor, self.clock.now())
        self.log.save(found)

    def delete_list(self, workspace_id: str, list_id: str, actor: str) -> int:
        """The list and its contacts gone; how many contacts it held."""
        self.ready()
        found = self._list(workspace_id, list_id)
        held = len(found.numbers)
        found.delete(actor, self.clock.now())
        self.log.save(found)
        return held

    def save_template(self, workspace_id: str, name: str, text: str, actor: str) -> Template:
        """The template of that name made, or changed when there is one (whatever its case)."""
        self.ready()
        name = check_name(name, "template")
        if not text.strip():
            raise InvalidInput(_("Type the template's text."))
        if len(text) > MAX_TEMPLATE:
            raise InvalidInput(_("A template holds at most %(most)s characters.", most=format(MAX_TEMPLATE, ",")))
        sealed = self.texts.seal(workspace_id, text)
        now = self.clock.now()
        found = self.log.find(template_id(workspace_id, name), Template)
        if found is None:
            made = new_template(workspace_id, name, sealed, actor, now)
            self.log.save(made)
            return made
        found.change(name, sealed, actor, now)
        self.log.save(found)
        return found

    def delete_template(self, workspace_id: str, template: str, actor: str) -> None:
        self.ready()
        found = self.log.find(template, Template)
        if found is None or found.workspace_id != workspace_id or found.deleted:
            raise NotFound(_("no template %(id)s", id=repr(template)))
        found.delete(actor, self.clock.now())
        self.log.save(found)

    def _list(self, workspace_id: str, list_id: str) -> ContactList:
        found = self.log.find(list_id, ContactList)
        if found is None or found.workspace_id != workspace_id or found.deleted:
            raise NotFound(_("no contact list %(id)s", id=repr(list_id)))
        return found

    def _add(self, contact_list: ContactList, contacts: Sequence[Recipient], actor: str) -> None:
        """The contacts, each number once (its last row's columns), in events of ADDED_EVENT."""
        if not contacts:
            raise InvalidInput(_("No contact to add: type numbers, or upload a list."))
        last = {c.number: c.fields for c in contacts}
        key = self.texts.key(contact_list.workspace_id)
        sealed = [[number, self.texts.seal_with(key, orjson.dumps(fields).decode()) if fields else ""]
                  for number, fields in last.items()]
        now = self.clock.now()
        for start in range(0, len(sealed), ADDED_EVENT):
            contact_list.add(sealed[start:start + ADDED_EVENT], actor, now)


def open_fields(texts: Texts, sealed: str) -> dict[str, str]:
    """A contact's columns, kept sealed as JSON ("" for none); none once erased."""
    opened = texts.open(sealed) if sealed else None
    return orjson.loads(opened) if opened else {}
