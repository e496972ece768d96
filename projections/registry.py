"""Inline read models of operator state: workspaces (with the balance ledger), clients, SIMs,
the SMS switch; and `PROJECTION`, the inline projection that these tables and those of the other
inline read models make together.  Written in the transaction that appends their events
(projections/storage/store.py), so a key rotation or a disable takes effect at once in every API
process, and rebuilt from the log by `sandesh replay registry` with the very same handlers.

Owns `workspaces`, `clients`, `sims`, `sms_switch` (`OWN`).  Other modules read these tables:
request_rate.py (the caller: clients, workspaces, sms_switch) and sim_health.py (the pool and
the route rule: sims).

The projection's other tables are written by their owners' handlers: dispatch.py
(`dispatch_queue`, `sent_parts`, `awaiting_reports`, `scheduled_sends`), idempotency.py
(`idempotency_keys`), inbound.py (`replies`), optouts.py (`opt_outs`), otp_limits.py
(`otp_issues`), webhooks.py (`webhook_deliveries`), people.py (`people`), contacts.py
(`contact_lists`, `contacts`, `message_templates`), alerts.py (`alerts`, `alert_destinations`,
`alert_tuning`).  An event several of them record has its
handler here, which writes them in a fixed order: an acceptance debits, keeps its key, then
queues; a failure leaves the queue, then refunds.
"""
from __future__ import annotations

from typing import Any, Callable, ContextManager, Sequence

from psycopg.types.json import Jsonb

from . import alerts, contacts, dispatch, idempotency, inbound, optouts, otp_limits, people, webhooks
from .storage import channels
from .contract import Projection, ReadModel
from .rows import Add, Batching, Key, Old, Rows, Table
from .sim_health import ROUTE_UNTIL

from sandesh.domain.alerts import Alert
from sandesh.domain.batch import Batch
from sandesh.domain.client import Client
from sandesh.domain.message import Message
from sandesh.domain.otp import Otp
from sandesh.domain.operators import of_imsi
from sandesh.domain.clock import iso
from sandesh.domain.pacing import PARTS_PER_WINDOW
from sandesh.domain.ports import SendingState
from sandesh.domain.promo_hours import DEFAULT as DEFAULT_PROMO_HOURS, parse as parse_promo_hours, shown
from sandesh.domain.sim import DEFAULT_MIN_CREDIT, PIN, SETTINGS as SIM_SETTINGS, Sim, SmsSwitch
from sandesh.domain.workspace import Workspace

