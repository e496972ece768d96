"""One function per `sandesh` subcommand: call a use case, print what the operator needs."""
from __future__ import annotations

import argparse
import re
import sys
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from sandesh.domain.clock import NEPAL, iso, parse_iso
from sandesh.domain.release import VERSION
from sandesh.domain.errors import InvalidInput, NotFound
from sandesh.domain.settings import Settings
from sandesh.domain.types import parse_rates, parse_types
from sandesh.domain.usecases.operators import Operators, Services
from sandesh.domain.usecases.sims import Sims
from sandesh.domain.alerts import CONDITIONS, DIGEST, INTERVAL, TEST_ALERT, delay_of, digest_time, interval_of, sms_number
from sandesh.projections import alerts as alert_rows, people, registry
from sandesh.projections.storage.runtime import Runtime

from . import metrics_dir
from .bootstrap import bootstrap, migrate

from .output import emit, emit_line, fail
from .logs import configure_logging


@contextmanager
def opened(settings: Settings) -> Iterator[Runtime]:
    runtime = bootstrap(settings, pool_size=2)
    try:
        yield runtime
    finally:
        runtime.close()


def _row(runtime: Runtime, table: str, value: str, label: str, key: str = "id") -> dict[str, Any]:
    with runtime.connection() as conn:
        row = registry.fetch_one(conn, table, key, value)
    if row is None:
        raise NotFound(f"no {label} {value!r}")
    return row


def _workspace(runtime: Runtime, workspace_id: str) -> dict[str, Any]:
    return registry.workspace_view(_row(runtime, "workspaces", workspace_id, "workspace"))


def _client(runtime: Runtime, client_id: str) -> dict[str, Any]:
    return registry.client_view(_row(runtime, "clients", client_id, "client"))


