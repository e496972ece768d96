"""`sandesh` management commands against a real PostgreSQL (docs/operations.md, "The sandesh command")."""
import threading
import time

import orjson
import psycopg
import pytest

from sandesh.domain.clock import parse_iso
from sandesh.domain.credentials import sha256_hex
from sandesh.domain.release import VERSION


MIGRATED = {"ok": True, "release": VERSION, "migratedBy": VERSION, "finalized": VERSION}


def test_migrate_is_idempotent(sandesh):
    assert sandesh("db", "migrate") == MIGRATED
    assert sandesh("db", "migrate") == MIGRATED


def test_migrate_under_traffic_gives_way_to_a_transaction_it_would_deadlock_with(sandesh, database_url):
    """A running process's transaction holds the sims table and then reads workspaces, which the
    migration locked before it reached sims: the migration, not the process, gives up, and it
    finishes once the transaction has ended."""
    sandesh("db", "migrate")
    with psycopg.connect(database_url) as running:
        running.execute("UPDATE sims SET name = name WHERE false")  # sims held, as by a write
        done: list = []
        migration = threading.Thread(target=lambda: done.append(sandesh.run("db", "migrate")))
        migration.start()
        waits = "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'sims'::regclass"
        with psycopg.connect(database_url, autocommit=True) as watch:
            deadline = time.monotonic() + 30
            while watch.execute(waits).fetchone()[0] == 0:
                assert time.monotonic() < deadline, "the migration never reached the sims table"
                time.sleep(0.02)
        began = time.monotonic()
        running.execute("SELECT count(*) FROM workspaces")  # before the change: a deadlock
        assert time.monotonic() - began < 0.8  # the migration waits 0.5 s at most; a deadlock is found at 1 s
        time.sleep(1.5)  # the migration tries again meanwhile
    migration.join(60)
    assert done[0].returncode == 0, done[0].stderr
    assert orjson.loads(done[0].stdout) == MIGRATED and "trying again" in done[0].stderr


def test_migrate_creates_a_missing_database(sandesh, database_url):
    url = psycopg.conninfo.make_conninfo(database_url, dbname=psycopg.conninfo.conninfo_to_dict(database_url)["dbname"] + "_new")
    try:
        assert sandesh("db", "migrate", env={"DATABASE_URL": url}) == MIGRATED
        assert sandesh("workspace", "list", env={"DATABASE_URL": url}) == {"workspaces": []}
    finally:
        admin = psycopg.conninfo.make_conninfo(database_url, dbname="postgres")
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{psycopg.conninfo.conninfo_to_dict(url)["dbname"]}" WITH (FORCE)')


def test_workspace_lifecycle_rates_types_and_credit(sandesh):
    workspace = sandesh("workspace", "create", "--name", "Himal Tea", "--types", "otp,transactional",
                        "--rate", "otp=150")
    assert workspace["status"] == "pending" and workspace["balance"] == 0
    assert workspace["allowedTypes"] == ["transactional", "otp"]
    assert workspace["rates"] == {"transactional": 100, "otp": 150, "promotional": 100}
    ws = workspace["id"]
    assert sandesh("workspace", "activate", ws)["status"] == "active"
    assert sandesh("workspace", "credit", ws, "2500", "--note", "invoice 7")["balance"] == 2500
    assert sandesh("workspace", "credit", ws, "500")["balance"] == 3000
    assert sandesh("workspace", "suspend", ws)["status"] == "suspended"
    assert sandesh("workspace", "reinstate", ws)["status"] == "active"
    assert sandesh("workspace", "set-rates", ws, "promotional=40")["rates"]["promotional"] == 40
    assert sandesh("workspace", "set-types", ws, "promotional")["allowedTypes"] == ["promotional"]
    assert sandesh("workspace", "show", ws)["balance"] == 3000


@pytest.mark.parametrize("args, message", [
    (["workspace", "credit", "ws_unknown", "100"], "no workspace"),
    (["workspace", "create", "--name", "X", "--rate", "otp=abc"], "PAISA"),
    (["workspace", "create", "--name", "X", "--types", "spam"], "unknown message type"),
    (["workspace", "create", "--name", "   "], "name"),
    (["client", "create", "--workspace", "ws_unknown", "--brand", "B"], "no workspace"),
    (["client", "rotate-key", "cl_unknown"], "no client"),
    (["sim", "disable", "nosuch"], "no SIM"),
])
def test_bad_input_exits_2_with_a_message_on_stderr(sandesh, args, message):
    done = sandesh.run(*args)
    assert done.returncode == 2 and message in done.stderr and done.stdout == ""