OWN_DDL = """
CREATE TABLE IF NOT EXISTS workspaces (
    id text PRIMARY KEY, name text NOT NULL, status text NOT NULL,
    rates jsonb NOT NULL, types jsonb NOT NULL,
    balance bigint NOT NULL DEFAULT 0 CONSTRAINT balance_never_negative CHECK (balance >= 0),
    created_at double precision NOT NULL, updated_at double precision NOT NULL);
ALTER TABLE workspaces ADD COLUMN IF NOT EXISTS promo_hours text NOT NULL DEFAULT '08:00-20:00';
ALTER TABLE workspaces ADD COLUMN IF NOT EXISTS help_text text,
    ADD COLUMN IF NOT EXISTS confirmations boolean NOT NULL DEFAULT false;
ALTER TABLE workspaces ADD COLUMN IF NOT EXISTS balance_alert bigint;
CREATE TABLE IF NOT EXISTS clients (
    id text PRIMARY KEY, workspace_id text NOT NULL, brand text NOT NULL, webhook_url text,
    rate_limit integer NOT NULL, key_hash text NOT NULL UNIQUE, key_prefix text NOT NULL,
    secret_sealed text NOT NULL, secret_hash text NOT NULL,
    previous_secret_sealed text, previous_secret_until double precision,
    enabled boolean NOT NULL, created_at double precision NOT NULL, updated_at double precision NOT NULL);
CREATE INDEX IF NOT EXISTS clients_workspace ON clients (workspace_id);
ALTER TABLE clients ADD COLUMN IF NOT EXISTS otp_template text, ADD COLUMN IF NOT EXISTS otp_web_domain text;
ALTER TABLE clients ADD COLUMN IF NOT EXISTS brand_requested text;
CREATE INDEX IF NOT EXISTS clients_brand_requested ON clients (workspace_id) WHERE brand_requested IS NOT NULL;
ALTER TABLE clients ADD COLUMN IF NOT EXISTS compat_type text NOT NULL DEFAULT 'transactional',
    ADD COLUMN IF NOT EXISTS keywords jsonb NOT NULL DEFAULT '[]', ADD COLUMN IF NOT EXISTS reply_url text,
    ADD COLUMN IF NOT EXISTS default_reply text;
CREATE TABLE IF NOT EXISTS client_keywords (
    keyword text CONSTRAINT client_keywords_pkey PRIMARY KEY, client_id text NOT NULL);
CREATE TABLE IF NOT EXISTS sims (
    id text PRIMARY KEY, name text NOT NULL UNIQUE, port text NOT NULL, baud integer NOT NULL,
    host text, enabled boolean NOT NULL, iccid text UNIQUE, imsi text,
    created_at double precision NOT NULL, updated_at double precision NOT NULL);
ALTER TABLE sims ADD COLUMN IF NOT EXISTS operator text;
ALTER TABLE sims ADD COLUMN IF NOT EXISTS quarantine text;
ALTER TABLE sims ADD COLUMN IF NOT EXISTS quarantine_reason text;
ALTER TABLE sims ADD COLUMN IF NOT EXISTS state_since double precision;
ALTER TABLE sims ADD COLUMN IF NOT EXISTS manufacturer text, ADD COLUMN IF NOT EXISTS model text,
    ADD COLUMN IF NOT EXISTS firmware text, ADD COLUMN IF NOT EXISTS reports text, ADD COLUMN IF NOT EXISTS inbound text,
    ADD COLUMN IF NOT EXISTS cnmi text, ADD COLUMN IF NOT EXISTS message_store text,
    ADD COLUMN IF NOT EXISTS pin_sealed text, ADD COLUMN IF NOT EXISTS pin_refused boolean NOT NULL DEFAULT false,
    ADD COLUMN IF NOT EXISTS daily_cap integer, ADD COLUMN IF NOT EXISTS monthly_cap integer,
    ADD COLUMN IF NOT EXISTS pace integer, ADD COLUMN IF NOT EXISTS balance_ussd text,
    ADD COLUMN IF NOT EXISTS min_credit bigint, ADD COLUMN IF NOT EXISTS balance_every integer,
    ADD COLUMN IF NOT EXISTS credit bigint, ADD COLUMN IF NOT EXISTS credit_reply text,
    ADD COLUMN IF NOT EXISTS credit_at double precision;
ALTER TABLE sims ADD COLUMN IF NOT EXISTS port_secret_sealed text;
CREATE TABLE IF NOT EXISTS sms_switch (
    id text PRIMARY KEY, enabled boolean NOT NULL, reason text, updated_at double precision);
"""

_ADD_TO_BALANCES = """
WITH locked AS (SELECT id FROM workspaces WHERE id = ANY(%(ids)s) ORDER BY id FOR UPDATE)
UPDATE workspaces w SET balance = w.balance + d.amount
FROM unnest(%(ids)s::text[], %(amounts)s::bigint[]) AS d(id, amount)
WHERE w.id = d.id AND w.id IN (SELECT id FROM locked)
"""


def _add_to_balances(cur: Any, sums: dict[Key, dict[str, Any]]) -> None:
    """The debits and refunds of one append, summed per workspace, in one statement that locks
    the rows in id order (rows.py, `Batching`)."""
    assert all(columns.keys() == {"balance"} for columns in sums.values())
    ids = sorted(workspace_id for (workspace_id,) in sums)
    cur.execute(_ADD_TO_BALANCES, {"ids": ids, "amounts": [sums[(i,)]["balance"] for i in ids]})


