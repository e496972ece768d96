"""Webhooks (docs/api.md, "Webhooks"; docs/design.md, "Decisions: webhooks"), delivered over real
HTTPS to a local receiver with a trustme certificate, from real PostgreSQL, on the test clock."""
import collections
import itertools
import queue
import select
import signal
import subprocess
import sys
import threading
import time

import orjson
import pytest
import stripe

from sandesh.domain.clock import iso, parse_iso
from sandesh.domain.sending import parse_send
from sandesh.domain.signature import SignatureError, verify_signature
from sandesh.domain.webhook import DELAYS, delivery_id
from eventsourcing.persistence import IntegrityError

from sandesh.projections import follower
from sandesh.projections.storage.db import advance_clock
from sandesh.projections.storage.group_commit import GroupCommit
from tests.helpers import funded_workspace
from tests.conftest import ROOT
from tests.receiver import Receiver
from sandesh.workers import webhook_guard
from sandesh.workers.webhook_schedule import LEASE, SLOW, SLOW_THREADS
from sandesh.workers.webhooks import WebhookSender

HEADERS = {"x-service-signature", "x-service-event", "x-service-delivery", "user-agent", "content-type"}
_paths = itertools.count(1)
_numbers = itertools.count(10_000_000)


@pytest.fixture(scope="module")
def workspace(runtime):
    return funded_workspace(runtime.sandesh, "Hooks", 10**7, "t")


class Hooked:
    """A client whose webhook URL is a path of its own on the receiver."""

    def __init__(self, runtime, workspace, receiver):
        self.runtime, self.workspace, self.receiver = runtime, workspace, receiver
        self.path = f"/hooks/{next(_paths)}"
        client, _, self.secret = runtime.sandesh.operators.create_client(workspace, "Hooked", receiver.url(self.path), 1000, "t")
        self.id = client.id

    def send(self, text="Your order shipped", message_type="transactional"):
        request, problems = parse_send({"to": f"97798{next(_numbers):08d}", "text": text, "messageType": message_type})
        assert not problems
        return self.runtime.sandesh.sending.send(self.id, self.workspace, request, 100 * request.segments)

    def received(self, count, timeout=20.0):
        return self.receiver.wait(self.path, count, timeout)


@pytest.fixture
def hooked(runtime, workspace, receiver):
    return Hooked(runtime, workspace, receiver)


@pytest.fixture
def sender(runtime, receiver):
    running = WebhookSender(runtime, http=webhook_guard.session(True, str(receiver.ca_file)))
    yield running
    running.close()


def deliver(sender, timeout=20.0):
    """Follow the log and make every attempt due now, until nothing is due or running."""
    deadline = time.monotonic() + timeout
    while True:
        sender.step()
        with sender.lock:
            running = bool(sender.in_flight)
        with sender.runtime.connection() as conn:
            due = conn.execute("SELECT count(*) AS n FROM webhook_deliveries WHERE next_at <= %s",
                               (sender.clock.now(),)).fetchone()["n"]
        if not running and not due:
            return
        assert time.monotonic() < deadline, "deliveries did not settle"
        time.sleep(0.02)


def lifecycle(runtime, message, *steps):
    """Move a message as the dispatcher does: ("submit",), ("accept",), ("report", TP-ST),
    ("requeue", reason), ("fail", error), ("reject", error)."""
    app = runtime.sandesh
    m = app.history.message(message.id)
    for step, *arg in steps:
        now = runtime.clock.now()
        if step == "submit":
            m.submit("sim_test", at=now)
        elif step == "accept":
            for part in range(1, m.parts + 1):
                m.part_accepted(part, 17 + part, at=now)
        elif step == "report":
            for part in range(1, m.parts + 1):
                m.report(part, arg[0], at=now)
        elif step == "requeue":
            m.requeue(arg[0], not_before=now, at=now)
        else:
            getattr(m, step)(arg[0], at=now)
        app.log.save(m)
    return m


def body(request):
    return orjson.loads(request.body)


def advance(runtime, seconds):
    with runtime.connection() as conn:
        advance_clock(conn, seconds)


def delivery_row(runtime, delivery_id):
    with runtime.connection() as conn:
        return conn.execute("SELECT * FROM webhook_deliveries WHERE id = %s", (delivery_id,)).fetchone()


# Events and their fields

def test_sent_then_delivered_carry_every_field_and_exactly_the_headers(runtime, hooked, sender):
    message = hooked.send()
    m = lifecycle(runtime, message, ("submit",), ("accept",))
    deliver(sender)
    [sent] = hooked.received(1)
    assert set(sent.headers) - {"host", "content-length", "accept-encoding", "connection", "accept"} == HEADERS
    assert sent.headers["user-agent"] == "service-sms-webhooks/1"
    assert sent.headers["content-type"] == "application/json"
    assert sent.headers["x-service-event"] == "message.status"
    assert body(sent) == {"type": "message.status", "id": message.id, "status": "sent", "to": message.to,
                          "at": iso(m.updated_at), "route": "device", "messageType": "transactional",
                          "segments": 1}
    lifecycle(runtime, message, ("report", 0))
    deliver(sender)
    delivered = hooked.received(2)[1]
    assert body(delivered)["status"] == "delivered" and "error" not in body(delivered)
    assert delivered.headers["x-service-delivery"] != sent.headers["x-service-delivery"]


def test_no_event_on_acceptance_or_submission(runtime, hooked, sender):
    """No event on acceptance (docs/api.md, "Events"); `submitted` alone fires nothing (docs/design.md,
    "Decisions: webhooks")."""
    message = hooked.send()
    lifecycle(runtime, message, ("submit",))
    deliver(sender)
    time.sleep(0.2)
    assert hooked.receiver.at(hooked.path) == []


def test_a_failover_sends_queued_with_the_reason_then_sent_and_queued_only_once(runtime, hooked, sender):
    message = hooked.send(message_type="otp")
    lifecycle(runtime, message, ("submit",), ("requeue", "CMS ERROR 38: network out of order"), ("submit",),
              ("requeue", "CMS ERROR 38: again"), ("submit",), ("accept",))
    deliver(sender)
    queued, sent = sorted(hooked.received(2), key=lambda r: body(r)["status"] != "queued")
    assert body(queued)["status"] == "queued" and body(queued)["error"] == "CMS ERROR 38: network out of order"
    assert body(sent)["status"] == "sent" and body(sent)["messageType"] == "otp"
    time.sleep(0.2)
    assert len(hooked.receiver.at(hooked.path)) == 2, "an event is never sent twice for one message and status"


