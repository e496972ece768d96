"""The dispatcher with emulated SIMs over real pseudo-terminals and real PostgreSQL."""
import threading
import time

import pytest

from sandesh.domain.clock import iso
from sandesh.domain.errors import NotCancelable
from sandesh.domain.sending import parse_send
from sandesh.projections import follower
from tests.helpers import funded_workspace
from sandesh.scripts.service.commands import register_emulated
from sandesh.scripts.service.emulator import Emulator
from tests.conftest import running_dispatcher, wait_for_status
from sandesh.workers.dispatcher import Dispatcher

# On a worker beside another module, its pacing and reply tests missed their deadlines in one full
# run of three (cause not found): run with nothing beside it (scripts/test.sh).
pytestmark = pytest.mark.alone


TO = "9779812345678"


@pytest.fixture(scope="module")
def emulator(runtime):
    with Emulator(sims=4, report_delay=0.05) as running:
        register_emulated(runtime, running.devices(), "test")
        yield running


@pytest.fixture(scope="module")
def account(runtime):
    app = runtime.sandesh
    ws = funded_workspace(app, "Dispatch", 10**7, "t")
    return ws, app.operators.create_client(ws, "D", None, 1000, "t")[0].id


@pytest.fixture
def dispatcher(runtime, emulator):
    with running_dispatcher(runtime) as running:
        yield running


_numbers = iter(range(10_000_000, 99_999_999))


def send(runtime, account, text, message_type="transactional", to=None):
    """A message to `to`, or to a number of its own (a shared number would stick to one SIM)."""
    request, problems = parse_send({"to": to or f"97798{next(_numbers):08d}", "text": text,
                                    "messageType": message_type})
    assert not problems
    return runtime.sandesh.sending.send(account[1], account[0], request, 100 * request.segments)


def wait_for(runtime, message_ids, statuses, timeout=20.0):
    return wait_for_status(runtime, message_ids, statuses, timeout)


def test_messages_leave_through_the_pool_and_reports_make_them_delivered(runtime, emulator, account, dispatcher):
    texts = [f"Order {i} shipped" for i in range(8)] + ["नमस्ते " * 50]  # the last: 5 UCS-2 parts
    ids = [send(runtime, account, text).id for text in texts]
    wait_for(runtime, ids, {"delivered"})
    received = {m["text"] for m in emulator.received}
    assert set(texts) <= received
    used = {runtime.sandesh.history.message(i).sim_id for i in ids}
    assert len(used) > 1, "sends are spread over the pool"
    follower.catch_up(runtime)
    with runtime.connection() as conn:
        rows = conn.execute("SELECT status FROM messages WHERE id = ANY(%s)", (ids,)).fetchall()
    assert {r["status"] for r in rows} == {"delivered"}


def test_a_refused_number_is_rejected_and_refunded(runtime, emulator, account, dispatcher):
    with runtime.connection() as conn:
        before = conn.execute("SELECT balance FROM workspaces WHERE id = %s", (account[0],)).fetchone()["balance"]
    for modem in emulator.modems:
        modem.fail_next("AT+CMGS", "+CMS ERROR: 1")
    message = send(runtime, account, "to nobody")
    wait_for(runtime, [message.id], {"rejected"})
    assert "CMS 1" in runtime.sandesh.history.message(message.id).error
    with runtime.connection() as conn:
        after = conn.execute("SELECT balance FROM workspaces WHERE id = %s", (account[0],)).fetchone()["balance"]
    assert after == before  # charged at acceptance, refunded: nothing reached the network
    for modem in emulator.modems:
        modem._failures.clear()


def test_an_undelivered_report_makes_the_message_undelivered(runtime, emulator, account, dispatcher):
    for modem in emulator.modems:
        modem.script_reports(0x46)
    message = send(runtime, account, "expires before delivery")
    wait_for(runtime, [message.id], {"undelivered"})
    assert "0x46" in runtime.sandesh.history.message(message.id).error
    for modem in emulator.modems:
        modem._report_script.clear()


