"""The SIM pool as live state: operator changes reach a running dispatcher within a second,
quarantine is history in the log, routing prefers the recipient's operator, and the lease reads
an index instead of ranking the queue.  Real PostgreSQL, emulated modems on pseudo-terminals,
the real `sandesh` command."""
import time

import orjson
import pytest

from sandesh.domain.sending import parse_send
from tests.helpers import funded_workspace
from sandesh.scripts.service.commands import register_emulated
from sandesh.scripts.service.emulator import Emulator
from sandesh.workers.sim_load import Stop
from tests.conftest import running_dispatcher, wait_for_status

NTC_NUMBER, NCELL_NUMBER = "977984", "977980"  # prefixes (domain/operators.py)


@pytest.fixture(scope="module")
def emulator(runtime):
    """emu-1 is a Nepal Telecom SIM (MNC 01), emu-2 an Ncell one (MNC 02)."""
    with Emulator(sims=2, report_delay=0.05) as running:
        register_emulated(runtime, running.devices(), "test")
        yield running


@pytest.fixture(scope="module")
def account(runtime):
    ws = funded_workspace(runtime.sandesh, "Pool", 10**7, "t")
    return ws, runtime.sandesh.operators.create_client(ws, "P", None, 1000, "t")[0].id


@pytest.fixture
def dispatcher(runtime, emulator, sandesh):
    sandesh("clock", "advance", "1801")  # every test starts with empty pacing windows
    with running_dispatcher(runtime) as running:
        yield running


_numbers = iter(range(1_000_000, 9_999_999))


def send(runtime, account, text, message_type="transactional", prefix=NTC_NUMBER):
    request, problems = parse_send({"to": f"{prefix}{next(_numbers):07d}", "text": text, "messageType": message_type})
    assert not problems
    return runtime.sandesh.sending.send(account[1], account[0], request, 100 * request.segments)


def wait_for(runtime, message_ids, statuses, timeout=15.0):
    return wait_for_status(runtime, message_ids, statuses, timeout)


def sims_by_name(sandesh):
    return {s["name"]: s for s in sandesh("sim", "list")["sims"]}


def wait_for_state(sandesh, name, state, timeout=5.0):
    """Until `sandesh sim list` shows the SIM in `state`; returns its listing."""
    deadline = time.monotonic() + timeout
    while (sim := sims_by_name(sandesh)[name])["state"] != state:
        assert time.monotonic() < deadline, sim
        time.sleep(0.1)
    return sim


def sent_by(runtime, message_ids):
    return {runtime.sandesh.history.message(m).sim_id for m in message_ids}


def test_sim_list_shows_state_operator_and_parts_used(runtime, emulator, dispatcher, sandesh):
    listed = sims_by_name(sandesh)
    assert (listed["emu-1"]["operator"], listed["emu-2"]["operator"]) == ("ntc", "ncell")
    for sim in listed.values():
        assert sim["state"] == "active" and sim["reason"] is None and sim["since"].endswith("Z")
        assert sim["partsUsed"] == 0 and sim["partsPerWindow"] == 30


def test_recipients_go_to_a_sim_on_their_own_operator(runtime, emulator, account, dispatcher, sandesh):
    """Both SIMs idle with room each time: the recipient's operator decides."""
    ids = sims_by_name(sandesh)
    ntc, ncell = [], []
    for i in range(4):
        pair = [send(runtime, account, f"Ncell {i}", prefix=NCELL_NUMBER).id,
                send(runtime, account, f"NTC {i}", prefix=NTC_NUMBER).id]
        wait_for(runtime, pair, {"delivered"})
        ncell.append(pair[0])
        ntc.append(pair[1])
    assert sent_by(runtime, ntc) == {ids["emu-1"]["id"]}
    assert sent_by(runtime, ncell) == {ids["emu-2"]["id"]}