@pytest.mark.parametrize("steps, status, error", [
    ((("submit",), ("accept",), ("report", 0x45)), "undelivered", "status report TP-ST 0x45 for part 1"),
    ((("fail", "no SIM could send it"),), "failed", "no SIM could send it"),
    ((("submit",), ("reject", "CMS ERROR 21: refused")), "failed", "CMS ERROR 21: refused"),
])
def test_undelivered_failed_and_rejected_carry_their_error(runtime, hooked, sender, steps, status, error):
    lifecycle(runtime, hooked.send(), *steps)
    deliver(sender)
    events = [body(r) for r in hooked.received(len(steps) > 2 and 2 or 1)]
    [last] = [e for e in events if e["status"] == status]  # concurrent deliveries may arrive in any order
    assert last["error"] == error


def test_an_attributed_reply_is_a_message_inbound_event(runtime, hooked, sender):
    app = runtime.sandesh
    message = hooked.send()
    part = app.dispatch.store_reply_part(None, "sim_test", message.to[3:], 7, 2, 2, " thanks!")
    app.dispatch.store_reply_part(part.id, "sim_test", message.to[3:], 7, 2, 1, "Got it,")
    finished_from = runtime.clock.now()
    reply = app.dispatch.finish_reply(part.id, app.history.message(message.id))
    finished_by = runtime.clock.now()
    unattributed = app.dispatch.store_reply_part(None, "sim_test", "NTC", None, 1, 1, "Balance low")
    app.dispatch.finish_reply(unattributed.id, None)
    deliver(sender)
    [inbound] = hooked.received(1)
    assert inbound.headers["x-service-event"] == "message.inbound"
    got = body(inbound)
    assert got == {"type": "message.inbound", "id": reply.id, "from": "+" + message.to,
                   "text": "Got it, thanks!", "at": got["at"], "inReplyTo": message.id}
    # "at" is when the reply was complete, to the millisecond (ISO 8601 UTC)
    assert got["at"].endswith("Z") and finished_from - 0.001 <= parse_iso(got["at"]) <= finished_by + 0.001, (
        got["at"], finished_from, finished_by)


def test_webhooks_show_opens_a_reply_delivery_whose_body_is_sealed(runtime, hooked, sender, sandesh):
    """A message.inbound body holds the reply's text, so it is kept sealed under the workspace's
    key: `webhooks show` shows it opened, and without it once the texts are shredded."""
    app = runtime.sandesh
    message = hooked.send()
    reply = app.dispatch.finish_reply(app.dispatch.store_reply_part(None, "sim_test", message.to[3:], None, 1, 1, "Show me").id,
                             app.history.message(message.id))
    deliver(sender)
    [row] = [d for d in sandesh("webhooks", "list", "--client", hooked.id)["deliveries"]
             if d["event"] == "message.inbound"]
    shown = sandesh("webhooks", "show", row["id"])
    assert (shown["body"]["type"], shown["body"]["id"], shown["body"]["text"]) == ("message.inbound", reply.id,
                                                                                   "Show me")
    sandesh("workspace", "shred-texts", hooked.workspace)
    assert sandesh("webhooks", "show", row["id"])["body"] is None


def test_a_client_without_a_webhook_url_gets_no_deliveries(runtime, workspace, receiver, sender):
    client, _, _ = runtime.sandesh.operators.create_client(workspace, "Silent", None, 100, "t")
    request, _ = parse_send({"to": "9779812000001", "text": "hi"})
    message = runtime.sandesh.sending.send(client.id, workspace, request, 100)
    lifecycle(runtime, message, ("fail", "x"))
    deliver(sender)
    with runtime.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM webhook_deliveries WHERE client_id = %s",
                            (client.id,)).fetchone()["n"] == 0
    assert runtime.sandesh.history.message(message.id).status == "failed", "its events are still recorded"


def test_the_sender_leaves_the_feed_to_its_read_model_which_carries_the_deliveries_ids_and_bodies(
        runtime, receiver, sender):
    """The sender makes deliveries and writes no feed item.  The feed (projections/feed.py), written
    by the projections' step, has an item for each delivery: `evt_X` for `whd_X`, its body the
    delivery's (a reply's text left to the log), in the log's order (docs/api.md, "GET /v1/events")."""
    app = runtime.sandesh
    hooked = Hooked(runtime, funded_workspace(app, "Fed", 10**6, "t"), receiver)
    message = hooked.send()
    lifecycle(runtime, message, ("submit",), ("requeue", "CMS ERROR 38: again"), ("submit",), ("accept",),
              ("report", 0x45))
    app.dispatch.finish_reply(app.dispatch.store_reply_part(None, "sim_test", message.to[3:], None, 1, 1, "Fed up").id,
                              app.history.message(message.id))
    deliver(sender)
    made = {row["id"] for row in rows_of(runtime, hooked)}
    with runtime.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM events_feed WHERE client_id = %s", (hooked.id,)
                            ).fetchone()["n"] == 0
    follower.catch_up(runtime)
    with runtime.connection() as conn:
        items = conn.execute("SELECT * FROM events_feed WHERE client_id = %s ORDER BY position",
                             (hooked.id,)).fetchall()
    assert [(item["subject"], item["body"].get("status")) for item in items] == [
        (message.id, "queued"), (message.id, "sent"), (message.id, "undelivered"), (items[-1]["subject"], None)]
    assert {"whd_" + item["id"][len("evt_"):] for item in items} == made
    for item in items:
        carried = orjson.loads(app.texts.open(app.webhooks.delivery("whd_" + item["id"][len("evt_"):]).body))
        if item["event_type"] == "message.inbound":
            assert carried["text"] == "Fed up"
            carried["text"] = None  # read from the log when the item is served
        assert item["body"] == carried


def test_following_the_log_again_creates_no_second_delivery(runtime, hooked, sender):
    """A crash between creating deliveries and moving the follower's position replays a batch."""
    lifecycle(runtime, hooked.send(), ("fail", "x"))
    deliver(sender)
    with runtime.connection() as conn:
        before = conn.execute("SELECT count(*) AS n FROM webhook_deliveries").fetchone()["n"]
        conn.execute("UPDATE projection_positions SET position = 0 WHERE name = 'webhooks'")
    deliver(sender)
    with runtime.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM webhook_deliveries").fetchone()["n"] == before
    assert len(hooked.receiver.at(hooked.path)) == 1


