"""Inline read models of operator state: workspaces (with the balance ledger), clients, SIMs,
the SMS switch, and the inline writer that composes every inline read model.  Written in the
transaction that appends their events (projections/store.py), so a key rotation or a disable
takes effect at once in every API process, and rebuilt from the log by `sandesh replay
registry` with the very same handlers.

Owns `workspaces`, `clients`, `sims`, `sms_switch`.  Other modules read these tables:
request_rate.py (the caller: clients, workspaces, sms_switch) and sim_health.py (the pool and
the route rule: sims).

The inline registry (`HANDLERS`, `DDL`, `TABLES`, `inline_writer`) is these tables and those
of the other inline read models, each written by its owner's handlers: dispatch.py
(`dispatch_queue`, `sent_parts`, `awaiting_reports`), idempotency.py (`idempotency_keys`),
inbound.py (`replies`), otp_limits.py
(`otp_issues`), webhooks.py (`webhook_deliveries`).  An event several of them record is
written here in a fixed order: an acceptance debits, keeps its key, then queues; a failure
leaves the queue, then refunds.
"""
from __future__ import annotations

from typing import Any, Callable

from psycopg.types.json import Jsonb

from . import dispatch, idempotency, inbound, otp_limits, webhooks

from sandesh.domain.client import Client
from sandesh.domain.message import Message
from sandesh.domain.otp import Otp
from sandesh.domain.operators import of_imsi
from sandesh.domain.clock import iso
from sandesh.domain.sim import Sim, SmsSwitch
from sandesh.domain.workspace import Workspace

NAME = "registry"
OWN_TABLES = ("workspaces", "clients", "sims", "sms_switch")
# Every inline table, in the order `sandesh replay registry` locks them (projections/replay.py).
TABLES = ("workspaces", "clients", "sims", "sms_switch", "idempotency_keys", "otp_issues", "dispatch_queue",
          "sent_parts", "replies", "awaiting_reports", *webhooks.TABLES)
assert sorted(TABLES) == sorted((*OWN_TABLES, *idempotency.TABLES, "otp_issues", *dispatch.TABLES, *inbound.TABLES,
                                 *webhooks.TABLES))

OWN_DDL = """
CREATE TABLE IF NOT EXISTS workspaces (
    id text PRIMARY KEY, name text NOT NULL, status text NOT NULL,
    rates jsonb NOT NULL, types jsonb NOT NULL,
    balance bigint NOT NULL DEFAULT 0 CONSTRAINT balance_never_negative CHECK (balance >= 0),
    created_at double precision NOT NULL, updated_at double precision NOT NULL);
CREATE TABLE IF NOT EXISTS clients (
    id text PRIMARY KEY, workspace_id text NOT NULL, brand text NOT NULL, webhook_url text,
    rate_limit integer NOT NULL, key_hash text NOT NULL UNIQUE, key_prefix text NOT NULL,
    secret_sealed text NOT NULL, secret_hash text NOT NULL,
    previous_secret_sealed text, previous_secret_until double precision,
    enabled boolean NOT NULL, created_at double precision NOT NULL, updated_at double precision NOT NULL);
CREATE INDEX IF NOT EXISTS clients_workspace ON clients (workspace_id);
CREATE TABLE IF NOT EXISTS sims (
    id text PRIMARY KEY, name text NOT NULL UNIQUE, port text NOT NULL, baud integer NOT NULL,
    host text, enabled boolean NOT NULL, iccid text UNIQUE, imsi text,
    created_at double precision NOT NULL, updated_at double precision NOT NULL);
ALTER TABLE sims ADD COLUMN IF NOT EXISTS operator text;
ALTER TABLE sims ADD COLUMN IF NOT EXISTS quarantine text;
ALTER TABLE sims ADD COLUMN IF NOT EXISTS quarantine_reason text;
ALTER TABLE sims ADD COLUMN IF NOT EXISTS state_since double precision;
CREATE TABLE IF NOT EXISTS sms_switch (
    id text PRIMARY KEY, enabled boolean NOT NULL, reason text, updated_at double precision);
"""
WORKING_COLUMNS = {**dispatch.WORKING_COLUMNS, **webhooks.WORKING_COLUMNS}
RETAINED = webhooks.RETAINED
DDL = OWN_DDL + idempotency.DDL + dispatch.DDL + inbound.DDL + otp_limits.ISSUES_DDL + webhooks.DDL

Handler = Callable[[Any, Any], None]
HANDLERS: dict[type, Handler] = {}


