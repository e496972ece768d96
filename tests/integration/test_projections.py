"""Read models: exactly once per event, `sandesh worker`, and `sandesh replay` row for row."""
import random
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime

import orjson
import pytest

from sandesh.domain.campaign_plan import SendForm
from sandesh.domain.clock import NEPAL, iso
from sandesh.domain.message import Message
from sandesh.domain.contacts import template_id
from sandesh.domain.recipients import pasted
from sandesh.domain.ports import Caller
from sandesh.domain.sending import OtpSendRequest, OtpVerifyRequest, parse_send
from sandesh.domain.topics import topics_of
from sandesh.domain.webhook import FEED_HISTORY
from sandesh.projections import follower, sim_health
from tests.helpers import funded_workspace
from tests.conftest import ROOT

TABLES = {"workspaces": "id", "clients": "id", "sims": "id", "sms_switch": "id",
          "idempotency_keys": "client_id, key", "messages": "id", "client_counters": "client_id",
          "otps": "id", "otp_issues": "otp_id, at",
          "audit_lines": "originator_id, originator_version", "audit_clients": "client_id",
          "campaigns": "id", "campaign_messages": "message_id", "contact_lists": "id", "contacts": "list_id, number",
          "message_templates": "id", "feed_messages": "id", "events_feed": "id"}


@pytest.fixture(scope="module")
def clients(runtime):
    """Two workspaces, three clients, a few hundred mixed messages (some with keys)."""
    app, made = runtime.sandesh, []
    for name in ("North", "South"):
        ws = funded_workspace(app, name, 1_000_000, "t", rates={"otp": 150})
        made += [(ws, app.operators.create_client(ws, f"{name}{i}", None, None, "t")[0].id) for i in range(1 + (name == "North"))]
    rng = random.Random(7)
    for i in range(300):
        ws, cl = rng.choice(made)
        kind = rng.choice(["transactional", "otp", "promotional"])
        request, _ = parse_send({"to": f"97798{rng.randrange(10**8):08d}", "text": "x" * rng.randrange(1, 400),
                                 "messageType": kind})
        key = f"k{i}" if i % 3 == 0 else None
        app.sending.send(cl, ws, request, {"transactional": 100, "otp": 150, "promotional": 40}[kind] * request.segments,
                 key, "h" if key else None)
    for i in range(20):  # codes, wrong tries and verifications
        ws, cl = made[i % len(made)]
        caller = Caller(client_id=cl, workspace_id=ws, brand="Brand", workspace_status="active",
                        rates={"transactional": 100, "otp": 150, "promotional": 100},
                        allowed_types=["transactional", "otp", "promotional"], sms_enabled=True, has_route=True,
                        promo_hours=None)
        to = f"977981{i:07d}"
        app.otp.send_otp(caller, OtpSendRequest(to, "login", "203.0.113.9" if i % 2 else None), "198.51.100.1")
        app.otp.verify_otp(caller, OtpVerifyRequest(to, "login", "not-the-code"), "198.51.100.1")
    campaign(app, runtime, made[0][0])
    return made


def campaign(app, runtime, workspace_id):
    """Two campaigns from the dashboard, of 20 and 10 messages (a line refused), scheduled; the
    second canceled.  A SIM is a route while they are previewed and sent, and is disabled after:
    no dispatcher of this module drives it."""
    sim = app.sims.add_sim("route-campaigns", "loop://", 115200, None, "t")
    with runtime.connection() as conn:
        sim_health.record(conn, sim.id, healthy=True, registered=True, signal_dbm=-73, last_error=None,
                          dispatcher="tests", at=app.clock.now())
    typed = "\n".join(f"98{i:08d}" for i in range(30)) + "\n12345"
    later = datetime.fromtimestamp(app.clock.now() + 3600, NEPAL).strftime("%Y-%m-%dT%H:%M")
    sent = []
    for numbers in ("\n".join(typed.splitlines()[:20]), "\n".join(typed.splitlines()[20:])):
        preview = app.campaigns.preview(workspace_id, "person-owner", SendForm(numbers, "Hello from the shop",
                                                                                "transactional", send_at=later))
        sent.append(app.campaigns.send(workspace_id, "person-owner", preview.token, "user:owner@north.example"))
    app.sims.disable_sim(sim.id, "t")
    canceled = app.campaigns.cancel(workspace_id, sent[1].campaign_id, "user:owner@north.example")
    assert (canceled.count, canceled.refunded) == (10, 1000)
    recipients, _ = pasted(typed)
    made = app.contacts.create_list(workspace_id, "Parents", recipients, "user:owner@north.example")
    app.contacts.remove(workspace_id, made.id, recipients[0].number, "user:owner@north.example")
    gone = app.contacts.create_list(workspace_id, "Old", recipients[:5], "user:owner@north.example")
    app.contacts.delete_list(workspace_id, gone.id, "user:owner@north.example")
    app.contacts.save_template(workspace_id, "Hello", "Hello {name}", "user:owner@north.example")
    app.contacts.save_template(workspace_id, "hello", "Hello again, {name}", "user:owner@north.example")
    app.contacts.save_template(workspace_id, "Bye", "Bye", "user:owner@north.example")
    app.contacts.delete_template(workspace_id, template_id(workspace_id, "bye"), "user:owner@north.example")