def test_two_senders_at_once_attempt_each_delivery_once(runtime, hooked, receiver):
    messages = [hooked.send() for _ in range(30)]
    for message in messages:
        lifecycle(runtime, message, ("fail", "x"))
    senders = [WebhookSender(runtime, concurrency=4, http=webhook_guard.session(True, str(receiver.ca_file)))
               for _ in range(2)]
    threads = [threading.Thread(target=deliver, args=(s,)) for s in senders]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for s in senders:
        s.close()
    got = hooked.received(30)
    time.sleep(0.3)
    assert len(hooked.receiver.at(hooked.path)) == 30
    assert {body(r)["id"] for r in got} == {m.id for m in messages}


# Signatures

def test_the_signature_verifies_with_ours_and_with_stripes_verifier(runtime, hooked, sender):
    lifecycle(runtime, hooked.send(), ("fail", "x"))
    deliver(sender)
    [request] = hooked.received(1)
    header = request.headers["x-service-signature"]
    now = runtime.clock.now()
    assert verify_signature(hooked.secret, header, request.body, now=now) == int(header.split(",")[0][2:])
    assert abs(now - time.time()) < 60, "this test runs before the clock is moved"
    assert stripe.WebhookSignature.verify_header(request.body.decode(), header, hooked.secret, tolerance=300)
    with pytest.raises(SignatureError):
        verify_signature(hooked.secret, header, request.body + b" ", now=now)
    with pytest.raises(SignatureError):
        verify_signature("whsec_other", header, request.body, now=now)
    with pytest.raises(stripe.SignatureVerificationError):
        stripe.WebhookSignature.verify_header(request.body.decode(), header, "whsec_other", tolerance=300)


def test_rotation_with_grace_signs_new_first_then_old_until_the_grace_ends(runtime, hooked, sender):
    old = hooked.secret
    _, new = runtime.sandesh.operators.rotate_secret(hooked.id, 1, "t")
    lifecycle(runtime, hooked.send(), ("fail", "x"))
    deliver(sender)
    [during] = hooked.received(1)
    header = during.headers["x-service-signature"]
    t, first, second = header.split(",")
    assert first.startswith("v1=") and second.startswith("v1=")
    now = runtime.clock.now()
    stamp = int(t.removeprefix("t="))
    assert verify_signature(new, f"{t},{first}", during.body, now=now) == stamp
    assert verify_signature(old, f"{t},{second}", during.body, now=now) == stamp
    with pytest.raises(SignatureError):  # new first, then old: not the other way round
        verify_signature(old, f"{t},{first}", during.body, now=now)
    assert stripe.WebhookSignature.verify_header(during.body.decode(), header, old, tolerance=None)
    advance(runtime, 3601)
    lifecycle(runtime, hooked.send(), ("fail", "x"))
    deliver(sender)
    after = hooked.received(2)[1].headers["x-service-signature"]
    assert after.count("v1=") == 1
    assert verify_signature(new, after, hooked.received(2)[1].body, now=runtime.clock.now()) == int(after[2:].split(",")[0])
    with pytest.raises(SignatureError):
        verify_signature(old, after, hooked.received(2)[1].body, now=runtime.clock.now())


def test_rotation_with_grace_0_stops_the_old_secret_at_once(runtime, hooked, sender):
    _, new = runtime.sandesh.operators.rotate_secret(hooked.id, 0, "t")
    lifecycle(runtime, hooked.send(), ("fail", "x"))
    deliver(sender)
    [request] = hooked.received(1)
    header = request.headers["x-service-signature"]
    assert header.count("v1=") == 1
    assert verify_signature(new, header, request.body, now=runtime.clock.now()) == int(header[2:].split(",")[0])
    with pytest.raises(SignatureError):
        verify_signature(hooked.secret, header, request.body, now=runtime.clock.now())


def test_a_secret_rotated_or_a_url_changed_while_the_sender_runs_acts_on_the_next_attempt(runtime, hooked, sender,
                                                                                           receiver):
    """The sender keeps each client's URL and secrets between attempts; a change of the client
    empties what it kept (docs/design.md, "The caller cache")."""
    lifecycle(runtime, hooked.send(), ("fail", "x"))
    deliver(sender)
    hooked.received(1)
    _, new = runtime.sandesh.operators.rotate_secret(hooked.id, 0, "t")
    lifecycle(runtime, hooked.send(), ("fail", "x"))
    deliver(sender)
    header = hooked.received(2)[-1].headers["x-service-signature"]
    assert header.count("v1=") == 1
    verify_signature(new, header, hooked.received(2)[-1].body, now=runtime.clock.now())
    moved = f"{hooked.path}/moved"
    runtime.sandesh.operators.update_client(hooked.id, None, receiver.url(moved), None, "t")
    lifecycle(runtime, hooked.send(), ("fail", "x"))
    deliver(sender)
    assert len(receiver.wait(moved, 1, 20.0)) == 1
    assert len(hooked.received(2)) == 2


# Retries

def attempts_until(runtime, sender, hooked, count):
    """Attempt, then move the test clock to the next attempt's time, `count` times over."""
    deliver(sender)
    [row] = rows_of(runtime, hooked)
    for _ in range(count - 1):
        if row["next_at"] is None:
            break
        advance(runtime, row["next_at"] - runtime.clock.now() + 0.5)
        deliver(sender)
        [row] = rows_of(runtime, hooked)
    return row


def rows_of(runtime, hooked):
    with runtime.connection() as conn:
        return conn.execute("SELECT * FROM webhook_deliveries WHERE client_id = %s", (hooked.id,)).fetchall()


def test_failures_retry_on_schedule_re_signed_with_the_same_body_then_dead_after_8(runtime, hooked, sender):
    hooked.receiver.answer(hooked.path, 503)
    lifecycle(runtime, hooked.send(), ("fail", "x"))
    row = attempts_until(runtime, sender, hooked, 8)
    requests_ = hooked.received(8)
    assert row["state"] == "dead" and row["attempts"] == 8 and row["next_at"] is None
    stamps = [int(r.headers["x-service-signature"].split(",")[0][2:]) for r in requests_]
    gaps = [b - a for a, b in zip(stamps, stamps[1:])]
    assert all(d <= gap <= d + 3 for gap, d in zip(gaps, DELAYS)), (gaps, DELAYS)
    assert len({r.body for r in requests_}) == 1, "the body never changes"
    assert len({r.headers["x-service-signature"] for r in requests_}) == 8, "each retry is signed again"
    assert len({r.headers["x-service-delivery"] for r in requests_}) == 1, "retries reuse the delivery id"
    assert [a["statusCode"] for a in row["history"]] == [503] * 8
    advance(runtime, 6 * 3600)
    deliver(sender)
    assert len(hooked.receiver.at(hooked.path)) == 8


