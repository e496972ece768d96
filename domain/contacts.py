"""A workspace's contact lists and message templates: what a person keeps to send from the
Send page again (docs/dashboard.md, "Contacts and templates").

A contact is a number and the columns it came with (a name, a class, a village), which fill a
message's `{column}` placeholders.  Those columns and a template's text are sealed under the
workspace's key of texts, like a message's text: erasing the workspace's texts (`sandesh
workspace shred-texts`) erases them too, and leaves the numbers and the names of the lists.
A list keeps one contact a number: adding a number again replaces its columns."""
from __future__ import annotations

import uuid

from eventsourcing.domain import event

from .aggregate import Aggregate
from .errors import InvalidInput
from .said import _

# The release whose finalized log every process reads these events in (domain/events.py).
CONTACTS_FROM = "0.4.0"
MAX_NAME = 100
MAX_CONTACTS = 10_000  # of one list: what one campaign sends (domain/recipients.py, MAX_ROWS)


def check_name(name: str, what: str) -> str:
    """The name of a list (`what`: "list") or of a template, its spaces tidied."""
    name = " ".join(name.split())
    if not name or len(name) > MAX_NAME:
        raise InvalidInput(_("Give the list a name of 1 to %(most)s characters.", most=MAX_NAME) if what == "list"
                           else _("Give the template a name of 1 to %(most)s characters.", most=MAX_NAME))
    return name


def template_id(workspace_id: str, name: str) -> str:
    """One template a name in a workspace, whatever its case: saving it again changes it."""
    return "tpl_" + uuid.uuid5(uuid.NAMESPACE_URL, f"sandesh:template:{workspace_id}:{name.casefold()}").hex


class ContactList(Aggregate):
    class Created(Aggregate.Created):
        written_from = CONTACTS_FROM

        workspace_id: str
        name: str
        actor: str
        at: float

    @event(Created)
    def __init__(self, workspace_id: str, name: str, actor: str, at: float):
        self.workspace_id, self.name, self.created_at = workspace_id, name, at
        self.numbers: set[str] = set()
        self.deleted = False

    class Added(Aggregate.Event):
        """Contacts added, or a number's columns replaced: [number, its columns sealed (JSON)]."""
        written_from = CONTACTS_FROM

        workspace_id: str
        contacts: list[list[str]]
        actor: str
        at: float

    def add(self, contacts: list[list[str]], actor: str, at: float) -> None:
        new = {number for number, _ in contacts} - self.numbers
        if len(self.numbers) + len(new) > MAX_CONTACTS:
            raise InvalidInput(_("A list holds at most %(most)s contacts: this one has %(held)s, and %(new)s more "
                                 "are new.", most=format(MAX_CONTACTS, ","),
                                 held=format(len(self.numbers), ","), new=format(len(new), ",")))
        self._added(workspace_id=self.workspace_id, contacts=contacts, actor=actor, at=at)

    @event(Added)
    def _added(self, workspace_id: str, contacts: list[list[str]], actor: str, at: float) -> None:
        self.numbers.update(number for number, _ in contacts)

    class Removed(Aggregate.Event):
        written_from = CONTACTS_FROM

        workspace_id: str
        number: str
        actor: str
        at: float

    def remove(self, number: str, actor: str, at: float) -> None:
        if number not in self.numbers:
            raise InvalidInput(_("%(number)s is not in the list.", number=number))
        self._removed(workspace_id=self.workspace_id, number=number, actor=actor, at=at)

    @event(Removed)
    def _removed(self, workspace_id: str, number: str, actor: str, at: float) -> None:
        self.numbers.discard(number)

    class Deleted(Aggregate.Event):
        """The list and its contacts gone; `numbers` are those it held, for the read model."""
        written_from = CONTACTS_FROM

        workspace_id: str
        numbers: list[str]
        actor: str
        at: float

    def delete(self, actor: str, at: float) -> None:
        self._deleted(workspace_id=self.workspace_id, numbers=sorted(self.numbers), actor=actor, at=at)

    @event(Deleted)
    def _deleted(self, workspace_id: str, numbers: list[str], actor: str, at: float) -> None:
        self.numbers = set()
        self.deleted = True


def new_list(workspace_id: str, name: str, actor: str, at: float) -> ContactList:
    return ContactList._create(ContactList.Created, id=f"cls_{uuid.uuid4().hex}", workspace_id=workspace_id,
                               name=check_name(name, "list"), actor=actor, at=at)


class Template(Aggregate):
    class Saved(Aggregate.Created):
        written_from = CONTACTS_FROM

        workspace_id: str
        name: str
        text: str          # sealed under the workspace's key of texts
        actor: str
        at: float

    @event(Saved)
    def __init__(self, workspace_id: str, name: str, text: str, actor: str, at: float):
        self.workspace_id, self.name, self.text, self.deleted = workspace_id, name, text, False

    class Changed(Aggregate.Event):
        """Saved again under its name (a deleted one comes back)."""
        written_from = CONTACTS_FROM

        workspace_id: str
        name: str
        text: str
        actor: str
        at: float

    def change(self, name: str, text: str, actor: str, at: float) -> None:
        self._changed(workspace_id=self.workspace_id, name=name, text=text, actor=actor, at=at)

    @event(Changed)
    def _changed(self, workspace_id: str, name: str, text: str, actor: str, at: float) -> None:
        self.name, self.text, self.deleted = name, text, False

    class Deleted(Aggregate.Event):
        written_from = CONTACTS_FROM

        workspace_id: str
        actor: str
        at: float

    def delete(self, actor: str, at: float) -> None:
        self._deleted(workspace_id=self.workspace_id, actor=actor, at=at)

    @event(Deleted)
    def _deleted(self, workspace_id: str, actor: str, at: float) -> None:
        self.deleted = True


def new_template(workspace_id: str, name: str, text: str, actor: str, at: float) -> Template:
    return Template._create(Template.Saved, id=template_id(workspace_id, name), workspace_id=workspace_id,
                            name=name, text=text, actor=actor, at=at)