def handles(*event_classes: type) -> Callable[[Handler], Handler]:
    def register(function: Handler) -> Handler:
        for cls in event_classes:
            HANDLERS[cls] = function
        return function
    return register


@handles(Workspace.Created)
def _workspace_created(cur: Any, e: Any) -> None:
    cur.execute(
        "INSERT INTO workspaces (id, name, status, rates, types, created_at, updated_at)"
        " VALUES (%s, %s, 'pending', %s, %s, %s, %s)",
        (e.originator_id, e.name, Jsonb(e.rates), Jsonb(e.types), e.at, e.at),
    )


_WORKSPACE_STATUS = {Workspace.Activated: "active", Workspace.Suspended: "suspended", Workspace.Reinstated: "active"}


@handles(*_WORKSPACE_STATUS)
def _workspace_status(cur: Any, e: Any) -> None:
    cur.execute("UPDATE workspaces SET status = %s, updated_at = %s WHERE id = %s",
                (_WORKSPACE_STATUS[type(e)], e.at, e.originator_id))


@handles(Workspace.Credited)
def _workspace_credited(cur: Any, e: Any) -> None:
    cur.execute("UPDATE workspaces SET balance = balance + %s, updated_at = %s WHERE id = %s",
                (e.amount, e.at, e.originator_id))


@handles(Workspace.RatesSet)
def _workspace_rates(cur: Any, e: Any) -> None:
    cur.execute("UPDATE workspaces SET rates = %s, updated_at = %s WHERE id = %s",
                (Jsonb(e.rates), e.at, e.originator_id))


@handles(Workspace.TypesSet)
def _workspace_types(cur: Any, e: Any) -> None:
    cur.execute("UPDATE workspaces SET types = %s, updated_at = %s WHERE id = %s",
                (Jsonb(e.types), e.at, e.originator_id))


@handles(Client.Created)
def _client_created(cur: Any, e: Any) -> None:
    cur.execute(
        "INSERT INTO clients (id, workspace_id, brand, webhook_url, rate_limit, key_hash, key_prefix,"
        " secret_sealed, secret_hash, enabled, created_at, updated_at)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, true, %s, %s)",
        (e.originator_id, e.workspace_id, e.brand, e.webhook_url, e.rate_limit, e.key_hash, e.key_prefix,
         e.secret_sealed, e.secret_hash, e.at, e.at),
    )


@handles(Client.KeyRotated)
def _client_key_rotated(cur: Any, e: Any) -> None:
    cur.execute("UPDATE clients SET key_hash = %s, key_prefix = %s, updated_at = %s WHERE id = %s",
                (e.key_hash, e.key_prefix, e.at, e.originator_id))


@handles(Client.SecretRotated)
def _client_secret_rotated(cur: Any, e: Any) -> None:
    keep_previous = e.grace_hours > 0
    cur.execute(
        "UPDATE clients SET previous_secret_sealed = CASE WHEN %s THEN secret_sealed END,"
        " previous_secret_until = %s, secret_sealed = %s, secret_hash = %s, updated_at = %s WHERE id = %s",
        (keep_previous, e.previous_until if keep_previous else None, e.secret_sealed, e.secret_hash,
         e.at, e.originator_id),
    )


@handles(Client.Disabled, Client.Enabled)
def _client_enabled(cur: Any, e: Any) -> None:
    cur.execute("UPDATE clients SET enabled = %s, updated_at = %s WHERE id = %s",
                (isinstance(e, Client.Enabled), e.at, e.originator_id))


_CLIENT_COLUMNS = {"brand": "brand", "webhook_url": "webhook_url", "rate_limit": "rate_limit"}


@handles(Client.Updated)
def _client_updated(cur: Any, e: Any) -> None:
    for field, value in e.changes.items():
        column = _CLIENT_COLUMNS[field]
        cur.execute(f"UPDATE clients SET {column} = %s, updated_at = %s WHERE id = %s",
                    (value, e.at, e.originator_id))


@handles(Sim.Added)
def _sim_added(cur: Any, e: Any) -> None:
    cur.execute(
        "INSERT INTO sims (id, name, port, baud, host, enabled, created_at, updated_at, state_since)"
        " VALUES (%s, %s, %s, %s, %s, true, %s, %s, %s)",
        (e.originator_id, e.name, e.port, e.baud, e.host, e.at, e.at, e.at),
    )


@handles(Sim.Disabled, Sim.Enabled)
def _sim_enabled(cur: Any, e: Any) -> None:
    cur.execute("UPDATE sims SET enabled = %s, updated_at = %s, state_since = %s WHERE id = %s",
                (isinstance(e, Sim.Enabled), e.at, e.at, e.originator_id))