def test_otp_goes_before_a_promotional_backlog(runtime, emulator, account):
    backlog = [send(runtime, account, f"Dashain offer {i}", "promotional").id for i in range(40)]
    code = send(runtime, account, "123456 is your code", "otp")
    running = Dispatcher(runtime)  # starts with the backlog already queued
    running.start()
    started = time.monotonic()
    thread = threading.Thread(target=running.run, daemon=True)
    thread.start()
    try:
        wait_for(runtime, [code.id], {"sent", "delivered"})
        latency = time.monotonic() - started
        pending = [m for m in backlog if runtime.sandesh.history.message(m).status == "queued"]
        assert latency < 1.0 and pending, (latency, len(pending))
        print(f"OTP behind {len(backlog)} promotional messages: sent {latency * 1000:.0f} ms after the dispatcher started")
        wait_for(runtime, backlog, {"delivered"})  # leave an empty queue to the next test
    finally:
        running.close()
        thread.join(timeout=5)


def _balance(runtime, workspace_id):
    with runtime.connection() as conn:
        return conn.execute("SELECT balance FROM workspaces WHERE id = %s", (workspace_id,)).fetchone()["balance"]


def test_a_refusal_that_proves_nothing_was_sent_fails_over_to_another_sim_at_once(runtime, emulator, account,
                                                                                   dispatcher):
    """CMS 331 (no network) sends the message back to `queued` and on to another SIM, without
    waiting for the retry delay of the SIM that refused it (docs/design.md, "Failures of a send")."""
    first = emulator.modems[0]
    first.fail_next("AT+CMGS", "+CMS ERROR: 331")
    deadline = time.monotonic() + 10
    # the refusal is armed on one modem only: send until that modem takes a message
    while not any(e.get("error", "").startswith("SIM emu-1") for e in _requeues(runtime)):
        message = send(runtime, account, "failover, please")
        wait_for(runtime, [message.id], {"delivered"})
        assert time.monotonic() < deadline, "emu-1 never took a message"
    [requeued] = [e for e in _requeues(runtime) if e["error"].startswith("SIM emu-1")]
    found = runtime.sandesh.history.message(requeued["id"])
    assert found.status == "delivered" and found.failed_on == [requeued["sim"]]
    assert found.sim_id != requeued["sim"], "delivered by another SIM"
    assert found.attempts == 1


def _requeues(runtime):
    """Every Requeued event in the log: (message id, SIM that refused, reason)."""
    from sandesh.domain.message import Message
    from eventsourcing.utils import get_topic

    found = []
    for notification in runtime.sandesh.log.recorder.select_notifications(start=1, limit=100_000,
                                                                  topics=[get_topic(Message.Requeued)]):
        event = runtime.sandesh.log.mapper.to_domain_event(notification)
        found.append({"id": event.originator_id, "sim": event.sim_id, "error": event.error})
    return found


def test_a_message_refused_on_every_usable_sim_ends_failed_and_refunded(runtime, emulator, account, dispatcher,
                                                                        sandesh):
    """A SIM whose window is full is usable too: the message would wait for it.  With room on
    all four, four refusals end it."""
    sandesh("clock", "advance", "1801")
    before = _balance(runtime, account[0])
    for modem in emulator.modems:
        modem.fail_next("AT+CMGS", "+CMS ERROR: 42")
    message = send(runtime, account, "congested everywhere")
    wait_for(runtime, [message.id], {"failed"})
    found = runtime.sandesh.history.message(message.id)
    assert "every usable SIM (4)" in found.error and len(set(found.failed_on)) == 3 and found.attempts == 3
    assert _balance(runtime, account[0]) == before, "nothing reached the network: refunded"
    for modem in emulator.modems:
        modem._failures.clear()


def test_two_dispatchers_at_once_never_take_the_same_message(runtime, emulator, account, dispatcher):
    """A second host with SIMs of its own drains the same queue; each message leaves once."""
    with Emulator(sims=2, report_delay=0.05, first=5) as host_b:
        for name, device in host_b.devices():
            runtime.sandesh.sims.add_sim(name, device, 115200, "host-b", "test")
        second = Dispatcher(runtime, host="host-b")
        second.start()
        assert len(second.sims) == 2
        thread = threading.Thread(target=second.run, daemon=True)
        thread.start()
        try:
            ids = [send(runtime, account, f"twice? {i}").id for i in range(60)]
            wait_for(runtime, ids, {"delivered"})
        finally:
            second.close()
            thread.join(timeout=5)
        texts = [m["text"] for m in emulator.received + host_b.received if m["text"].startswith("twice? ")]
        by_host_b = [m for m in host_b.received if m["text"].startswith("twice? ")]
    assert sorted(texts) == sorted(f"twice? {i}" for i in range(60)), "each message reached its phone exactly once"
    assert by_host_b, "both dispatchers took messages"
    for name, _ in host_b.devices():
        with runtime.connection() as conn:
            sim_id = conn.execute("SELECT id FROM sims WHERE name = %s", (name,)).fetchone()["id"]
        runtime.sandesh.sims.disable_sim(sim_id, "test")


