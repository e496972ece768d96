"""A SIM found again wherever it is plugged (`SANDESH_MODEM_PORTS`; docs/operations.md,
"SIMs and modems"): once its port has been gone for 30 s of the service clock, its dispatcher
asks the free ports of the glob for the SIM's ICCID and moves it to the one that answers with it.
Real PostgreSQL, emulated modems on pseudo-terminals behind a folder of symlinks as
/dev/serial/by-id is, the real `sandesh` command."""
import os
import time

import orjson
import pytest

from sandesh.domain.sending import parse_send
from sandesh.scripts.service.emulator import Emulator
from tests.conftest import running_dispatcher, wait_for_status
from tests.helpers import funded_workspace


@pytest.fixture(scope="module")
def by_id(tmp_path_factory):
    return tmp_path_factory.mktemp("serial")


@pytest.fixture(scope="module")
def env(env, by_id):
    return {**env, "SANDESH_MODEM_PORTS": str(by_id / "usb-*")}


@pytest.fixture(scope="module")
def account(runtime):
    ws = funded_workspace(runtime.sandesh, "Refind", 10**7, "t")
    return ws, runtime.sandesh.operators.create_client(ws, "R", None, 1000, "t")[0].id


def send(runtime, account, text, number):
    request, problems = parse_send({"to": f"97798412345{number:02d}", "text": text, "messageType": "transactional"})
    assert not problems
    return runtime.sandesh.sending.send(account[1], account[0], request, 100 * request.segments).id


def sim_named(sandesh, name):
    return next(s for s in sandesh("sim", "list")["sims"] if s["name"] == name)


def wait_for_state(sandesh, name, state, timeout=10.0):
    deadline = time.monotonic() + timeout
    while (sim := sim_named(sandesh, name))["state"] != state:
        assert time.monotonic() < deadline, sim
        time.sleep(0.1)
    return sim


def test_a_sim_whose_port_is_gone_for_30_s_is_moved_to_the_free_port_that_answers_with_its_iccid(
        runtime, sandesh, by_id, account):
    """"A dispatcher whose SIM's port has been gone for 30 s asks the free ports of
    SANDESH_MODEM_PORTS for its ICCID, and moves the SIM to the one that answers with it." A port
    that answers with another ICCID, or stays silent (a stick's diagnostic port), is never taken."""
    old, stranger_link = by_id / "usb-modem-A-if00", by_id / "usb-modem-B-if00"
    silent_link, new = by_id / "usb-modem-C-if00", by_id / "usb-modem-C-if01"
    silent_master, silent_slave = os.openpty()  # nobody answers on it
    try:
        with Emulator(sims=1, report_delay=0.05, first=51) as first_life, \
                Emulator(sims=1, report_delay=0.05, first=52) as stranger:
            old.symlink_to(first_life.modems[0].device)
            stranger_link.symlink_to(stranger.modems[0].device)
            sim_id = sandesh("sim", "add", "--name", "usb-51", "--port", str(old))["id"]
            with running_dispatcher(runtime) as dispatcher:
                wait_for_state(sandesh, "usb-51", "active")
                first_life.modems[0].vanish()  # unplugged: the device and its by-id name go
                old.unlink()
                wait_for_state(sandesh, "usb-51", "unreachable")
                waiting = [send(runtime, account, f"waiting for usb-51 {i}", i) for i in range(3)]

                with Emulator(sims=1, report_delay=0.05, first=51) as second_life:  # the same SIM, another socket
                    silent_link.symlink_to(os.ttyname(silent_slave))
                    new.symlink_to(second_life.modems[0].device)
                    time.sleep(5.5)  # the thread tries its own port again at least once meanwhile
                    assert sim_named(sandesh, "usb-51")["port"] == str(old)  # gone for less than 30 s
                    assert {runtime.sandesh.history.message(m).status for m in waiting} == {"queued"}

                    sandesh("clock", "advance", "31")
                    moved_at = time.monotonic()
                    wait_for_status(runtime, waiting, {"delivered"}, timeout=20)
                    print(f"usb-51 sent its waiting messages {time.monotonic() - moved_at:.1f} s after its port "
                          "had been gone for 30 s")

                    assert sorted(m["text"] for m in second_life.modems[0].sent) == sorted(
                        f"waiting for usb-51 {i}" for i in range(3))
                    assert {runtime.sandesh.history.message(m).sim_id for m in waiting} == {sim_id}
                    assert sim_named(sandesh, "usb-51")["port"] == str(new)
                    assert dispatcher.sims[sim_id].sim["port"] == str(new)
                    moves = [line for line in (orjson.loads(x) for x in sandesh.run("audit").stdout.splitlines())
                             if line["action"] == "sim.port_changed" and line["simId"] == sim_id]
                    assert len(moves) == 1 and moves[0]["details"]["port"] == str(new)
                    assert moves[0]["actor"] == dispatcher.me and moves[0]["actor"].startswith("dispatcher-")

                    assert stranger.modems[0].sent == []  # another ICCID: asked, never taken
                    assert str(stranger_link) not in {s["port"] for s in sandesh("sim", "list")["sims"]}
                    assert str(silent_link) not in {s["port"] for s in sandesh("sim", "list")["sims"]}
            sandesh("sim", "disable", "usb-51")
    finally:
        os.close(silent_master)
        os.close(silent_slave)
