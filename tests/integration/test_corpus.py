"""The log outlives the code.  Each folder of tests/corpus/ holds a log written by an earlier
release's own processes (scripts/devtools/corpus.py: its API, workers, emulator and commands, run through
one scripted workload), what that release answered at the end, and the keys and ids of it.

This release restores each log into a fresh database, migrates it (which builds the read models
the earlier release did not have, the events feed among them), finds its read models equal to the
log (`replay --check`), replays it, and answers every question the earlier release was asked as
that release did.  Then its own processes take over the service the earlier release left: the
messages left waiting go out, the scheduled one goes at its time, old keys send, webhooks carry
signatures of the old secrets and the feed the same events, a new OTP verifies, the feed the
service serves is what a replay makes, and the log still replays equal."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import psycopg
import pytest
import requests
from psycopg.rows import dict_row

from sandesh.domain.clock import parse_iso
from sandesh.domain.release import OLDEST_PEER, VERSION
from sandesh.domain.signature import verify_signature
from scripts.devtools.corpus_release import pg_tool
from tests.conftest import ROOT, SERVER_URL, Sandesh, Server, _admin

CORPUS = ROOT / "tests" / "corpus"
CORPORA = sorted(path for path in CORPUS.glob("*/") if (path / "log.dump").is_file())

# Fields this release answers that an earlier release did not, by the release that added them; a
# corpus of release R is answered with those of every release after R.  In a pattern `[]` is any
# item of a list and `*` any id.  Nothing else may differ, and each field listed must be added.
ADDED_IN: dict[str, dict[str, str]] = {
    "0.2.0": {
        **{f"sims.sims[].{field}": "the device and the modes the dispatcher chose for it"
           for field in ("manufacturer", "model", "firmware", "reports", "inbound", "cnmi", "messageStore")},
        **{f"sims.sims[].{field}": "a SIM's plan, PIN and credit (pace: 30, the interface's, when none is set)"
           for field in ("dailyCap", "monthlyCap", "pace", "pin", "balanceUssd", "balanceEvery", "minCredit",
                         "credit", "creditAt", "creditReply")},
        **{f"sims.sims[].{field}": "a SIM's caps: parts today and this month, when a resting SIM resumes"
           for field in ("partsToday", "partsThisMonth", "resumesAt")},
        "balances.*.promotionalHours": "promotional hours: a workspace of 0.1.0 has the default, 08:00-20:00",
        "workspaces.workspaces[].promotionalHours": "promotional hours, as on the balance",
        "audit[].details.redelivery_id": "WebhookDelivery.Redelivered's outage redelivery (v2; null when upcast)",
    },
    "0.4.0": {
        "clients.clients[].otpTemplate": "a client's OTP template (null: the default text)",
        "clients.clients[].otpWebDomain": "a client's web domain for the WebOTP line (null: none)",
        "clients.clients[].brandRequested": "a brand the workspace asked the operator team for (null: none)",
        "sims.sims[].portSecret": "whether a device's port has a sealed password or signing key (null: none)",
        "clients.clients[].compatType": "the message type of its Sparrow and Aakash sends (transactional)",
        "clients.clients[].keywords": "its keyword services' keywords (none)",
        "clients.clients[].replyUrl": "its keyword services' reply URL (null: none)",
        "clients.clients[].defaultReply": "its keyword services' default reply (null: none)",
        "workspaces.workspaces[].helpText": "what a HELP reply is answered with (null: none)",
        "workspaces.workspaces[].confirmations": "whether a reply's opt-out or opt-in is confirmed (false)",
        "workspaces.workspaces[].balanceAlert": "the balance below which its owners are told (null: none)",
    },
}


def added_since(release: str) -> dict[str, str]:
    def version(text: str) -> tuple[int, ...]:
        return tuple(int(part) for part in text.split("."))

    return {pattern: f"{added}: {why}" for added, fields in ADDED_IN.items() if version(added) > version(release)
            for pattern, why in fields.items()}


# Fields whose value depends on when the question is asked, not on the log.
VOLATILE: dict[str, str] = {
    "sims.sims[].state": "active while the last heartbeat is within the route window (60 s) of the clock; "
                         "the earlier release was asked while its dispatcher's last heartbeat was fresh",
    "sims.sims[].partsUsed": "parts in the rolling 30 minutes before the clock's now",
    "sims.sims[].reason": "why the state is what it is: a heartbeat outside the route window, on a busy machine",
    "sims.sims[].since": "when the state began, which moves with it",
}


def differences(old: Any, new: Any, path: str = "") -> list[tuple[str, str, Any, Any]]:
    """Every leaf where `old` and `new` differ: (pattern of its path, what differs, old, new)."""
    if isinstance(old, dict) and isinstance(new, dict):
        found = []
        for key in sorted(set(old) | set(new)):
            pattern = f"{path}.*" if re.match(r"^(msg|cl|ws|whd|sim|in)_", key) else f"{path}.{key}"
            if key not in old:
                found.append((pattern.lstrip("."), "added", None, new[key]))
            elif key not in new:
                found.append((pattern.lstrip("."), "removed", old[key], None))
            else:
                found += differences(old[key], new[key], pattern)
        return found
    if isinstance(old, list) and isinstance(new, list):
        found = [(f"{path}[]".lstrip("."), "length", len(old), len(new))] if len(old) != len(new) else []
        for o, n in zip(old, new):
            found += differences(o, n, f"{path}[]")
        return found
    return [] if old == new else [(path.lstrip("."), "changed", old, new)]


def summary(found: list[tuple[str, str, Any, Any]]) -> str:
    """One line per pattern and kind of difference: how many, and the first example."""
    seen: dict[tuple[str, str], list[Any]] = {}
    for pattern, kind, old, new in found:
        seen.setdefault((pattern, kind), []).append((old, new))
    return "\n".join(f"{pattern} {kind} x{len(examples)}: {examples[0][0]!r} -> {examples[0][1]!r}"[:300]
                     for (pattern, kind), examples in seen.items())


@contextmanager
def restored(dump: Path) -> Iterator[str]:
    """A new database with the corpus's dump restored into it, as docs/operations.md "Backups" restores."""
    name = f"sandesh_corpus_{uuid.uuid4().hex[:12]}"
    with _admin() as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = psycopg.conninfo.make_conninfo(SERVER_URL, dbname=name)
    try:
        done = subprocess.run([pg_tool("pg_restore"), "--no-owner", "--exit-on-error", "--dbname", url, str(dump)],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        yield url
    finally:
        with _admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def replays_equal(sandesh: Sandesh, *names: str) -> None:
    """`sandesh replay --check`: every table rebuilt from the log equals the live one (those of
    the projections named, when given)."""
    check = sandesh.run("replay", "--check", *names)
    assert check.returncode == 0, check.stdout + check.stderr
    unequal = {table: found for projection in json.loads(check.stdout)["projections"].values()
               for table, found in projection["tables"].items()
               if found["differ"] or found["onlyLive"] or found["onlyReplayed"]}
    assert not unequal, unequal


def set_clock(database: str, now: str) -> None:
    """The test clock at the moment the corpus's answers were recorded, for the answers that depend
    on it (the deliveries of the last 7 days, a SIM's state by the age of its heartbeat).
    `sandesh clock advance` only moves forward, and the restored clock went on with the wall clock
    since the corpus was made."""
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("UPDATE clock_offset SET offset_seconds = %s", (parse_iso(now) - time.time(),))


def service_now(sandesh: Sandesh) -> float:
    return parse_iso(sandesh("clock", "show")["now"])


def answers_of(sandesh: Sandesh, api: str, manifest: dict[str, Any], expected: dict[str, Any]) -> dict[str, Any]:
    """This release's answers to the questions the corpus's release was asked at the end."""
    key_of = {client["id"]: client["key"] for client in manifest["clients"].values()}
    key_of.update((m, manifest["clients"][name]["key"]) for m, name in manifest["messages"].items())

    def get(key: str, path: str) -> Any:
        answer = requests.get(api + path, headers={"x-api-key": key}, timeout=30)
        assert answer.status_code == 200, f"GET {path}: {answer.status_code} {answer.text}"
        return answer.json()

    with ThreadPoolExecutor(4) as pool:  # one `sandesh` process per message: four at a time
        histories = dict(zip(manifest["messages"], pool.map(lambda m: sandesh("message", "history", m),
                                                            manifest["messages"])))
    answers = {
        "messages": {m: get(key_of[m], f"/v1/sms/messages/{m}") for m in manifest["messages"]},
        "balances": {client: get(key_of[client], "/v1/sms/balance") for client in expected["balances"]},
        "histories": histories,
        "sims": sandesh("sim", "list"),
        "webhooks": sandesh("webhooks", "list", "--limit", "1000"),
        "audit": [json.loads(line) for line in sandesh.run("audit", "--limit", "1000").stdout.splitlines()],
        "inbound": sandesh("inbound", "list", "--limit", "1000"),
        "optouts": {ws: sandesh("optout", "list", ws) for ws in expected["optouts"]},
        "workspaces": sandesh("workspace", "list"),
        "clients": sandesh("client", "list"),
    }
    if "people" in expected:
        answers["people"] = sandesh("user", "list")
    return answers


def wait(check: Any, what: str, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)
    return found


class Modems:
    """This release's emulator with the corpus's SIM count: the same ICCIDs, on new pseudo-terminals."""

    def __init__(self, env: dict[str, str], sims: int, phones: Path):
        self.phones = phones
        self.process = subprocess.Popen(
            [sys.executable, "-m", "sandesh.scripts.service.cli", "emulator", "--sims", str(sims), "--phones-log", str(phones),
             "--report-delay", "0.3"], cwd=ROOT, env={**env, "PYTHONPATH": str(ROOT)}, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.modems = [json.loads(self.process.stdout.readline()) for _ in range(sims)]

    def received(self, number: str) -> list[dict[str, Any]]:
        if not self.phones.exists():
            return []
        return [m for m in map(json.loads, self.phones.read_text().splitlines()) if m["to"] == number]

    def control(self, sim: str, **command: Any) -> None:
        self.process.stdin.write(json.dumps({"sim": sim, **command}).encode() + b"\n")
        self.process.stdin.flush()
        assert json.loads(self.process.stdout.readline())["ok"]

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        assert self.process.wait(timeout=15) == 0


@pytest.mark.parametrize("corpus", CORPORA, ids=[path.name for path in CORPORA])
def test_a_log_of_an_earlier_release_is_migrated_replayed_answered_alike_and_served_on(corpus, receiver, tmp_path):
    manifest = json.loads((corpus / "manifest.json").read_text())
    expected = json.loads((corpus / "answers.json").read_text())
    with restored(corpus / "log.dump") as database:
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("SANDESH_")}, "DATABASE_URL": database,
               "SANDESH_SECRET_KEY": manifest["secretKey"], "SANDESH_CLOCK": "test",
               "SANDESH_WEBHOOK_ALLOW_PRIVATE": "1", "REQUESTS_CA_BUNDLE": str(receiver.ca_file), "USER": "tester",
               "SANDESH_METRICS_DIR": str(tmp_path / "metrics")}
        sandesh = Sandesh(env, tmp_path)

        # The upgrade: migrate, then the read models are checked against the log and rebuilt.  A
        # log of the previous release may still have its processes running beside this one, so the
        # gate keeps to its shapes; an older release's processes were all stopped for the upgrade.
        migrated = sandesh("db", "migrate")
        assert migrated["finalized"] == (OLDEST_PEER if manifest["release"] == OLDEST_PEER else VERSION)
        assert migrated["built"]["feed"]["rows"] > 0, "no release before this one had the feed: migrating builds it"
        built = feed_rows(database)
        replays_equal(sandesh)
        sandesh("replay")
        assert feed_rows(database) == built, "the feed a migration builds is the one a replay makes"
        set_clock(database, manifest["clock"]["now"])

        server = Server(env, workers=1)
        env["SANDESH_PUBLIC_URL"] = server.url  # the set-password links of `sandesh user`
        try:
            # The same answers as the earlier release gave, apart from fields added since.
            answered = answers_of(sandesh, server.url, manifest, expected)
            found = differences(expected, answered)
            added = added_since(manifest["release"])
            unexplained = [d for d in found if d[0] not in VOLATILE and (d[0] not in added or d[1] != "added")]
            assert not unexplained, "answers unlike the earlier release's:\n" + summary(unexplained)
            assert not set(added) - {d[0] for d in found}, "listed as added, yet answered alike"

            hooks = takes_over(sandesh, server, env, manifest, expected, receiver, tmp_path)
            # The dispatcher records its last reports as it stops, maybe after the projections
            # worker stopped: the check takes the live feed there first, as that worker would.
            replays_equal(sandesh, "feed")
            served = feeds(server, manifest)
            carried_alike(served["foods"], hooks, manifest["story"]["idempotent"])
            sandesh("replay", "feed")
            again = feeds(server, manifest)
            assert again == served, f"the feed served after the upgrade is not what a replay makes: {again}"
            dashboard_opens(sandesh, server, manifest)
        finally:
            server.stop()
        replays_equal(sandesh)