def test_a_port_is_driven_by_one_process_only(runtime, emulator, dispatcher):
    from sandesh.workers.modem import Modem, PortGone

    with pytest.raises(PortGone):
        Modem(emulator.modems[0].device).open()  # the fixture's dispatcher holds it


def test_pacing_holds_each_sim_to_30_parts_per_rolling_30_minutes(runtime, emulator, account, dispatcher, sandesh):
    """A burst drains to the pacing cap of the pool, less the one part the pool holds for OTP
    (one per four SIMs): 4 x 30 - 1 = 119 of 130 leave, no SIM more than 30."""
    sandesh("clock", "advance", "1801")  # a fresh window for every SIM
    ids = [send(runtime, account, f"burst {i}", "promotional").id for i in range(130)]
    deadline = time.monotonic() + 30
    while True:
        statuses = [runtime.sandesh.history.message(i).status for i in ids]
        if statuses.count("queued") == 11 and all(s in ("queued", "delivered") for s in statuses):
            break
        assert time.monotonic() < deadline, statuses.count("queued")
        time.sleep(0.1)
    time.sleep(0.5)  # nothing more leaves within the window
    assert [runtime.sandesh.history.message(i).status for i in ids].count("queued") == 11
    with runtime.connection() as conn:
        per_sim = conn.execute("SELECT sim_id, count(*) AS n FROM sent_parts WHERE at > %s GROUP BY sim_id",
                               (runtime.clock.now() - 1800,)).fetchall()
    assert sorted(row["n"] for row in per_sim) == [29, 30, 30, 30]
    code = send(runtime, account, "654321 is your code", "otp")  # the reserve is there for it
    wait_for(runtime, [code.id], {"delivered"})
    assert [runtime.sandesh.history.message(i).status for i in ids].count("queued") == 11
    sandesh("clock", "advance", "1801")
    wait_for(runtime, ids, {"delivered"})


def test_sends_answer_503_when_no_enabled_sim_is_healthy_and_sim_list_shows_why(runtime, emulator, account,
                                                                                  dispatcher, server, sandesh):
    import requests

    key = runtime.sandesh.operators.create_client(account[0], "Route", None, 1000, "t")[1]
    body = {"to": TO, "text": "route?"}
    headers = {"x-api-key": key, "content-type": "application/json"}
    assert requests.post(server.url + "/v1/sms/send", json=body, headers=headers, timeout=5).status_code == 202
    dispatcher.heartbeat_seconds = 0.1
    for modem in emulator.modems:
        modem.set_registration(0)  # off the network
    try:
        deadline = time.monotonic() + 10
        while requests.post(server.url + "/v1/sms/send", json=body, headers=headers, timeout=5).status_code != 503:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        answer = requests.post(server.url + "/v1/sms/send", json=body, headers=headers, timeout=5)
        assert answer.json()["code"] == "unavailable"
        listed = {s["name"]: s for s in sandesh("sim", "list")["sims"]}
        emu = listed[emulator.modems[0].name]
        assert emu["healthy"] is False and emu["lastError"] == "not registered on the network"
        with runtime.connection() as conn:  # the parts this SIM sent in the last 30 minutes of the service clock
            used = conn.execute("SELECT count(*) AS n FROM sent_parts WHERE sim_id = %s AND at > %s",
                                (emu["id"], runtime.clock.now() - 1800)).fetchone()["n"]
        assert used >= 1, "the pacing test's burst left parts in this window"
        assert emu["signalDbm"] == -73 and emu["partsUsed"] == used and emu["partsPerWindow"] == 30
    finally:  # the later tests of this module need the modems back on the network
        for modem in emulator.modems:
            modem.set_registration(1)
    deadline = time.monotonic() + 10
    while requests.post(server.url + "/v1/sms/send", json=body, headers=headers, timeout=5).status_code != 202:
        assert time.monotonic() < deadline
        time.sleep(0.2)