OWN = ReadModel(tables={"workspaces": Table("workspaces", ("id",), batching=Batching(add_many=_add_to_balances)),
                        "clients": Table("clients", ("id",)), "sims": Table("sims", ("id",)),
                        "sms_switch": Table("sms_switch", ("id",)),
                        "client_keywords": Table("client_keywords", ("keyword",))},
                ddl=OWN_DDL)


@OWN.on(Workspace.Created)
def _workspace_created(rows: Rows, e: Workspace.Created) -> None:
    rows.insert("workspaces", {"id": e.originator_id, "name": e.name, "status": "pending", "rates": Jsonb(e.rates),
                               "types": Jsonb(e.types), "promo_hours": shown(DEFAULT_PROMO_HOURS), "created_at": e.at,
                               "updated_at": e.at})


_WORKSPACE_STATUS = {Workspace.Activated: "active", Workspace.Suspended: "suspended", Workspace.Reinstated: "active"}


@OWN.on(*_WORKSPACE_STATUS)
def _workspace_status(rows: Rows,
                      e: Workspace.Activated | Workspace.Suspended | Workspace.Reinstated) -> None:
    rows.update("workspaces", (e.originator_id,), {"status": _WORKSPACE_STATUS[type(e)], "updated_at": e.at})


@OWN.on(Workspace.Credited)
def _workspace_credited(rows: Rows, e: Workspace.Credited) -> None:
    rows.update("workspaces", (e.originator_id,), {"balance": Add(e.amount), "updated_at": e.at})


@OWN.on(Workspace.RatesSet)
def _workspace_rates(rows: Rows, e: Workspace.RatesSet) -> None:
    rows.update("workspaces", (e.originator_id,), {"rates": Jsonb(e.rates), "updated_at": e.at})


@OWN.on(Workspace.TypesSet)
def _workspace_types(rows: Rows, e: Workspace.TypesSet) -> None:
    rows.update("workspaces", (e.originator_id,), {"types": Jsonb(e.types), "updated_at": e.at})


@OWN.on(Workspace.PromoHoursSet)
def _workspace_promo_hours(rows: Rows, e: Workspace.PromoHoursSet) -> None:
    rows.update("workspaces", (e.originator_id,), {"promo_hours": e.hours, "updated_at": e.at})


@OWN.on(Workspace.RepliesSet)
def _workspace_replies(rows: Rows, e: Workspace.RepliesSet) -> None:
    rows.update("workspaces", (e.originator_id,), {"help_text": e.help_text, "confirmations": e.confirmations,
                                                   "updated_at": e.at})


@OWN.on(Workspace.BalanceAlertSet)
def _workspace_balance_alert(rows: Rows, e: Workspace.BalanceAlertSet) -> None:
    rows.update("workspaces", (e.originator_id,), {"balance_alert": e.threshold, "updated_at": e.at})


@OWN.on(Client.Created)
def _client_created(rows: Rows, e: Client.Created) -> None:
    rows.insert("clients", {
        "id": e.originator_id, "workspace_id": e.workspace_id, "brand": e.brand, "webhook_url": e.webhook_url,
        "rate_limit": e.rate_limit, "key_hash": e.key_hash, "key_prefix": e.key_prefix,
        "secret_sealed": e.secret_sealed, "secret_hash": e.secret_hash, "enabled": True, "created_at": e.at,
        "updated_at": e.at})


@OWN.on(Client.KeyRotated)
def _client_key_rotated(rows: Rows, e: Client.KeyRotated) -> None:
    rows.update("clients", (e.originator_id,), {"key_hash": e.key_hash, "key_prefix": e.key_prefix,
                                                "updated_at": e.at})