def test_usage_errors_exit_2(sandesh):
    assert sandesh.run("workspace", "credit", "ws_x", "-5").returncode == 2
    assert sandesh.run("frobnicate").returncode == 2


def test_activating_an_active_workspace_is_refused(sandesh):
    ws = sandesh("workspace", "create", "--name", "Twice")["id"]
    sandesh("workspace", "activate", ws)
    done = sandesh.run("workspace", "activate", ws)
    assert done.returncode == 2 and "only a pending workspace" in done.stderr


def test_client_key_and_secret_are_shown_once(sandesh):
    ws = sandesh("workspace", "create", "--name", "Keys")["id"]
    client = sandesh("client", "create", "--workspace", ws, "--brand", "Keys", "--webhook-url",
                     "https://hooks.example.com/sms", "--rate-limit", "7")
    assert client["key"].startswith("sk_live_") and client["webhookSecret"].startswith("whsec_")
    assert client["keyPrefix"] == client["key"][:12] and client["rateLimit"] == 7
    shown = sandesh("client", "show", client["id"])
    assert "key" not in shown and "webhookSecret" not in shown
    assert client["key"] not in orjson.dumps(shown).decode()


def test_client_update_disable_enable(sandesh):
    ws = sandesh("workspace", "create", "--name", "Upd")["id"]
    cl = sandesh("client", "create", "--workspace", ws, "--brand", "Old")["id"]
    updated = sandesh("client", "update", cl, "--brand", "New", "--rate-limit", "50",
                      "--webhook-url", "https://example.com/h")
    assert (updated["brand"], updated["rateLimit"], updated["webhookUrl"]) == ("New", 50, "https://example.com/h")
    assert sandesh("client", "disable", cl)["enabled"] is False
    assert sandesh("client", "enable", cl)["enabled"] is True
    done = sandesh.run("client", "update", cl, "--webhook-url", "http://insecure.example.com")
    assert done.returncode == 2 and "https://" in done.stderr


def test_keys_and_secrets_are_stored_neither_in_clear_nor_in_events(sandesh, database_url):
    """Keys only as SHA-256; webhook secrets sealed; every event state encrypted (docs/design.md,
    "Decisions: webhooks" and "Decisions: event store and security")."""
    ws = sandesh("workspace", "create", "--name", "Cleartext Check")["id"]
    client = sandesh("client", "create", "--workspace", ws, "--brand", "Cleartext Check")
    rotated = sandesh("client", "rotate-secret", client["id"], "--grace-hours", "2")
    with psycopg.connect(database_url) as conn:
        dump = "\n".join(str(row) for table in ("sandesh_events", "clients", "workspaces", "request_rates")
                         for row in conn.execute(f"SELECT * FROM {table}").fetchall())
        states = b"".join(bytes(r[0]) for r in conn.execute("SELECT state FROM sandesh_events").fetchall())
    bodies = [client["key"].removeprefix("sk_live_")] + [
        s.removeprefix("whsec_") for s in (client["webhookSecret"], rotated["webhookSecret"])]
    # the rows looked at are this client's: its key's hash and its name are there in the read model
    assert sha256_hex(client["key"]) in dump and "Cleartext Check" in dump and states
    for body in bodies:  # 48 hex characters, 43 base64url characters: never there by chance
        assert body not in dump
    assert b"Cleartext Check" not in states, "event states must be encrypted at rest"


def test_sims_are_added_listed_disabled_by_name_and_names_are_unique(sandesh):
    sim = sandesh("sim", "add", "--name", "ntc-1", "--port", "/dev/serial/by-id/usb-Quectel-if02", "--host", "pi-1")
    assert sim["id"].startswith("sim_") and sim["baud"] == 115200 and sim["host"] == "pi-1"
    [listed] = [s for s in sandesh("sim", "list")["sims"] if s["name"] == "ntc-1"]
    assert (listed["id"], listed["port"], listed["enabled"]) == (sim["id"], "/dev/serial/by-id/usb-Quectel-if02", True)
    assert sandesh("sim", "disable", "ntc-1")["enabled"] is False
    assert sandesh("sim", "enable", sim["id"])["enabled"] is True
    done = sandesh.run("sim", "add", "--name", "ntc-1", "--port", "/dev/ttyUSB3")
    assert done.returncode == 2 and "exists already" in done.stderr


def test_sms_switch(sandesh):
    assert sandesh("sms", "disable", "--reason", "operator maintenance") == {
        "enabled": False, "reason": "operator maintenance"}
    assert sandesh("sms", "enable") == {"enabled": True, "reason": None}


