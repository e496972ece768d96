"""A database failover under traffic (docs/reliability.md, "Failover"): a primary and its
synchronous standby on this machine, the service given both in libpq's multi-host form with
`target_session_attrs=read-write`, the primary crashed under sends and the standby promoted.
Sends answer 503 while no primary is up, never 500; every acknowledged send is on the new
primary, leaves a modem exactly once, and `replay --check` is equal."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import psycopg
import requests

from tests.conftest import ROOT, SECRET_KEY, free_port
from tests.installation import Processes, Traffic, answering, wait_draining, wait_until
from tests.private_postgres import PrivatePostgres


def test_a_primary_crashed_under_traffic_fails_over_to_its_standby_and_nothing_is_lost_or_sent_twice(tmp_path):
    # Not under pytest's temporary folder, which pytest sets back to 0700 (tests/private_postgres.py).
    root = Path(tempfile.mkdtemp(prefix="sandesh-failover-"))
    primary = PrivatePostgres(root / "primary")
    primary.start()
    standby = PrivatePostgres(root / "standby", standby_of=primary)
    standby.start()
    # A commit waits for the standby.  Set after the base backup: a promoted standby that kept
    # the setting would wait for a standby of its own that does not exist (docs/reliability.md).
    with psycopg.connect(primary.url, autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET synchronous_standby_names = 'standby'")
        conn.execute("SELECT pg_reload_conf()")
        wait_until(lambda: conn.execute("SELECT 1 FROM pg_stat_replication WHERE application_name = 'standby'"
                                        " AND sync_state = 'sync'").fetchone(), "the standby to be synchronous")
    url = (f"postgresql://root@127.0.0.1:{primary.port},127.0.0.1:{standby.port}/sandesh_failover"
           "?target_session_attrs=read-write")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("SANDESH_", "DATABASE_URL"))},
           "DATABASE_URL": url, "SANDESH_SECRET_KEY": SECRET_KEY, "SANDESH_CLOCK": "test", "USER": "operator",
           "PYTHONPATH": str(ROOT), "SANDESH_METRICS_DIR": str(tmp_path / "metrics")}
    cli = [sys.executable, "-m", "sandesh.scripts.service.cli"]

    def command(*args: str) -> dict:
        done = subprocess.run([*cli, *args], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"{' '.join(args)}: {done.stderr}"
        return json.loads(done.stdout)

    processes = Processes(tmp_path)
    phones = tmp_path / "phones.jsonl"
    traffic = None
    try:
        command("db", "migrate")
        workspace = command("workspace", "create", "--name", "Failover", "--types", "transactional")["id"]
        command("workspace", "activate", workspace)
        command("workspace", "credit", workspace, "10000000")
        key = command("client", "create", "--workspace", workspace, "--brand", "Failover", "--rate-limit", "100")["key"]
        processes.start("emulator", [*cli, "emulator", "--sims", "2", "--register", "--phones-log", str(phones)], env)
        api = f"http://127.0.0.1:{free_port()}"
        processes.start("serve", [*cli, "serve", "--bind", api[7:], "--workers", "1"], env)
        processes.start("workers", [*cli, "worker", "all"], env)
        wait_until(lambda: answering(api) and requests.get(f"{api}/v1/ready", timeout=5).status_code == 200,
                   "the API and a route", timeout=90)
        traffic = Traffic(key)
        traffic.serve_at(api)
        traffic.thread.start()
        time.sleep(4)

        primary.stop("immediate")  # the crash
        time.sleep(1)
        standby.promote()          # what Patroni, or an operator, does next
        wait_until(lambda: traffic.statuses[202] and _accepting(api, key), "sends to be accepted again", timeout=60)
        time.sleep(4)
        traffic.stop.set()
        traffic.thread.join(timeout=20)

        acked = traffic.acked
        assert traffic.statuses.get(500, 0) == 0, traffic.statuses
        assert len(acked) >= 20, traffic.statuses
        statuses: Counter[str] = Counter()

        def left_a_modem() -> int:
            with psycopg.connect(standby.url.replace("/postgres", "/sandesh_failover"), autocommit=True) as conn:
                statuses.clear()
                statuses.update(dict(conn.execute("SELECT status, count(*) FROM messages WHERE id = ANY(%s)"
                                                  " GROUP BY status", (list(acked),)).fetchall()))
            return statuses["sent"] + statuses["delivered"]
        try:
            wait_draining(left_a_modem, len(acked), lambda: command("clock", "advance", "1801"),
                          "every acknowledged send to leave a modem")
        finally:
            print(f"failover: answers {dict(traffic.statuses)}; acknowledged {len(acked)}: {dict(statuses)}")
        received = Counter(json.loads(line)["text"] for line in phones.read_text().splitlines())
        assert {text: received[text] for text in acked.values()} == {text: 1 for text in acked.values()}
        assert all(count == 1 for count in received.values()), "no message left a modem twice"
        checked = subprocess.run([*cli, "replay", "--check"], env=env, cwd=tmp_path, capture_output=True, text=True,
                                 timeout=120)
        assert checked.returncode == 0, checked.stdout + checked.stderr
    finally:
        if traffic is not None:
            traffic.stop.set()
        processes.stop_all()
        standby.remove()
        primary.remove()
        shutil.rmtree(root, ignore_errors=True)


def _accepting(api: str, key: str) -> bool:
    """A send with a key of its own is accepted now (the new primary takes writes)."""
    answer = requests.post(f"{api}/v1/sms/send", json={"to": "9779841000777", "text": "after the failover"},
                           headers={"x-api-key": key, "Idempotency-Key": f"probe-{time.monotonic()}"}, timeout=10)
    return answer.status_code == 202