def snapshot(runtime):
    with runtime.connection() as conn:
        return {table: conn.execute(f"SELECT * FROM {table} ORDER BY {order}").fetchall()
                for table, order in TABLES.items()}


def test_the_worker_applies_every_event_exactly_once(runtime, clients):
    follower.catch_up(runtime)
    follower.catch_up(runtime)  # nothing left: running again changes nothing
    with runtime.connection() as conn:
        counted = conn.execute("SELECT sum(sent) AS sent, sum(spent) AS spent FROM client_counters").fetchone()
        messages = conn.execute("SELECT count(*) AS n, sum(cost) AS cost FROM messages").fetchone()
        balances = conn.execute("SELECT sum(balance) AS b FROM workspaces WHERE name IN ('North', 'South')").fetchone()
    assert counted["sent"] == messages["n"] == 350
    assert counted["spent"] == messages["cost"] - 1000 == 2_000_000 - balances["b"]  # the campaign's refunds
    with runtime.connection() as conn:
        otps = conn.execute("SELECT count(*) AS n, sum(wrong_attempts) AS tries FROM otps").fetchone()
    assert (otps["n"], otps["tries"]) == (20, 20)


def test_two_runners_at_once_still_apply_each_event_once(runtime, clients):
    ws, cl = clients[0]
    request, _ = parse_send({"to": "9779812345678", "text": "again"})
    for _ in range(200):
        runtime.sandesh.sending.send(cl, ws, request, 100)
    threads = [threading.Thread(target=follower.catch_up, args=(runtime,)) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with runtime.connection() as conn:
        assert conn.execute("SELECT sum(sent) AS n FROM client_counters").fetchone()["n"] == 550
        assert conn.execute("SELECT count(*) AS n FROM messages").fetchone()["n"] == 550


def test_replay_rebuilds_every_read_model_identical_row_for_row(runtime, clients, sandesh):
    follower.catch_up(runtime)
    live = snapshot(runtime)
    started = time.monotonic()
    done = sandesh.run("replay")
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    summary = orjson.loads(done.stdout)
    projections = summary["projections"]
    assert set(projections) == {"registry", "messages", "counters", "otps", "audit", "campaigns", "feed"}
    assert projections["messages"]["events"] == 550 + 10
    # the log is read once: every event of it, each projection handling its own
    assert summary["events"] == runtime.sandesh.log.recorder.max_notification_id()
    assert all(0 < p["events"] <= summary["events"] for p in projections.values())
    assert projections["registry"]["events"] > projections["messages"]["events"]
    # the whole replay's time, measured inside the command: within the time the command took, and no
    # less than the one pass plus each projection's load and swap (each rounded to the millisecond)
    parts = summary["readSeconds"] + sum(p["seconds"] for p in projections.values())
    assert parts - 0.005 <= summary["seconds"] <= elapsed, (summary, elapsed)
    assert "replay log" in done.stderr  # plain progress lines when stderr is not a terminal
    assert snapshot(runtime) == live


def test_replay_of_one_projection_while_sends_continue(runtime, clients, sandesh):
    ws, cl = clients[1]
    request, _ = parse_send({"to": "9779812345678", "text": "during replay"})
    stop = threading.Event()
    sent, errors = [], []

    def keep_sending():
        while not stop.is_set():
            try:
                sent.append(runtime.sandesh.sending.send(cl, ws, request, 100))
            except Exception as error:  # a send the swap made fail (a deadlock, a timeout)
                errors.append(error)

    sender = threading.Thread(target=keep_sending)
    sender.start()
    try:
        for name in ("counters", "registry"):
            assert sandesh.run("replay", name).returncode == 0
    finally:
        stop.set()
        sender.join()
    assert errors == [] and len(sent) > 10, "sends go on while the tables are swapped"
    follower.catch_up(runtime)
    after_live = snapshot(runtime)
    assert sandesh.run("replay").returncode == 0
    assert snapshot(runtime) == after_live, "no event was lost or applied twice around the swaps"


def test_replay_check_compares_without_swapping_and_finds_a_tampered_row(runtime, clients, sandesh):
    follower.catch_up(runtime)
    clean = sandesh.run("replay", "--check")
    assert clean.returncode == 0, clean.stderr
    report = orjson.loads(clean.stdout)
    assert report["ok"] is True
    assert set(report["projections"]) == {"registry", "messages", "counters", "otps", "audit", "campaigns", "feed"}
    tables = {t: r for p in report["projections"].values() for t, r in p["tables"].items()}
    assert all(r["differ"] == 0 for r in tables.values()), tables
    with runtime.connection() as conn:
        assert tables["messages"]["rows"] == conn.execute("SELECT count(*) AS n FROM messages").fetchone()["n"] >= 320
        assert tables["workspaces"]["rows"] == conn.execute("SELECT count(*) AS n FROM workspaces").fetchone()["n"]
        one = conn.execute("SELECT id FROM messages ORDER BY id LIMIT 1").fetchone()["id"]
        conn.execute("UPDATE messages SET status = 'delivered' WHERE id = %s", (one,))
    try:
        tampered = sandesh.run("replay", "--check", "messages")
        assert tampered.returncode == 1, tampered.stderr
        found = orjson.loads(tampered.stdout)
        assert found["ok"] is False and list(found["projections"]) == ["messages"]
        differs = found["projections"]["messages"]["tables"]["messages"]
        assert differs["differ"] == 2  # the live row, and the row the log makes instead
        [live_row], [replayed_row] = differs["onlyLive"], differs["onlyReplayed"]
        assert (live_row["id"], live_row["status"]) == (one, "delivered")
        assert replayed_row["id"] == one and replayed_row["status"] != "delivered"
        with runtime.connection() as conn:  # a check never swaps: the live row is as it was
            assert conn.execute("SELECT status FROM messages WHERE id = %s", (one,)).fetchone()["status"] == "delivered"
            assert conn.execute("SELECT count(*) AS n FROM pg_namespace WHERE nspname LIKE 'check_%%'"
                                ).fetchone()["n"] == 0  # and leaves no scratch schema behind
    finally:
        assert sandesh.run("replay", "messages").returncode == 0  # the log puts the row right
    assert sandesh("replay", "--check", "messages")["ok"] is True


def test_replay_check_while_sends_continue_finds_nothing(runtime, clients, sandesh):
    """The live tables and the log are read in one snapshot: appends during the check (each
    writing the registry's rows and its events together) never look like a difference."""
    ws, cl = clients[1]
    request, _ = parse_send({"to": "9779812345678", "text": "during the check"})
    stop, sent = threading.Event(), []

    def keep_sending():
        while not stop.is_set():
            sent.append(runtime.sandesh.sending.send(cl, ws, request, 100).id)

    sender = threading.Thread(target=keep_sending)
    sender.start()
    try:
        done = sandesh.run("replay", "--check", "registry")
    finally:
        stop.set()
        sender.join()
    assert done.returncode == 0, done.stdout + done.stderr
    assert orjson.loads(done.stdout)["ok"] is True and len(sent) > 10


def test_replay_refuses_unknown_names(sandesh):
    done = sandesh.run("replay", "nonsense")
    assert done.returncode == 2 and "unknown projection" in done.stderr


def test_worker_all_follows_the_log_and_stops_cleanly_on_sigterm(runtime, clients, env):
    ws, cl = clients[0]
    worker = subprocess.Popen([sys.executable, "-m", "sandesh.scripts.service.cli", "worker", "all"], cwd=ROOT,
                              env={**env, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        request, _ = parse_send({"to": "9779812345678", "text": "followed"})
        message = runtime.sandesh.sending.send(cl, ws, request, 100)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            with runtime.connection() as conn:
                if conn.execute("SELECT 1 FROM messages WHERE id = %s", (message.id,)).fetchone():
                    break
            time.sleep(0.05)
        else:
            pytest.fail("the projections worker did not project the message: " + worker.stderr.read1().decode())
    finally:
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=20) == 0


def test_a_charge_and_its_message_commit_together_or_not_at_all(runtime, clients):
    """If the event append fails after the debit ran, the debit is rolled back with it."""
    from eventsourcing.persistence import IntegrityError

    from sandesh.domain.message import Message

    ws, cl = clients[0]
    request, _ = parse_send({"to": "9779812345678", "text": "atomic"})
    first = runtime.sandesh.sending.send(cl, ws, request, 100)
    with runtime.connection() as conn:
        before = conn.execute("SELECT balance FROM workspaces WHERE id = %s", (ws,)).fetchone()["balance"]
    twin = Message._create(Message.Accepted, id=first.id, client_id=cl, workspace_id=ws, to=request.to, text="twin", message_type="otp",
                   segments=1, encoding="GSM-7", cost=999, idempotency_key=None, request_hash=None, at=0.0,
                   expires_at=None, send_at=None)
    with pytest.raises(IntegrityError):
        runtime.sandesh.log.save(twin)  # same id and version: the append fails after the inline debit ran
    with runtime.connection() as conn:
        assert conn.execute("SELECT balance FROM workspaces WHERE id = %s", (ws,)).fetchone()["balance"] == before
    assert runtime.sandesh.texts.open(runtime.sandesh.history.message(first.id).text) == "atomic"


def test_status_events_count_for_the_client_that_sent_the_message(runtime):
    """Status events do not name the client: the counters look it up (a read inside the
    follower's pipelined batch) and count delivered, undelivered and failed with refunds."""
    app = runtime.sandesh
    ws = funded_workspace(app, "Statuses", 10_000, "t")
    cl, _, _ = app.operators.create_client(ws, "Statuses", None, 1000, "t")
    request, _ = parse_send({"to": "9779812345678", "text": "status"})
    outcomes = []
    for report in (0, 0, 64):  # delivered, delivered, undelivered (TP-ST 64: permanent error)
        m = app.history.message(app.sending.send(cl.id, ws, request, 100).id)
        now = runtime.clock.now()
        m.submit("sim_t", at=now)
        m.part_accepted(1, 7, at=now)
        m.report(1, report, at=now)
        app.log.save(m)
        outcomes.append(m.status)
    failed = app.history.message(app.sending.send(cl.id, ws, request, 100).id)
    failed.fail("CMS 500", at=runtime.clock.now())
    app.log.save(failed)
    follower.catch_up(runtime)
    with runtime.connection() as conn:
        row = conn.execute("SELECT * FROM client_counters WHERE client_id = %s", (cl.id,)).fetchone()
    assert outcomes == ["delivered", "delivered", "undelivered"]
    assert (row["sent"], row["delivered"], row["undelivered"], row["failed"], row["spent"]) == (4, 2, 1, 1, 300)


def test_a_purge_forgets_feed_items_past_thirty_days_a_bounded_number_at_a_time(runtime, sandesh):
    """The feed keeps an item 30 days (`retained`): the projections worker's purge forgets older
    ones, at most `limit` rows of a table at once, saying when more are left; a replay, which
    cannot see the clock, makes them again."""
    app = runtime.sandesh
    ws = funded_workspace(app, "Purged", 10_000, "t")
    cl, _, _ = app.operators.create_client(ws, "Purged", None, 1000, "t")
    request, _ = parse_send({"to": "9779812345678", "text": "old news"})
    for _ in range(3):
        failed = app.history.message(app.sending.send(cl.id, ws, request, 100).id)
        failed.fail("CMS 500", at=runtime.clock.now())
        app.log.save(failed)
    follower.catch_up(runtime)
    with runtime.connection() as conn:
        kept = conn.execute("SELECT * FROM events_feed ORDER BY position").fetchall()
        assert [row["body"]["status"] for row in kept if row["client_id"] == cl.id] == ["failed"] * 3
        assert follower.purge(conn, runtime.clock.now()) is False  # nothing is 30 days old yet
        later = max(row["at"] for row in kept) + FEED_HISTORY + 1
        assert follower.purge(conn, later, limit=len(kept) - 1) is True
        assert follower.purge(conn, later, limit=len(kept) - 1) is False
        assert conn.execute("SELECT count(*) AS n FROM events_feed").fetchone()["n"] == 0
        assert conn.execute("SELECT count(*) AS n FROM feed_messages").fetchone()["n"] >= 3  # kept whole
    sandesh("replay", "feed")
    with runtime.connection() as conn:
        assert conn.execute("SELECT * FROM events_feed ORDER BY position").fetchall() == kept


def all_read_models(runtime):
    """Every read model's rows (but the columns a worker's lease writes), in a fixed order."""
    from sandesh.projections.engine import replay

    models = {}
    with runtime.connection() as conn:
        for name in replay.NAMES:
            view = replay.PROJECTIONS[name]
            working = view.working_columns
            for table in view.tables:
                rows = [{k: v for k, v in row.items() if k not in working.get(table, ())}
                        for row in conn.execute(f"SELECT * FROM {table}").fetchall()]
                models[table] = sorted(rows, key=lambda row: orjson.dumps(row, option=orjson.OPT_SORT_KEYS))
    return models


def test_replay_equals_live_after_a_mixed_workload(runtime, sandesh):
    """Sends of each type with keys, OTPs sent, mistyped and verified, a failover, status
    reports, failures with refunds, a rejection, an attributed and an unattributed reply,
    webhook deliveries and their attempts: one replay (the memory executor) makes every read
    model equal to what the live path (SQL) made, and --check agrees."""
    import re

    from sandesh.domain.webhook import STATUS, new_delivery
    from tests.integration.test_webhooks import lifecycle

    app = runtime.sandesh
    ws = funded_workspace(app, "Mixed", 10**7, "t", rates={"otp": 150})
    cl, _, _ = app.operators.create_client(ws, "Mixed", None, 1000, "t")
    caller = Caller(client_id=cl.id, workspace_id=ws, brand="Mixed", workspace_status="active",
                    rates={"transactional": 100, "otp": 150, "promotional": 40},
                    allowed_types=["transactional", "otp", "promotional"], sms_enabled=True, has_route=True,
                    promo_hours=None)  # quiet hours off: every promotion queued at once, at any hour
    sent = []
    for i, kind in enumerate(["transactional", "promotional", "otp"] * 4):
        request, _ = parse_send({"to": f"9779841{i:06d}", "text": f"mixed {i} " * (1 + i * 5), "messageType": kind})
        key = f"mixed-{i}" if i % 2 else None
        sent.append(app.sending.send(cl.id, ws, request, 100 * request.segments, key, "h" if key else None))

    now = runtime.clock.now()
    later = [app.sending.send(cl.id, ws, parse_send({"to": f"977984200000{i}", "text": f"later {i}", "sendAt": iso(now + 60)},
                                            now)[0], 100) for i in range(3)]
    app.sending.cancel_message(cl.id, later[0].id)                                              # canceled, refunded
    app.sending.release_scheduled([later[1].id])                                                # released early
    app.sending.send_batch(caller, [parse_send({"to": "9779842000100", "text": "batched"})[0], []],
                           "batch-1", "hb")                                             # a batch's key
    lifecycle(runtime, sent[0], ("submit",), ("accept",), ("report", 0))             # delivered
    lifecycle(runtime, sent[1], ("submit",), ("requeue", "CMS 38"), ("submit",),     # failover, then
              ("accept",), ("report", 0))                                             # delivered
    lifecycle(runtime, sent[2], ("submit",), ("accept",), ("report", 64))            # undelivered
    lifecycle(runtime, sent[3], ("fail", "CMS 500"))                                 # failed, refunded
    lifecycle(runtime, sent[4], ("reject", "CMS 21"))                                # rejected, refunded
    lifecycle(runtime, sent[5], ("submit",), ("requeue", "no prompt"))               # waiting again
    for i in range(3):  # codes: sent, a wrong try, then the right one
        to = f"9779852{i:06d}"
        issued = app.otp.send_otp(caller, OtpSendRequest(to, "login", "203.0.113.5"), "198.51.100.2")
        code = re.match(r"(\d{6}) ", app.texts.open(app.history.message(issued.message.id).text)).group(1)
        app.otp.verify_otp(caller, OtpVerifyRequest(to, "login", "000000" if code != "000000" else "111111"), "198.51.100.2")
        if i < 2:
            app.otp.verify_otp(caller, OtpVerifyRequest(to, "login", code), "198.51.100.2")
    reply = app.dispatch.store_reply_part(None, "sim_a", sent[0].to[3:], 9, 2, 2, " later")
    app.dispatch.store_reply_part(reply.id, "sim_a", sent[0].to[3:], 9, 2, 1, "Thanks,")
    app.dispatch.finish_reply(reply.id, app.history.message(sent[0].id))
    stray = app.dispatch.store_reply_part(None, "sim_b", "NTC", None, 1, 1, "Balance low")
    app.dispatch.finish_reply(stray.id, None)
    deliveries = [new_delivery(cl.id, STATUS, m.id, "delivered", {"id": m.id}, at=runtime.clock.now())
                  for m in sent[:2]]
    app.webhooks.add_deliveries(deliveries)
    app.webhooks.record_attempt(app.webhooks.delivery(deliveries[0].id), 200, None, 0.012)
    app.webhooks.record_attempt(app.webhooks.delivery(deliveries[1].id), 503, "HTTP 503", 0.02)
    follower.catch_up(runtime)
    live = all_read_models(runtime)
    # the workload reached what it was built to reach
    statuses = sorted(r["status"] for r in live["messages"] if r["client_id"] == cl.id)
    assert {"delivered", "undelivered", "failed", "rejected", "queued", "scheduled", "canceled"} <= set(statuses)
    assert [r["message_id"] for r in live["scheduled_sends"] if r["message_id"] in {m.id for m in later}] == [later[2].id]
    assert any(r["key"] == "batch-1" for r in live["idempotency_keys"])
    assert [r["state"] for r in live["otps"] if r["client_id"] == cl.id].count("used") == 2
    assert any(r["failed_sims"] == ["sim_test"] for r in live["dispatch_queue"])
    assert {r["in_reply_to"] for r in live["replies"]} >= {sent[0].id, None}
    assert sorted(r["attempts"] for r in live["webhook_deliveries"] if r["client_id"] == cl.id) == [1, 1]

    assert sandesh.run("replay").returncode == 0
    assert all_read_models(runtime) == live
    assert sandesh("replay", "--check")["ok"] is True


def test_a_follower_moves_past_the_events_it_does_not_follow(runtime):
    """A step reads up to the newest committed event; once `SKIP_FROM` events of other topics
    lie past a follower's position, it moves past them, so that its next step does not read
    them again (docs/design.md, "Followers skip what they do not follow")."""
    app, name, handled = runtime.sandesh, "test-skipper", []
    topics = topics_of([Message.Accepted])

    def step(limit=follower.BATCH):
        return follower.positioned_step(runtime, name, topics, lambda cur, batch: handled.extend(n.id for n in batch),
                                        limit)

    def position():
        with runtime.connection() as conn:
            return follower.read_position(conn, name)

    ws = funded_workspace(app, "Skipper", 1_000_000, "t")
    client = app.operators.create_client(ws, "Skipper", None, None, "t")[0].id
    request, _ = parse_send({"to": "9779811111111", "text": "skip"})

    def send():
        app.sending.send(client, ws, request, 100)
        return app.log.recorder.max_notification_id()

    last = send()
    while step():
        pass
    assert position() == last and handled[-1] == last

    def credits(count):
        for _ in range(count):
            app.operators.credit_workspace(ws, 1, None, "t")

    credits(follower.SKIP_FROM - 10)
    assert step() == 0 and position() == last, "a few events of other topics: the position is not written"
    credits(10)
    assert step() == 0 and position() == app.log.recorder.max_notification_id(), "moved past them"

    three = [send() for _ in range(3)]
    credits(5)
    assert step(limit=2) == 2 and position() == three[1], "a full batch: up to its last event"
    assert step(limit=2) == 1 and position() == app.log.recorder.max_notification_id(), "a short one: up to the newest"
    assert handled[-3:] == three


def test_a_rebuild_from_a_checkpoint_equals_a_rebuild_from_zero(runtime, clients, sandesh):
    """`sandesh checkpoint` folds the log into a checkpoint (then onward from it, kept once it
    equals a fresh fold); `replay --from-checkpoint` folds only what follows and makes every read
    model equal to a replay from zero; `replay --check --since-checkpoint` finds a checkpoint
    that does not match the log."""
    app = runtime.sandesh
    ws, cl = clients[0]

    def more(n: int, text: str) -> None:
        for i in range(n):
            request, _ = parse_send({"to": f"97798{i:08d}", "text": f"{text} {i}"})
            message = app.history.message(app.sending.send(cl, ws, request, 100).id)
            if i % 3 == 0:  # a lifecycle that updates rows a checkpoint holds
                message.submit("sim_t", at=runtime.clock.now())
                message.part_accepted(1, i, at=runtime.clock.now())
                app.log.save(message)

    refused = sandesh.run("replay", "--from-checkpoint")
    assert refused.returncode == 2 and "no checkpoint of" in refused.stderr
    first = sandesh("checkpoint")
    assert (first["ok"], first["from"], first["verified"]) == (True, "zero", "a fresh fold from zero")
    more(30, "after the first checkpoint")
    second = sandesh("checkpoint")
    assert (second["from"], second["verified"]) == ("the previous checkpoint", "equal to a fresh fold from zero")
    assert second["position"] > first["position"]
    more(30, "after the second")
    follower.catch_up(runtime)

    assert sandesh("replay", "--check", "--since-checkpoint")["ok"] is True
    from_zero = sandesh("replay")
    rebuilt_from_zero = all_read_models(runtime)
    from_checkpoint = sandesh("replay", "--from-checkpoint")
    assert all_read_models(runtime) == rebuilt_from_zero
    assert 0 < from_checkpoint["projections"]["messages"]["events"] < from_zero["projections"]["messages"]["events"]

    with runtime.connection() as conn:  # a checkpoint that no longer matches the log
        conn.execute("UPDATE checkpoint_messages.messages SET status = 'delivered'"
                     " WHERE id = (SELECT min(id) FROM checkpoint_messages.messages)")
    found = sandesh.run("replay", "--check", "--since-checkpoint", "messages")
    assert found.returncode == 1 and orjson.loads(found.stdout)["projections"]["messages"]["tables"]["messages"]["differ"]
    onward = sandesh.run("checkpoint")
    assert onward.returncode == 1 and set(orjson.loads(onward.stdout)["differ"]) == {"messages"}
    assert sandesh("checkpoint", "--from-zero")["verified"] == "a fresh fold from zero"
    assert sandesh("replay", "--check", "--since-checkpoint")["ok"] is True


def test_a_replay_within_a_small_memory_budget_lets_rows_go_and_takes_them_back_equal(runtime, clients, sandesh):
    """Past its budget a replay holds no more rows of the tables that grow with the log, the queue
    included: the rest wait in the tables being built, and come back when a later event changes
    them; the queue's turns, computed while most of the queue is spilled, are the live ones."""
    app = runtime.sandesh
    (ws, cl), (ws2, cl2) = clients[0], clients[1]
    accepted = []
    for i in range(1500):  # many rows, then a late change to the earliest of them
        request, _ = parse_send({"to": f"97798{i:08d}", "text": f"budget {i}"})
        accepted.append(app.sending.send(cl, ws, request, 100).id)
    for message_id in accepted[:40]:
        message = app.history.message(message_id)
        message.submit("sim_t", at=runtime.clock.now())
        message.part_accepted(1, 1, at=runtime.clock.now())
        app.log.save(message)
    for message_id in accepted[:30]:  # the head of the queue leaves: the turn being served moves on
        message = app.history.message(message_id)
        message.report(1, 0, at=runtime.clock.now())
        app.log.save(message)
    late = set()
    for i in range(20):  # turns of both clients, taken while the rows they depend on are spilled
        request, _ = parse_send({"to": f"97798{i:08d}", "text": f"late {i}"})
        late.add(app.sending.send(cl2 if i % 2 else cl, ws2 if i % 2 else ws, request, 100).id)
    follower.catch_up(runtime)
    live = all_read_models(runtime)
    late_turns = [row["turn"] for row in live["dispatch_queue"] if row["message_id"] in late]
    assert len(late_turns) == 20 and min(late_turns) >= 30  # each one after the turns already waiting
    small = sandesh("replay", "--memory-mb", "64")
    assert small["memory"]["rowsSpilled"] > 1000 and small["memory"]["rowsTakenBack"] >= 40, small["memory"]
    assert small["memory"]["spilledByTable"]["dispatch_queue"] > 500, small["memory"]
    assert all_read_models(runtime) == live
    checked = sandesh("replay", "--check", "--memory-mb", "64")
    assert checked["ok"] is True and checked["memory"]["rowsSpilled"] > 1000
    assert sandesh("replay")["memory"]["rowsSpilled"] == 0  # within the default budget, nothing waits