def test_a_receiver_down_for_10_minutes_gets_the_delivery_on_the_next_retry_after_it_returns(
        runtime, workspace, receiver, sender, tmp_path):
    """Its port really closed for 10 minutes of the service clock: the attempts fail on the
    schedule, the delivery stays waiting (never dead early), and the first retry after the
    receiver returns delivers it, once."""
    down = Receiver(tmp_path, ca=receiver.ca)
    port = down.port
    hooked = Hooked(runtime, workspace, down)
    down.close()
    lifecycle(runtime, hooked.send(), ("fail", "x"))
    started = runtime.clock.now()
    row = attempts_until(runtime, sender, hooked, 5)  # at 0 s, 10 s, 40 s, 2 min 40 s, 12 min 40 s
    assert (row["state"], row["attempts"]) == ("waiting", 5)
    assert runtime.clock.now() - started >= 600, "down for 10 minutes"
    assert [(a["attempt"], a["statusCode"]) for a in row["history"]] == [(n, None) for n in range(1, 6)]
    assert [("Connection refused" in a["error"]) for a in row["history"]] == [True] * 5, row["history"]
    back = Receiver(tmp_path, port=port, ca=receiver.ca)
    try:
        row = attempts_until(runtime, sender, hooked, 2)  # the next one, on schedule (30 min later)
        assert (row["state"], row["attempts"]) == ("delivered", 6)
        assert len(back.wait(hooked.path, 1)) == 1
        advance(runtime, 6 * 3600)
        deliver(sender)
        assert len(back.at(hooked.path)) == 1, "delivered once"
    finally:
        back.close()


def test_a_permanent_4xx_ends_after_3_attempts_but_408_and_429_keep_trying(runtime, workspace, receiver, sender):
    permanent, busy = Hooked(runtime, workspace, receiver), Hooked(runtime, workspace, receiver)
    receiver.answer(permanent.path, 500, 404)
    receiver.answer(busy.path, 429, 408)
    lifecycle(runtime, permanent.send(), ("fail", "x"))
    row = attempts_until(runtime, sender, permanent, 3)
    assert (row["state"], row["attempts"]) == ("dead", 3)
    assert [a["statusCode"] for a in row["history"]] == [500, 404, 404]
    lifecycle(runtime, busy.send(), ("fail", "x"))
    row = attempts_until(runtime, sender, busy, 4)
    assert (row["state"], row["attempts"]) == ("waiting", 4)


def test_a_redirect_is_not_followed_and_counts_as_a_failure(runtime, hooked, sender):
    hooked.receiver.answer(hooked.path, 302)
    lifecycle(runtime, hooked.send(), ("fail", "x"))
    deliver(sender)
    [row] = rows_of(runtime, hooked)
    assert (row["state"], row["history"][0]["statusCode"]) == ("waiting", 302)
    assert hooked.receiver.at("/elsewhere") == []


def test_a_receiver_hanging_11_s_fails_after_10_s_without_holding_up_others(runtime, workspace, receiver, sender):
    slow, quick = Hooked(runtime, workspace, receiver), Hooked(runtime, workspace, receiver)
    receiver.answer(slow.path, ("hang", 11, 200), 200)
    lifecycle(runtime, slow.send(), ("fail", "x"))
    deliver_started = time.monotonic()
    sender.step()
    slow.received(1)
    lifecycle(runtime, quick.send(), ("fail", "x"))
    sender.step()
    quick.received(1, timeout=3)
    assert time.monotonic() - deliver_started < 5, "the quick receiver did not wait for the slow one"
    deliver(sender, timeout=30)
    [row] = rows_of(runtime, slow)
    attempt = row["history"][0]
    assert row["state"] == "waiting" and attempt["statusCode"] is None
    assert attempt["error"] == "no answer within 10 s" and 10_000 <= attempt["durationMs"] < 11_000


@pytest.mark.parametrize("hanging_count", [1, 2])
def test_receivers_that_hang_hold_their_share_of_threads_and_hold_up_no_one(runtime, workspace, receiver,
                                                                           hanging_count):
    """Receivers that take 6 s each, 6 deliveries to each, then three to a quick one, with 4
    places and at most 2 attempts for one client.  One hanging receiver holds 2 places; two take
    all 4 at first, and give them up after SLOW seconds, keeping their threads.  Either way the
    quick ones go within seconds, not after the hanging ones."""
    http = webhook_guard.session(True, str(receiver.ca_file))
    sender = WebhookSender(runtime, concurrency=4, per_client=2, http=http)
    hanging = [Hooked(runtime, workspace, receiver) for _ in range(hanging_count)]
    try:
        quick = Hooked(runtime, workspace, receiver)
        for hooked in hanging:
            receiver.answer(hooked.path, ("hang", 6, 200))
            for _ in range(6):
                lifecycle(runtime, hooked.send(), ("fail", "x"))
        sender.step()
        for hooked in hanging:
            hooked.received(2, timeout=5)
        with sender.lock:
            assert sorted(collections.Counter(sender.in_flight.values()).values()) == [2] * hanging_count
        started = time.monotonic()
        for _ in range(3):
            lifecycle(runtime, quick.send(), ("fail", "x"))
        while len(receiver.at(quick.path)) < 3:
            sender.step()
            assert time.monotonic() - started < 3, "the quick receiver waited for the hanging ones"
            time.sleep(0.05)
        with sender.lock:
            held = collections.Counter(sender.in_flight.values())
            assert all(held[hooked.id] <= 2 for hooked in hanging)  # still their share of threads, no more
    finally:
        for hooked in hanging:
            receiver.answer(hooked.path, 200)
        sender.close()  # the attempts still hanging end within 6 s


