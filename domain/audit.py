"""The audit trail: which events are operator changes, and how each reads (docs/operations.md, "Audit")."""
from __future__ import annotations

from typing import Any, Callable

from .campaign import Campaign
from .contacts import ContactList, Template
from .client import Client
from .optout import OPERATOR, OptOut
from .person import Person
from .redelivery import Redelivery
from .sim import Sim, SmsSwitch
from .webhook import WebhookDelivery
from .workspace import Workspace

ACTIONS: dict[type, str] = {
    Workspace.Created: "workspace.created",
    Workspace.Activated: "workspace.activated",
    Workspace.Suspended: "workspace.suspended",
    Workspace.Reinstated: "workspace.reinstated",
    Workspace.Credited: "workspace.credited",
    Workspace.RatesSet: "workspace.rates_set",
    Workspace.TypesSet: "workspace.types_set",
    Workspace.TextsShredded: "workspace.texts_shredded",
    Workspace.TotpRequirementSet: "workspace.totp_requirement_set",
    Workspace.PromoHoursSet: "workspace.promo_hours_set",
    Workspace.RepliesSet: "workspace.replies_set",
    Workspace.BalanceAlertSet: "workspace.balance_alert_set",
    Client.Created: "client.created",
    Client.KeyRotated: "client.key_rotated",
    Client.SecretRotated: "client.secret_rotated",
    Client.Disabled: "client.disabled",
    Client.Enabled: "client.enabled",
    Client.Updated: "client.updated",
    Client.BrandRequested: "client.brand_requested",
    Client.BrandRequestDismissed: "client.brand_request_dismissed",
    Client.KeywordsChanged: "client.keywords_changed",
    Sim.Added: "sim.added",
    Sim.Disabled: "sim.disabled",
    Sim.Enabled: "sim.enabled",
    Sim.PortChanged: "sim.port_changed",
    Sim.Updated: "sim.updated",
    Sim.Quarantined: "sim.quarantined",
    Sim.Recovered: "sim.recovered",
    Sim.Released: "sim.released",
    Sim.PinSet: "sim.pin_set",
    SmsSwitch.Disabled: "sms.disabled",
    SmsSwitch.Enabled: "sms.enabled",
    WebhookDelivery.Redelivered: "webhook.redelivered",
    Redelivery.Requested: "webhook.redelivered",  # an outage's deliveries, once, with their count
    OptOut.OptedOut: "optout.added",
    OptOut.OptedIn: "optout.removed",
    Person.Added: "person.added",
    Person.LinkIssued: "person.link_issued",
    Person.PasswordSet: "person.password_set",
    Person.Disabled: "person.disabled",
    Person.Enabled: "person.enabled",
    Person.RoleChanged: "person.role_changed",
    Person.Removed: "person.removed",
    Person.Rejoined: "person.rejoined",
    Person.TotpEnrolled: "person.totp_enrolled",
    Campaign.Created: "campaign.sent",
    Campaign.Canceled: "campaign.canceled",
    ContactList.Created: "contacts.list_created",
    ContactList.Added: "contacts.added",
    ContactList.Removed: "contacts.removed",
    ContactList.Deleted: "contacts.list_deleted",
    Template.Saved: "template.saved",
    Template.Changed: "template.saved",
    Template.Deleted: "template.deleted",
}

# Never shown in `details`: no key or secret, not even sealed or hashed (docs/operations.md, "Audit").
HIDDEN = {"actor", "at", "timestamp", "originator_id", "originator_version",
          "key_hash", "secret_sealed", "secret_hash", "pin_sealed", "workspace_id", "originator_topic",
          "token_hash", "token_expires", "password_hash", "step",
          # what the action says already (a person added again starts without their app); and
          # the audit lines a release wrote must stay as a replay of its log makes them
          "authenticator_reset"}


def operator_change(event: Any) -> bool:
    """An opt-out or opt-in that a recipient's STOP or START reply made is the recipient's doing,
    not an operator's: it stays out of the audit trail (docs/operations.md, "Opt-outs").  A dead
    delivery redelivered for an outage is counted in the outage's one line (Redelivery.Requested)."""
    if isinstance(event, WebhookDelivery.Redelivered):
        return event.redelivery_id is None
    return not isinstance(event, (OptOut.OptedOut, OptOut.OptedIn)) or event.source == OPERATOR


def audit_line(event: Any, workspace_of_client: Callable[[str], str | None]) -> dict[str, Any]:
    """One line of the audit trail for an operator event.  `workspace_of_client(client_id)`: the
    workspace of a client, for its events that do not carry it (asked only for those)."""
    state = vars(event)
    kind = ACTIONS[type(event)]
    subject = event.originator_id
    workspace_id = client_id = sim_id = None
    if kind.startswith("workspace."):
        workspace_id = subject
    elif kind.startswith(("optout.", "person.")):
        workspace_id = state["workspace_id"]
    elif kind.startswith("client."):
        client_id = subject
        workspace_id = state.get("workspace_id") or workspace_of_client(subject)
    elif kind.startswith("webhook."):
        client_id = state["client_id"]
        workspace_id = workspace_of_client(client_id)
    elif kind.startswith("sim."):
        sim_id = subject
    elif kind.startswith("campaign."):  # its counts, never its text or its recipients
        workspace_id, client_id = state["workspace_id"], state.get("client_id")
        state = {**state, "campaign_id": subject, "text": None}
        if "message_ids" in state:
            state["recipients"] = len(state.pop("message_ids"))
        state.pop("text")
    elif kind.startswith(("contacts.", "template.")):  # counts and names, never numbers, columns or texts
        workspace_id = state["workspace_id"]
        state = {k: v for k, v in state.items() if k not in ("contacts", "numbers", "number", "text")}
        if "contacts" in vars(event):
            state["contacts"] = len(event.contacts)
        elif "numbers" in vars(event):
            state["contacts"] = len(event.numbers)
        elif kind == "contacts.removed":
            state["contacts"] = 1
        state[("list_id" if kind.startswith("contacts.") else "template_id")] = subject
    details = {k: v for k, v in state.items() if k not in HIDDEN}
    return {
        "at": state["at"], "actor": state["actor"], "action": kind,
        "workspaceId": workspace_id, "clientId": client_id, "simId": sim_id, "details": details,
    }
