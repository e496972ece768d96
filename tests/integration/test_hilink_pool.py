"""A HiLink stick in the pool beside a serial modem: registered with `sandesh sim add`, driven by
the dispatcher through its link (workers/links.py), over real HTTP to the HiLink emulator and a
real pseudo-terminal to the serial one, with real PostgreSQL."""
import orjson
import pytest

from sandesh.scripts.service.commands import register_emulated
from sandesh.scripts.service.emulator import Emulator
from sandesh.scripts.service.hilink_emulator import HilinkDevice
from tests import contract
from tests.conftest import running_dispatcher, wait_for_status
from tests.helpers import fails_over, funded_client, send, sims, until


@pytest.fixture(scope="module")
def account(runtime):
    return funded_client(runtime.sandesh, "HiLink")


@pytest.fixture
def stick():
    with HilinkDevice(send_seconds=0.05) as device:
        contract.devices.add(f"127.0.0.1:{device.port}")
        yield device


def test_a_stick_sends_gets_its_reports_and_replies_and_its_messages_fail_over_when_it_vanishes(
        runtime, account, sandesh, stick):
    with Emulator(sims=1, first=200, report_delay=0.05) as serial:
        register_emulated(runtime, serial.devices(), "test")
        modem = serial.modems[0]
        sandesh("sim", "disable", modem.name)  # the stick alone first
        added = sandesh("sim", "add", "--name", "stick", "--port", stick.port_url())
        assert added["port"] == stick.port_url()
        with running_dispatcher(runtime) as dispatcher:
            dispatcher.heartbeat_seconds = 0.3
            listed = until(lambda: (s := sims(sandesh)["stick"])["state"] == "active" and s)
            assert (listed["iccid"], listed["imsi"], listed["model"]) == (stick.iccid, stick.imsi, stick.model)
            assert listed["signalDbm"] == stick.rssi_dbm

            text = "तपाईंको अर्डर पठाइयो। धन्यवाद! " * 3  # UCS-2 in two parts: a report for each
            message = send(runtime, account, text)
            wait_for_status(runtime, [message.id], {"delivered"})
            assert [(s.to, s.text) for s in stick.sent] == [("+" + message.to, text)]

            stick.receive("+" + message.to, "ठीक छ, धन्यवाद")
            reply = until(lambda: [r for r in sandesh("inbound", "list")["replies"] if r["text"] == "ठीक छ, धन्यवाद"])
            assert reply[0]["inReplyTo"] == message.id and reply[0]["from"] == "+" + message.to
            until(lambda: not stick.inbox)  # recorded, then deleted from the device

            stick.expire_sessions()  # the device forgot its tokens: a new session, and the send made once
            again = send(runtime, account, "Your parcel is on its way")
            wait_for_status(runtime, [again.id], {"delivered"})
            assert [s.text for s in stick.sent].count("Your parcel is on its way") == 1

            moved = fails_over(runtime, account, sandesh, stick, "stick", serial)
            assert {runtime.sandesh.history.message(m).sim_id for m in moved} == {
                sims(sandesh)[modem.name]["id"]}


def test_a_routers_password_is_sealed_it_sends_and_its_session_ends_with_the_dispatcher(runtime, account, sandesh):
    with HilinkDevice(username="admin", password="s3cret:pw", model="B525s-23a", imei="866110030000002",
                      imsi="429010000000102", iccid="8997701000000001028") as router:
        contract.devices.add(f"127.0.0.1:{router.port}")
        added = sandesh("sim", "add", "--name", "router", "--port", router.port_url())
        assert added["port"] == f"hilink://admin@127.0.0.1:{router.port}" and added["portSecret"] == "set"
        with runtime.connection() as conn:
            row = conn.execute("SELECT * FROM sims WHERE name = 'router'").fetchone()
        assert "s3cret" not in repr(row) and "s3cret" not in repr(sandesh("sim", "list"))
        with running_dispatcher(runtime):
            until(lambda: sims(sandesh)["router"]["state"] == "active")
            message = send(runtime, account, "Namaste from the router")
            wait_for_status(runtime, [message.id], {"delivered"})
            assert router.sessions == 1
        assert [s.text for s in router.sent] == ["Namaste from the router"]
        assert router.sessions == 0, "the dispatcher logged out: the router keeps no session of ours"
        sandesh("sim", "disable", "router")


def test_sim_add_refuses_what_it_cannot_drive_and_never_prints_a_password(sandesh, stick):
    done = sandesh.run("sim", "add", "--name", "phone", "--port", "android://u:p4ss@192.168.1.5/x")
    assert done.returncode != 0 and "android://USER:PASSWORD@HOST" in done.stderr and "p4ss" not in done.stderr
    done = sandesh.run("sim", "add", "--name", "fax", "--port", "ftp://u:p4ss@192.168.1.5")
    assert done.returncode != 0 and "is no kind of port" in done.stderr and "p4ss" not in done.stderr
    done = sandesh.run("sim", "add", "--name", "odd", "--port", "hilink://admin:pw@192.168.8.1:99999")
    assert done.returncode != 0 and "65535" in done.stderr and ":pw@" not in done.stderr
    done = sandesh.run("sim", "add", "--name", "slashed", "--port", "hilink://admin:pa/ss@192.168.8.1")
    assert done.returncode != 0 and "%2F" in done.stderr and "pa/ss" not in done.stderr and "ss@" not in done.stderr
    sandesh("sim", "add", "--name", "first", "--port", stick.port_url())
    done = sandesh.run("sim", "add", "--name", "second", "--port", stick.port_url())
    assert done.returncode != 0 and "one device is one SIM" in done.stderr
    sandesh("sim", "disable", "first")