@OWN.on(Client.SecretRotated)
def _client_secret_rotated(rows: Rows, e: Client.SecretRotated) -> None:
    keep_previous = e.grace_hours > 0
    rows.update("clients", (e.originator_id,), {
        "previous_secret_sealed": Old("secret_sealed") if keep_previous else None,
        "previous_secret_until": e.previous_until if keep_previous else None,
        "secret_sealed": e.secret_sealed, "secret_hash": e.secret_hash, "updated_at": e.at})


@OWN.on(Client.SecretsResealed)
def _client_secrets_resealed(rows: Rows, e: Client.SecretsResealed) -> None:
    rows.update("clients", (e.originator_id,), {"secret_sealed": e.secret_sealed,
                                                "previous_secret_sealed": e.previous_secret_sealed})


@OWN.on(Client.Disabled, Client.Enabled)
def _client_enabled(rows: Rows, e: Client.Disabled | Client.Enabled) -> None:
    rows.update("clients", (e.originator_id,), {"enabled": isinstance(e, Client.Enabled), "updated_at": e.at})


_CLIENT_COLUMNS = {"brand": "brand", "webhook_url": "webhook_url", "rate_limit": "rate_limit",
                   "otp_template": "otp_template", "otp_web_domain": "otp_web_domain", "compat_type": "compat_type",
                   "reply_url": "reply_url", "default_reply": "default_reply"}


@OWN.on(Client.Updated)
def _client_updated(rows: Rows, e: Client.Updated) -> None:
    for field, value in e.changes.items():
        rows.update("clients", (e.originator_id,), {_CLIENT_COLUMNS[field]: value, "updated_at": e.at})
    if "brand" in e.changes:  # the operator team set it: a request waiting is settled
        rows.update("clients", (e.originator_id,), {"brand_requested": None})


@OWN.on(Client.KeywordsChanged)
def _client_keywords(rows: Rows, e: Client.KeywordsChanged) -> None:
    """Each keyword is kept once in the pool: another client's refuses the append (client_keywords_pkey)."""
    for word in e.removed:
        rows.delete("client_keywords", (word,))
    for word in e.added:
        rows.insert("client_keywords", {"keyword": word, "client_id": e.originator_id})
    rows.update("clients", (e.originator_id,), {"keywords": Jsonb(e.keywords), "updated_at": e.at})


@OWN.on(Client.BrandRequested, Client.BrandRequestDismissed)
def _client_brand_requested(rows: Rows, e: Client.BrandRequested | Client.BrandRequestDismissed) -> None:
    rows.update("clients", (e.originator_id,),
                {"brand_requested": e.brand if isinstance(e, Client.BrandRequested) else None})


@OWN.on(Sim.Added)
def _sim_added(rows: Rows, e: Sim.Added) -> None:
    rows.insert("sims", {"id": e.originator_id, "name": e.name, "port": e.port, "baud": e.baud, "host": e.host,
                         "enabled": True, "created_at": e.at, "updated_at": e.at, "state_since": e.at,
                         "pin_refused": False})


@OWN.on(Sim.Disabled, Sim.Enabled)
def _sim_enabled(rows: Rows, e: Sim.Disabled | Sim.Enabled) -> None:
    rows.update("sims", (e.originator_id,), {"enabled": isinstance(e, Sim.Enabled), "updated_at": e.at,
                                             "state_since": e.at})


@OWN.on(Sim.PortChanged)
def _sim_port_changed(rows: Rows, e: Sim.PortChanged) -> None:
    rows.update("sims", (e.originator_id,), {"port": e.port, "updated_at": e.at})


_SIM_COLUMNS = {name: name for name in SIM_SETTINGS}
_DEVICE_COLUMNS = {"manufacturer": "manufacturer", "model": "model", "firmware": "firmware", "reports": "reports",
                   "inbound": "inbound", "cnmi": "cnmi", "store": "message_store"}


@OWN.on(Sim.Updated)
def _sim_updated(rows: Rows, e: Sim.Updated) -> None:
    for field, value in e.changes.items():
        rows.update("sims", (e.originator_id,), {_SIM_COLUMNS[field]: value, "updated_at": e.at})