def _audit(sandesh, *args):
    done = sandesh.run("audit", *args)
    assert done.returncode == 0, done.stderr
    return [orjson.loads(line) for line in done.stdout.splitlines()]


def test_audit_lists_every_change_oldest_first_with_who_what_when(sandesh):
    ws = sandesh("--actor", "sita", "workspace", "create", "--name", "Audited")["id"]
    sandesh("--actor", "ram", "workspace", "activate", ws)
    sandesh("workspace", "credit", ws, "700", "--note", "bank transfer")
    client = sandesh("client", "create", "--workspace", ws, "--brand", "Audited")
    sandesh("client", "rotate-key", client["id"])
    sandesh("client", "rotate-secret", client["id"], "--grace-hours", "0")
    sandesh("client", "disable", client["id"])
    lines = _audit(sandesh, "--workspace", ws)
    assert [line["action"] for line in lines] == [
        "workspace.created", "workspace.activated", "workspace.credited", "client.created",
        "client.key_rotated", "client.secret_rotated", "client.disabled"]
    assert [line["actor"] for line in lines[:3]] == ["sita", "ram", "tester"]
    assert lines[2]["details"] == {"amount": 700, "note": "bank transfer"}
    assert all(line["workspaceId"] == ws for line in lines)
    assert lines[3]["clientId"] == client["id"] and lines[0]["clientId"] is None
    assert [line["at"] for line in lines] == sorted(line["at"] for line in lines)
    assert all(line["at"].endswith("Z") for line in lines)
    text = orjson.dumps(lines).decode()
    assert client["key"] not in text and client["webhookSecret"] not in text and "secret_hash" not in text
    assert set(lines[0]) == {"at", "actor", "action", "workspaceId", "clientId", "simId", "details"}


def test_audit_filters_by_client_since_and_limit(sandesh):
    ws = sandesh("workspace", "create", "--name", "Filtered")["id"]
    cl = sandesh("client", "create", "--workspace", ws, "--brand", "F")["id"]
    sandesh("client", "disable", cl)
    sandesh("client", "enable", cl)
    by_client = _audit(sandesh, "--client", cl)
    assert [line["action"] for line in by_client] == ["client.created", "client.disabled", "client.enabled"]
    assert [line["action"] for line in _audit(sandesh, "--client", cl, "--limit", "2")] == [
        "client.disabled", "client.enabled"]
    since = by_client[1]["at"]
    assert [line["action"] for line in _audit(sandesh, "--client", cl, "--since", since)] == [
        "client.disabled", "client.enabled"]
    assert sandesh.run("audit", "--since", "yesterday").returncode == 2


def test_audit_shows_sim_and_switch_changes(sandesh):
    sandesh("sim", "add", "--name", "audit-sim", "--port", "loop://")
    sandesh("sms", "disable")
    lines = _audit(sandesh, "--limit", "2")
    assert [line["action"] for line in lines] == ["sim.added", "sms.disabled"]
    assert lines[0]["simId"].startswith("sim_")
    sandesh("sms", "enable")


def test_clock_advance_moves_the_test_clock_for_every_process(sandesh):
    before = sandesh("clock", "show")
    started = time.time()
    moved = sandesh("clock", "advance", "3600")
    took = time.time() - started
    assert moved["offsetSeconds"] == before["offsetSeconds"] + 3600
    assert sandesh("clock", "show")["offsetSeconds"] == moved["offsetSeconds"]
    # an hour later, plus the real time the command took
    assert 3600 <= parse_iso(moved["now"]) - parse_iso(before["now"]) <= 3600 + took + 1


def test_clock_advance_refuses_outside_test_mode(sandesh):
    done = sandesh.run("clock", "advance", "60", env={"SANDESH_CLOCK": "system"})
    assert done.returncode == 2 and "test mode" in done.stderr
    assert sandesh.run("clock", "advance", "-5").returncode == 2


def test_commands_refuse_to_run_without_a_secret_key(sandesh):
    done = sandesh.run("workspace", "list", env={"SANDESH_SECRET_KEY": ""})
    assert done.returncode == 2 and "SANDESH_SECRET_KEY" in done.stderr


def test_an_unreachable_database_is_reported_clearly(sandesh):
    done = sandesh.run("workspace", "list", env={"DATABASE_URL": "postgresql://root@127.0.0.1:1/nothing"})
    assert done.returncode == 1 and "cannot reach PostgreSQL" in done.stderr and "sandesh up" in done.stderr