def test_an_otp_takes_the_off_net_sim_when_the_on_net_one_has_no_room(runtime, emulator, account, dispatcher,
                                                                       sandesh):
    """Never waiting for an on-net SIM: affinity must not delay a code."""
    ids = sims_by_name(sandesh)
    sandesh("sim", "disable", "emu-2")
    time.sleep(1.0)
    fill = [send(runtime, account, f"fill {i}", prefix=NTC_NUMBER).id for i in range(29)]
    wait_for(runtime, fill, {"delivered"}, timeout=30)
    reserve = send(runtime, account, "000000 is your code", "otp", prefix=NTC_NUMBER).id  # the OTP reserve
    wait_for(runtime, [reserve], {"delivered"})
    assert sims_by_name(sandesh)["emu-1"]["partsUsed"] == 30
    sandesh("sim", "enable", "emu-2")
    wait_for_state(sandesh, "emu-2", "active", timeout=5)
    code = send(runtime, account, "135790 is your code", "otp", prefix=NTC_NUMBER)
    started = time.monotonic()
    wait_for(runtime, [code.id], {"sent", "delivered"})
    assert sent_by(runtime, [code.id]) == {ids["emu-2"]["id"]}
    assert time.monotonic() - started < 1.0


def test_disable_and_enable_reach_a_running_dispatcher_within_a_second(runtime, emulator, account, dispatcher,
                                                                      sandesh):
    ids = sims_by_name(sandesh)
    sandesh("sim", "disable", "emu-1")
    time.sleep(1.0)
    after = [send(runtime, account, f"while emu-1 is off {i}", prefix=NTC_NUMBER).id for i in range(5)]
    wait_for(runtime, after, {"delivered"})
    assert sent_by(runtime, after) == {ids["emu-2"]["id"]}, "a disabled SIM leases nothing"
    assert sims_by_name(sandesh)["emu-1"]["state"] == "disabled"
    sandesh("sim", "enable", "emu-1")
    time.sleep(1.0)
    back = [send(runtime, account, f"emu-1 is back {i}", prefix=NTC_NUMBER).id for i in range(4)]
    wait_for(runtime, back, {"delivered"})
    assert ids["emu-1"]["id"] in sent_by(runtime, back), "an enabled SIM is used again without a restart"


def test_a_sim_added_while_running_is_used_and_a_changed_port_is_followed(runtime, emulator, account, dispatcher,
                                                                          sandesh):
    with Emulator(sims=2, report_delay=0.05, first=31) as extra:
        [(_, first_device), (_, second_device)] = extra.devices()
        sandesh("sim", "disable", "emu-1")
        sandesh("sim", "disable", "emu-2")
        added = sandesh("sim", "add", "--name", "late-1", "--port", first_device)
        wait_for_state(sandesh, "late-1", "active", timeout=5)
        message = send(runtime, account, "through the new SIM")
        wait_for(runtime, [message.id], {"delivered"})
        assert sent_by(runtime, [message.id]) == {added["id"]}
        assert [m["text"] for m in extra.modems[0].network.received][-1] == "through the new SIM"

        sandesh("sim", "update", "late-1", "--port", second_device)
        time.sleep(1.0)
        moved = send(runtime, account, "after the move")
        wait_for(runtime, [moved.id], {"delivered"})
        assert [m["text"] for m in extra.modems[1].sent] == ["after the move"]
        assert sims_by_name(sandesh)["late-1"]["port"] == second_device
        sandesh("sim", "disable", "late-1")
        sandesh("sim", "enable", "emu-1")
        sandesh("sim", "enable", "emu-2")