@OWN.on(Sim.Identified)
def _sim_identified(rows: Rows, e: Sim.Identified) -> None:
    rows.update("sims", (e.originator_id,), {"iccid": e.iccid, "imsi": e.imsi, "operator": of_imsi(e.imsi),
                                             "updated_at": e.at})


@OWN.on(Sim.DeviceLearned)
def _sim_device_learned(rows: Rows, e: Sim.DeviceLearned) -> None:
    rows.update("sims", (e.originator_id,), {column: e.device.get(name) for name, column in _DEVICE_COLUMNS.items()})


@OWN.on(Sim.PinSet)
def _sim_pin_set(rows: Rows, e: Sim.PinSet) -> None:
    rows.update("sims", (e.originator_id,), {"pin_sealed": e.pin_sealed, "pin_refused": False, "updated_at": e.at})


@OWN.on(Sim.PortSecretSet)
def _sim_port_secret_set(rows: Rows, e: Sim.PortSecretSet) -> None:
    rows.update("sims", (e.originator_id,), {"port_secret_sealed": e.secret_sealed, "updated_at": e.at})


@OWN.on(Sim.PinResealed)
def _sim_pin_resealed(rows: Rows, e: Sim.PinResealed) -> None:
    rows.update("sims", (e.originator_id,), {"pin_sealed": e.pin_sealed})


@OWN.on(Sim.CreditChecked)
def _sim_credit_checked(rows: Rows, e: Sim.CreditChecked) -> None:
    rows.update("sims", (e.originator_id,), {"credit": e.amount, "credit_reply": e.reply, "credit_at": e.at})


@OWN.on(Sim.Quarantined)
def _sim_quarantined(rows: Rows, e: Sim.Quarantined) -> None:
    changes = {"quarantine": e.kind, "quarantine_reason": e.reason, "state_since": e.at, "updated_at": e.at}
    if e.kind == PIN:
        changes["pin_refused"] = True
    rows.update("sims", (e.originator_id,), changes)


@OWN.on(Sim.Recovered, Sim.Released)
def _sim_back(rows: Rows, e: Sim.Recovered | Sim.Released) -> None:
    rows.update("sims", (e.originator_id,), {"quarantine": None, "quarantine_reason": None, "state_since": e.at,
                                             "updated_at": e.at})


@OWN.on(SmsSwitch.Disabled, SmsSwitch.Enabled)
def _sms_switch(rows: Rows, e: SmsSwitch.Disabled | SmsSwitch.Enabled) -> None:
    on = isinstance(e, SmsSwitch.Enabled)
    rows.insert("sms_switch", {"id": e.originator_id, "enabled": on, "reason": None if on else e.reason,
                               "updated_at": e.at}, on_conflict="update")


def _debit(rows: Rows, workspace_id: str, amount: int) -> None:
    """The charge at acceptance (an append's charges and refunds are summed per workspace:
    `_add_to_balances`); the CHECK on the balance refuses it, and the whole append, when short.
    A message charged nothing (an alert's SMS, domain/alerts.py) touches no balance."""
    if amount:
        rows.update("workspaces", (workspace_id,), {"balance": Add(-amount)})


# The events several inline read models record.

@OWN.on(Message.Accepted)
def _message_accepted(rows: Rows, e: Message.Accepted) -> None:
    _debit(rows, e.workspace_id, e.cost)
    idempotency.remember(rows, e)
    dispatch.enqueue(rows, e)


@OWN.on(Message.Failed, Message.Rejected, Message.Canceled)
def _message_ended(rows: Rows, e: Message.Failed | Message.Rejected | Message.Canceled) -> None:
    """Out of the queue; refunded when no segment was accepted by the network, and in full when
    canceled (docs/design.md, "Decisions: money")."""
    dispatch.dequeue(rows, e)
    if e.refund:
        rows.update("workspaces", (e.workspace_id,), {"balance": Add(e.refund)})


