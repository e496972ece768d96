"""Contact lists and message templates, as use cases (domain/usecases/contacts.py; docs/dashboard.md,
"Contacts and templates"), read back as the Send page reads them (the ContactBook port)."""
from __future__ import annotations

import pytest

from sandesh.domain.clock import SystemClock
from sandesh.domain.contacts import MAX_CONTACTS, ContactList
from sandesh.domain.errors import InvalidInput, InvalidTransition, NotFound
from sandesh.domain.recipients import Recipient
from sandesh.domain.release import OLDEST_PEER, VERSION
from sandesh.domain.usecases.contacts import MAX_TEMPLATE, open_fields

from tests import memory

from .conftest import Store, a_number

ACTOR = "user:owner@pasal.example"


def kept(store: Store, workspace: str, list_id: str) -> list[tuple[str, dict[str, str]]] | None:
    """The list's contacts and their columns, as the Send page reads them; None when it is gone."""
    found = store.sandesh.campaigns.book.contact_list(workspace, list_id)
    return None if found is None else [(c.number, open_fields(store.sandesh.texts, c.fields)) for c in found.contacts]


def test_a_list_keeps_each_number_once_with_its_last_rows_columns(store: Store):
    workspace = store.workspace()
    ram, sita = a_number(), a_number()
    made = store.sandesh.contacts.create_list(workspace, "  Class   5 ", [
        Recipient(2, ram, {"name": "Ram"}), Recipient(3, sita, {}), Recipient(4, ram, {"name": "Ram Bahadur"})], ACTOR)
    assert made.name == "Class 5"
    assert kept(store, workspace, made.id) == [(ram, {"name": "Ram Bahadur"}), (sita, {})]


def test_a_number_added_again_takes_its_new_columns_and_goes_last(store: Store):
    workspace = store.workspace()
    ram, sita, hari = a_number(), a_number(), a_number()
    made = store.sandesh.contacts.create_list(workspace, "Parents", [Recipient(1, ram, {"class": "4"}),
                                                                     Recipient(2, sita, {"class": "4"})], ACTOR)
    added = store.sandesh.contacts.add(workspace, made.id, [Recipient(1, hari), Recipient(2, ram, {"class": "5"})],
                                       ACTOR)
    assert added == 2
    assert kept(store, workspace, made.id) == [(sita, {"class": "4"}), *sorted([(hari, {}), (ram, {"class": "5"})])]


def test_a_contact_is_removed_and_a_number_not_in_the_list_is_said(store: Store):
    workspace = store.workspace()
    ram, sita = a_number(), a_number()
    made = store.sandesh.contacts.create_list(workspace, "Parents", [Recipient(1, ram), Recipient(2, sita)], ACTOR)
    store.sandesh.contacts.remove(workspace, made.id, ram, ACTOR)
    assert kept(store, workspace, made.id) == [(sita, {})]
    with pytest.raises(InvalidInput, match="is not in the list"):
        store.sandesh.contacts.remove(workspace, made.id, ram, ACTOR)


def test_a_deleted_list_is_gone_and_another_workspaces_list_is_never_found(store: Store):
    workspace, other = store.workspace(), store.workspace()
    made = store.sandesh.contacts.create_list(workspace, "Old", [Recipient(1, a_number()), Recipient(2, a_number())],
                                              ACTOR)
    with pytest.raises(NotFound):
        store.sandesh.contacts.add(other, made.id, [Recipient(1, a_number())], ACTOR)
    assert kept(store, other, made.id) is None
    assert store.sandesh.contacts.delete_list(workspace, made.id, ACTOR) == 2
    assert kept(store, workspace, made.id) is None
    with pytest.raises(NotFound):
        store.sandesh.contacts.delete_list(workspace, made.id, ACTOR)


def test_a_list_without_a_name_or_a_contact_is_refused(store: Store):
    workspace = store.workspace()
    with pytest.raises(InvalidInput, match="a name of 1 to 100 characters"):
        store.sandesh.contacts.create_list(workspace, " ", [Recipient(1, a_number())], ACTOR)
    with pytest.raises(InvalidInput, match="No contact to add"):
        store.sandesh.contacts.create_list(workspace, "Empty", [], ACTOR)


