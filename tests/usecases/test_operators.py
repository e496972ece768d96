"""The operators' use cases (domain/usecases/operators.py, sims.py) and the audit trail they leave."""
from __future__ import annotations

import pytest

from sandesh.domain.clock import SystemClock
from sandesh.domain.errors import InvalidInput, InvalidTransition, NameTaken, NotFound
from sandesh.domain.release import OLDEST_PEER, VERSION
from sandesh.domain.sim import Sim
from sandesh.domain.usecases.sending import Accepted

from tests import memory

from .conftest import Store, a_number
from .test_sending import request


def test_a_workspace_is_created_pending_activated_credited_and_audited(store: Store):
    workspace = store.sandesh.operators.create_workspace("Kirana", None, {"otp": 150}, "ops@example")
    assert workspace.status == "pending" and workspace.rates["otp"] == 150
    store.sandesh.operators.activate_workspace(workspace.id, "ops@example")
    store.sandesh.operators.credit_workspace(workspace.id, 5_000, "first payment", "ops@example")
    assert store.balance(workspace.id) == 5_000
    actions = [line["action"] for line in store.sandesh.history.audit(workspace_id=workspace.id)]
    assert actions == ["workspace.created", "workspace.activated", "workspace.credited"]
    with pytest.raises(InvalidInput):
        store.sandesh.operators.create_workspace("  ", None, {}, "ops@example")
    with pytest.raises(NotFound):
        store.sandesh.operators.activate_workspace("ws_missing", "ops@example")


def test_a_clients_key_and_secret_rotate_and_its_webhook_url_is_checked(store: Store):
    workspace = store.workspace()
    client, key, secret = store.sandesh.operators.create_client(workspace, "Kirana", "https://example.com/hook", None, "ops")
    assert client.key_prefix == key[:len(client.key_prefix)]
    rotated, new_key = store.sandesh.operators.rotate_key(client.id, "ops")
    assert new_key != key and rotated.key_prefix == new_key[:len(rotated.key_prefix)]
    _, new_secret = store.sandesh.operators.rotate_secret(client.id, 1, "ops")
    assert new_secret != secret
    assert store.sandesh.operators.disable_client(client.id, "ops").enabled is False
    with pytest.raises(InvalidInput):
        store.sandesh.operators.update_client(client.id, None, "ftp://example.com", None, "ops")


def test_a_brand_is_the_operator_teams_to_set_and_the_workspace_asks_for_one(store: Store):
    """A client's brand goes out in every code it sends, so the operator team sets it, like a
    registered sender ID: a client made without one has the workspace's name; the workspace asks
    for another, which the team grants or dismisses, each in the audit."""
    operators, workspace = store.sandesh.operators, store.workspace()
    client, _, _ = operators.create_client(workspace, None, None, None, "user:owner@pasal.example")
    assert client.brand == "Pasal"
    with pytest.raises(InvalidInput, match="web address or domain name"):
        operators.request_brand(client.id, "pasal.example", "user:owner@pasal.example")
    with pytest.raises(InvalidInput, match="already"):
        operators.request_brand(client.id, "Pasal", "user:owner@pasal.example")
    asked = operators.request_brand(client.id, "Pasal Nepal", "user:owner@pasal.example")
    assert (asked.brand, asked.brand_requested) == ("Pasal", "Pasal Nepal")
    with pytest.raises(InvalidTransition, match="now 'Pasal Nepal'"):  # asked again since the operator looked
        operators.grant_brand(client.id, "Pasal Traders", "ops")
    granted = operators.grant_brand(client.id, "Pasal Nepal", "ops")
    assert (granted.brand, granted.brand_requested) == ("Pasal Nepal", None)
    operators.request_brand(client.id, "PayPal", "user:owner@pasal.example")
    dismissed = operators.dismiss_brand_request(client.id, "PayPal", "ops")
    assert (dismissed.brand, dismissed.brand_requested) == ("Pasal Nepal", None)
    with pytest.raises(InvalidTransition, match="no brand is asked"):
        operators.dismiss_brand_request(client.id, "PayPal", "ops")
    lines = [(line["action"], line["actor"], line["details"]) for line in store.sandesh.history.audit(client_id=client.id)]
    assert lines[1:] == [
        ("client.brand_requested", "user:owner@pasal.example", {"brand": "Pasal Nepal"}),
        ("client.updated", "ops", {"changes": {"brand": "Pasal Nepal"}}),
        ("client.brand_requested", "user:owner@pasal.example", {"brand": "PayPal"}),
        ("client.brand_request_dismissed", "ops", {"brand": "PayPal"})]


def test_asking_for_a_brand_waits_for_the_upgrade_to_be_finalized():
    """A 0.3.0 process would not know Client.BrandRequested: no one asks until the upgrade is
    finalized (over memory alone: a PostgreSQL process reads the gate from its database)."""
    app = memory.in_memory(SystemClock())
    workspace = app.operators.create_workspace("Pasal", None, {}, "ops")
    client, _, _ = app.operators.create_client(workspace.id, None, None, None, "ops")
    app.log.mapper.finalized = OLDEST_PEER
    with pytest.raises(InvalidTransition, match="once the upgrade to 0.4.0 is finalized"):
        app.operators.request_brand(client.id, "Pasal Nepal", "user:owner@pasal.example")
    app.log.mapper.finalized = VERSION
    assert app.operators.request_brand(client.id, "Pasal Nepal", "ops").brand_requested == "Pasal Nepal"


