"""A SIM registered while the workers run, on a port inside SANDESH_MODEM_PORTS (a by-id style
symlink, as docs/operations.md advises), sends, as a new user tries it: `sandesh up`'s emulated
SIM disabled as the README says, the same card on another port, `sandesh sim add`.  Real
PostgreSQL, the real `sandesh worker all`, emulated modems on pseudo-terminals, the real
`sandesh` command."""
import subprocess
import sys
import time

import pytest

from sandesh.domain.errors import Refused
from sandesh.domain.sending import parse_send
from sandesh.scripts.service.commands import register_emulated
from sandesh.scripts.service.emulator import Emulator
from tests.conftest import ROOT, wait_for_status
from tests.helpers import funded_workspace

from .test_sim_refind import sim_named, wait_for_state


@pytest.fixture(scope="module")
def by_id(tmp_path_factory):
    return tmp_path_factory.mktemp("serial")


@pytest.fixture(scope="module")
def env(env, by_id):
    return {**env, "SANDESH_MODEM_PORTS": str(by_id / "*")}


@pytest.fixture(scope="module")
def workers(env, tmp_path_factory):
    log = open(tmp_path_factory.mktemp("logs") / "workers.log", "w+")
    process = subprocess.Popen([sys.executable, "-m", "sandesh.scripts.service.cli", "worker", "all"], cwd=ROOT,
                               env={**env, "PYTHONPATH": str(ROOT)}, stdout=log, stderr=subprocess.STDOUT)
    yield log
    process.terminate()
    process.wait(timeout=20)


@pytest.fixture(scope="module")
def account(runtime):
    ws = funded_workspace(runtime.sandesh, "Live add", 10**7, "t")
    return ws, runtime.sandesh.operators.create_client(ws, "L", None, 1000, "t")[0].id


def send_when_routed(runtime, account, text, timeout=20.0):
    """Sends as a client retrying 503 unavailable does, until a SIM is a route."""
    request, problems = parse_send({"to": "9779841234567", "text": text, "messageType": "transactional"})
    assert not problems
    deadline = time.monotonic() + timeout
    while True:
        try:
            return runtime.sandesh.sending.send(account[1], account[0], request, 100 * request.segments).id
        except Refused as refused:
            assert refused.code == "unavailable" and time.monotonic() < deadline, refused
            time.sleep(0.2)


def test_a_card_registered_again_on_a_port_of_the_glob_sends_once_its_old_registration_is_disabled(
        runtime, sandesh, by_id, workers, account):
    """"A disabled SIM gives its ICCID up to the enabled SIM whose modem holds the card": the old
    registration stays in the list, without ICCID, and the new one sends."""
    with Emulator(sims=1, report_delay=0.05, first=61) as first_life:
        register_emulated(runtime, first_life.devices(), "test")  # as `sandesh up` registers its emulator
        old = sim_named(sandesh, first_life.modems[0].name)
        wait_for_state(sandesh, old["name"], "active", timeout=20)
        sandesh("sim", "disable", old["name"])  # the README: "sandesh sim disable emu-1 takes them out at once"
    with Emulator(sims=1, report_delay=0.05, first=61) as again:  # the same card, another device
        link = by_id / "usb-modem-a"
        link.symlink_to(again.modems[0].device)
        added = sandesh("sim", "add", "--name", "usb-a", "--port", str(link))
        message = send_when_routed(runtime, account, "hello again")
        wait_for_status(runtime, [message], {"delivered"}, timeout=20)
        assert [m["text"] for m in again.modems[0].sent] == ["hello again"]
        assert runtime.sandesh.history.message(message).sim_id == added["id"]
        assert sim_named(sandesh, "usb-a")["iccid"] == again.modems[0].iccid
        assert sim_named(sandesh, old["name"])["iccid"] is None
        sandesh("sim", "disable", "usb-a")


def test_two_enabled_registrations_of_one_card_say_so_in_the_list_and_hold_no_port(
        runtime, sandesh, by_id, workers):
    """The second registration's thread does not keep the port: the list names the other SIM,
    and once that one is disabled the second is a route."""
    with Emulator(sims=1, report_delay=0.05, first=71) as emulator:
        first, second = by_id / "usb-modem-b", by_id / "usb-modem-b-again"
        first.symlink_to(emulator.modems[0].device)
        sandesh("sim", "add", "--name", "usb-b", "--port", str(first))
        wait_for_state(sandesh, "usb-b", "active", timeout=20)
        sandesh("sim", "disable", "usb-b")
        sandesh("sim", "enable", "usb-b")  # its ICCID is known: enabled again it holds the card
        wait_for_state(sandesh, "usb-b", "active", timeout=20)
        with Emulator(sims=1, report_delay=0.05, first=71) as twin:  # the same ICCID in another modem
            second.symlink_to(twin.modems[0].device)
            sandesh("sim", "add", "--name", "usb-b2", "--port", str(second))
            deadline = time.monotonic() + 20
            while not (sim := sim_named(sandesh, "usb-b2"))["lastError"]:
                assert time.monotonic() < deadline, sim
                time.sleep(0.2)
            assert sim["state"] == "unreachable"
            assert "registered as SIM 'usb-b', which is enabled" in sim["lastError"]
            sandesh("sim", "disable", "usb-b")
            wait_for_state(sandesh, "usb-b2", "active", timeout=20)
            assert sim_named(sandesh, "usb-b2")["iccid"] == twin.modems[0].iccid
            sandesh("sim", "disable", "usb-b2")


def test_sim_add_refuses_a_port_that_leads_to_another_sims_modem(sandesh, by_id):
    """A by-id link to a modem another SIM drives would wait on that SIM's lock for ever."""
    with Emulator(sims=1, report_delay=0.05, first=81) as emulator:
        sandesh("sim", "add", "--name", "pts-81", "--port", emulator.modems[0].device)
        link = by_id / "usb-modem-c"
        link.symlink_to(emulator.modems[0].device)
        refused = sandesh.run("sim", "add", "--name", "usb-c", "--port", str(link))
        assert refused.returncode == 2, refused
        assert f"leads to {emulator.modems[0].device}, the port of SIM 'pts-81'" in refused.stderr
        assert "usb-c" not in {s["name"] for s in sandesh("sim", "list")["sims"]}
        sandesh("sim", "disable", "pts-81")