def test_replies_are_reassembled_attributed_and_listed(runtime, emulator, account, dispatcher, sandesh):
    message = send(runtime, account, "Did the parcel arrive?", to="9779801234567")
    wait_for(runtime, [message.id], {"delivered"})
    with runtime.connection() as conn:
        sim_name = conn.execute("SELECT name FROM sims WHERE id = %s", (runtime.sandesh.history.message(message.id).sim_id,)
                                ).fetchone()["name"]
    sim = emulator.modem(sim_name)
    text = "Haina, aajha samma aayena. Bholi pheri hernus hai. " * 7  # 357 septets: 3 GSM-7 parts
    sim.inject_inbound("+9779801234567", text, parts_order=[2, 3, 1], duplicate=[3], reference=200)
    sim.inject_inbound("+9779899999999", "who is this?")  # nobody sent to this number
    deadline = time.monotonic() + 10
    while True:
        listed = sandesh("inbound", "list")["replies"]
        if len(listed) >= 2:
            break
        assert time.monotonic() < deadline, listed
        time.sleep(0.2)
    by_sender = {r["from"]: r for r in listed}
    reply = by_sender["+9779801234567"]
    assert (reply["text"], reply["clientId"], reply["inReplyTo"]) == (text, account[1], message.id)
    assert reply["parts"] == reply["total"] == 3 and reply["missingParts"] == []
    stranger = sandesh("inbound", "list", "--unattributed")["replies"]
    assert [r["from"] for r in stranger] == ["+9779899999999"] and stranger[0]["clientId"] is None
    assert not sim.store, "read, saved, then deleted"


def test_an_incomplete_reply_is_flushed_after_10_minutes_with_what_arrived(runtime, emulator, account, dispatcher,
                                                                            sandesh):
    sim = emulator.modems[0]
    text = "Part one of three. " * 8 + "Part two here. " * 10 + "And three. " * 5
    sim.inject_inbound("+9779807654321", text, parts_order=[1, 3], reference=201)
    time.sleep(1.0)
    assert all(r["from"] != "+9779807654321" for r in sandesh("inbound", "list")["replies"])
    sandesh("clock", "advance", "601")
    dispatcher.flush_replies()
    [reply] = [r for r in sandesh("inbound", "list")["replies"] if r["from"] == "+9779807654321"]
    assert reply["missingParts"] == [2] and reply["parts"] == 2


def test_a_recipient_stays_on_the_sim_it_last_heard_from(runtime, emulator, account, dispatcher, sandesh):
    """...while that SIM is usable and has room in its window (domain/routing.py)."""
    sandesh("clock", "advance", "1801")
    first = send(runtime, account, "hello from one SIM", to="9779812000001")
    wait_for(runtime, [first.id], {"delivered"})
    sim = runtime.sandesh.history.message(first.id).sim_id
    later = [send(runtime, account, f"same sender {i}", to="9779812000001").id for i in range(6)]
    others = [send(runtime, account, f"someone else {i}", to=f"97798120001{i:02d}").id for i in range(12)]
    wait_for(runtime, later + others, {"delivered"})
    assert {runtime.sandesh.history.message(m).sim_id for m in later} == {sim}
    assert len({runtime.sandesh.history.message(m).sim_id for m in others}) > 1


def test_a_scheduled_message_leaves_at_its_send_at_on_the_service_clock(runtime, emulator, account, dispatcher,
                                                                        sandesh):
    now = runtime.clock.now()
    request, problems = parse_send({"to": f"97798{next(_numbers):08d}", "text": "Happy Tihar",
                                    "sendAt": iso(now + 3600)}, now)
    assert not problems
    later = runtime.sandesh.sending.send(account[1], account[0], request, 100)
    soon = send(runtime, account, "not scheduled")
    wait_for(runtime, [soon.id], {"delivered"})
    time.sleep(1.5)  # the dispatcher looked at the schedule at least once meanwhile
    assert runtime.sandesh.history.message(later.id).status == "scheduled"
    assert not [m for m in emulator.received if m["text"] == "Happy Tihar"]
    sandesh("clock", "advance", "3601")
    wait_for(runtime, [later.id], {"delivered"})
    statuses = [e["type"] for e in sandesh("message", "history", later.id)["events"]]
    assert statuses[:2] == ["accepted", "released"] and "delivered" in statuses