def db_migrate(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    def waiting(tries: int) -> None:
        if tries in (1, 10, 50):
            print(f"sandesh: db migrate: running processes hold the tables' locks; trying again ({tries} tries so far)",
                  file=sys.stderr, flush=True)

    built = migrate(settings, waiting)
    emit({"ok": True, **_releases(settings), **({"built": built} if built else {})})
    return 0


# Releases and the upgrade gate (docs/operations.md, "Upgrading")

def _releases(settings: Settings) -> dict[str, Any]:
    from sandesh.projections.storage import db, releases

    with db.connect(settings) as conn:
        found = releases.read(conn)
    return {"release": VERSION, "migratedBy": found.migrated if found else None,
            "finalized": found.finalized if found else None}


def upgrade_status(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    from sandesh.projections.storage import releases

    with opened(settings) as runtime, runtime.connection() as conn:
        now = runtime.clock.now()
        found = releases.read(conn)
        running = releases.processes(conn)
        unreported = releases.unreported_dispatchers(conn, now)
        blocking = releases.holding_back(conn, now)
    emit({**_releases(settings),
          "finalizedBy": found.finalized_by if found else None,
          "finalizedOn": found.finalized_at.isoformat() if found and found.finalized_at else None,
          "processes": [{"kind": p["kind"], "host": p["host"], "pid": p["pid"], "release": p["release"],
                         "since": p["started_at"].isoformat()} for p in running],
          "unreportedDispatchers": unreported,
          "finalizable": found is not None and not blocking})
    return 0


def upgrade_finalize(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    from sandesh.projections.storage import releases

    with opened(settings) as runtime, runtime.connection() as conn:
        try:
            result = releases.finalize(conn, actor, runtime.clock.now(), force=args.force)
        except releases.NotFinalizable as refused:
            return fail(str(refused))
    emit({**result, "by": actor})
    return 0


# The server's keys (docs/operations.md, "Rotating the key")

def _root_row(row: dict[str, Any], wraps: int) -> dict[str, Any]:
    return {"id": row["id"], "state": row["state"], "first": row["position"] == 0, "wraps": wraps,
            "currentSince": iso(row["current_since"]) if row["current_since"] is not None else None,
            "rotatedBy": row["rotated_by"],
            "retiredOn": row["retired_at"].isoformat() if row["retired_at"] else None, "retiredBy": row["retired_by"]}


def key_status(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    from sandesh.projections.storage import keys, releases

    with opened(settings) as runtime, runtime.connection() as conn:
        assert runtime.keys is not None
        ring = runtime.keys
        roots = keys.read(conn)
        wraps = {r["id"]: keys.wrapped_under(conn, r["id"]) for r in roots}
        data = keys.read_data_keys(conn)
        running = releases.processes(conn)
        holders = keys.holders_of_secrets(conn)
        due = runtime.sandesh.secrets.due_for_replacement(holders)
    emit({"keys": [_root_row(r, wraps[r["id"]]) for r in roots], "wraps": ring.current, "held": list(ring.ids),
          "dataKeys": keys.data_key_summary(ring, data),
          "processes": [{"kind": p["kind"], "host": p["host"], "pid": p["pid"], "release": p["release"],
                         "keys": p["keys"], "writes": p["writes"]} for p in running],
          "dueForReplacement": due})
    return 0


def key_rotate(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    from sandesh.projections.storage import keys, releases

    with opened(settings) as runtime, runtime.connection() as conn:
        assert runtime.keys is not None
        try:
            rotated = keys.rotate(conn, runtime.keys, actor, runtime.clock.now(), releases.processes(conn),
                                  compromised=args.compromised)
        except keys.NotNow as refused:
            return fail(str(refused))
    emit({**rotated, "by": actor, "next": f"sandesh key retire {rotated['previous']}"})
    return 0


def key_retire(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    from sandesh.projections.storage import keys

    with opened(settings) as runtime, runtime.connection() as conn:
        rows = {r["id"]: r for r in keys.read(conn)}
        row = rows.get(args.key)
        if row is None:
            return fail(f"no root key {args.key!r} in the database (`sandesh key status`)")
        if row["state"] == "retired":
            emit({"id": args.key, "state": "retired", "changed": False})
            return 0
        if row["state"] == "current":
            return fail(f"root key {args.key} is the current one: rotate to a new key first")
        if wraps := keys.wrapped_under(conn, args.key):
            return fail(f"root key {args.key} still wraps {wraps} data keys: rotate again "
                        "(docs/operations.md, \"Rotating the key\")")
        keys.retire(conn, args.key, actor)
    emit({"id": args.key, "state": "retired", "changed": True, "by": actor,
          "next": f"remove key {args.key} from SANDESH_PREVIOUS_KEYS and restart the processes"})
    return 0


# Workspaces

def workspace_create(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    types = parse_types(args.types) if args.types is not None else None
    rates = parse_rates(args.rate)
    with opened(settings) as runtime:
        workspace = runtime.sandesh.operators.create_workspace(args.name, types, rates, actor)
        emit(_workspace(runtime, workspace.id))
    return 0


def _workspace_command(change: Callable[[Operators], object], args: argparse.Namespace, settings: Settings) -> int:
    with opened(settings) as runtime:
        change(runtime.sandesh.operators)
        emit(_workspace(runtime, args.workspace))
    return 0


def workspace_activate(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    return _workspace_command(lambda ops: ops.activate_workspace(args.workspace, actor), args, settings)


def workspace_suspend(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    return _workspace_command(lambda ops: ops.suspend_workspace(args.workspace, actor), args, settings)


def workspace_reinstate(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    return _workspace_command(lambda ops: ops.reinstate_workspace(args.workspace, actor), args, settings)


def workspace_credit(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    return _workspace_command(lambda ops: ops.credit_workspace(args.workspace, args.amount, args.note, actor),
                              args, settings)


def workspace_set_rates(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    return _workspace_command(lambda ops: ops.set_rates(args.workspace, parse_rates(args.rates), actor), args, settings)


def workspace_set_types(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    return _workspace_command(lambda ops: ops.set_types(args.workspace, parse_types(args.types), actor), args, settings)


def workspace_set_help_text(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    return _workspace_command(lambda ops: ops.set_replies(args.workspace, args.text, None, actor), args, settings)


def workspace_set_confirmations(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    return _workspace_command(lambda ops: ops.set_replies(args.workspace, None, args.state == "on", actor), args,
                              settings)


def workspace_set_balance_alert(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    return _workspace_command(lambda ops: ops.set_balance_alert(args.workspace, args.npr, actor), args, settings)


def workspace_set_promo_hours(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    return _workspace_command(lambda ops: ops.set_promo_hours(args.workspace, args.hours, actor), args, settings)


def workspace_shred_texts(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    """Destroy the keys of the workspace's texts (docs/design.md, "Erasing texts")."""
    with opened(settings) as runtime:
        keys = runtime.sandesh.operators.shred_texts(args.workspace, actor)
        emit({"workspaceId": args.workspace, "keysDestroyed": keys})
    return 0


def workspace_show(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    with opened(settings) as runtime:
        emit(_workspace(runtime, args.workspace))
    return 0


def workspace_list(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    with opened(settings) as runtime, runtime.connection() as conn:
        rows = registry.workspaces(conn)
    emit({"workspaces": [registry.workspace_view(r) for r in rows]})
    return 0


# API clients

def client_create(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    with opened(settings) as runtime:
        client, key, secret = runtime.sandesh.operators.create_client(
            args.workspace, args.brand, args.webhook_url, args.rate_limit, actor)
        emit({**_client(runtime, client.id), "key": key, "webhookSecret": secret})
    return 0


def client_rotate_key(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    with opened(settings) as runtime:
        client, key = runtime.sandesh.operators.rotate_key(args.client, actor)
        emit({"id": client.id, "key": key, "keyPrefix": client.key_prefix})
    return 0


def client_rotate_secret(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    with opened(settings) as runtime:
        client, secret = runtime.sandesh.operators.rotate_secret(args.client, args.grace_hours, actor)
        until = client.previous_secret_until
        emit({"id": client.id, "webhookSecret": secret, "previousSecretValidUntil": iso(until) if until else None})
    return 0


def _client_command(change: Callable[[Operators], object], args: argparse.Namespace, settings: Settings) -> int:
    with opened(settings) as runtime:
        change(runtime.sandesh.operators)
        emit(_client(runtime, args.client))
    return 0


def client_disable(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    return _client_command(lambda ops: ops.disable_client(args.client, actor), args, settings)


def client_enable(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    return _client_command(lambda ops: ops.enable_client(args.client, actor), args, settings)


def client_update(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    services = Services(args.compat_type, tuple(args.keyword), tuple(args.no_keyword), args.reply_url,
                        args.default_reply)
    with opened(settings) as runtime:
        with runtime.connection() as conn:  # the keyword's owner named; the append's guard settles a race
            for word in args.keyword:
                owner = registry.keyword_owner(conn, word.strip().upper())
                if owner is not None and owner["id"] != args.client:
                    raise InvalidInput(f"keyword {word.strip().upper()} is client {owner['id']}'s already: a "
                                       "keyword is unique across the pool")
        runtime.sandesh.operators.update_client(args.client, args.brand, args.webhook_url, args.rate_limit, actor,
                                                args.otp_template, args.otp_web_domain, services)
        emit(_client(runtime, args.client))
    return 0


def client_show(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    with opened(settings) as runtime:
        emit(_client(runtime, args.client))
    return 0


def client_list(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    with opened(settings) as runtime, runtime.connection() as conn:
        rows = registry.clients(conn, args.workspace)
    emit({"clients": [registry.client_view(r) for r in rows]})
    return 0


# SIMs and the SMS switch

SIM_SETTINGS_ARGS = ("baud", "host", "daily_cap", "monthly_cap", "pace", "balance_ussd", "min_credit",
                     "balance_every")


def _sim_settings(args: argparse.Namespace) -> dict[str, object]:
    """The SIM settings given on the command line (None: not given; CLEAR: 'off')."""
    from sandesh.domain.sim import CLEAR

    settings = {name: getattr(args, name, None) for name in SIM_SETTINGS_ARGS}
    if settings["balance_ussd"] == "off":
        settings["balance_ussd"] = CLEAR
    return settings


def _pin(text: str | None) -> str | None:
    """--pin as given, or read from stdin for '-' (so it stays out of the shell's history)."""
    import sys

    return sys.stdin.readline().strip() if text == "-" else text


def _port(text: str | None) -> str | None:
    """--port as given, or read from stdin for '-' (a device's password stays out of the shell's history)."""
    import sys

    return sys.stdin.readline().strip() if text == "-" else text


def _shown_port(port: str) -> str:
    """A port as a sentence may show it: a device URL without its password or signing key, and
    any other URL without what comes before its last "@"."""
    from sandesh.domain.sim import split_secret

    public = split_secret(port)[0]
    return re.sub(r"://.*@", "://***@", public) if public == port else public


def _port_problem(port: str, others: list[dict[str, Any]]) -> str | None:
    """Why `port` cannot be a SIM's beside the enabled SIMs `others`, as the command says it."""
    from sandesh.workers.links import port_problem

    if problem := port_problem(port, [r["port"] for r in others]):
        return f"--port {_shown_port(port)}: {problem}"
    return None


def sim_add(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    from sandesh.workers.ports import same_device

    args.port = _port(args.port)
    with opened(settings) as runtime:
        with runtime.connection() as conn:
            enabled = [r for r in registry.sims(conn) if r["enabled"] and r["host"] == args.host]
        if problem := _port_problem(args.port, enabled):
            return fail(problem)
        taken = same_device(args.port, enabled)
        if taken is not None:  # its thread would wait on the other's lock for ever
            return fail(f"--port {_shown_port(args.port)} leads to {taken['device']}, the port of SIM "
                        f"{taken['name']!r}: one modem is one SIM (`sandesh sim list`)")
        sim = runtime.sandesh.sims.add_sim(args.name, args.port, args.baud, args.host, actor,
                                  {k: v for k, v in _sim_settings(args).items() if k not in ("baud", "host")})
        emit(registry.sim_view(_row(runtime, "sims", sim.id, "SIM")))
    return 0


def sim_list(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    """The SIMs with their state and what their dispatcher last reported: health, signal, parts
    used in the current pacing window, today and this month, last error."""
    from sandesh.projections import sim_health

    with opened(settings) as runtime, runtime.connection() as conn:
        rows = sim_health.pool(conn, runtime.clock.now(), settings.route_window)
    emit({"sims": [{**registry.sim_view(r), "state": r["state"], "reason": r["reason"],
                    "since": iso(r["since"]) if r["since"] else None,
                    "resumesAt": iso(r["resting_until"]) if r["state"] == "resting" else None,
                    "healthy": r["healthy"], "registered": r["registered"],
                    "signalDbm": r["signal_dbm"], "partsUsed": r["parts_used"],
                    "partsPerWindow": r["pace"] or sim_health.PARTS_PER_WINDOW,
                    "partsToday": r["parts_today"], "partsThisMonth": r["parts_month"],
                    "lastError": r["last_error"],
                    "heartbeatAt": iso(r["heartbeat_at"]) if r["heartbeat_at"] else None} for r in rows]})
    return 0


def sim_probe(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    """Like `gammu identify` for the operator plugging in a new stick: no database is needed."""
    from sandesh.workers.sims import probe

    found = probe(args.port, args.baud, _pin(args.pin))
    emit(found)
    if found["ok"]:
        return 0
    lines = [f"sim probe: {found['failedStep']}: {found['error']}"]
    lines += [f"  {e['command']} -> {' | '.join(e['answer'] + [e['final']])}" for e in found["dialogue"][-4:]]
    return fail("\n".join(lines), 1)


def sim_discover(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    """Every serial port of this host (or of --ports), what answers on it and which registered SIM
    it is; with --apply, the SIMs not registered are added and those on a new port moved
    (docs/operations.md, "Discovering modems").  A port a running dispatcher holds is not opened;
    one the operator named exactly (no wildcard) is refused with an error instead."""
    import socket
    import sys
    import time

    from sandesh.projections import sim_health
    from sandesh.projections.storage import releases
    from sandesh.workers import discover

    ports = discover.matching(args.ports) if args.ports else discover.serial_ports()
    hilink = sys.stdin.readline().strip() if args.hilink == "-" else args.hilink
    if hilink != "none" and (hilink or not args.ports):
        ports += discover.hilink_ports([h.strip() for h in hilink.split(",") if h.strip()] if hilink else None)
    with opened(settings) as runtime:
        with runtime.connection() as conn:
            pool = sim_health.pool(conn, runtime.clock.now(), settings.route_window)
            held = discover.holders(pool, releases.processes(conn), socket.gethostname())
        refused = [f"{p.name}: {held[p.device]}" for p in ports if p.named and p.device in held]
        if refused:
            return fail("; ".join(refused) + ". sim discover does not open a port a dispatcher drives: stop that "
                        "dispatcher first, or disable the SIM")
        started = time.monotonic()
        found = discover.discover(ports, held, args.baud)
        seconds = round(time.monotonic() - started, 2)
        locked = [f"{row['port']}: {row['reason']}" for p, row in zip(ports, found) if p.named and row["status"] == "held"]
        if locked:
            return fail("; ".join(locked))
        discover.plan(found, pool, held, args.name_prefix)
        if args.apply:
            discover.apply(runtime, found, ports, args.baud, args.host, actor)
    if sys.stdout.isatty() and not args.json:
        _discovered_table(found, args.apply)
    else:
        emit({"ports": found, "applied": args.apply, "seconds": seconds})
    return 0


def _discovered_table(found: list[dict[str, Any]], applied: bool) -> None:
    import sys

    from .output import table

    def sim(row: dict[str, Any]) -> str:
        if row["action"] == "add":
            return f"added as {row['name']}" if applied else f"not registered: --apply adds it as {row['name']}"
        if row["action"] == "move":
            return f"{row['name']}, moved from {row['movedFrom']}" if applied else \
                f"{row['name']}, at {row['movedFrom']}: --apply moves it here"
        if row["sim"] is None:
            return "-"
        return row["sim"]["name"] if row["sim"]["port"] == row["port"] else f"{row['sim']['name']}, at {row['sim']['port']}"

    table(["PORT", "STATUS", "DEVICE", "ICCID", "OPERATOR", "SIGNAL", "SIM"],
          [[row["port"], row["status"], " ".join(filter(None, (row["manufacturer"], row["model"]))) or "-",
            row["iccid"] or "-", row["operator"] or "-",
            f"{row['signalDbm']} dBm" if row["signalDbm"] is not None else "-", sim(row)] for row in found])
    for row in found:
        if row["reason"] and row["status"] != "no answer":
            sys.stdout.write(f"{row['port']}: {row['reason']}\n")


def _sim_id(runtime: Runtime, id_or_name: str) -> str:
    key = "id" if id_or_name.startswith("sim_") else "name"
    return _row(runtime, "sims", id_or_name, "SIM", key)["id"]


def _sim_command(change: Callable[[Sims, str], object], args: argparse.Namespace, settings: Settings) -> int:
    with opened(settings) as runtime:
        sim_id = _sim_id(runtime, args.sim)
        change(runtime.sandesh.sims, sim_id)
        emit(registry.sim_view(_row(runtime, "sims", sim_id, "SIM")))
    return 0


def sim_disable(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    return _sim_command(lambda sims, sim: sims.disable_sim(sim, actor), args, settings)


def sim_enable(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    return _sim_command(lambda sims, sim: sims.enable_sim(sim, actor), args, settings)


def sim_release(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    return _sim_command(lambda sims, sim: sims.release_sim(sim, actor), args, settings)


def sim_update(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    if args.pin == "-" and args.port == "-":
        return fail("--pin - and --port - both read stdin: give one of them on the command line")
    pin, args.port = _pin(args.pin), _port(args.port)
    with opened(settings) as runtime:
        sim_id = _sim_id(runtime, args.sim)
        if args.port is not None:
            with runtime.connection() as conn:
                others = [r for r in registry.sims(conn) if r["enabled"] and r["id"] != sim_id]
            if problem := _port_problem(args.port, others):
                return fail(problem)
        runtime.sandesh.sims.update_sim(sim_id, args.port, actor, _sim_settings(args), pin=None if pin == "off" else pin,
                               clear_pin=pin == "off")
        emit(registry.sim_view(_row(runtime, "sims", sim_id, "SIM")))
    return 0


def _sms_switch(on: bool, reason: str | None, settings: Settings, actor: str) -> int:
    with opened(settings) as runtime:
        switch = runtime.sandesh.operators.set_sms_switch(on, reason, actor)
        emit({"enabled": switch.enabled, "reason": switch.reason})
    return 0


def sms_disable(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    return _sms_switch(False, args.reason, settings, actor)


def sms_enable(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    return _sms_switch(True, None, settings, actor)


# Opt-outs of promotional messages

def _optout_change(opted_out: bool, args: argparse.Namespace, settings: Settings, actor: str) -> int:
    """The number's opt-out as it now stands; `changed` is false when it stood so already."""
    from sandesh.domain import phone
    from sandesh.domain.optout import OPERATOR
    from sandesh.projections import optouts

    with opened(settings) as runtime:
        change = runtime.sandesh.operators.opt_out if opted_out else runtime.sandesh.operators.opt_in
        changed = change(args.workspace, args.number, OPERATOR, actor)
        number = phone.normalise(args.number.strip()) or args.number
        with runtime.connection() as conn:
            row = optouts.find(conn, args.workspace, number)
    shown = optouts.view(row) if row else {"workspaceId": args.workspace, "number": number}
    emit({**shown, "optedOut": row is not None, "changed": changed})
    return 0


def optout_add(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    return _optout_change(True, args, settings, actor)


def optout_remove(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    return _optout_change(False, args, settings, actor)


def optout_list(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    from sandesh.projections import optouts

    with opened(settings) as runtime:
        _workspace(runtime, args.workspace)  # an unknown workspace exits 2
        with runtime.connection() as conn:
            rows = optouts.list_for(conn, args.workspace)
    emit({"workspaceId": args.workspace, "optOuts": [optouts.view(r) for r in rows]})
    return 0


def inbound_list(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    """Replies, their attribution, and their text (kept only in the encrypted log)."""
    from sandesh.projections import inbound

    with opened(settings) as runtime:
        with runtime.connection() as conn:
            rows = inbound.received(conn, args.unattributed, args.limit)
        emit({"replies": [{"id": r["id"], "simId": r["sim_id"], "from": r["sender"],
                           "text": runtime.sandesh.texts.open(runtime.sandesh.dispatch.reply(r["id"]).text), "parts": r["parts"], "total": r["total"],
                           "missingParts": r["missing"], "clientId": r["client_id"], "inReplyTo": r["in_reply_to"],
                           "at": iso(r["received_at"])} for r in rows]})
    return 0


def message_history(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    """`sandesh message history MESSAGE_ID`: one JSON object; exit 2 when no such message."""
    from sandesh.projections import inbound

    with opened(settings) as runtime, runtime.connection() as conn:
        emit(runtime.sandesh.history.message_history(args.message, inbound.replies_to(conn, args.message),
                                         lambda client_id: registry.webhook_url(conn, client_id)))
    return 0


def webhooks_list(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    from sandesh.projections import webhooks

    with opened(settings) as runtime, runtime.connection() as conn:
        emit({"deliveries": webhooks.listing(conn, runtime.clock.now(), args.client, args.state, args.limit)})
    return 0


def _recent_delivery(runtime: Runtime, delivery_id: str) -> dict[str, Any]:
    """The read-model row of a delivery of the last 7 days (the history the operator sees)."""
    from sandesh.projections import webhooks

    with runtime.connection() as conn:
        row = webhooks.find(conn, delivery_id, runtime.clock.now())
    if row is None:
        raise NotFound(f"no webhook delivery {delivery_id!r} in the last 7 days")
    return row


def webhooks_show(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    """A delivery of the last 7 days, its attempts, and the body it sends (kept only in the log;
    a reply's is sealed under its workspace's key, and null once the workspace's texts are shredded)."""
    import orjson

    from sandesh.projections import webhooks

    with opened(settings) as runtime:
        row = _recent_delivery(runtime, args.delivery)
        body = runtime.sandesh.texts.open(runtime.sandesh.webhooks.delivery(row["id"]).body)
        emit({**webhooks.view(row, attempts=True), "body": orjson.loads(body) if body is not None else None})
    return 0


def webhooks_redeliver(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    """One delivery again as a new one (ID), or an outage's deliveries again as they were (--client)."""
    from sandesh.projections import webhooks

    spanned = args.client is not None or args.since is not None or args.until is not None or args.state is not None
    if args.delivery is not None and spanned:
        raise InvalidInput("give either a delivery ID, or --client and --since (with --until, --state), not both")
    if args.delivery is None:
        return _redeliver_outage(args, settings, actor)
    with opened(settings) as runtime:
        _recent_delivery(runtime, args.delivery)
        again = runtime.sandesh.webhooks.redeliver(args.delivery, actor)
        emit(webhooks.view(_recent_delivery(runtime, again.id)))
    return 0


def _redeliver_outage(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    from sandesh.domain.webhook import REDELIVERABLE

    if args.client is None or args.since is None:
        raise InvalidInput("give a delivery ID, or --client CL and --since ISO")
    with opened(settings) as runtime:
        count = runtime.sandesh.webhooks.redeliver_outage(args.client, args.since, args.until, args.state, actor)
        emit({"clientId": args.client, "redelivered": count, "states": [args.state] if args.state else
              list(REDELIVERABLE), "since": iso(args.since), "until": iso(args.until) if args.until else None})
    return 0


# People of the dashboard

def _link(settings: Settings, token: str) -> str:
    return f"{settings.public_url}/dashboard/set-password/{token}"


# Alerts (docs/operations.md, "Alerts")

def alerts_add(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    from sandesh.workers.notifier import check_url
    shown = check_url(args.url)
    with opened(settings) as runtime:
        added = runtime.sandesh.alerts.add_destination(args.url, shown, args.only.split(","), actor)
        emit({"id": added.id, "url": added.shown, "conditions": added.conditions or "all"})
    return 0


def alerts_list(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    with opened(settings) as runtime, runtime.connection() as conn:
        rows = alert_rows.destinations(conn)
    emit({"destinations": [{"id": r["id"], "url": r["shown"], "conditions": r["conditions"] or "all"} for r in rows]})
    return 0


def alerts_remove(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    with opened(settings) as runtime:
        removed = runtime.sandesh.alerts.remove_destination(args.destination, actor)
        emit({"id": removed.id, "removed": True})
    return 0


def alerts_test(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    from sandesh.workers.notifier import tell
    with opened(settings) as runtime:
        with runtime.connection() as conn:
            rows = [r for r in alert_rows.destinations(conn) if args.destination in (None, r["id"])]
        if not rows:
            return fail("no destination to test: add one with `sandesh alerts add URL`")
        told = []
        for r in rows:
            url = runtime.sandesh.alerts.opened(r["url_sealed"])
            if (number := sms_number(url)) is not None:
                message = runtime.sandesh.alerts.text_test(number)
                told.append({"id": r["id"], "url": r["shown"], "error": None, "messageId": message.id})
            else:
                told.append({"id": r["id"], "url": r["shown"], "error": tell(url, TEST_ALERT)})
    emit({"told": told})
    return 0 if all(t["error"] is None for t in told) else 1


def alerts_status(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    from datetime import datetime, timedelta

    with opened(settings) as runtime, runtime.connection() as conn:
        today = datetime.fromtimestamp(runtime.clock.now(), NEPAL).date()
        digests = [d for d in (runtime.sandesh.alerts.digest_of(str(today - timedelta(days=n))) for n in (1, 2)) if d]
        holding = [alert_rows.view(r) for r in alert_rows.open_alerts(conn)]
        latest = [alert_rows.view(r) for r in alert_rows.history(conn, 20) if r["cleared_at"] is not None]
        texts = alert_rows.messages_of(conn, [a["id"] for a in holding + latest])
        tuning = alert_rows.tuning(conn)
    for alert in holding + latest:
        alert["messages"] = texts.get(alert["id"], [])
    emit({"holding": holding, "ended": latest, "interval": interval_of(tuning),
          "digest": _clock_time(tuning.get(DIGEST)),
          "lastDigest": {"day": digests[0].day, "text": digests[0].text, "at": iso(digests[0].composed_at),
                         "told": sum(1 for _, error in digests[0].told if error is None),
                         "failed": sum(1 for _, error in digests[0].told if error is not None)} if digests else None,
          "conditions": {name: {"after": delay_of(tuning, name), "on": delay_of(tuning, name) is not None}
                         for name in CONDITIONS}})
    return 0


def alerts_tune(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    delay = None if args.off else CONDITIONS[args.condition].delay if args.default else args.after
    with opened(settings) as runtime:
        runtime.sandesh.alerts.tune(args.condition, delay, actor)
    emit({"condition": args.condition, "after": delay, "on": delay is not None})
    return 0


def alerts_interval(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    with opened(settings) as runtime:
        runtime.sandesh.alerts.set_interval(None if args.default else args.seconds, actor)
    emit({"interval": INTERVAL if args.default else args.seconds})
    return 0


def alerts_digest(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    seconds = digest_time(args.time)
    with opened(settings) as runtime:
        runtime.sandesh.alerts.set_digest(seconds, actor)
    emit({"digest": _clock_time(seconds)})
    return 0


def _clock_time(seconds: float | None) -> str | None:
    """Seconds after midnight as HH:MM."""
    return None if seconds is None else f"{int(seconds) // 3600:02d}:{int(seconds) % 3600 // 60:02d}"


def user_add(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    with opened(settings) as runtime:
        person, token = runtime.sandesh.people.add_person(args.email, args.name, args.workspace, args.role,
                                                      args.operator, actor)
        emit({**_person(runtime, person.id), "setPasswordLink": _link(settings, token)})
    return 0


def user_list(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    with opened(settings) as runtime, runtime.connection() as conn:
        rows = people.listed(conn, args.workspace)
    emit({"people": [people.view(row) for row in rows]})
    return 0


def user_disable(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    with opened(settings) as runtime:
        emit(_person(runtime, runtime.sandesh.people.disable_person(args.email, actor).id))
    return 0


def user_enable(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    with opened(settings) as runtime:
        emit(_person(runtime, runtime.sandesh.people.enable_person(args.email, actor).id))
    return 0


def user_reset(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    with opened(settings) as runtime:
        person, token = runtime.sandesh.people.reset_password(args.email, actor)
        emit({**_person(runtime, person.id), "setPasswordLink": _link(settings, token)})
    return 0


def _person(runtime: Runtime, person_id: str) -> dict[str, Any]:
    with runtime.connection() as conn:
        return people.view(people.find(conn, person_id))


# Audit, clock, run commands

def audit(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    try:
        since = parse_iso(args.since) if args.since else None
    except ValueError:
        raise InvalidInput(f"--since {args.since!r} is not an ISO 8601 time, e.g. 2026-11-21T00:00:00Z") from None
    with opened(settings) as runtime:
        for line in runtime.sandesh.history.audit(args.workspace, args.client, since, args.limit):
            emit_line(line)
    return 0


def clock_show(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    from sandesh.projections.storage.db import read_clock_offset

    with opened(settings) as runtime, runtime.connection() as conn:
        offset = read_clock_offset(conn) if settings.test_clock else 0.0
        emit({"mode": settings.clock_mode, "now": iso(runtime.clock.now()), "offsetSeconds": offset})
    return 0


def clock_advance(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    from sandesh.projections.storage.db import advance_clock

    if not settings.test_clock:
        return fail("the clock can only be moved in test mode (SANDESH_CLOCK=test)")
    if args.seconds < 0:
        return fail("the clock only moves forward: SECONDS must be 0 or more")
    with opened(settings) as runtime:
        with runtime.connection() as conn:
            offset = advance_clock(conn, args.seconds)
        emit({"mode": settings.clock_mode, "now": iso(runtime.clock.now()), "offsetSeconds": offset})
    return 0


def _open_worker_runtime(settings: Settings, pool_size: int, name: str) -> Runtime:
    return bootstrap(settings, pool_size=pool_size, process=name)


def worker(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    """`sandesh worker NAME`: one worker in this process (`--host` for the dispatcher's SIMs)."""
    metrics_dir.use(settings)  # before the workers import prometheus_client
    from sandesh.workers.supervisor import run_one

    configure_logging(settings)
    options: dict[str, Any] = {"host": args.host} if args.command == "dispatch" else {}
    if args.command == "notifier":  # a workspace's owners are e-mailed in their language
        from sandesh.api.dashboard.i18n import spoken

        options["say"] = spoken
    return run_one(args.command, settings, _open_worker_runtime, **options)


def worker_all(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    metrics_dir.use(settings)  # its children inherit it
    from sandesh.workers.supervisor import run_all

    configure_logging(settings)
    passed = ["--database-url", args.database_url] if args.database_url else []
    return run_all(settings, passed)


def replay(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    from sandesh.projections.engine import replay as rebuild

    unknown = [name for name in args.names if name not in rebuild.NAMES]
    if unknown:
        raise InvalidInput(f"unknown projection {unknown[0]!r}; expected some of {', '.join(rebuild.NAMES)}")
    if args.since_checkpoint and not args.check:
        raise InvalidInput("--since-checkpoint goes with --check; a rebuild from a checkpoint is --from-checkpoint")
    if args.from_checkpoint and args.check:
        raise InvalidInput("--from-checkpoint rebuilds; to check from a checkpoint use --check --since-checkpoint")
    with opened(settings) as runtime:
        try:
            budget = (args.memory_mb or settings.replay_memory_mb) << 20
            if args.check:
                result = rebuild.check(runtime, args.names or list(rebuild.NAMES), since_checkpoint=args.since_checkpoint,
                                       memory_budget=budget)
                emit(result)
                return 0 if result["ok"] else 1
            emit(rebuild.replay(runtime, args.names or list(rebuild.NAMES), from_checkpoint=args.from_checkpoint,
                                memory_budget=budget))
        except rebuild.NoCheckpoint as missing:
            return fail(str(missing))
    return 0


def checkpoint(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    from sandesh.projections.engine import replay as rebuild

    unknown = [name for name in args.names if name not in rebuild.NAMES]
    if unknown:
        raise InvalidInput(f"unknown projection {unknown[0]!r}; expected some of {', '.join(rebuild.NAMES)}")
    with opened(settings) as runtime:
        result = rebuild.checkpoint(runtime, args.names or list(rebuild.NAMES), from_zero=args.from_zero,
                                    memory_budget=(args.memory_mb or settings.replay_memory_mb) << 20)
    emit(result)
    return 0 if result["ok"] else 1


def emulator(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    from .emulator import main as run_emulator

    argv = ["--sims", str(args.sims), "--report-delay", str(args.report_delay), "--profile", args.profile]
    argv += ["--phones-log", args.phones_log] if args.phones_log else []
    argv += ["--cmgs-seconds", str(args.cmgs_seconds)] if args.cmgs_seconds is not None else []
    argv += ["--register"] if args.register else []
    argv += ["--network", args.network] if args.network else []

    def register(devices: list[tuple[str, str]]) -> None:
        with opened(settings) as runtime:
            register_emulated(runtime, devices, actor)

    return run_emulator(argv, register=register)


def register_emulated(runtime: Runtime, devices: list[tuple[str, str]], actor: str) -> None:
    """Register each virtual modem as a SIM, through the driver as a real modem would be: its
    ICCID finds it again when a restarted emulator gives it a new /dev/pts path."""
    from sandesh.workers.sims import place

    for name, device in devices:
        place(runtime, name, device, actor)


def serve(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    metrics_dir.use(settings)  # gunicorn's workers inherit it
    from .serve import serve as run_server

    run_server(settings, args.bind, args.workers, args.worker_connections)
    return 0


def up(args: argparse.Namespace, settings: Settings, actor: str) -> int:
    metrics_dir.forget_ended_processes(metrics_dir.use(settings))  # it starts every process itself
    from .up import up as run_up

    return run_up(args, actor)


Command = Callable[[argparse.Namespace, Settings, str], int]

# Every `sandesh` subcommand and the function that runs it, by its words on the command line
# (scripts/service/cli.py builds the parser; tests/unit/test_cli_commands.py checks the two agree).
COMMANDS: dict[tuple[str, ...], Command] = {
    ("db", "migrate"): db_migrate,
    ("workspace", "create"): workspace_create,
    ("workspace", "activate"): workspace_activate,
    ("workspace", "suspend"): workspace_suspend,
    ("workspace", "reinstate"): workspace_reinstate,
    ("workspace", "credit"): workspace_credit,
    ("workspace", "set-rates"): workspace_set_rates,
    ("workspace", "set-types"): workspace_set_types,
    ("workspace", "set-promo-hours"): workspace_set_promo_hours,
    ("workspace", "set-help-text"): workspace_set_help_text,
    ("workspace", "set-balance-alert"): workspace_set_balance_alert,
    ("workspace", "set-confirmations"): workspace_set_confirmations,
    ("workspace", "shred-texts"): workspace_shred_texts,
    ("workspace", "show"): workspace_show,
    ("workspace", "list"): workspace_list,
    ("alerts", "add"): alerts_add,
    ("alerts", "interval"): alerts_interval,
    ("alerts", "digest"): alerts_digest,
    ("alerts", "list"): alerts_list,
    ("alerts", "remove"): alerts_remove,
    ("alerts", "test"): alerts_test,
    ("alerts", "status"): alerts_status,
    ("alerts", "tune"): alerts_tune,
    ("client", "create"): client_create,
    ("client", "rotate-key"): client_rotate_key,
    ("client", "rotate-secret"): client_rotate_secret,
    ("client", "disable"): client_disable,
    ("client", "enable"): client_enable,
    ("client", "update"): client_update,
    ("client", "show"): client_show,
    ("client", "list"): client_list,
    ("user", "add"): user_add,
    ("user", "list"): user_list,
    ("user", "disable"): user_disable,
    ("user", "enable"): user_enable,
    ("user", "reset"): user_reset,
    ("sim", "add"): sim_add,
    ("sim", "list"): sim_list,
    ("sim", "disable"): sim_disable,
    ("sim", "enable"): sim_enable,
    ("sim", "release"): sim_release,
    ("sim", "update"): sim_update,
    ("sim", "probe"): sim_probe,
    ("sim", "discover"): sim_discover,
    ("sms", "disable"): sms_disable,
    ("sms", "enable"): sms_enable,
    ("optout", "add"): optout_add,
    ("optout", "remove"): optout_remove,
    ("optout", "list"): optout_list,
    ("inbound", "list"): inbound_list,
    ("message", "history"): message_history,
    ("webhooks", "list"): webhooks_list,
    ("webhooks", "show"): webhooks_show,
    ("webhooks", "redeliver"): webhooks_redeliver,
    ("audit",): audit,
    ("upgrade", "status"): upgrade_status,
    ("upgrade", "finalize"): upgrade_finalize,
    ("key", "status"): key_status,
    ("key", "rotate"): key_rotate,
    ("key", "retire"): key_retire,
    ("clock", "show"): clock_show,
    ("clock", "advance"): clock_advance,
    **{("worker", name): worker for name in ("projections", "dispatch", "webhooks", "notifier")},
    ("worker", "all"): worker_all,
    ("replay",): replay,
    ("checkpoint",): checkpoint,
    ("emulator",): emulator,
    ("serve",): serve,
    ("up",): up,
}
