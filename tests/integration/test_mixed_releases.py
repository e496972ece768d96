"""A rolling upgrade from the previous release, under traffic (docs/operations.md, "Upgrading").

An installation of the previous release (its own code, installed from its git tag into a venv
of its own) runs its API, a dispatcher per modem host, its projections and webhook workers.
This release is migrated onto the same database while they run, then its processes replace
the old ones one at a time, with restarts of both releases' APIs in both orders.  The gate
stays shut while an old dispatcher runs, and opens once none does.  Nothing acknowledged is
lost or charged twice, no request answers 500, every message leaves a modem once, every
`delivered` webhook arrives, and `replay --check` is equal."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from datetime import datetime
from pathlib import Path

import psycopg
import pytest
import requests

from sandesh.domain.release import OLDEST_PEER, VERSION
from sandesh.domain.signature import verify_signature
from scripts.devtools.corpus_release import release_install
from tests.conftest import ROOT, free_port
from tests.installation import Processes, Traffic, answering, devices, wait_draining, wait_until
from tests.receiver import Receiver

# The release this one upgrades from one process at a time: its commit (tagged v0.3.0, CHANGELOG.md),
# so that a clone without tags finds it too.
PREVIOUS = "c98865d"
CREDIT = 10_000_000
STOP_DROPS = 3.0  # seconds of reports the previous release's dispatcher may drop as it stops


@pytest.fixture(scope="module")
def previous() -> Path:
    """The previous release's own `sandesh`, installed from its tag (built once, kept under var/)."""
    return release_install(PREVIOUS)