def test_a_quarantine_is_kept_across_a_restart_shown_and_lifted_by_an_operator(runtime, emulator, account,
                                                                               dispatcher, sandesh):
    ids = sims_by_name(sandesh)
    emulator.modem("emu-2").fail_next("AT+CMGS", "+CMS ERROR: 8")  # barred: the SIM's fault
    message = send(runtime, account, "to Ncell", prefix=NCELL_NUMBER)
    wait_for(runtime, [message.id], {"delivered"})
    assert sent_by(runtime, [message.id]) == {ids["emu-1"]["id"]}, "failed over to the other SIM"
    quarantined = sims_by_name(sandesh)["emu-2"]
    assert quarantined["state"] == "quarantined" and "CMS 8" in quarantined["reason"]

    dispatcher.close()
    with running_dispatcher(runtime):
        later = [send(runtime, account, f"Ncell after restart {i}", prefix=NCELL_NUMBER).id for i in range(3)]
        wait_for(runtime, later, {"delivered"})
        assert sent_by(runtime, later) == {ids["emu-1"]["id"]}, "still quarantined after a restart"
        assert sims_by_name(sandesh)["emu-2"]["state"] == "quarantined"

        released = sandesh("sim", "release", "emu-2")
        assert released["name"] == "emu-2"
        assert sandesh.run("sim", "release", "emu-2").returncode == 2, "not quarantined any more"
        time.sleep(1.0)
        again = send(runtime, account, "Ncell after release", prefix=NCELL_NUMBER).id
        wait_for(runtime, [again], {"delivered"})
        assert sent_by(runtime, [again]) == {ids["emu-2"]["id"]}, "used again, on-net"
    actions = [(line["action"], line["simId"]) for line in
               (orjson.loads(x) for x in sandesh.run("audit").stdout.splitlines())]
    assert ("sim.quarantined", ids["emu-2"]["id"]) in actions and ("sim.released", ids["emu-2"]["id"]) in actions


def test_a_sim_off_the_network_is_quarantined_and_recovers_by_itself(runtime, emulator, account, dispatcher,
                                                                      sandesh):
    dispatcher.heartbeat_seconds = 0.2
    emulator.modem("emu-2").set_registration(0)
    wait_for_state(sandesh, "emu-2", "quarantined", timeout=15)
    assert sims_by_name(sandesh)["emu-2"]["reason"] == "not registered on the network"
    emulator.modem("emu-2").set_registration(1)
    wait_for_state(sandesh, "emu-2", "active", timeout=15)  # at its next heartbeat
    actions = [line for line in (orjson.loads(x) for x in sandesh.run("audit").stdout.splitlines())
               if line["action"] == "sim.recovered"]
    assert actions and actions[-1]["actor"].startswith("dispatcher-")


def test_a_modem_that_vanishes_is_unreachable_and_used_again_within_10_s_of_its_return(runtime, emulator, account, sandesh,
                                                                                        tmp_path):
    """The port is a symlink, as /dev/serial/by-id is: the device behind it vanishes (the pty
    closes), its SIM shows `unreachable` and its messages go to another SIM; the same SIM
    (same ICCID) comes back behind the same name and is used again."""
    link = tmp_path / "usb-modem-41"
    sandesh("sim", "disable", "emu-1")
    sandesh("sim", "disable", "emu-2")
    try:
        with Emulator(sims=1, report_delay=0.05, first=41) as first_life, \
                Emulator(sims=1, report_delay=0.05, first=42) as other:
            link.symlink_to(first_life.modems[0].device)
            vanishing = sandesh("sim", "add", "--name", "usb-41", "--port", str(link))["id"]
            sandesh("sim", "add", "--name", "usb-42", "--port", other.modems[0].device)
            with running_dispatcher(runtime):
                first_life.modems[0].vanish()
                wait_for_state(sandesh, "usb-41", "unreachable", timeout=5)
                meanwhile = [send(runtime, account, f"while usb-41 is gone {i}").id for i in range(3)]
                wait_for(runtime, meanwhile, {"delivered"})
                assert sent_by(runtime, meanwhile) == {sims_by_name(sandesh)["usb-42"]["id"]}

                with Emulator(sims=1, report_delay=0.05, first=41) as second_life:  # the same SIM, a new device
                    link.unlink()
                    link.symlink_to(second_life.modems[0].device)
                    back_at = time.monotonic()
                    wait_for_state(sandesh, "usb-41", "active", timeout=10)
                    print(f"usb-41 active again {time.monotonic() - back_at:.1f} s after its port returned")
                    sandesh("sim", "disable", "usb-42")
                    time.sleep(1.0)
                    after = send(runtime, account, "usb-41 is back").id
                    wait_for(runtime, [after], {"delivered"})
                    assert sent_by(runtime, [after]) == {vanishing}
                    assert [m["text"] for m in second_life.modems[0].sent] == ["usb-41 is back"]
            sandesh("sim", "disable", "usb-41")
    finally:
        sandesh("sim", "enable", "emu-1")
        sandesh("sim", "enable", "emu-2")