@OWN.on(Alert.Texted)
def _alert_texted(rows: Rows, e: Alert.Texted) -> None:
    alerts.texted(rows, e)
    if e.avoid_sim:
        dispatch.avoid(rows, e.message_id, e.avoid_sim)


@OWN.on(Batch.Accepted)
def _batch_accepted(rows: Rows, e: Batch.Accepted) -> None:
    idempotency.remember_batch(rows, e)


@OWN.on(Otp.Issued)
def _otp_issued(rows: Rows, e: Otp.Issued) -> None:
    otp_limits.guard_issue(rows, e)


NOTIFY_CALLER = f"NOTIFY {channels.CALLERS}, '{channels.CALLER}'"
NOTIFY_ROUTE = f"NOTIFY {channels.CALLERS}, '{channels.ROUTE}'"


def _changes_callers(e: Any) -> bool:
    """Whether the event changes what authentication reads of a caller (request_rate.CALLER):
    a client, its workspace's status, rates or types, the SMS switch; not a balance."""
    return isinstance(e, (Client.Event, SmsSwitch.Event)) or (
        isinstance(e, Workspace.Event) and not isinstance(e, Workspace.Credited))


def _notices(events: Sequence[Any]) -> list[str]:
    """What an append of these events tells those who listen: the dispatchers (projections/
    dispatch.py) of new work, one that may be an OTP or only sends that are not, and of a changed
    SIM pool; the API processes' caller caches (projections/callers.py) of what to forget."""
    notices = []
    if any(isinstance(e, (Message.Requeued, Message.Released)) or
           (isinstance(e, Message.Accepted) and e.message_type == "otp") for e in events):
        notices.append(dispatch.NOTIFY_ANY_WORK)
    elif any(isinstance(e, Message.Accepted) for e in events):
        notices.append(dispatch.NOTIFY_WORK)
    if any(isinstance(e, Sim.Event) for e in events):
        notices += [dispatch.NOTIFY_POOL, NOTIFY_ROUTE]
    if any(_changes_callers(e) for e in events):
        notices.append(NOTIFY_CALLER)
    return notices


PROJECTION = Projection.composed(
    "registry", (OWN, idempotency.MODEL, dispatch.MODEL, inbound.MODEL, otp_limits.MODEL, webhooks.MODEL, optouts.MODEL,
                 people.MODEL, contacts.MODEL, alerts.MODEL),
    # the order `sandesh replay registry` locks them (projections/engine/replay.py)
    order=("workspaces", "clients", "client_keywords", "sims", "sms_switch", "idempotency_keys", "otp_issues", "dispatch_queue",
           "sent_parts", "replies", "awaiting_reports", "scheduled_sends", "webhook_deliveries", "opt_outs",
           "people", "contact_lists", "contacts", "message_templates", "alerts", "alert_destinations",
           "alert_tuning", "alert_texts"),
    inline=True, notices=_notices)

# What the application hands to the recorder (scripts/service/bootstrap.py): write an append's rows on its cursor.
inline_writer: Callable[[Sequence[Any]], Callable[[Any], None]] = PROJECTION.inline_writer


# Views for the operator command and the API (one place that turns rows into JSON).

def workspace_view(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": row["id"], "name": row["name"], "status": row["status"], "balance": row["balance"],
        "currency": "NPR", "rates": row["rates"], "allowedTypes": row["types"],
        "promotionalHours": promotional_hours(row["promo_hours"]),
        "createdAt": iso(row["created_at"]), "updatedAt": iso(row["updated_at"]),
        "helpText": row["help_text"], "confirmations": row["confirmations"], "balanceAlert": row["balance_alert"],
    }


def promotional_hours(kept: str) -> dict[str, str] | None:
    """A workspace's promotional hours as the API and the command show them: null when off."""
    hours = parse_promo_hours(kept)
    if hours is None:
        return None
    start, end = str(hours).split("-")
    return {"start": start, "end": end, "timeZone": "Asia/Kathmandu"}