def test_deliveries_waiting_behind_hanging_attempts_start_when_those_turn_slow_without_the_loop(runtime, workspace,
                                                                                                receiver):
    """Two places, both taken by a receiver that hangs 4 s; two deliveries to a quick one leased
    behind them.  Nothing leases or steps after that: they start once the hanging attempts have
    run SLOW seconds, not when those end."""
    http = webhook_guard.session(True, str(receiver.ca_file))
    sender = WebhookSender(runtime, concurrency=2, per_client=2, http=http)
    hanging, quick = Hooked(runtime, workspace, receiver), Hooked(runtime, workspace, receiver)
    try:
        deliver(sender)  # what earlier tests left due
        receiver.answer(hanging.path, ("hang", 4, 200))
        deliveries_due(runtime, sender, hanging, 2)
        assert sender.dispatch() == 2
        hanging.received(2, timeout=3)
        deliveries_due(runtime, sender, quick, 2)
        leased = time.monotonic()
        assert sender.dispatch() == 2
        with sender.lock:
            assert len(sender.ready) == 2, "both places are taken: the quick ones wait"
        quick.received(2, timeout=3)
        assert time.monotonic() - leased < SLOW + 1.5, "they waited for the hanging attempts to end"
    finally:
        receiver.answer(hanging.path, 200)
        sender.close()


def deliveries_due(runtime, sender, hooked, count):
    """`count` messages that failed, and their deliveries made by the sender's follower (none leased)."""
    for _ in range(count):
        lifecycle(runtime, hooked.send(), ("fail", "x"))
    while sender.follow():
        pass


def test_a_thread_that_ends_an_attempt_leases_the_next_at_once(runtime, hooked, receiver):
    """One thread, three deliveries due, one lease by the loop (one to attempt, one leased ahead
    to wait behind it): the sender goes on to the other two by itself, without the loop leasing again."""
    sender = WebhookSender(runtime, concurrency=1, http=webhook_guard.session(True, str(receiver.ca_file)))
    try:
        deliveries_due(runtime, sender, hooked, 3)
        assert sender.dispatch() == 2
        hooked.received(3, timeout=5)
    finally:
        sender.close()


def one_slow_attempt_and_one_waiting(runtime, hooked, sender):
    """Two deliveries due to a sender of one thread: the first attempted (its receiver takes
    2 s and has it now), the second leased ahead behind it; returns the second's id."""
    hooked.receiver.answer(hooked.path, ("hang", 2, 200), 200)
    deliveries_due(runtime, sender, hooked, 2)
    assert sender.dispatch() == 2
    [waiting] = [leased.delivery_id for leased in sender.ready]
    hooked.received(1, timeout=5)
    return waiting


def test_a_delivery_leased_ahead_past_its_lease_is_left_to_whoever_leased_it_since(runtime, hooked, receiver):
    """A delivery that waited behind a slow attempt until its lease ran out may be another
    sender's by then: the first sender does not attempt it as well."""
    first = WebhookSender(runtime, concurrency=1, http=webhook_guard.session(True, str(receiver.ca_file)))
    second = WebhookSender(runtime, concurrency=1, http=webhook_guard.session(True, str(receiver.ca_file)))
    try:
        waiting = one_slow_attempt_and_one_waiting(runtime, hooked, first)
        with runtime.connection() as conn:
            advance_clock(conn, LEASE + 1)  # every lease of the first sender has run out
        deliver(second, timeout=5)  # the second sender leases both and delivers them
        deadline = time.monotonic() + 5
        while first.in_flight or first.ready:  # the slow attempt ends; the waiting one is dropped
            assert time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(0.5)
        attempts = collections.Counter(r.headers["x-service-delivery"] for r in receiver.at(hooked.path))
        assert attempts[waiting] == 1, "attempted by the second sender only"
    finally:
        first.close()
        second.close()


def test_a_delivery_leased_ahead_too_long_ago_is_handed_back_and_attempted_at_once(runtime, hooked, receiver):
    """One that waited so long that its attempt might outlive its lease, while the lease is
    still the sender's, is handed back and leased again at once, not left to wait the lease out."""
    from sandesh.domain.webhook import TIMEOUT
    sender = WebhookSender(runtime, concurrency=1, http=webhook_guard.session(True, str(receiver.ca_file)))
    try:
        waiting = one_slow_attempt_and_one_waiting(runtime, hooked, sender)
        with runtime.connection() as conn:
            advance_clock(conn, LEASE - 1.5 * TIMEOUT)  # 45 s: past the time to start it, inside its lease
        hooked.received(2, timeout=5)  # within 5 s, not after the 15 s left of its lease
        assert [r.headers["x-service-delivery"] for r in receiver.at(hooked.path)].count(waiting) == 1
    finally:
        sender.close()


def test_the_deliveries_of_a_lease_are_read_in_one_go_as_they_are_now(runtime, hooked, sender):
    hooked.receiver.answer(hooked.path, 503, 200)
    for _ in range(2):
        lifecycle(runtime, hooked.send(), ("fail", "x"))
    deliver(sender)
    first, second = sorted(rows_of(runtime, hooked), key=lambda row: row["created_at"])[-2:]
    read = runtime.sandesh.webhooks.deliveries([first["id"], second["id"], "whd_none"])
    assert set(read) == {first["id"], second["id"]}
    for row in (first, second):
        one = runtime.sandesh.webhooks.delivery(row["id"])
        assert (read[row["id"]].version, read[row["id"]].state, read[row["id"]].attempts) == \
            (one.version, one.state, one.attempts) == (one.version, row["state"], row["attempts"])


def test_the_follower_reads_the_messages_of_a_batch_in_one_go(runtime, hooked, sender, monkeypatch):
    """Each status event's delivery needs its message's fixed fields: a batch of events reads its
    messages together, not one round trip per event."""
    while sender.follow():
        pass
    messages = [hooked.send() for _ in range(5)]
    for message in messages:
        lifecycle(runtime, message, ("fail", "x"))
    one_by_one = []
    monkeypatch.setattr(runtime.sandesh.log.repository, "get", lambda *a, **k: one_by_one.append(a) or pytest.fail("read alone"))
    while sender.follow():
        pass
    made = {(row["subject"], row["status"]) for row in rows_of(runtime, hooked)}
    assert made == {(m.id, "failed") for m in messages} and one_by_one == []
    monkeypatch.undo()
    deliver(sender)  # none left due for the tests after this one