def test_an_operator_sets_no_brand_that_could_phish(store: Store):
    workspace = store.workspace()
    for brand in ("paypal.com", "Pay\u202ePal", "Nabil\nBank"):
        with pytest.raises(InvalidInput):
            store.sandesh.operators.create_client(workspace, brand, None, None, "ops")
    client, _, _ = store.sandesh.operators.create_client(workspace, "Pasal", None, None, "ops")
    with pytest.raises(InvalidInput, match="web address"):
        store.sandesh.operators.update_client(client.id, "www.pasal", None, None, "ops")


def test_shredding_a_workspaces_texts_makes_its_messages_unreadable_and_fails_the_queued_ones(store: Store):
    workspace = store.workspace(1_000)
    sent = store.sandesh.sending.send_sms(store.caller(workspace), request(text="secret text"))
    assert store.sandesh.texts.open(store.sandesh.history.message(sent.message.id).text) == "secret text"
    assert store.sandesh.operators.shred_texts(workspace, "ops") >= 1
    assert store.sandesh.texts.open(store.sandesh.history.message(sent.message.id).text) is None
    sim = store.sandesh.sims.add_sim(f"sim-{a_number()}", "loop://", 115200, None, "ops")
    assert store.sandesh.dispatch.submit_message(sent.message.id, sim.id).action == "skip"
    assert store.sandesh.history.message(sent.message.id).status == "failed"
    assert store.balance(workspace) == 1_000  # refunded
    again = store.sandesh.sending.send_sms(store.caller(workspace), request(text="new text"))
    assert isinstance(again, Accepted)
    assert store.sandesh.texts.open(store.sandesh.history.message(again.message.id).text) == "new text"


def test_a_sims_name_and_iccid_are_its_own_and_its_quarantine_is_decided_once(store: Store):
    name = f"sim-{a_number()}"
    sim = store.sandesh.sims.add_sim(name, "/dev/ttyUSB0", 115200, None, "ops")
    with pytest.raises(NameTaken):
        store.sandesh.sims.add_sim(name, "/dev/ttyUSB1", 115200, None, "ops")
    iccid = "8997701" + a_number()[3:]
    store.sandesh.sims.identify_sim(sim.id, iccid, "429011234567890")
    other = store.sandesh.sims.add_sim(f"sim-{a_number()}", "/dev/ttyUSB2", 115200, None, "ops")
    with pytest.raises(NameTaken):
        store.sandesh.sims.identify_sim(other.id, iccid, None)
    assert store.sandesh.sims.quarantine_sim(sim.id, "network", "no signal", "dispatcher") is True
    assert store.sandesh.sims.quarantine_sim(sim.id, "network", "no signal", "dispatcher") is False
    assert store.sandesh.sims.recover_sim(sim.id, "network", "signal back", "dispatcher") is True
    assert store.sandesh.sims.disable_sim(sim.id, "ops").enabled is False


def test_a_disabled_sim_gives_its_iccid_up_to_the_enabled_sim_whose_modem_holds_the_card(store: Store):
    """One card registered twice: an enabled holder keeps its ICCID and the other is refused, naming
    it; once the holder is disabled, the card is the new registration's, in one append."""
    iccid = "8997701" + a_number()[3:]
    old = store.sandesh.sims.add_sim(f"sim-{a_number()}", "/dev/pts/0", 115200, None, "ops")
    store.sandesh.sims.identify_sim(old.id, iccid, "429011234567890")
    new = store.sandesh.sims.add_sim(f"sim-{a_number()}", "/dev/serial/by-id/usb-a", 115200, None, "ops")
    with pytest.raises(NameTaken, match=f"registered as SIM {old.name!r}, which is enabled"):
        store.sandesh.sims.identify_sim(new.id, iccid, "429011234567890", None, old.id)
    store.sandesh.sims.disable_sim(old.id, "ops")
    store.sandesh.sims.identify_sim(new.id, iccid, "429011234567890", None, old.id)
    assert (sim_of(store, new.id).iccid, sim_of(store, old.id).iccid) == (iccid, None)
    again = store.sandesh.sims.add_sim(f"sim-{a_number()}", "/dev/ttyUSB3", 115200, None, "ops")
    with pytest.raises(NameTaken):  # the guard holds the card for the new registration now
        store.sandesh.sims.identify_sim(again.id, iccid, None)


def test_a_sim_is_quarantined_for_the_pin_it_was_tried_with_never_for_one_set_since(store: Store):
    sim = store.sandesh.sims.add_sim(f"sim-{a_number()}", "/dev/ttyUSB0", 115200, None, "ops")
    read = sim_of(store, sim.id).pin_sealed  # the dispatcher reads no PIN and opens the port ...
    store.sandesh.sims.update_sim(sim.id, None, "ops", pin="1234")  # ... while an operator sets one
    assert store.sandesh.sims.quarantine_for_pin(sim.id, read, "the SIM asks for its PIN", "dispatcher") is False
    tried = sim_of(store, sim.id).pin_sealed
    assert store.sandesh.sims.quarantine_for_pin(sim.id, tried, "the SIM refused its PIN", "dispatcher") is True
    assert sim_of(store, sim.id).pin_refused is True


def sim_of(store: Store, sim_id: str) -> Sim:
    return store.sandesh.log.get(sim_id, Sim, "SIM")