def test_probe_tells_what_a_stick_or_a_phone_is_without_registering_it_or_printing_a_password(runtime, sandesh,
                                                                                              stick):
    from sandesh.scripts.service.android_emulator import AndroidPhone

    with runtime.connection() as conn:
        before = conn.execute("SELECT count(*) AS n FROM sims").fetchone()["n"]
    probed = sandesh("sim", "probe", stick.port_url())
    assert probed["ok"] and (probed["model"], probed["iccid"], probed["operator"]) == (
        stick.model, stick.iccid, "ncell")
    assert probed["registered"] and probed["signalDbm"] == stick.rssi_dbm
    with AndroidPhone(name="probed") as phone:
        contract.devices.add(f"127.0.0.1:{phone.port}")
        done = sandesh.run("sim", "probe", phone.port_url())
        assert done.returncode == 0 and phone.password not in done.stdout + done.stderr
        assert '"model": "SM-A105F"' in done.stdout or '"model":"SM-A105F"' in done.stdout
        wrong = sandesh.run("sim", "probe", phone.port_url().replace(phone.password, "nope"))
        assert wrong.returncode == 1 and "refused the user and password" in wrong.stderr and "nope" not in wrong.stderr
    with runtime.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM sims").fetchone()["n"] == before, "a probe registers nothing"


def test_discover_finds_a_stick_where_it_is_told_to_look_and_apply_registers_it(sandesh):
    with HilinkDevice(name="found", iccid="8997702000000009991", imsi="429020000009991") as found:
        contract.devices.add(f"127.0.0.1:{found.port}")
        where = ["--ports", "/dev/no-such-port-*", "--hilink", f"127.0.0.1:{found.port},127.0.0.1:9"]
        rows = {r["port"]: r for r in sandesh("sim", "discover", *where)["ports"]}
        assert list(rows) == [f"hilink://127.0.0.1:{found.port}"], "where nothing answers is not listed"
        row = rows[f"hilink://127.0.0.1:{found.port}"]
        assert (row["status"], row["iccid"], row["model"], row["action"]) == (
            "identified", found.iccid, found.model, "add")
        sandesh("sim", "discover", *where, "--apply")
        assert sims(sandesh)[row["name"]]["port"] == f"hilink://127.0.0.1:{found.port}"
        again = sandesh("sim", "discover", *where)["ports"][0]
        assert again["action"] is None and again["sim"]["name"] == row["name"], "registered: nothing more to do"
        sandesh("sim", "disable", row["name"])


def test_discover_finds_a_router_by_its_login_prints_no_password_and_apply_seals_it(sandesh, runtime):
    import subprocess
    import sys

    from tests.conftest import ROOT

    with HilinkDevice(name="locked", iccid="8997702000000009992", imsi="429020000009992",
                      username="admin", password="r0uter-pw") as router:
        contract.devices.add(f"127.0.0.1:{router.port}")
        address, shown = f"127.0.0.1:{router.port}", f"hilink://admin@127.0.0.1:{router.port}"
        bare = sandesh("sim", "discover", "--ports", "/dev/no-such-port-*", "--hilink", address)["ports"][0]
        assert bare["status"] == "failed" and "--hilink USER:PASSWORD@HOST" in bare["reason"], bare
        done = sandesh.run("sim", "discover", "--ports", "/dev/no-such-port-*", "--hilink", f"admin:r0uter-pw@{address}")
        assert done.returncode == 0 and "r0uter-pw" not in done.stdout + done.stderr
        row = orjson.loads(done.stdout)["ports"][0]
        assert (row["port"], row["status"], row["iccid"], row["action"]) == (shown, "identified", router.iccid, "add")
        applied = subprocess.run(  # the login from stdin, as a shell's history would not keep it
            [sys.executable, "-m", "sandesh.scripts.service.cli", "sim", "discover", "--ports", "/dev/no-such-port-*",
             "--hilink", "-", "--apply"], input=f"admin:r0uter-pw@{address}\n", capture_output=True, text=True,
            env={**sandesh.env, "PYTHONPATH": str(ROOT)}, cwd=sandesh.cwd, timeout=60)
        assert applied.returncode == 0 and "r0uter-pw" not in applied.stdout + applied.stderr, applied.stderr
        listed = sims(sandesh)[row["name"]]
        assert (listed["port"], listed["portSecret"], listed["iccid"]) == (shown, "set", router.iccid)
        with running_dispatcher(runtime) as dispatcher:  # it signs in with the login sealed
            dispatcher.heartbeat_seconds = 0.3
            until(lambda: sims(sandesh)[row["name"]]["state"] == "active")
        sandesh("sim", "disable", row["name"])


def test_a_port_with_a_password_can_come_on_stdin_and_an_update_is_checked_as_an_add_is(sandesh):
    import subprocess
    import sys

    from tests.conftest import ROOT

    def command(*args, stdin=""):
        return subprocess.run([sys.executable, "-m", "sandesh.scripts.service.cli", *args], input=stdin,
                              capture_output=True, text=True, env={**sandesh.env, "PYTHONPATH": str(ROOT)},
                              cwd=sandesh.cwd, timeout=60)

    added = command("sim", "add", "--name", "quiet", "--port", "-", stdin="hilink://admin:fr0m-stdin@192.0.2.44\n")
    assert added.returncode == 0, added.stderr
    assert '"hilink://admin@192.0.2.44"' in added.stdout and "fr0m-stdin" not in added.stdout
    moved = sandesh.run("sim", "update", "quiet", "--port", "android://sms@192.0.2.45")  # no password
    assert moved.returncode != 0 and "USER:PASSWORD" in moved.stderr
    both = command("sim", "update", "quiet", "--port", "-", "--pin", "-", stdin="1234\n")
    assert both.returncode != 0 and "both read stdin" in both.stderr
    sandesh("sim", "disable", "quiet")