def test_an_append_submitted_without_waiting_reports_its_outcome(runtime, workspace):
    """The sender's threads go on while their attempts commit (GroupCommit.submit): each append
    reports once, after its commit, or with the error that refused it; a refused one does not
    hold back the others."""
    commits = GroupCommit(runtime.sandesh.log.append_events)
    client, _, _ = runtime.sandesh.operators.create_client(workspace, "No hook", None, 1000, "t")  # no deliveries left behind
    request, _ = parse_send({"to": f"97798{next(_numbers):08d}", "text": "Your order shipped"})
    try:
        message = runtime.sandesh.sending.send(client.id, workspace, request, 100)
        first, rival = runtime.sandesh.history.message(message.id), runtime.sandesh.history.message(message.id)
        first.fail("first", at=runtime.clock.now())
        rival.fail("rival", at=runtime.clock.now())  # the same version again: refused
        other = runtime.sandesh.sending.send(client.id, workspace, request, 100)
        later = runtime.sandesh.history.message(other.id)
        later.fail("later", at=runtime.clock.now())
        outcomes = queue.Queue()
        for name, aggregate in (("first", first), ("rival", rival), ("later", later)):
            commits.submit(aggregate, then=lambda failure, name=name: outcomes.put((name, failure)))
        reported = dict(outcomes.get(timeout=5) for _ in range(3))
        assert reported["first"] is None and reported["later"] is None
        assert isinstance(reported["rival"], IntegrityError)
        assert (runtime.sandesh.history.message(message.id).error, runtime.sandesh.history.message(other.id).error) == ("first", "later")
        assert outcomes.empty()
    finally:
        commits.close(wait=True)


def test_an_attempt_recorded_first_by_another_sender_is_logged_not_counted(runtime, hooked, sender, caplog):
    """Without waiting for its commit (the pool's way), an attempt another sender recorded first
    is refused on the committer thread: a warning names the delivery, and the first record stands."""
    lifecycle(runtime, hooked.send(), ("fail", "x"))
    while sender.follow():
        pass
    (row,) = [row for row in rows_of(runtime, hooked) if row["state"] == "attempting"]
    stale = runtime.sandesh.webhooks.delivery(row["id"])
    runtime.sandesh.webhooks.record_attempt(runtime.sandesh.webhooks.delivery(row["id"]), 200, None, 0.01)  # the other sender
    sender.attempt(row["id"], stale, wait=False)
    hooked.received(1)
    deadline = time.monotonic() + 5
    while "not recorded" not in caplog.text:
        assert time.monotonic() < deadline, "no word of the refused record"
        time.sleep(0.02)
    assert f"{row['id']} attempt 1 (200) not recorded: another sender attempted it at the same time" in caplog.text
    after = delivery_row(runtime, row["id"])
    assert (after["state"], after["attempts"]) == ("delivered", 1)
    deliver(sender)  # none left due for the tests after this one


def test_closing_hands_back_the_leases_of_attempts_that_never_started(runtime, hooked, receiver):
    """Leased deliveries still waiting for a thread when the sender closes, those given to the
    pool and those leased ahead, are free at once for the next sender, not after their 60 s lease."""
    http = webhook_guard.session(True, str(receiver.ca_file))
    sender = WebhookSender(runtime, concurrency=2, http=http)
    release = threading.Event()
    for _ in range(2 + SLOW_THREADS + 1):  # every thread busy (two places, those for slow attempts, the spare):
        sender.pool.submit(release.wait)    # the attempts leased next wait
    try:
        deliveries_due(runtime, sender, hooked, 4)
        assert sender.dispatch() == 4
        leased = [row for row in rows_of(runtime, hooked) if row["leased_until"] is not None]
        assert len(leased) == 4
        assert len(sender.in_flight) == 2 and len(sender.ready) == 2  # two given to the pool, two leased ahead
        sender.close(wait=False)
        assert all(row["leased_until"] is None for row in rows_of(runtime, hooked)), "handed back"
    finally:
        release.set()
    nxt = WebhookSender(runtime, http=webhook_guard.session(True, str(receiver.ca_file)))
    try:
        deliver(nxt, timeout=5)
    finally:
        nxt.close()
    assert len(hooked.received(4, timeout=5)) == 4


# History, redelivery, the command

def test_list_show_redeliver_and_7_days_of_history(runtime, hooked, sender, sandesh):
    hooked.receiver.answer(hooked.path, 410)
    message = hooked.send()
    lifecycle(runtime, message, ("fail", "x"))
    attempts_until(runtime, sender, hooked, 3)
    [dead] = sandesh("webhooks", "list", "--client", hooked.id, "--state", "dead")["deliveries"]
    assert (dead["state"], dead["attempts"], dead["lastAttempt"]["statusCode"]) == ("dead", 3, 410)
    shown = sandesh("webhooks", "show", dead["id"])
    assert [a["attempt"] for a in shown["history"]] == [1, 2, 3]
    assert shown["body"]["id"] == message.id and shown["body"]["status"] == "failed"
    hooked.receiver.answer(hooked.path, 200)
    again = sandesh("webhooks", "redeliver", dead["id"])
    assert again["id"] != dead["id"] and again["redeliveryOf"] == dead["id"] and again["state"] == "attempting"
    deliver(sender)
    requests_ = hooked.received(4)
    assert requests_[-1].body == requests_[0].body
    assert requests_[-1].headers["x-service-delivery"] == again["id"]
    assert sandesh("webhooks", "show", again["id"])["state"] == "delivered"
    [line] = [line for line in map(orjson.loads, sandesh.run("audit", "--client", hooked.id).stdout.splitlines())
              if line["action"] == "webhook.redelivered"]
    assert line["details"]["redelivered_as"] == again["id"]
    assert line["clientId"] == hooked.id and line["actor"] == "tester"  # the operator who ran the command ($USER)
    advance(runtime, 7 * 24 * 3600 + 60)
    sender.purged_at = 0
    deliver(sender)
    assert sandesh("webhooks", "list", "--client", hooked.id)["deliveries"] == []
    gone = sandesh.run("webhooks", "show", dead["id"])
    assert gone.returncode == 2 and f"no webhook delivery {dead['id']!r} in the last 7 days" in gone.stderr
    assert runtime.sandesh.webhooks.delivery(dead["id"]).attempts == 3, "the log keeps the events"


# The SSRF guard

# Addresses that are not public though Python 3.11's `is_global` says they are: loopback and
# private addresses inside NAT64, 6to4 and IPv4-compatible IPv6, and IETF's 192.0.0.0/24.
INSIDE_IPV6 = ("[64:ff9b::7f00:1]", "[64:ff9b::a00:1]", "[2002:7f00:1::1]", "[::7f00:1]", "192.0.0.8")


