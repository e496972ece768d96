"""Releases an operator can see, and the upgrade gate (docs/operations.md, "Upgrading"): the
version in `sandesh --version`; `db migrate` records the release that migrated the database; a
release older than the database's finalized one refuses to start and writes nothing; the gate
is finalized only when no older process runs; a worker that meets an event only a newer
release can read stops, with the release it needs, and is not started again."""
from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import time

import orjson
import psycopg
import pytest
from eventsourcing.persistence import StoredEvent

from sandesh.domain.release import OLDEST_PEER, VERSION
from tests.conftest import ROOT


def one(database_url: str, query: str, *params: object) -> tuple:
    with psycopg.connect(database_url, autocommit=True) as conn:
        return conn.execute(query, params).fetchone()


def change(database_url: str, statement: str, *params: object) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(statement, params)


def events(database_url: str) -> int:
    return one(database_url, "SELECT count(*) FROM sandesh_events")[0]


def worker(env: dict[str, str], *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "sandesh.scripts.service.cli", "worker", *args], cwd=ROOT,
                            env={**env, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def test_the_version_is_one_everywhere():
    """The package's metadata, `sandesh --version` and the code agree (one source: domain/release.py)."""
    assert importlib.metadata.version("sandesh") == VERSION
    shown = subprocess.run([sys.executable, "-m", "sandesh.scripts.service.cli", "--version"], capture_output=True, text=True,
                           cwd=ROOT, check=True)
    assert shown.stdout.strip() == f"sandesh {VERSION}"


def test_a_new_database_is_migrated_and_finalized_at_this_release(sandesh):
    assert sandesh("db", "migrate") == {"ok": True, "release": VERSION, "migratedBy": VERSION, "finalized": VERSION}
    status = sandesh("upgrade", "status")
    assert (status["migratedBy"], status["finalized"], status["finalizable"]) == (VERSION, VERSION, True)


def test_the_previous_releases_database_stays_at_it_and_an_older_one_is_finalized_at_this_release(
        sandesh, database_url):
    """The previous release has the gate: a database it finalized stays so when this release
    migrates it, since its processes may still run beside this one, until `upgrade finalize`.  A
    log of a release from before the gate (0.2.0 and earlier) is finalized at this release: those
    processes were stopped for the upgrade, as skipping a release needs (docs/operations.md,
    "Upgrading")."""
    change(database_url, f"UPDATE sandesh_release SET finalized = '{OLDEST_PEER}', migrated = '{OLDEST_PEER}'")
    migrated = sandesh("db", "migrate")
    assert (migrated["migratedBy"], migrated["finalized"]) == (VERSION, OLDEST_PEER)
    assert sandesh("upgrade", "finalize")["finalized"] == VERSION
    assert sandesh("upgrade", "status")["finalizedBy"] == "tester"

    change(database_url, "DROP TABLE sandesh_release")
    assert sandesh("db", "migrate")["finalized"] == VERSION


def test_a_release_older_than_the_database_refuses_to_start_and_writes_nothing(sandesh, env, database_url):
    before = events(database_url)
    change(database_url, "UPDATE sandesh_release SET finalized = '99.0.0'")
    try:
        refused = sandesh.run("workspace", "create", "--name", "Too old")
        assert refused.returncode == 3
        assert "finalized at Sandesh 99.0.0" in refused.stderr and "Run Sandesh 99.0.0 or newer" in refused.stderr
        serve = subprocess.run([sys.executable, "-m", "sandesh.scripts.service.cli", "serve", "--bind", "127.0.0.1:0"],
                               env={**env, "PYTHONPATH": str(ROOT)}, cwd=ROOT, capture_output=True, text=True,
                               timeout=30)
        assert serve.returncode == 3 and "99.0.0" in serve.stderr
        supervised = worker(env, "all")
        _, stderr = supervised.communicate(timeout=60)
        assert supervised.returncode == 3, stderr
        assert "stopping every worker" in stderr
        assert sandesh.run("db", "migrate").returncode == 3
        assert events(database_url) == before
        assert one(database_url, "SELECT count(*) FROM sandesh_processes")[0] == 0
    finally:
        change(database_url, "UPDATE sandesh_release SET finalized = %s", VERSION)


def test_running_processes_report_their_release_and_an_older_one_keeps_the_gate_shut(sandesh, env, database_url):
    running = worker(env, "projections")
    try:
        deadline = time.monotonic() + 15
        while not (status := sandesh("upgrade", "status"))["processes"]:
            assert time.monotonic() < deadline, "the worker never reported"
            time.sleep(0.5)
        assert [(p["kind"], p["release"], p["pid"]) for p in status["processes"]] == [
            ("projections", VERSION, running.pid)]
    finally:
        running.terminate()
        running.wait(timeout=20)
    assert sandesh("upgrade", "status")["processes"] == [], "a stopped process takes its report away"

    change(database_url, "UPDATE sandesh_release SET finalized = %s", OLDEST_PEER)
    change(database_url, "INSERT INTO sandesh_processes (id, kind, host, pid, release) VALUES"
                         " ('serve-old', 'serve', 'api-2', 4242, %s)", OLDEST_PEER)
    try:
        assert sandesh("upgrade", "status")["finalizable"] is False
        refused = sandesh.run("upgrade", "finalize")
        assert refused.returncode == 2
        assert f"serve on api-2 (pid 4242, Sandesh {OLDEST_PEER})" in refused.stderr
        assert sandesh("upgrade", "status")["finalized"] == OLDEST_PEER
        forced = sandesh("upgrade", "finalize", "--force")
        assert (forced["finalized"], forced["previous"], forced["changed"]) == (VERSION, OLDEST_PEER, True)
    finally:
        change(database_url, "DELETE FROM sandesh_processes")


def test_a_dispatcher_of_a_release_before_the_gate_is_seen_by_its_sim_heartbeats(sandesh, runtime, database_url):
    """Releases before 0.3.0 report no release, but their dispatchers write SIM heartbeats."""
    change(database_url, "UPDATE sandesh_release SET finalized = %s", OLDEST_PEER)
    change(database_url, "INSERT INTO sim_health (sim_id, healthy, dispatcher, heartbeat_at) VALUES"
                         " ('sim_old', true, 'dispatcher-0ld0ld00', %s)", runtime.clock.now())
    try:
        assert sandesh("upgrade", "status")["unreportedDispatchers"] == ["dispatcher-0ld0ld00"]
        refused = sandesh.run("upgrade", "finalize")
        assert refused.returncode == 2 and "dispatcher dispatcher-0ld0ld00 (a release before 0.3.0)" in refused.stderr
    finally:
        change(database_url, "DELETE FROM sim_health WHERE sim_id = 'sim_old'")
    assert sandesh("upgrade", "finalize")["finalized"] == VERSION


@pytest.mark.parametrize("command", [("projections",), ("all",)])
def test_a_worker_that_meets_an_event_of_a_newer_release_stops_and_is_not_started_again(command, runtime, env,
                                                                                        database_url):
    """An event of a version above its class's (as a newer release would write it) is never
    misread or skipped: the worker stops, naming the release to run, with status 3."""
    mapper = runtime.sandesh.log.mapper
    topic = "sandesh.domain.workspace:Workspace.Created"
    state = {"timestamp": "2026-11-26T10:00:00+00:00", "originator_topic": "sandesh.domain.workspace:Workspace",
             "name": "From the future", "class_version": 7}
    originator = f"ws_future_{command[0]}"
    runtime.sandesh.log.recorder.insert_events([StoredEvent(originator, 1, topic,
                                                        mapper.cipher.encrypt(orjson.dumps(state)))])
    try:
        running = worker(env, *command)
        _, stderr = running.communicate(timeout=90)
        assert running.returncode == 3, stderr
        assert f"version 7 of {topic}" in stderr and f"this is Sandesh {VERSION}" in stderr
    finally:
        change(database_url, "DELETE FROM sandesh_events WHERE originator_id = %s", originator)


def test_a_clients_otp_message_waits_for_the_upgrade_to_be_finalized(sandesh, database_url):
    """A 0.3.0 process would not know the OTP settings in Client.Updated: they are refused
    until every process runs 0.4.0 and the upgrade is finalized."""
    workspace = sandesh("workspace", "create", "--name", "Gated")["id"]
    client = sandesh("client", "create", "--workspace", workspace, "--brand", "Gated")["id"]
    change(database_url, "UPDATE sandesh_release SET finalized = %s", OLDEST_PEER)
    try:
        refused = sandesh.run("client", "update", client, "--otp-template", "{code} is the code")
        assert refused.returncode == 2 and "once the upgrade to 0.4.0 is finalized" in refused.stderr
        assert sandesh("client", "update", client, "--brand", "Still Gated")["brand"] == "Still Gated"
    finally:
        change(database_url, "UPDATE sandesh_release SET finalized = %s", VERSION)
    assert sandesh("client", "update", client, "--otp-template", "{code} is the code")["otpTemplate"] == \
        "{code} is the code"
