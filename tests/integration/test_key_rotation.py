"""Rotating the root key under traffic, as docs/operations.md, "Rotating the key", says: every
process is given the new key (the old one kept to read), `sandesh key rotate` wraps the data
keys again under it and makes new ones, in every process within a second, without writing a
single event again; `sandesh key retire` then retires the old root key, and the service starts
with the new one alone.  Every message, text, webhook secret, PIN and authenticator secret is
still readable, webhooks are still signed, a code sent before the rotation still verifies, and
`replay --check` is equal."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import psycopg
import requests

from sandesh.domain import totp
from sandesh.domain.settings import Settings
from sandesh.domain.signature import verify_signature
from sandesh.projections.storage.keys import key_id
from sandesh.scripts.service.bootstrap import bootstrap
from tests.conftest import ROOT, free_port
from tests.installation import Processes, Traffic, answering, devices, wait_until
from tests.receiver import Receiver

OLD = "the-key-this-installation-began-with-0123456789"
NEW = "the-key-that-replaces-it-after-a-leak-9876543210"


def test_a_key_rotated_under_traffic_is_retired_and_the_service_runs_on_the_new_key_alone(tmp_path,
                                                                                          empty_database_url):
    url = empty_database_url
    receiver = Receiver(tmp_path)
    base = {**{k: v for k, v in os.environ.items() if not k.startswith(("SANDESH_", "DATABASE_URL"))},
            "DATABASE_URL": url, "SANDESH_CLOCK": "test", "SANDESH_WEBHOOK_ALLOW_PRIVATE": "1",
            "REQUESTS_CA_BUNDLE": str(receiver.ca_file), "USER": "operator", "PYTHONPATH": str(ROOT),
            "SANDESH_METRICS_DIR": str(tmp_path / "metrics")}
    old = {**base, "SANDESH_SECRET_KEY": OLD}
    both = {**base, "SANDESH_SECRET_KEY": NEW, "SANDESH_PREVIOUS_KEYS": OLD}
    new = {**base, "SANDESH_SECRET_KEY": NEW}
    cli = [sys.executable, "-m", "sandesh.scripts.service.cli"]

    def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*cli, *args], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)

    def command(env: dict[str, str], *args: str) -> dict:
        done = run(env, *args)
        assert done.returncode == 0, f"{' '.join(args)}: {done.stderr}"
        return json.loads(done.stdout)

    def start_all(env: dict[str, str], api: str) -> None:
        processes.start("serve", [*cli, "serve", "--bind", api[7:], "--workers", "1"], env)
        processes.start("workers", [*cli, "worker", "all"], env)
        wait_until(lambda: answering(api) and requests.get(f"{api}/v1/ready", timeout=5).status_code == 200,
                   "the API and a route", timeout=90)

    processes = Processes(tmp_path)
    phones = tmp_path / "phones.jsonl"
    traffic = None
    try:
        processes.start("emulator", [*cli, "emulator", "--sims", "2", "--phones-log", str(phones)], old)
        command(old, "db", "migrate")
        workspace = command(old, "workspace", "create", "--name", "Keys", "--types", "transactional,otp")["id"]
        command(old, "workspace", "activate", workspace)
        command(old, "workspace", "credit", workspace, "10000000")
        client = command(old, "client", "create", "--workspace", workspace, "--brand", "Keys",
                         "--webhook-url", receiver.url("/hooks"), "--rate-limit", "100")
        ports = wait_until(lambda: devices(tmp_path / "emulator.log", 2), "the emulator's modems")
        for n, device in enumerate(ports):
            command(old, "sim", "add", "--name", f"sim-{n}", "--port", device)
        command(old, "sim", "update", "sim-0", "--pin", "2468")
        with _runtime(old) as runtime:  # an owner with an authenticator app
            person, token = runtime.sandesh.people.add_person("owner@keys.example", "Owner", workspace, "owner", False,
                                                          "operator")
            runtime.sandesh.people.set_password(token, "a long enough password")
            app_secret = totp.new_secret()
            runtime.sandesh.people.enroll_totp(person.id, app_secret,
                                           totp.hotp(app_secret, totp.step_of(runtime.clock.now())),
                                           proof="a long enough password")

        api = f"http://127.0.0.1:{free_port()}"
        start_all(old, api)
        traffic = Traffic(client["key"])
        traffic.serve_at(api)
        traffic.thread.start()
        headers = {"x-api-key": client["key"]}
        number = "9779801777001"
        sent = requests.post(f"{api}/v1/sms/otp/send", json={"to": number, "purpose": "login"}, headers=headers,
                             timeout=10)
        assert sent.status_code == 202, sent.text
        code = re.search(r"\b(\d{6})\b", wait_until(lambda: _received(phones, number), "the OTP's SMS")[0]).group(1)

        # The new key is given to every process, the old one kept to read with; they restart one
        # at a time.  Until the rotation the old root key wraps the data keys.
        refused = run(new, "key", "status")
        assert refused.returncode == 2 and f"wrapped under root key {key_id(OLD)}" in refused.stderr, refused.stderr
        for name_, argv in (("serve", [*cli, "serve", "--bind", api[7:], "--workers", "1"]),
                            ("workers", [*cli, "worker", "all"])):
            processes.stop(name_)
            processes.start(name_, argv, both)
            wait_until(lambda: answering(api), "the API")
        status = wait_until(lambda: (s := command(both, "key", "status"))["processes"] and
                            all(p["keys"] == [key_id(NEW), key_id(OLD)] for p in s["processes"]) and
                            len(s["processes"]) >= 4 and s, "every process to hold both keys")
        assert status["wraps"] == key_id(OLD) and [k["state"] for k in status["keys"]] == ["current"]
        time.sleep(1)

        # The rotation, under traffic: the events written so far are left as they are, byte for byte.
        with psycopg.connect(url, autocommit=True) as conn:
            before_rotation = dict(conn.execute("SELECT notification_id, state FROM sandesh_events").fetchall())
        rotated = command(both, "key", "rotate")
        assert rotated["current"] == key_id(NEW) and rotated["previous"] == key_id(OLD)
        assert rotated["dataKeys"] == {"wrappedAgain": 5, "made": 5}, rotated
        status = wait_until(lambda: (s := command(both, "key", "status")) and
                            {p["writes"] for p in s["processes"]} == {key_id(NEW)} and s,
                            "every process to take the new root key")
        assert [(k["id"], k["wraps"]) for k in status["keys"]] == [(key_id(OLD), 0), (key_id(NEW), 10)]
        time.sleep(2)  # sends under the new data keys

        # A code sent before the rotation, hashed with the old data key, still verifies.
        verified = requests.post(f"{api}/v1/sms/otp/verify", json={"to": number, "purpose": "login", "code": code},
                                 headers=headers, timeout=10)
        assert verified.json()["verified"] is True, verified.text
        traffic.stop.set()
        traffic.thread.join(timeout=20)
        assert command(both, "key", "retire", key_id(OLD))["changed"] is True
        with psycopg.connect(url, autocommit=True) as conn:
            after_rotation = dict(conn.execute("SELECT notification_id, state FROM sandesh_events").fetchall())
            new_marks = {bytes(state[:7]) for n, state in after_rotation.items() if n not in before_rotation}
            assert new_marks - {bytes(state[:7]) for state in before_rotation.values()}, \
                "sends went on through the rotation, under the new data key"
            assert {n: after_rotation[n] for n in before_rotation} == before_rotation, "no event was written again"

        # The service starts with the new key alone; the old key alone is refused.
        processes.stop("serve")
        processes.stop("workers")
        refused = run(old, "key", "status")
        assert refused.returncode == 2 and f"wrapped under root key {key_id(NEW)}" in refused.stderr, refused.stderr
        before = len(receiver.at("/hooks"))
        start_all(new, api)
        acked = traffic.acked
        assert traffic.statuses.get(500, 0) == 0 and len(acked) >= 40, traffic.statuses
        with psycopg.connect(url, autocommit=True) as conn:
            assert conn.execute("SELECT count(*) FROM messages WHERE id = ANY(%s)",
                                (list(acked),)).fetchone()[0] == len(acked)
        first_id = next(iter(acked))
        history = command(new, "message", "history", first_id)
        assert acked[first_id] in json.dumps(history), history  # a text sealed before the rotation
        with _runtime(new) as runtime:
            with runtime.connection() as conn:
                pin_sealed = conn.execute("SELECT pin_sealed FROM sims WHERE name = 'sim-0'").fetchone()
            assert runtime.sandesh.sims.sim_pin(pin_sealed["pin_sealed"]) == "2468"
            assert runtime.sandesh.people.sealer.open(runtime.sandesh.people.person(person.id).totp_sealed) == app_secret
        command(new, "clock", "advance", "1801")  # the SIMs' pacing windows, full of the traffic's sends, open again
        wait_until(lambda: requests.get(f"{api}/v1/ready", timeout=5).status_code == 200,  # a heartbeat on the
                   "a SIM to be a route again", timeout=90)                                 # moved clock
        # An OTP: it goes before the traffic's backlog, which the opened windows do not all take.
        after = requests.post(f"{api}/v1/sms/otp/send", json={"to": "9779801777002", "purpose": "after"},
                              headers=headers, timeout=10)
        assert after.status_code == 202, after.text

        def signed_webhook() -> bool:
            for hook in receiver.at("/hooks")[before:]:
                verify_signature(client["webhookSecret"], hook.headers["x-service-signature"], hook.body,
                                 tolerance=10**6)
                if json.loads(hook.body)["id"] == after.json()["messageId"]:
                    return True
            return False
        wait_until(signed_webhook, "a signed webhook of a message sent on the new key alone", timeout=90)
        checked = run(new, "replay", "--check")
        assert checked.returncode == 0, checked.stdout + checked.stderr
        with psycopg.connect(url, autocommit=True) as conn:  # every backend's counts flushed: they have ended
            conn.execute("SELECT pg_stat_force_next_flush()")
            changed = conn.execute("SELECT n_tup_upd + n_tup_del FROM pg_stat_user_tables"
                                   " WHERE relname = 'sandesh_events'").fetchone()[0]
        assert changed == 0, "nothing ever updates or deletes an event"
        print(f"key rotated under traffic: {len(acked)} sends acknowledged, answers {dict(traffic.statuses)}; "
              f"no event written again; retired, restarted on the new key alone; replay --check equal")
    finally:
        if traffic is not None:
            traffic.stop.set()
        processes.stop_all()
        receiver.close()


class _runtime:
    def __init__(self, env: dict[str, str]):
        self.runtime = bootstrap(Settings.from_env(env), pool_size=2)

    def __enter__(self):
        return self.runtime

    def __exit__(self, *_):
        self.runtime.close()


def _received(phones, number: str) -> list[str]:
    if not phones.exists():
        return []
    return [m["text"] for m in map(json.loads, phones.read_text().splitlines()) if m["to"] == number]