def client_view(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": row["id"], "workspaceId": row["workspace_id"], "brand": row["brand"],
        "webhookUrl": row["webhook_url"], "rateLimit": row["rate_limit"], "keyPrefix": row["key_prefix"],
        "enabled": row["enabled"], "createdAt": iso(row["created_at"]), "updatedAt": iso(row["updated_at"]),
        "otpTemplate": row["otp_template"], "otpWebDomain": row["otp_web_domain"],
        "brandRequested": row["brand_requested"], "compatType": row["compat_type"], "keywords": row["keywords"],
        "replyUrl": row["reply_url"], "defaultReply": row["default_reply"],
    }


def sim_view(row: dict[str, Any]) -> dict[str, Any]:
    """A SIM as the `sandesh sim` commands print it: never its PIN or its port's password and
    signing key, only whether they are set."""
    return {
        "id": row["id"], "name": row["name"], "port": row["port"], "baud": row["baud"], "host": row["host"],
        "enabled": row["enabled"], "iccid": row["iccid"], "imsi": row["imsi"], "operator": row["operator"],
        "manufacturer": row["manufacturer"], "model": row["model"], "firmware": row["firmware"],
        "reports": row["reports"], "inbound": row["inbound"], "cnmi": row["cnmi"], "messageStore": row["message_store"],
        "pin": ("refused" if row["pin_refused"] else "set") if row["pin_sealed"] else None,
        "portSecret": "set" if row.get("port_secret_sealed") else None,
        "dailyCap": row["daily_cap"], "monthlyCap": row["monthly_cap"], "pace": row["pace"] or PARTS_PER_WINDOW,
        "balanceUssd": row["balance_ussd"], "balanceEvery": row["balance_every"],
        "minCredit": row["min_credit"] if row["min_credit"] is not None else
        (DEFAULT_MIN_CREDIT if row["balance_ussd"] else None),
        "credit": row["credit"], "creditAt": iso(row["credit_at"]) if row["credit_at"] else None,
        "creditReply": row["credit_reply"],
        "createdAt": iso(row["created_at"]),
    }


def fetch_one(conn: Any, table: str, key: str, value: str) -> dict[str, Any] | None:
    assert table in OWN.tables and key in {"id", "name"}
    with conn.cursor() as cur:
        cur.execute(f"SELECT * FROM {table} WHERE {key} = %s", (value,))
        return cur.fetchone()



# Queries of the API, the workers and the operator command.

def find_sim(conn: Any, key: str, value: str) -> dict[str, Any] | None:
    """The SIM with this id, name or ICCID."""
    assert key in {"id", "name", "iccid"}
    return conn.execute(f"SELECT * FROM sims WHERE {key} = %s", (value,)).fetchone()


def sims(conn: Any) -> list[dict[str, Any]]:
    """Every registered SIM, by name."""
    return conn.execute("SELECT * FROM sims ORDER BY name").fetchall()


def sending_state(conn: Any, workspace_id: str, route_window: float) -> dict[str, Any] | None:
    """What a send from the dashboard is decided on: the workspace's status, balance, rates, types
    and promotional hours, the SMS switch, and until when a SIM is a route."""
    return conn.execute(
        "SELECT w.status, w.balance, w.rates, w.types, w.promo_hours,"
        " COALESCE((SELECT enabled FROM sms_switch LIMIT 1), true) AS sms_enabled,"
        f" {ROUTE_UNTIL} AS route_until FROM workspaces w WHERE w.id = %(workspace)s",
        {"workspace": workspace_id, "route_window": route_window}).fetchone()


