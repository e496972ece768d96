"""The restore drill of docs/operations.md, "Backups", as an operator runs it: the two dumps taken
exactly as the docs say while messages are being sent, restored into a new database, then
`db migrate`, `replay --check`, `serve` and the workers.  Every message acknowledged before the
dump began is there, and the projections catch up."""
from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
import uuid

import orjson
import psycopg
import pytest
import requests

from sandesh.domain.release import VERSION
from scripts.devtools.corpus_release import pg_tool
from tests.conftest import ROOT, SERVER_URL, Server

pytestmark = pytest.mark.alone  # it measures latency or throughput: run with nothing beside it (scripts/test.sh)

SENDS_PER_SECOND = 20


def command(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sandesh.scripts.service.cli", *args], env={**env, "PYTHONPATH": str(ROOT)},
                          cwd=ROOT, capture_output=True, text=True, timeout=120)


def started(env: dict[str, str], *args: str, **kwargs: object) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "sandesh.scripts.service.cli", *args], cwd=ROOT,
                            env={**env, "PYTHONPATH": str(ROOT)}, **kwargs)


def stopped(*processes: subprocess.Popen) -> None:
    for process in processes:
        process.send_signal(signal.SIGTERM)
    for process in processes:
        process.wait(timeout=30)


def emulator(env: dict[str, str]) -> subprocess.Popen:
    """Two virtual modems registered (again, by ICCID) as the database's SIMs."""
    process = started(env, "emulator", "--sims", "2", "--register", stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                      stderr=subprocess.DEVNULL)
    for _ in range(2):
        process.stdout.readline()
    return process


class Traffic:
    """Sends at a steady rate until stopped; keeps when each 202 arrived, and every status."""

    def __init__(self, url: str, key: str):
        self.url, self.key = url, key
        self.acked: list[tuple[float, str]] = []
        self.statuses: dict[int, int] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        """The n-th send is due n / SENDS_PER_SECOND after the first, however long the answers take."""
        session = requests.Session()
        n, started = 0, time.monotonic()
        while not self.stop.wait(max(0.0, started + n / SENDS_PER_SECOND - time.monotonic())):
            n += 1
            answer = session.post(f"{self.url}/v1/sms/send", timeout=10,
                                  headers={"x-api-key": self.key, "Idempotency-Key": f"drill-{n}"},
                                  json={"to": f"97798410{n % 100000:05d}", "text": f"drill {n}"})
            self.statuses[answer.status_code] = self.statuses.get(answer.status_code, 0) + 1
            if answer.status_code == 202:
                self.acked.append((time.time(), answer.json()["messageId"]))


def test_a_dump_taken_under_traffic_restores_checks_equal_and_serves_every_acknowledged_message(env, sandesh,
                                                                                                 tmp_path):
    workspace = sandesh("workspace", "create", "--name", "Drill", "--types", "transactional")["id"]
    sandesh("workspace", "activate", workspace)
    sandesh("workspace", "credit", workspace, "100000000")
    key = sandesh("client", "create", "--workspace", workspace, "--brand", "Drill", "--rate-limit", "1000")["key"]
    modems = emulator(env)
    server, workers = Server(env), started(env, "worker", "all", stderr=subprocess.DEVNULL)
    traffic = Traffic(server.url, key)
    log_dump, keys_dump = tmp_path / "sandesh.dump", tmp_path / "text-keys.dump"
    try:
        deadline = time.monotonic() + 30
        while requests.get(f"{server.url}/v1/ready", timeout=5).status_code != 200:
            assert time.monotonic() < deadline, "no SIM became a route"
            time.sleep(0.2)
        traffic.thread.start()
        time.sleep(3)
        dump_began = time.time()
        # docs/operations.md, "Backups": the log and read models in one snapshot, the keys apart
        subprocess.run([pg_tool("pg_dump"), "--format=custom", "--exclude-table=text_keys", env["DATABASE_URL"]],
                       stdout=log_dump.open("wb"), check=True)
        subprocess.run([pg_tool("pg_dump"), "--format=custom", "--table=text_keys", env["DATABASE_URL"]],
                       stdout=keys_dump.open("wb"), check=True)
        time.sleep(2)
    finally:
        traffic.stop.set()
        traffic.thread.join(timeout=15)
        server.stop()
        stopped(workers, modems)
    assert traffic.statuses.get(500, 0) == 0, traffic.statuses
    before = [message for at, message in traffic.acked if at < dump_began]
    assert len(before) >= 2 * SENDS_PER_SECOND, traffic.statuses

    restored_name = f"sandesh_restored_{uuid.uuid4().hex[:8]}"
    restored_url = psycopg.conninfo.make_conninfo(SERVER_URL, dbname=restored_name)
    restored = {**env, "DATABASE_URL": restored_url}
    with psycopg.connect(SERVER_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{restored_name}"')
    try:
        for dump in (log_dump, keys_dump):
            subprocess.run([pg_tool("pg_restore"), "--no-owner", "--exit-on-error", "-d", restored_url, str(dump)],
                           check=True, capture_output=True)
        migrated = command(restored, "db", "migrate")
        assert migrated.returncode == 0, migrated.stderr
        assert orjson.loads(migrated.stdout)["migratedBy"] == VERSION
        checked = command(restored, "replay", "--check")
        assert checked.returncode == 0, checked.stdout + checked.stderr

        modems = emulator(restored)
        server, workers = Server(restored), started(restored, "worker", "all", stderr=subprocess.DEVNULL)
        try:
            missing = [m for m in before if requests.get(f"{server.url}/v1/sms/messages/{m}", timeout=10,
                                                         headers={"x-api-key": key}).status_code != 200]
            assert not missing, f"{len(missing)} of {len(before)} acknowledged messages are not there"
            deadline = time.monotonic() + 60
            while True:
                with psycopg.connect(restored_url, autocommit=True) as conn:
                    projected = conn.execute("SELECT count(*) FROM messages WHERE id = ANY(%s)", (before,)).fetchone()
                    lag = requests.get(f"{server.url}/v1/ready", timeout=5).json()["checks"]["projectionLag"]
                if projected[0] == len(before) and lag and not any(lag.values()):
                    break
                assert time.monotonic() < deadline, (projected, lag)
                time.sleep(0.5)
            answer = requests.post(f"{server.url}/v1/sms/send", headers={"x-api-key": key}, timeout=10,
                                   json={"to": "9779841000001", "text": "after the restore"})
            assert answer.status_code == 202, answer.text
        finally:
            server.stop()
            stopped(workers, modems)
        print(f"restore drill: {len(before)} messages acknowledged before the dump, all there after the restore; "
              f"statuses under traffic {traffic.statuses}")
    finally:
        with psycopg.connect(SERVER_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{restored_name}" WITH (FORCE)')