def test_a_private_webhook_host_is_refused_at_configuration_without_telling_what_it_resolves_to(
        sandesh, workspace, receiver):
    private = {"SANDESH_WEBHOOK_ALLOW_PRIVATE": "0"}
    for url in (receiver.url("/x"), "https://127.0.0.1/x", "https://10.1.2.3/x", "https://169.254.169.254/x",
                "https://[::1]/x", *(f"https://{host}/x" for host in INSIDE_IPV6)):
        done = sandesh.run("client", "create", "--workspace", workspace, "--brand", "B", "--webhook-url", url,
                           env=private)
        assert done.returncode == 2 and "public addresses only" in done.stderr, (url, done.stderr)
    named = sandesh.run("client", "create", "--workspace", workspace, "--brand", "B", "--webhook-url",
                        receiver.url("/x"), env=private)
    assert "localhost resolves to an address that is not public (loopback)" in named.stderr
    assert "127.0.0.1" not in named.stderr, "a developer is not told what an inside name resolves to"
    done = sandesh.run("client", "create", "--workspace", workspace, "--brand", "B", "--webhook-url",
                       "https://no-such-host.invalid/x", env=private)
    assert done.returncode == 2 and "does not resolve" in done.stderr


def test_a_private_address_is_refused_again_at_delivery(runtime, hooked, receiver):
    guarded = WebhookSender(runtime, http=webhook_guard.session(False, str(receiver.ca_file)))
    try:
        lifecycle(runtime, hooked.send(), ("fail", "x"))
        deliver(guarded)
    finally:
        guarded.close()
    [row] = rows_of(runtime, hooked)
    assert row["state"] == "waiting" and "refused" in row["history"][0]["error"]
    assert "not public (loopback)" in row["history"][0]["error"] and "127.0.0.1" not in row["history"][0]["error"]
    assert hooked.receiver.at(hooked.path) == []


@pytest.mark.parametrize("host", INSIDE_IPV6[:4])
def test_an_ipv6_address_carrying_a_private_one_is_refused_at_delivery(runtime, workspace, receiver, host):
    """Configured while private addresses were allowed, then delivered by a guarded sender: the
    connection is never made."""
    client, _, _ = runtime.sandesh.operators.create_client(workspace, "Inside", f"https://{host}:{receiver.port}/in",
                                                       1000, "t")
    request, _ = parse_send({"to": f"97798{next(_numbers):08d}", "text": "inside"})
    message = runtime.sandesh.sending.send(client.id, workspace, request, 100)
    guarded = WebhookSender(runtime, http=webhook_guard.session(False, str(receiver.ca_file)))
    try:
        lifecycle(runtime, message, ("fail", "x"))
        deliver(guarded)
    finally:
        guarded.close()
    with runtime.connection() as conn:
        [row] = conn.execute("SELECT * FROM webhook_deliveries WHERE client_id = %s", (client.id,)).fetchall()
    error = row["history"][0]["error"]
    assert "refused" in error and "not public" in error, error
    assert "127.0.0.1" not in error and "10.0.0.1" not in error, "the address it carries is not told"
    assert receiver.at("/in") == []


# The worker and the example receiver, as processes