def test_a_list_holds_at_most_10000_contacts(store: Store):
    workspace = store.workspace()
    full = [Recipient(n, f"97798{n:08d}") for n in range(MAX_CONTACTS)]
    made = store.sandesh.contacts.create_list(workspace, "Full", full, ACTOR)
    with pytest.raises(InvalidInput, match="at most 10,000 contacts"):
        store.sandesh.contacts.add(workspace, made.id, [Recipient(1, a_number())], ACTOR)
    assert store.sandesh.contacts.add(workspace, made.id, full[:1], ACTOR) == 1  # a number in it already: no more


def test_a_template_saved_under_a_taken_name_whatever_its_case_changes_it(store: Store):
    workspace = store.workspace()
    made = store.sandesh.contacts.save_template(workspace, "Meeting", "Namaste {name}", ACTOR)
    changed = store.sandesh.contacts.save_template(workspace, "MEETING", "Namaste {name}, on Sunday", ACTOR)
    assert changed.id == made.id and changed.name == "MEETING"
    found = store.sandesh.campaigns.book.template(workspace, made.id)
    assert (found.name, store.sandesh.texts.open(found.text)) == ("MEETING", "Namaste {name}, on Sunday")
    assert store.sandesh.campaigns.book.template(store.workspace(), made.id) is None  # another workspace's


@pytest.mark.parametrize("text, said", [(" ", "Type the template's text."),
                                        ("x" * (MAX_TEMPLATE + 1), "at most 1,000 characters")])
def test_a_template_without_text_or_too_long_is_refused(store: Store, text, said):
    with pytest.raises(InvalidInput, match=said):
        store.sandesh.contacts.save_template(store.workspace(), "Empty", text, ACTOR)


def test_a_deleted_template_is_gone(store: Store):
    workspace = store.workspace()
    made = store.sandesh.contacts.save_template(workspace, "Bye", "Bye", ACTOR)
    store.sandesh.contacts.delete_template(workspace, made.id, ACTOR)
    assert store.sandesh.campaigns.book.template(workspace, made.id) is None
    with pytest.raises(NotFound):
        store.sandesh.contacts.delete_template(workspace, made.id, ACTOR)


def test_erased_texts_leave_the_numbers_and_names_but_no_column_or_template_text():
    """Over memory alone: a PostgreSQL process forgets a destroyed key within a second
    (projections/storage/text_keys.py), which tests/integration/test_dashboard_send.py waits for."""
    app = memory.in_memory(SystemClock())
    store = Store(app, lambda workspace_id: memory.balance(app, workspace_id), lambda sim_id: None)
    workspace, ram = store.workspace(), a_number()
    made = store.sandesh.contacts.create_list(workspace, "Parents", [Recipient(1, ram, {"name": "Ram"})], ACTOR)
    template = store.sandesh.contacts.save_template(workspace, "Holiday", "Closed tomorrow", ACTOR)
    store.sandesh.operators.shred_texts(workspace, "tester")
    assert kept(store, workspace, made.id) == [(ram, {})]
    found = store.sandesh.campaigns.book.template(workspace, template.id)
    assert (found.name, store.sandesh.texts.open(found.text)) == ("Holiday", None)


def test_lists_and_templates_wait_for_the_upgrade_to_be_finalized():
    """Over memory alone: a PostgreSQL process reads the gate from its database."""
    app = memory.in_memory(SystemClock())
    workspace = Store(app, lambda workspace_id: 0, lambda sim_id: None).workspace(0)
    app.log.mapper.finalized = OLDEST_PEER
    with pytest.raises(InvalidTransition, match="once the upgrade to this release is finalized"):
        app.contacts.create_list(workspace, "Early", [Recipient(1, a_number())], ACTOR)
    with pytest.raises(InvalidTransition):
        app.contacts.save_template(workspace, "Early", "Hi", ACTOR)
    app.log.mapper.finalized = VERSION
    assert isinstance(app.contacts.create_list(workspace, "Now", [Recipient(1, a_number())], ACTOR), ContactList)
