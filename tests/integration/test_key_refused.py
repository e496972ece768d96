"""A process writes only with the database's keys (docs/design.md, "Keys"): one started while the
database is away, holding a root key that was retired (or a mistyped one), writes nothing when
the database comes back: its requests that would write answer 503, its worker stops with exit
status 4, and no event, sealed value or key of texts in the database is under its key.  On
0.3.0's code such a process wrote with its own key, and the processes holding the right key
could not read it.  A private PostgreSQL server, really stopped and started."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import psycopg
import pytest
import requests

from sandesh.projections.storage.keys import KeyRing, RingCipher, key_id
from tests.conftest import ROOT, free_port
from tests.integration.test_database_outage import Heartbeat
from tests.installation import answering, wait_until

OLD = "the-key-of-before-which-was-retired-0123456789"
NEW = "the-current-root-key-of-this-database-98765432"




def test_a_process_started_with_a_retired_key_during_an_outage_writes_nothing(postgres, tmp_path):
    url = psycopg.conninfo.make_conninfo(postgres.url, dbname="sandesh_keys")
    base = {**{k: v for k, v in os.environ.items() if not k.startswith(("SANDESH_", "DATABASE_URL"))},
            "DATABASE_URL": url, "SANDESH_CLOCK": "test", "USER": "tester", "PYTHONPATH": str(ROOT),
            "SANDESH_METRICS_DIR": str(tmp_path / "metrics")}
    old, both, new = ({**base, "SANDESH_SECRET_KEY": OLD}, {**base, "SANDESH_SECRET_KEY": NEW,
                                                             "SANDESH_PREVIOUS_KEYS": OLD},
                      {**base, "SANDESH_SECRET_KEY": NEW})
    cli = [sys.executable, "-m", "sandesh.scripts.service.cli"]

    def command(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*cli, *args], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)

    assert command(old, "db", "migrate").returncode == 0
    workspace_id = json.loads(command(old, "workspace", "create", "--name", "Keys").stdout)["id"]
    command(old, "workspace", "activate", workspace_id)
    command(old, "workspace", "credit", workspace_id, "100000")
    created = json.loads(command(old, "client", "create", "--workspace", workspace_id, "--brand", "Keys").stdout)
    assert command(both, "key", "rotate").returncode == 0
    assert command(new, "key", "retire", key_id(OLD)).returncode == 0
    heartbeat = Heartbeat(new)  # a SIM is a route: a send would be accepted
    logs = {name: open(tmp_path / f"{name}.log", "wb") for name in ("serve", "worker")}
    port = free_port()
    serve = worker = None
    try:
        postgres.stop()
        serve = subprocess.Popen([*cli, "serve", "--bind", f"127.0.0.1:{port}", "--workers", "1"], env=old,
                                 cwd=tmp_path, stdout=logs["serve"], stderr=logs["serve"])
        worker = subprocess.Popen([*cli, "worker", "webhooks"], env=old, cwd=tmp_path, stdout=logs["worker"],
                                  stderr=logs["worker"])
        # Both up while the database is away (nothing can be checked yet): the API answers its
        # health, the worker has found the database away.  A process that first reaches the
        # database with a retired key refuses to start instead (docs/operations.md, "Rotating the key").
        wait_until(lambda: answering(f"http://127.0.0.1:{port}"), "the API, the database away")
        wait_until(lambda: b"database unavailable" in (tmp_path / "worker.log").read_bytes(),
                   "the worker, the database away")
        assert worker.poll() is None and serve.poll() is None
        postgres.start()

        def answered() -> list[requests.Response]:
            """A send's answer once the API answers (a list: a 503 is a false Response)."""
            try:
                return [requests.post(f"http://127.0.0.1:{port}/v1/sms/send", timeout=10,
                                      headers={"x-api-key": created["key"]},
                                      json={"to": "9779841234567", "text": "under which key?"})]
            except requests.ConnectionError:
                return []

        answers = wait_until(answered, "the API")
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            answers += answered()
            time.sleep(0.25)
        assert {a.status_code for a in answers} == {503}, [(a.status_code, a.text) for a in answers]
        assert all(a.json()["code"] == "unavailable" and a.headers["Retry-After"] for a in answers)
        assert worker.wait(timeout=30) == 4, (tmp_path / "worker.log").read_text()[-2000:]
        assert f"wrapped under root key {key_id(NEW)}, which this process does not hold" in \
            (tmp_path / "worker.log").read_text()

        # Nothing under the retired key: no event opens with the keys it derives (what a process
        # holding it alone writes before it has read the database's keys).
        with psycopg.connect(url, autocommit=True) as conn:
            states = [bytes(s) for (s,) in conn.execute("SELECT state FROM sandesh_events")]
            sent = conn.execute("SELECT count(*) FROM sandesh_events WHERE topic LIKE '%Message.Accepted%'"
                                ).fetchone()[0]
        assert sent == 0, "no send was accepted"
        retired = RingCipher(KeyRing([OLD]))
        for state in states:
            with pytest.raises(ValueError):
                retired.decrypt(state)
    finally:
        for process in (serve, worker):
            if process is not None and process.poll() is None:
                process.terminate()
                process.wait(timeout=30)
        heartbeat.close()