def test_what_a_dead_dispatcher_leased_is_sent_within_5_s_of_a_new_one_starting(runtime, emulator, account, sandesh):
    """A lease outlives its dispatcher by up to 30 s; the thread that opens the SIM's port (which
    it holds alone) hands back the leases left on that SIM at once."""
    from sandesh.projections import dispatch

    sandesh("clock", "advance", "1801")
    message = send(runtime, account, "leased by a dispatcher that died")
    sim = sims_by_name(sandesh)["emu-1"]["id"]
    now = runtime.clock.now()
    with runtime.connection() as conn:
        leased = dispatch.lease(conn, me="dispatcher-dead", now=now, until=now + 30, recent=now - 7 * 86400,
                                max_priority=2, limit=16,
                                choose=lambda head: [(r["message_id"], sim) for r in head
                                                     if r["message_id"] == message.id])
    assert leased == [(message.id, sim)]
    started = time.monotonic()
    with running_dispatcher(runtime):
        wait_for(runtime, [message.id], {"sent", "delivered"}, timeout=5)
    print(f"a dead dispatcher's lease: sent {time.monotonic() - started:.1f} s after a new dispatcher started")


def test_a_sim_thread_that_dies_is_started_again(runtime, emulator, account, dispatcher, sandesh):
    worker = dispatcher.sims[sims_by_name(sandesh)["emu-1"]["id"]]
    worker.retiring.set()  # the thread ends as if it had died (it catches every error itself)
    worker.jobs.put(Stop())
    worker.thread.join(timeout=5)
    deadline = time.monotonic() + 5
    while dispatcher.sims.get(worker.id) in (None, worker) or not dispatcher.sims[worker.id].usable:
        assert time.monotonic() < deadline, "not started again"
        time.sleep(0.05)
    message = send(runtime, account, "after a restart of its thread", prefix=NTC_NUMBER)
    wait_for(runtime, [message.id], {"delivered"})


def test_the_lease_reads_the_head_of_an_index_and_never_sorts_or_scans_the_queue(runtime, account):
    """With 20,000 messages waiting, the plan of the lease's head query has no Sort and no
    sequential scan of dispatch_queue, so its cost does not grow with the queue."""
    from sandesh.projections import dispatch

    request, _ = parse_send({"to": "9779841000000", "text": "Tihar offer", "messageType": "promotional"})
    for _ in range(200):
        runtime.sandesh.log.append_events([e for _ in range(100) for e in _accepted(runtime, account, request)])
    with runtime.connection() as conn:
        conn.execute("ANALYZE dispatch_queue")
        waiting = conn.execute("SELECT count(*) AS n FROM dispatch_queue WHERE sim_id IS NULL").fetchone()["n"]
        assert waiting >= 20_000
        now = runtime.clock.now()
        params = {"now": now, "recent": now - 7 * 86400, "max_priority": 2, "limit": 16}
        plan = "\n".join(r["QUERY PLAN"] for r in conn.execute("EXPLAIN " + dispatch.HEAD, params))
        [tree] = conn.execute("EXPLAIN (FORMAT JSON) " + dispatch.HEAD, params).fetchone()["QUERY PLAN"]

    def nodes(node):
        yield node
        for child in node.get("Plans", []):
            yield from nodes(child)

    def reads_queue(node):
        return any(n.get("Relation Name") == "dispatch_queue" for n in nodes(node))

    # no Sort above a read of the queue (the sticky-SIM lookup may sort a recipient's few parts,
    # as a server with no statistics on sent_parts plans it), and no sequential scan of it
    assert not [n for n in nodes(tree["Plan"]) if n["Node Type"] == "Sort" and reads_queue(n)], plan
    assert "Seq Scan on dispatch_queue" not in plan, plan
    assert "dispatch_queue_head" in plan, plan


def _accepted(runtime, account, request):
    """The events of one accepted message, not yet appended (so 100 go in one append)."""
    from sandesh.domain.message import accept

    message = accept(client_id=account[1], workspace_id=account[0], to=request.to, text=request.text,
                     message_type=request.message_type, segments=request.segments, encoding=request.encoding,
                     cost=0, idempotency_key=None, request_hash=None, at=runtime.clock.now())
    return message.collect_events()