class SendingStates:
    """The application's SendingStates port (domain/ports.py) on pooled connections; a SIM is a
    route for `route_window` seconds after its last healthy heartbeat."""

    def __init__(self, connection: Callable[[], ContextManager[Any]], route_window: float):
        self.connection, self.route_window = connection, route_window

    def of(self, workspace_id: str) -> SendingState | None:
        with self.connection() as conn:
            row = sending_state(conn, workspace_id, self.route_window)
        if row is None:
            return None
        return SendingState(workspace_id, row["status"], row["balance"], row["rates"], row["types"],
                            parse_promo_hours(row["promo_hours"]), row["sms_enabled"], row["route_until"])


def workspace_balance(conn: Any, workspace_id: str) -> dict[str, Any] | None:
    """What GET /v1/sms/balance shows of the caller's workspace (prepared: read on every call)."""
    return conn.execute("SELECT status, balance, rates, types, promo_hours FROM workspaces WHERE id = %s",
                        (workspace_id,), prepare=True).fetchone()


def workspaces(conn: Any) -> list[dict[str, Any]]:
    return conn.execute("SELECT * FROM workspaces ORDER BY created_at").fetchall()


def clients(conn: Any, workspace_id: str | None) -> list[dict[str, Any]]:
    """Every client, or a workspace's, oldest first."""
    return conn.execute("SELECT * FROM clients WHERE %(ws)s::text IS NULL OR workspace_id = %(ws)s ORDER BY created_at",
                        {"ws": workspace_id}).fetchall()


def brand_requests(conn: Any) -> list[dict[str, Any]]:
    """The clients whose workspace asked for a brand, with the workspace's name, by workspace."""
    return conn.execute("SELECT c.*, w.name AS workspace_name FROM clients c JOIN workspaces w ON w.id = c.workspace_id "
                        "WHERE c.brand_requested IS NOT NULL ORDER BY w.name, c.created_at").fetchall()


def any_client(conn: Any) -> bool:
    return conn.execute("SELECT 1 FROM clients LIMIT 1").fetchone() is not None


def any_sim_not_named(conn: Any, prefix: str) -> bool:
    """Whether a SIM is registered whose name does not start with `prefix` (no LIKE wildcards in it)."""
    return conn.execute("SELECT 1 FROM sims WHERE name NOT LIKE %s LIMIT 1", (prefix + "%",)).fetchone() is not None


def client_services(conn: Any, client_id: str) -> dict[str, Any] | None:
    """A client's reply URL and default reply (workers/services.py)."""
    return conn.execute("SELECT reply_url, default_reply FROM clients WHERE id = %s", (client_id,)).fetchone()


def sim_name(conn: Any, sim_id: str) -> str | None:
    row = conn.execute("SELECT name FROM sims WHERE id = %s", (sim_id,)).fetchone()
    return row["name"] if row else None


def workspace_of(conn: Any, client_id: str) -> str:
    """The workspace of a client (on a connection or a transaction's cursor)."""
    return conn.execute("SELECT workspace_id FROM clients WHERE id = %s", (client_id,)).fetchone()["workspace_id"]


def keyword_owner(conn: Any, keyword: str) -> dict[str, Any] | None:
    """The client a keyword belongs to (its id, workspace, reply URL and default reply), or None."""
    return conn.execute("SELECT c.id, c.workspace_id, c.reply_url, c.default_reply FROM client_keywords k"
                        " JOIN clients c ON c.id = k.client_id WHERE k.keyword = %s", (keyword,)).fetchone()


def webhook_url(conn: Any, client_id: str) -> str | None:
    """The client's webhook URL, if it has one (on a connection or a transaction's cursor)."""
    row = conn.execute("SELECT webhook_url FROM clients WHERE id = %s", (client_id,)).fetchone()
    return row["webhook_url"] if row else None


def webhook_target(conn: Any, client_id: str) -> dict[str, Any] | None:
    """The client's webhook URL and sealed secrets: the current one, and the previous one with
    the end of its grace period."""
    return conn.execute("SELECT webhook_url, secret_sealed, previous_secret_sealed, previous_secret_until"
                        " FROM clients WHERE id = %s", (client_id,)).fetchone()