def test_a_message_cannot_be_canceled_once_a_modem_has_it(runtime, emulator, account, dispatcher):
    message = send(runtime, account, "too late to take back")
    wait_for(runtime, [message.id], {"delivered"})
    with pytest.raises(NotCancelable) as refused:
        runtime.sandesh.sending.cancel_message(account[1], message.id)
    assert refused.value.status == "delivered"
    assert runtime.sandesh.history.message(message.id).status == "delivered"


def test_a_message_with_no_report_within_its_validity_stays_sent_with_the_report_unknown(runtime, emulator, account,
                                                                                         dispatcher, sandesh):
    _forget_earlier_reports(runtime, dispatcher, sandesh)
    for modem in emulator.modems:
        modem.script_reports(None)  # this network never reports
    try:
        message = send(runtime, account, "into the void")
        wait_for(runtime, [message.id], {"sent"})
        sandesh("clock", "advance", str(24 * 3600 + 1))
        assert dispatcher.give_up_on_reports() == 1, "this message alone went a day without its report"
        found = runtime.sandesh.history.message(message.id)
        assert found.status == "sent" and found.report_known is False
    finally:
        for modem in emulator.modems:
            modem._report_script.clear()


def _forget_earlier_reports(runtime, dispatcher, sandesh, timeout=15.0):
    """Let the messages of earlier tests leave, then give up on the reports they still wait
    for, both steps (unknown after a day, never after another), so only this test's count is left."""
    deadline = time.monotonic() + timeout
    while True:
        with runtime.connection() as conn:
            queued = conn.execute("SELECT count(*) AS n FROM dispatch_queue").fetchone()["n"]
        if not queued or time.monotonic() > deadline:
            break  # what stays queued (a SIM switched off, say) waits for no report
        time.sleep(0.1)
    for _ in range(2):
        sandesh("clock", "advance", str(24 * 3600 + 1))
        dispatcher.give_up_on_reports()
    assert dispatcher.give_up_on_reports() == 0