def test_a_rolling_upgrade_under_traffic_loses_nothing_charges_once_and_replays_equal(previous, tmp_path,
                                                                                     empty_database_url):
    url = empty_database_url
    receiver = Receiver(tmp_path)
    base = {**{k: v for k, v in os.environ.items()
               if not k.startswith(("SANDESH_", "PYTHON", "VIRTUAL_ENV", "DATABASE_URL", "REQUESTS_CA_BUNDLE"))},
            "DATABASE_URL": url, "SANDESH_SECRET_KEY": "rolling-upgrade-key-0123456789abcdef0123",
            "SANDESH_CLOCK": "test", "SANDESH_WEBHOOK_ALLOW_PRIVATE": "1", "REQUESTS_CA_BUNDLE": str(receiver.ca_file),
            "USER": "operator"}
    old_env = {**base, "SANDESH_METRICS_DIR": str(tmp_path / "old-metrics")}
    new_env = {**base, "SANDESH_METRICS_DIR": str(tmp_path / "new-metrics"), "PYTHONPATH": str(ROOT)}
    new = [sys.executable, "-m", "sandesh.scripts.service.cli"]
    old = [str(previous)]

    def run(release: list[str], env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*release, *args], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)

    def command(release: list[str], env: dict[str, str], *args: str) -> dict:
        done = run(release, env, *args)
        assert done.returncode == 0, f"{' '.join(args)}: {done.stderr}"
        return json.loads(done.stdout)

    processes = Processes(tmp_path)
    phones = tmp_path / "phones.jsonl"
    traffic = None
    try:
        # An installation of the previous release: four SIMs on two modem hosts.
        processes.start("emulator", [*new, "emulator", "--sims", "4", "--phones-log", str(phones)], new_env)
        assert command(old, old_env, "db", "migrate")["ok"] is True
        workspace = command(old, old_env, "workspace", "create", "--name", "Rolling", "--types", "transactional")["id"]
        command(old, old_env, "workspace", "activate", workspace)
        command(old, old_env, "workspace", "credit", workspace, str(CREDIT))
        client = command(old, old_env, "client", "create", "--workspace", workspace, "--brand", "Rolling",
                         "--webhook-url", receiver.url("/hooks"), "--rate-limit", "100")
        ports = wait_until(lambda: devices(tmp_path / "emulator.log", 4), "the emulator's modems")
        sims_of: dict[str, list[str]] = {"h0": [], "h1": []}  # host -> its SIMs' ids
        modems_of: dict[str, list[str]] = {"h0": [], "h1": []}  # host -> its emulated modems' names
        for n, device in enumerate(ports):
            sim = command(old, old_env, "sim", "add", "--name", f"sim-{n}", "--port", device, "--host", f"h{n % 2}")
            sims_of[f"h{n % 2}"].append(sim["id"])
            modems_of[f"h{n % 2}"].append(emulated_modem(tmp_path / "emulator.log", device))
        old_api, new_api = f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"
        processes.start("old-serve", [*old, "serve", "--bind", old_api[7:], "--workers", "1"], old_env)
        for host in ("h0", "h1"):
            processes.start(f"old-dispatch-{host}", [*old, "worker", "dispatch", "--host", host], old_env)
        processes.start("old-projections", [*old, "worker", "projections"], old_env)
        processes.start("old-webhooks", [*old, "worker", "webhooks"], old_env)
        wait_until(lambda: answering(old_api) and requests.get(f"{old_api}/v1/ready").status_code == 200,
                   "the previous release to be ready")
        traffic = Traffic(client["key"])
        traffic.serve_at(old_api)
        traffic.thread.start()
        time.sleep(2)

        # The upgrade: this release migrates the database while the old processes run.
        assert command(new, new_env, "db", "migrate")["finalized"] == OLDEST_PEER
        processes.start("new-serve", [*new, "serve", "--bind", new_api[7:], "--workers", "1"], new_env)
        wait_until(lambda: answering(new_api), "this release's API")
        traffic.serve_at(old_api, new_api)
        unread: dict[str, tuple[float, float]] = {}  # host -> when no dispatcher read its modems

        def replace_dispatcher(host: str) -> None:
            """The old dispatcher of a host stopped and this release's started; until the new one has
            opened the host's SIMs (its heartbeats), nobody reads their ports."""
            old_ones = heartbeats(url, sims_of[host])
            began = time.time()
            processes.stop(f"old-dispatch-{host}")
            processes.start(f"new-dispatch-{host}", [*new, "worker", "dispatch", "--host", host], new_env)
            wait_until(lambda: all(new_one != old_ones[sim] for sim, new_one in heartbeats(url, sims_of[host]).items()),
                       f"this release's dispatcher to open the SIMs of {host}")
            unread[host] = (began, time.time())

        replace_dispatcher("h1")
        # Both releases' projections and webhook workers share the work a while: each leases
        # deliveries the other's API and sender made, and the old one reads the new one's events.
        processes.start("new-projections", [*new, "worker", "projections"], new_env)
        processes.start("new-webhooks", [*new, "worker", "webhooks"], new_env)
        time.sleep(2)
        for api, release, env in (("old-serve", old, old_env), ("new-serve", new, new_env),
                                  ("new-serve", new, new_env), ("old-serve", old, old_env)):
            bind = (old_api if api == "old-serve" else new_api)[7:]
            processes.stop(api)  # restarts in both orders, traffic going to the other meanwhile
            processes.start(api, [*release, "serve", "--bind", bind, "--workers", "1"], env)
            wait_until(lambda: answering(f"http://{bind}"), f"{api} again")
            time.sleep(1)

        status = command(new, new_env, "upgrade", "status")
        assert status["finalizable"] is False and status["unreportedDispatchers"] == []
        assert {p["release"] for p in status["processes"]} == {OLDEST_PEER, VERSION}
        refused = run(new, new_env, "upgrade", "finalize")
        assert refused.returncode == 2 and f"Sandesh {OLDEST_PEER}" in refused.stderr, refused.stderr

        processes.stop("old-projections")
        processes.stop("old-webhooks")
        replace_dispatcher("h0")
        traffic.serve_at(new_api)
        processes.stop("old-serve")
        wait_until(lambda: command(new, new_env, "upgrade", "status")["finalizable"], "the gate to open",
                   timeout=90)  # the old dispatcher's SIM heartbeats age out of the live window
        assert command(new, new_env, "upgrade", "finalize")["finalized"] == VERSION
        time.sleep(2)
        traffic.stop.set()
        traffic.thread.join(timeout=20)

        # Every acknowledged message leaves a modem once, and its webhooks arrive.  A status report
        # that reached a modem while its dispatcher was being replaced is lost, as with a real
        # modem whose port nobody reads (docs/operations.md, "Upgrading"): that message stays `sent`.
        # Every other one is delivered.
        acked = traffic.acked
        assert traffic.statuses.get(500, 0) == 0, traffic.statuses
        assert len(acked) >= 40, traffic.statuses
        statuses: Counter[str] = Counter()

        def left_a_modem() -> int:
            with psycopg.connect(url, autocommit=True) as conn:
                statuses.clear()
                statuses.update(dict(conn.execute("SELECT status, count(*) FROM messages WHERE id = ANY(%s)"
                                                  " GROUP BY status", (list(acked),)).fetchall()))
            return statuses["sent"] + statuses["delivered"]
        try:
            wait_draining(left_a_modem, len(acked), lambda: command(new, new_env, "clock", "advance", "1801"),
                          "every acknowledged message to leave a modem")
        finally:
            print("statuses of the acknowledged messages:", dict(statuses), "of", len(acked))
        phoned = [json.loads(line) for line in phones.read_text().splitlines()]
        id_of = {text: message for message, text in acked.items()}
        # The previous release drops, as it stops, the reports its SIMs' threads had read but not
        # recorded (they wait behind the next send; this release records them): those of parts that
        # left in the seconds before it was told to stop.  Later ones find their port unread.
        unheard = {id_of[m["text"]] for m in phoned if m["text"] in id_of for host, (began, ended) in unread.items()
                   if m["sim"] in modems_of[host]
                   and began - STOP_DROPS <= datetime.fromisoformat(m["at"]).timestamp() <= ended}
        must_deliver = sorted(set(acked) - unheard)
        undelivered: list[str] = []

        def delivered_all() -> bool:
            with psycopg.connect(url, autocommit=True) as conn:
                undelivered[:] = [row[0] for row in conn.execute(
                    "SELECT id FROM messages WHERE id = ANY(%s) AND status <> 'delivered'", (must_deliver,))]
            return not undelivered
        try:
            wait_until(delivered_all, "the status report of every message that left while its port was read")
        finally:
            print(f"{len(unheard)} message(s) left a modem while its dispatcher was being replaced;"
                  f" of the {len(must_deliver)} others, not delivered: {len(undelivered)}")
            left = {m["text"]: (m["at"], m["sim"]) for m in phoned}
            for message in undelivered:
                print(message, acked[message], "left", *left.get(acked[message], ("nowhere",)))
            print("the old dispatchers told to stop, and the new ones reading:", unread, modems_of)
        received = Counter(m["text"] for m in phoned)
        assert {text: received[text] for text in acked.values()} == {text: 1 for text in acked.values()}
        assert all(count == 1 for count in received.values()), "no message left a modem twice"

        with psycopg.connect(url, autocommit=True) as conn:
            balance = conn.execute("SELECT balance FROM workspaces WHERE id = %s", (workspace,)).fetchone()[0]
            charged = conn.execute("SELECT coalesce(sum(cost), 0), count(*) FROM messages WHERE client_id = %s",
                                   (client["id"],)).fetchone()
            delivered = {row[0] for row in conn.execute("SELECT id FROM messages WHERE id = ANY(%s)"
                                                        " AND status = 'delivered'", (list(acked),))}
        assert CREDIT - balance == charged[0] and charged[1] >= len(acked), "each message charged once"

        def webhooks() -> bool:
            found: dict[str, set[str]] = {}
            for hook in receiver.at("/hooks"):
                verify_signature(client["webhookSecret"], hook.headers["x-service-signature"], hook.body,
                                 tolerance=10**6)  # signed on the service clock, moved a window on or more
                body = json.loads(hook.body)
                found.setdefault(body.get("status"), set()).add(body["id"])
            return set(acked) <= found.get("sent", set()) and delivered <= found.get("delivered", set())
        wait_until(webhooks, "the sent and delivered webhooks of every acknowledged message", timeout=60)

        checked = run(new, new_env, "replay", "--check")
        assert checked.returncode == 0, checked.stdout + checked.stderr
        print(f"rolling upgrade {OLDEST_PEER} -> {VERSION}: {len(acked)} sends acknowledged, answers "
              f"{dict(traffic.statuses)}; each sent once and charged once, {len(delivered)} delivered, every "
              "webhook arrived; replay --check equal")
    finally:
        if traffic is not None:
            traffic.stop.set()
        processes.stop_all()
        receiver.close()


def heartbeats(url: str, sims: list[str]) -> dict[str, str | None]:
    """Which dispatcher gave each SIM's last heartbeat."""
    with psycopg.connect(url, autocommit=True) as conn:
        found = dict(conn.execute("SELECT sim_id, dispatcher FROM sim_health WHERE sim_id = ANY(%s)", (sims,)).fetchall())
    return {sim: found.get(sim) for sim in sims}


def emulated_modem(log: Path, device: str) -> str:
    """The emulator's name for the modem on `device` (what its phones' log calls it)."""
    return next(json.loads(line)["name"] for line in log.read_text().splitlines()
                if line.startswith("{") and json.loads(line)["device"] == device)