def test_sandesh_worker_webhooks_delivers_to_the_example_receiver(runtime, workspace, receiver, env, tmp_path):
    cert = receiver.ca.issue_cert("localhost")
    cert.private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "receiver.pem"))
    from tests.conftest import free_port

    port = free_port()
    client, _, secret = runtime.sandesh.operators.create_client(workspace, "Example", f"https://localhost:{port}/webhooks", 10, "t")
    example = subprocess.Popen(
        [sys.executable, "scripts/devtools/example_receiver.py", "--port", str(port), "--cert", str(tmp_path / "receiver.pem"),
         "--tolerance", "1000000000"],
        env={**env, "WEBHOOK_SECRET": secret}, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    worker = subprocess.Popen([sys.executable, "-m", "sandesh.scripts.service.cli", "worker", "webhooks"],
                              env={**env, "REQUESTS_CA_BUNDLE": str(receiver.ca_file), "PYTHONPATH": str(ROOT)},
                              cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        request, _ = parse_send({"to": "9779811111111", "text": "hello"})
        message = runtime.sandesh.sending.send(client.id, workspace, request, 100)
        lifecycle(runtime, message, ("fail", "no route"))
        ready, _, _ = select.select([example.stdout], [], [], 30)
        assert ready, "the example receiver printed nothing in 30 s"
        line = example.stdout.readline()
        assert orjson.loads(line)["event"]["id"] == message.id and orjson.loads(line)["verified"] is True
    finally:
        worker.send_signal(signal.SIGTERM)
        example.terminate()
        assert worker.wait(timeout=20) == 0, worker.stderr.read()
        example.wait(timeout=5)


def test_through_emulated_modems_a_send_ends_delivered_and_a_reply_arrives_as_message_inbound(runtime, hooked,
                                                                                                 sender):
    """The whole path: the dispatcher drives emulated SIMs, the sender follows the log."""
    from sandesh.scripts.service.commands import register_emulated
    from sandesh.scripts.service.emulator import Emulator
    from sandesh.workers.dispatcher import Dispatcher

    with Emulator(sims=2, report_delay=0.05) as emulator:
        register_emulated(runtime, emulator.devices(), "test")
        dispatcher = Dispatcher(runtime)
        dispatcher.start()
        threading.Thread(target=dispatcher.run, daemon=True).start()
        stop = threading.Event()
        threading.Thread(target=sender.run, args=(stop,), daemon=True).start()
        try:
            message = hooked.send("Your parcel is at the counter. " * 7)  # 2 GSM-7 parts
            events = [body(r) for r in hooked.received(2)]
            assert sorted(e["status"] for e in events) == ["delivered", "sent"]
            assert all(e["segments"] == 2 and e["to"] == message.to and e["route"] == "device" for e in events)
            sim = runtime.sandesh.history.message(message.id).sim_id
            with runtime.connection() as conn:
                name = conn.execute("SELECT name FROM sims WHERE id = %s", (sim,)).fetchone()["name"]
            emulator.modem(name).inject_inbound("+" + message.to, "Thank you!")
            [*_, inbound] = hooked.received(3)
            assert body(inbound)["type"] == "message.inbound"
            assert (body(inbound)["from"], body(inbound)["text"], body(inbound)["inReplyTo"]) == (
                "+" + message.to, "Thank you!", message.id)
        finally:
            stop.set()
            dispatcher.close()


def test_message_history_tells_the_whole_life_from_the_log(runtime, workspace, receiver, sender, sandesh):
    """`sandesh message history`: acceptance with its key, submits, parts with their TP-MR, a
    requeue with its reason, status reports, the attributed reply, and every webhook attempt
    (host, HTTP status, delay), oldest first; no API key or webhook secret anywhere."""
    app = runtime.sandesh
    path = f"/hooks/{next(_paths)}"
    client, key, secret = app.operators.create_client(workspace, "History", receiver.url(path), 1000, "t")
    receiver.answer(path, 503, 200)  # the first attempt fails, the retry is delivered
    request, _ = parse_send({"to": f"97798{next(_numbers):08d}", "text": "Your order 42 shipped"})
    message = app.sending.send(client.id, workspace, request, 100, "order-42", "hash-42")
    lifecycle(runtime, message, ("submit",), ("requeue", "CMS 38: network out of order"), ("submit",), ("accept",),
              ("report", 0))
    deliver(sender)  # the 503 goes to one of the three status deliveries, attempted at once
    reply = app.dispatch.store_reply_part(None, "sim_test", message.to[3:], None, 1, 1, "Thanks")
    app.dispatch.finish_reply(reply.id, app.history.message(message.id))  # its message.inbound delivery gets a 200
    advance(runtime, 11)  # past the first retry's delay
    deliver(sender)
    app.webhooks.redeliver(delivery_id(message.id, "delivered"), "tester")
    deliver(sender)

    done = sandesh.run("message", "history", message.id)
    assert done.returncode == 0, done.stderr
    assert key not in done.stdout and secret not in done.stdout
    history = orjson.loads(done.stdout)
    assert (history["messageId"], history["workspaceId"], history["clientId"]) == (message.id, workspace, client.id)
    events = history["events"]
    assert [e["at"] for e in events] == sorted(e["at"] for e in events)
    own = [e for e in events if not e["type"].startswith("webhook_") and e["type"] != "inbound"]
    assert [e["type"] for e in own] == ["accepted", "submitted", "requeued", "submitted", "part_accepted", "sent",
                                        "status_report", "delivered"]
    accepted, _, requeued, submitted, part, *_ = own
    assert {k: accepted[k] for k in ("messageType", "text", "segments", "cost", "idempotencyKey")} == {
        "messageType": "transactional", "text": "Your order 42 shipped", "segments": 1, "cost": 100,
        "idempotencyKey": "order-42"}
    assert requeued["reason"] == "CMS 38: network out of order"
    assert (submitted["simId"], part["simId"], part["part"], part["messageReference"]) == ("sim_test", "sim_test", 1, 18)
    [inbound] = [e for e in events if e["type"] == "inbound"]
    assert (inbound["replyId"], inbound["text"], inbound["from"]) == (reply.id, "Thanks", "+" + message.to)
    attempts = [e for e in events if e["type"] == "webhook_attempt"]
    by_status = {}
    for attempt in attempts:
        by_status.setdefault(attempt["status"], []).append(attempt["httpStatus"])
    # queued (after the requeue), sent and delivered each: first try 503 for the first one
    # attempted, then 200; the redelivery of `delivered` is one more 200
    assert sorted(by_status) == ["delivered", "queued", "sent"]
    assert sum(len(codes) for codes in by_status.values()) == 5
    assert sorted(c for codes in by_status.values() for c in codes) == [200, 200, 200, 200, 503]
    assert {a["host"] for a in attempts} == {"localhost"}
    retried = [a for a in attempts if a["attempt"] == 2]
    assert len(retried) == 1 and retried[0]["delay"] >= 10  # the retry waited out its 10 s delay
    [redelivered] = [e for e in events if e["type"] == "webhook_redelivered"]
    assert redelivered["actor"] == "tester" and redelivered["deliveryId"] == delivery_id(message.id, "delivered")


def test_message_history_never_shows_an_otp_code_and_refuses_an_unknown_id(runtime, workspace, sandesh):
    client, _, _ = runtime.sandesh.operators.create_client(workspace, "Codes", None, 1000, "t")
    request, _ = parse_send({"to": f"97798{next(_numbers):08d}", "text": "Your code is 913274", "messageType": "otp"})
    message = runtime.sandesh.sending.send(client.id, workspace, request, 100)
    done = sandesh.run("message", "history", message.id)
    assert done.returncode == 0, done.stderr
    assert "913274" not in done.stdout
    [accepted] = orjson.loads(done.stdout)["events"]
    assert (accepted["type"], accepted["messageType"], accepted["text"]) == ("accepted", "otp", None)
    unknown = sandesh.run("message", "history", "msg_nope")
    assert (unknown.returncode, unknown.stdout, unknown.stderr) == (2, "", "sandesh: no message 'msg_nope'\n")


def test_message_history_of_a_refunded_message_shows_the_failure_and_the_refund(runtime, workspace, sandesh):
    """Refused by every SIM it tried: the requeues with their reasons, then the failure with
    the whole charge refunded; a message whose part the network accepted fails without one."""
    client, _, _ = runtime.sandesh.operators.create_client(workspace, "Refunds", None, 1000, "t")
    request, _ = parse_send({"to": f"97798{next(_numbers):08d}", "text": "Refund me"})
    refunded = runtime.sandesh.sending.send(client.id, workspace, request, 100)
    lifecycle(runtime, refunded, ("submit",), ("requeue", "CMS 38: network out of order"), ("submit",),
              ("fail", "CMS 500: refused by every SIM"))
    charged = runtime.sandesh.sending.send(client.id, workspace, request, 100)
    lifecycle(runtime, charged, ("submit",), ("accept",), ("fail", "no status report within validity"))
    events = sandesh("message", "history", refunded.id)["events"]
    assert [e["type"] for e in events] == ["accepted", "submitted", "requeued", "submitted", "failed"]
    assert (events[2]["reason"], events[-1]["error"], events[-1]["refund"]) == (
        "CMS 38: network out of order", "CMS 500: refused by every SIM", 100)
    last = sandesh("message", "history", charged.id)["events"][-1]
    assert (last["type"], last["refund"]) == ("failed", 0)