@handles(Sim.PortChanged)
def _sim_port_changed(cur: Any, e: Any) -> None:
    cur.execute("UPDATE sims SET port = %s, updated_at = %s WHERE id = %s", (e.port, e.at, e.originator_id))


_SIM_COLUMNS = {"baud": "baud", "host": "host"}


@handles(Sim.Updated)
def _sim_updated(cur: Any, e: Any) -> None:
    for field, value in e.changes.items():
        cur.execute(f"UPDATE sims SET {_SIM_COLUMNS[field]} = %s, updated_at = %s WHERE id = %s",
                    (value, e.at, e.originator_id))


@handles(Sim.Identified)
def _sim_identified(cur: Any, e: Any) -> None:
    cur.execute("UPDATE sims SET iccid = %s, imsi = %s, operator = %s, updated_at = %s WHERE id = %s",
                (e.iccid, e.imsi, of_imsi(e.imsi), e.at, e.originator_id))


@handles(Sim.Quarantined)
def _sim_quarantined(cur: Any, e: Any) -> None:
    cur.execute("UPDATE sims SET quarantine = %s, quarantine_reason = %s, state_since = %s, updated_at = %s"
                " WHERE id = %s", (e.kind, e.reason, e.at, e.at, e.originator_id))


@handles(Sim.Recovered, Sim.Released)
def _sim_back(cur: Any, e: Any) -> None:
    cur.execute("UPDATE sims SET quarantine = NULL, quarantine_reason = NULL, state_since = %s, updated_at = %s"
                " WHERE id = %s", (e.at, e.at, e.originator_id))


@handles(SmsSwitch.Disabled, SmsSwitch.Enabled)
def _sms_switch(cur: Any, e: Any) -> None:
    on = isinstance(e, SmsSwitch.Enabled)
    cur.execute(
        "INSERT INTO sms_switch (id, enabled, reason, updated_at) VALUES (%s, %s, %s, %s)"
        " ON CONFLICT (id) DO UPDATE SET enabled = excluded.enabled, reason = excluded.reason,"
        " updated_at = excluded.updated_at",
        (e.originator_id, on, None if on else e.reason, e.at),
    )


def _debit(cur: Any, workspace_id: str, amount: int) -> None:
    """The charge at acceptance; the CHECK on the balance refuses it, and the whole append, when short."""
    cur.execute("UPDATE workspaces SET balance = balance - %s WHERE id = %s", (amount, workspace_id))


_DEBIT_MANY = """
WITH locked AS (SELECT id FROM workspaces WHERE id = ANY(%(ids)s) ORDER BY id FOR UPDATE)
UPDATE workspaces w SET balance = w.balance - d.amount
FROM unnest(%(ids)s::text[], %(amounts)s::bigint[]) AS d(id, amount)
WHERE w.id = d.id AND w.id IN (SELECT id FROM locked)
"""


def _debit_many(cur: Any, debits: dict[str, int]) -> None:
    """Several workspaces' debits in one statement; rows are locked in id order, so two
    committers never wait on each other's rows in opposite orders."""
    if len(debits) == 1:
        [(workspace_id, amount)] = debits.items()
        return _debit(cur, workspace_id, amount)
    ids = sorted(debits)
    cur.execute(_DEBIT_MANY, {"ids": ids, "amounts": [debits[i] for i in ids]})


@handles(Message.Accepted)
def _message_accepted(cur: Any, e: Any) -> None:
    _debit(cur, e.workspace_id, e.cost)
    idempotency.remember(cur, e)
    dispatch.enqueue(cur, e)


@handles(Message.Failed, Message.Rejected)
def _message_ended(cur: Any, e: Any) -> None:
    """Out of the queue; refunded when no segment was accepted by the network (decisions §1)."""
    dispatch.dequeue(cur, e)
    if e.refund:
        cur.execute("UPDATE workspaces SET balance = balance + %s WHERE id = %s", (e.refund, e.workspace_id))


@handles(Otp.Issued)
def _otp_issued(cur: Any, e: Any) -> None:
    otp_limits.guard_issue(cur, e)


# The other inline read models' events, each recorded by one of them alone.
for _owner in (dispatch, inbound, webhooks):
    assert not HANDLERS.keys() & _owner.HANDLERS.keys(), f"{_owner.__name__}: an event written here already"
    HANDLERS.update(_owner.HANDLERS)