class Customer:
    """A client of the corpus, with the key the earlier release gave it."""

    def __init__(self, server: Server, client: dict[str, Any]):
        self.url, self.key, self.http = server.url, client["key"], requests.Session()

    def post(self, path: str, body: dict[str, Any], **headers: str) -> requests.Response:
        return self.http.post(self.url + path, json=body, headers={"x-api-key": self.key, **headers}, timeout=10)

    def message(self, message_id: str) -> dict[str, Any]:
        answer = self.http.get(f"{self.url}/v1/sms/messages/{message_id}", headers={"x-api-key": self.key}, timeout=10)
        assert answer.status_code == 200, answer.text
        return answer.json()

    def delivered(self, *messages: str) -> None:
        def statuses() -> list[str]:
            return [self.message(m)["status"] for m in messages]

        wait(lambda: set(statuses()) == {"delivered"}, f"{messages} delivered", timeout=45)


def takes_over(sandesh: Sandesh, server: Server, env: dict[str, str], manifest: dict[str, Any],
               expected: dict[str, Any], receiver: Any, tmp_path: Path) -> list[Any]:
    """This release's workers and modems take over what the earlier release left.  Returns the
    webhooks the Foods client got for what was sent and replied since."""
    story, clients = manifest["story"], manifest["clients"]
    for client in clients.values():  # the receiver listens on another port than the corpus's did
        if client.get("webhookPath"):
            sandesh("client", "update", client["id"], "--webhook-url", receiver.url(client["webhookPath"]))
    modems = Modems(env, manifest["emulator"]["sims"], tmp_path / "phones.jsonl")
    for modem in modems.modems:
        sandesh("sim", "update", modem["name"], "--port", modem["device"])
    workers = subprocess.Popen([sys.executable, "-m", "sandesh.scripts.service.cli", "worker", "all"], cwd=ROOT,
                               env={**env, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL,
                               stderr=open(tmp_path / "workers.log", "wb"), start_new_session=True)
    foods = Customer(server, clients["foods"])
    try:
        # The upgrade's last step (CHANGELOG.md): once only this release's processes run, its event
        # shapes may be written.  The earlier release's dispatcher counts as running until its
        # last SIM heartbeat is 30 s old on the service clock.
        wait(lambda: sandesh("upgrade", "status")["finalizable"], "the upgrade to be finalizable", timeout=60)
        sandesh("upgrade", "finalize")

        foods.delivered(*manifest["waiting"])
        for message in manifest["waiting"]:
            assert modems.received(foods.message(message)["to"]), f"{message} never reached its phone"
        left = story["idempotentWaiting"]  # its Idempotency-Key still answers the earlier release's 202
        again = foods.post("/v1/sms/send", left["body"], **{"Idempotency-Key": left["key"]})
        assert (again.status_code, again.headers.get("idempotent-replayed"), again.text) == (202, "true", left["reply"])

        [scheduled] = manifest["scheduled"]
        assert foods.message(scheduled)["status"] == "scheduled"
        send_at = parse_iso(foods.message(scheduled)["sendAt"])
        sandesh("clock", "advance", str(max(0.0, send_at - service_now(sandesh)) + 2))
        foods.delivered(scheduled)

        sent = foods.post("/v1/sms/send", {"to": "9779841999001", "text": "Sent with a key of the earlier release."})
        assert sent.status_code == 202, sent.text
        foods.delivered(sent.json()["messageId"])

        # A reply to a message the earlier release sent, through the SIM that sent it.
        replied = story["idempotent"]
        number = expected["messages"][replied]["to"]
        sim_id = next(e["simId"] for e in expected["histories"][replied]["events"] if e["type"] == "part_accepted")
        sim = next(s["name"] for s in expected["sims"]["sims"] if s["id"] == sim_id)
        modems.control(sim, inbound={"from": "+" + number, "text": "Still here after the upgrade."})
        wait(lambda: any(r["inReplyTo"] == replied and r["text"] == "Still here after the upgrade."
                         for r in sandesh("inbound", "list")["replies"]), "the reply attributed to its message")

        # Webhooks, signed with the secrets the earlier release made: the Foods client's current
        # one and, while its grace period runs, the previous one; the Outage client's retries.
        subjects = {*manifest["waiting"], scheduled, sent.json()["messageId"]}
        signed_by_foods = webhooks_of(receiver, clients["foods"], subjects, {"sent", "delivered"})
        inbound = wait(lambda: [r for r in receiver.at(clients["foods"]["webhookPath"])
                                if json.loads(r.body).get("inReplyTo") == replied], "the reply's webhook")
        now = service_now(sandesh)
        for hook in signed_by_foods + inbound:
            for secret in secrets_of(clients["foods"], now):  # each alone verifies: during a grace period both sign
                verify_signature(secret, hook.headers["x-service-signature"], hook.body, tolerance=10**9)
        for hook in webhooks_of(receiver, clients["outage"], {story["webhooksWaiting"]}, {"sent", "delivered"}):
            verify_signature(clients["outage"]["webhookSecret"], hook.headers["x-service-signature"], hook.body,
                             tolerance=10**9)

        # OTPs: a code locked in the earlier release stays locked; one sent now verifies.
        locked = foods.post("/v1/sms/otp/verify", {"to": story["otpLockedTo"], "purpose": "login", "code": "123456"})
        assert locked.json()["reason"] == "too_many_attempts", locked.text
        number = "9779801999002"
        otp = foods.post("/v1/sms/otp/send", {"to": number, "purpose": "login"})
        assert otp.status_code == 202, otp.text
        code = re.search(r"\b(\d{6})\b", wait(lambda: modems.received(number), "the OTP's SMS")[0]["text"]).group(1)
        verified = foods.post("/v1/sms/otp/verify", {"to": number, "purpose": "login", "code": code})
        assert verified.json()["verified"] is True, verified.text

        wait(lambda: all(lag == 0 for lag in foods.http.get(f"{server.url}/v1/ready", timeout=10).json()["checks"]
                         ["projectionLag"].values()), "the projections to catch up")
        return signed_by_foods + inbound
    finally:
        workers.send_signal(signal.SIGTERM)
        assert workers.wait(timeout=30) == 0, (tmp_path / "workers.log").read_text()[-3000:]
        modems.stop()


def feed_rows(database: str) -> list[dict[str, Any]]:
    with psycopg.connect(database, row_factory=dict_row) as conn:
        return conn.execute("SELECT * FROM events_feed ORDER BY position").fetchall()


def feeds(server: Server, manifest: dict[str, Any]) -> dict[str, Any]:
    """Each client's whole feed as GET /v1/events serves it, page by page (a disabled client's answer)."""
    found: dict[str, Any] = {}
    for name, client in manifest["clients"].items():
        items: list[dict[str, Any]] = []
        while True:
            after = {"after": items[-1]["id"]} if items else {}
            answer = requests.get(server.url + "/v1/events", params={"limit": 100, **after},
                                  headers={"x-api-key": client["key"]}, timeout=30)
            if answer.status_code != 200:
                found[name] = (answer.status_code, answer.json()["code"])
                break
            items += answer.json()["data"]
            if not answer.json()["hasMore"]:
                found[name] = items
                break
    return found


def carried_alike(feed: list[dict[str, Any]], hooks: list[Any], old: str) -> None:
    """The feed holds the earlier release's message `old`, and each webhook since is an item of it:
    `evt_X` for `whd_X`, its data the webhook's body."""
    by_id = {item["id"]: item["data"] for item in feed}
    assert any(data["id"] == old for data in by_id.values()), feed
    for hook in hooks:
        assert by_id["evt_" + hook.headers["x-service-delivery"][len("whd_"):]] == json.loads(hook.body)


def webhooks_of(receiver: Any, client: dict[str, Any], subjects: set[str], statuses: set[str]) -> list[Any]:
    """The `message.status` webhooks of `subjects` with `statuses` at the client's receiver, once all arrived."""
    def arrived() -> list[Any]:
        found = [r for r in receiver.at(client["webhookPath"]) if json.loads(r.body)["id"] in subjects]
        got = {(json.loads(r.body)["id"], json.loads(r.body)["status"]) for r in found}
        return found if got >= {(s, status) for s in subjects for status in statuses} else []

    return wait(arrived, f"the webhooks of {subjects}", timeout=45)


def secrets_of(client: dict[str, Any], now: float) -> list[str]:
    """The webhook secrets that sign now: the current one, and the previous one in its grace period."""
    until = client.get("previousSecretValidUntil")
    return [client["webhookSecret"], *([client["previousWebhookSecret"]] if until and parse_iso(until) > now else [])]


def dashboard_opens(sandesh: Sandesh, server: Server, manifest: dict[str, Any]) -> None:
    """The dashboard over the earlier release's log: its people sign in with the passwords and
    authenticator apps they set then (a log without people gets an owner now), and the pages of
    their workspace, its old messages and deliveries, and the operator team's console open."""
    from scripts.devtools.corpus_dashboard import Browser

    now = lambda: service_now(sandesh)  # noqa: E731 - the codes of authenticator apps follow the service clock
    main, story = manifest["workspaces"]["main"], manifest["story"]
    people = {p["role"]: p for p in manifest["people"]}
    owner = Browser(server.url, now)
    if "owner" in people:
        owner.sign_in(people["owner"]["email"], people["owner"]["password"], totp_secret=people["owner"]["totpSecret"])
    else:
        link = sandesh("user", "add", "--email", "owner@upgrade.example", "--name", "Owner", "--workspace", main,
                       "--role", "owner")["setPasswordLink"]
        owner.set_password(link, "upgraded-password-0123")
        owner.sign_in("owner@upgrade.example", "upgraded-password-0123")
    delivery = sandesh("webhooks", "list", "--client", manifest["clients"]["outage"]["id"],
                       "--state", "dead")["deliveries"][0]["id"]
    for page in ("overview", "clients", "messages", f"messages/{story['idempotent']}", "webhooks",
                 f"webhooks/{delivery}", "opt-outs", "people", "audit"):
        owner.page(f"/dashboard/w/{main}/{page}")
    if people.get("viewer", {}).get("setPasswordLink"):  # a link the earlier release printed sets a password
        viewer = Browser(server.url, now)
        viewer.set_password(people["viewer"]["setPasswordLink"], "viewer-password-0123")
        viewer.sign_in(people["viewer"]["email"], "viewer-password-0123")
        viewer.page(f"/dashboard/w/{main}/messages")
    operator = Browser(server.url, now)
    if "operator" in people:
        operator.sign_in(people["operator"]["email"], people["operator"]["password"],
                         totp_secret=people["operator"]["totpSecret"])
    else:
        link = sandesh("user", "add", "--email", "ops@upgrade.example", "--name", "Ops",
                       "--operator")["setPasswordLink"]
        operator.set_password(link, "upgraded-password-0123")
        operator.sign_in("ops@upgrade.example", "upgraded-password-0123", enroll=True)
    for page in ("workspaces", f"workspaces/{main}", "sims", "traffic", "replies", "audit", "people",
                 f"messages?id={story['idempotent']}", f"messages?id={story['erased']}"):
        operator.page(f"/dashboard/ops/{page}")