def test_200_mixed_messages_drain_through_4_sims_with_pacing_priority_and_lifecycle(runtime, emulator, account,
                                                                                   sandesh):
    sandesh("clock", "advance", "1801")
    kinds = ["promotional"] * 120 + ["transactional"] * 60 + ["otp"] * 20
    ids = {send(runtime, account, f"{kind} {i} " + ("x" * 170 if i % 10 == 0 else ""), kind).id: kind
           for i, kind in enumerate(kinds)}
    running = Dispatcher(runtime)
    running.start()
    thread = threading.Thread(target=running.run, daemon=True)
    thread.start()
    try:
        for _ in range(6):  # each window lets 4 SIMs x 30 parts out
            deadline = time.monotonic() + 20
            while any(runtime.sandesh.history.message(m).status == "submitted" for m in ids) or (
                    time.monotonic() < deadline and _still_leaving(runtime, ids)):
                time.sleep(0.2)
            if all(runtime.sandesh.history.message(m).status == "delivered" for m in ids):
                break
            sandesh("clock", "advance", "1801")
        statuses = {runtime.sandesh.history.message(m).status for m in ids}
        assert statuses == {"delivered"}, statuses
    finally:
        running.close()
        thread.join(timeout=5)
    with runtime.connection() as conn:
        rows = conn.execute("SELECT message_id, sim_id, at FROM sent_parts WHERE message_id = ANY(%s)",
                            (list(ids),)).fetchall()
    first_part = {}
    for row in rows:
        first_part[row["message_id"]] = min(first_part.get(row["message_id"], row["at"]), row["at"])
    windows: dict = {}
    for row in rows:
        windows.setdefault((row["sim_id"], int(row["at"] // 1801)), []).append(row)
    assert max(len(parts) for parts in windows.values()) <= 30
    last_otp = max(first_part[m] for m, k in ids.items() if k == "otp")
    first_promo = min(first_part[m] for m, k in ids.items() if k == "promotional")
    assert last_otp <= first_promo, "every code left before any promotion"


def _still_leaving(runtime, ids) -> bool:
    """True while parts keep being accepted (the current window is not used up yet)."""
    with runtime.connection() as conn:
        before = conn.execute("SELECT count(*) AS n FROM sent_parts WHERE message_id = ANY(%s)", (list(ids),)).fetchone()["n"]
    time.sleep(0.5)
    with runtime.connection() as conn:
        after = conn.execute("SELECT count(*) AS n FROM sent_parts WHERE message_id = ANY(%s)", (list(ids),)).fetchone()["n"]
    return after > before


def _killed_during_at_cmgs(runtime, env, account, host_c, text, reports):
    """A dispatcher process sends `text` through host_c's modem, which takes the PDU and never
    answers +CMGS; it is killed with SIGKILL there.  Returns the message."""
    import os
    import signal
    import subprocess
    import sys

    from tests.conftest import ROOT

    modem = host_c.modems[0]
    modem.script_reports(*reports)
    modem.hang_after_pdu(deliver=True)  # the part leaves, +CMGS never comes
    message = send(runtime, account, text)
    worker = subprocess.Popen([sys.executable, "-m", "sandesh.scripts.service.cli", "worker", "dispatch", "--host", "host-c"],
                              cwd=ROOT, env={**env, "PYTHONPATH": str(ROOT)},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(runtime, [message.id], {"submitted"})
        deadline = time.monotonic() + 10
        while not any(m["text"] == text for m in host_c.received):
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait()
    assert runtime.sandesh.history.message(message.id).status == "submitted"
    return message


def test_a_dispatcher_killed_during_at_cmgs_never_resends_and_its_status_report_still_counts(runtime, env, account):
    """Near the end of this module: it moves the test clock on by a day.

    kill -9 between AT+CMGS and the recording of its answer: after a restart the message is
    not submitted again (docs/reliability.md, "Unknown outcomes"); the status report that comes
    for it, matched on SIM and recipient, makes it delivered."""
    with Emulator(sims=1, report_delay=0.5, first=9) as host_c:
        [(name, device)] = host_c.devices()
        sim = runtime.sandesh.sims.add_sim(name, device, 115200, "host-c", "test").id
        message = _killed_during_at_cmgs(runtime, env, account, host_c, "exactly once, please", [None])
        with running_dispatcher(runtime, host="host-c"):
            deadline = time.monotonic() + 10
            while runtime.sandesh.history.message(message.id).unknown_since is None:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            assert runtime.sandesh.history.message(message.id).status == "submitted", "not called failed while a report may come"
            with host_c.modems[0]._lock:
                host_c.modems[0]._send_report(0, message.to, 0x00)  # the network's report, late
            wait_for(runtime, [message.id], {"delivered"})
        assert [m["text"] for m in host_c.received].count("exactly once, please") == 1

        # No report at all: after the validity period it ends failed, not refunded, never resent.
        before = _balance(runtime, account[0])
        silent = _killed_during_at_cmgs(runtime, env, account, host_c, "and nobody reports", [None])
        with running_dispatcher(runtime, host="host-c") as restarted:
            deadline = time.monotonic() + 10
            while runtime.sandesh.history.message(silent.id).unknown_since is None:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            with runtime.connection() as conn:
                from sandesh.projections.storage.db import advance_clock
                advance_clock(conn, 24 * 3600 + 1)
            restarted.give_up_on_reports()
        found = runtime.sandesh.history.message(silent.id)
        assert found.status == "failed" and "outcome unknown" in found.error and "not resent" in found.error
        assert _balance(runtime, account[0]) == before - 100, "not refunded: the network may have delivered it"
        assert [m["text"] for m in host_c.received].count("and nobody reports") == 1
        runtime.sandesh.sims.disable_sim(sim, "test")


def test_an_otp_behind_5000_queued_promotional_messages_is_submitted_within_a_second(runtime, emulator, account,
                                                                                      sandesh):
    """Last in this module: the backlog stays queued (pacing lets 100 of it out per window)."""
    sandesh("clock", "advance", "1801")
    request, _ = parse_send({"to": TO, "text": "Tihar sale: 20% off", "messageType": "promotional"})
    for _ in range(5000):
        runtime.sandesh.sending.send(account[1], account[0], request, 40)
    code = send(runtime, account, "246810 is your code", "otp")
    running = Dispatcher(runtime)
    running.start()
    thread = threading.Thread(target=running.run, daemon=True)
    started = time.monotonic()
    thread.start()
    try:
        wait_for(runtime, [code.id], {"submitted", "sent", "delivered"})
        latency = time.monotonic() - started
    finally:
        running.close()
        thread.join(timeout=5)
    print(f"OTP behind 5000 promotional messages: submitted {latency * 1000:.0f} ms after the dispatcher started")
    assert latency < 1.0