def inline_writer(events: list[Any]) -> Callable[[Any], None]:
    """What the application hands to the recorder: write these events' rows on its cursor.

    A group commit's many acceptances debit each workspace once, by their sum, in one statement."""
    relevant = [e for e in events if type(e) in HANDLERS]

    def write(cur: Any) -> None:
        debits: dict[str, int] = {}
        for event in relevant:
            if isinstance(event, Message.Accepted):
                debits[event.workspace_id] = debits.get(event.workspace_id, 0) + event.cost
                idempotency.remember(cur, event)
                dispatch.enqueue(cur, event)
            else:
                HANDLERS[type(event)](cur, event)
        if debits:
            _debit_many(cur, debits)
        # Wake the dispatchers (projections/dispatch.py): new work, or a changed SIM pool.
        if any(isinstance(e, (Message.Accepted, Message.Requeued)) for e in relevant):
            cur.execute(dispatch.NOTIFY_WORK)
        if any(isinstance(e, Sim.Event) for e in relevant):
            cur.execute(dispatch.NOTIFY_POOL)

    return write


# Views for the operator command and the API (one place that turns rows into JSON).

def workspace_view(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": row["id"], "name": row["name"], "status": row["status"], "balance": row["balance"],
        "currency": "NPR", "rates": row["rates"], "allowedTypes": row["types"],
        "createdAt": iso(row["created_at"]), "updatedAt": iso(row["updated_at"]),
    }


def client_view(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": row["id"], "workspaceId": row["workspace_id"], "brand": row["brand"],
        "webhookUrl": row["webhook_url"], "rateLimit": row["rate_limit"], "keyPrefix": row["key_prefix"],
        "enabled": row["enabled"], "createdAt": iso(row["created_at"]), "updatedAt": iso(row["updated_at"]),
    }


def sim_view(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": row["id"], "name": row["name"], "port": row["port"], "baud": row["baud"], "host": row["host"],
        "enabled": row["enabled"], "iccid": row["iccid"], "imsi": row["imsi"], "operator": row["operator"],
        "createdAt": iso(row["created_at"]),
    }


def fetch_one(conn: Any, table: str, key: str, value: str) -> dict[str, Any] | None:
    assert table in OWN_TABLES and key in {"id", "name"}
    with conn.cursor() as cur:
        cur.execute(f"SELECT * FROM {table} WHERE {key} = %s", (value,))
        return cur.fetchone()



# Queries of the API, the workers and the operator command.

def find_sim(conn: Any, key: str, value: str) -> dict[str, Any] | None:
    """The SIM with this id, name or ICCID."""
    assert key in {"id", "name", "iccid"}
    return conn.execute(f"SELECT * FROM sims WHERE {key} = %s", (value,)).fetchone()


def workspace_balance(conn: Any, workspace_id: str) -> dict[str, Any] | None:
    """What GET /v1/sms/balance shows of the caller's workspace (prepared: read on every call)."""
    return conn.execute("SELECT status, balance, rates, types FROM workspaces WHERE id = %s", (workspace_id,),
                        prepare=True).fetchone()


def workspaces(conn: Any) -> list[dict[str, Any]]:
    return conn.execute("SELECT * FROM workspaces ORDER BY created_at").fetchall()


def clients(conn: Any, workspace_id: str | None) -> list[dict[str, Any]]:
    """Every client, or a workspace's, oldest first."""
    return conn.execute("SELECT * FROM clients WHERE %(ws)s::text IS NULL OR workspace_id = %(ws)s ORDER BY created_at",
                        {"ws": workspace_id}).fetchall()


def any_client(conn: Any) -> bool:
    return conn.execute("SELECT 1 FROM clients LIMIT 1").fetchone() is not None


def any_sim_not_named(conn: Any, prefix: str) -> bool:
    """Whether a SIM is registered whose name does not start with `prefix` (no LIKE wildcards in it)."""
    return conn.execute("SELECT 1 FROM sims WHERE name NOT LIKE %s LIMIT 1", (prefix + "%",)).fetchone() is not None


def webhook_url(conn: Any, client_id: str) -> str | None:
    """The client's webhook URL, if it has one (on a connection or a transaction's cursor)."""
    row = conn.execute("SELECT webhook_url FROM clients WHERE id = %s", (client_id,)).fetchone()
    return row["webhook_url"] if row else None


def webhook_target(conn: Any, client_id: str) -> dict[str, Any] | None:
    """The client's webhook URL and sealed secrets: the current one, and the previous one with
    the end of its grace period."""
    return conn.execute("SELECT webhook_url, secret_sealed, previous_secret_sealed, previous_secret_until"
                        " FROM clients WHERE id = %s", (client_id,)).fetchone()
