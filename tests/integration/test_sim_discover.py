"""`sandesh sim discover` (docs/operations.md, "Discovering modems"): the ports of a glob, what
answers on each and which registered SIM it is; silent ports cost 2 s together; `--apply` adds
and moves SIMs, audited; a port a running dispatcher holds is never opened; no PIN is shown.
Real PostgreSQL, emulated modems and silent pseudo-terminals, the real `sandesh` command."""
import os
import socket
import subprocess
import sys
import time
from contextlib import contextmanager

import orjson
import serial

from sandesh.domain.operators import of_imsi
from sandesh.scripts.service.emulator import Emulator
from sandesh.scripts.service.commands import register_emulated
from tests.conftest import ROOT, running_dispatcher

_first = iter(range(10, 1000, 10))  # each test's modems have ICCIDs of their own in the module's database


@contextmanager
def modems(folder, count=2, silent=0, profiles=("3gpp",)):
    """`count` emulated modems and `silent` pseudo-terminals nobody answers on, as symlinks in
    `folder` (`emu-N`, `silent-N`), the way /dev/serial/by-id links lead to /dev/ttyUSBn."""
    quiet = [os.openpty() for _ in range(silent)]
    with Emulator(sims=count, report_delay=0.05, first=next(_first), profiles=profiles) as emulator:
        for modem in emulator.modems:
            os.symlink(modem.device, folder / modem.name)
        for i, (_, slave) in enumerate(quiet):
            os.symlink(os.ttyname(slave), folder / f"silent-{i}")
        try:
            yield emulator
        finally:
            for pair in quiet:
                for fd in pair:
                    os.close(fd)


def discover(sandesh, folder, *args):
    return sandesh("sim", "discover", "--ports", f"{folder}/*", *args)


def by_port(found, folder):
    return {os.path.basename(row["port"]): row for row in found["ports"]}


def events(runtime):
    with runtime.connection() as conn:
        return conn.execute("SELECT count(*) AS n FROM sandesh_events").fetchone()["n"]


def audit(sandesh):
    return [orjson.loads(line) for line in sandesh.run("audit").stdout.splitlines()]


def test_identifies_each_modem_and_skips_silent_ports_within_about_2_s(sandesh, tmp_path):
    """A port that does not answer AT with OK within 2 s is skipped; ports are asked at once."""
    with modems(tmp_path, count=3, silent=5, profiles=("3gpp", "huawei", "quectel")) as emulator:
        found = by_port(discover(sandesh, tmp_path), tmp_path)
    assert sorted(found) == [m.name for m in emulator.modems] + [f"silent-{i}" for i in range(5)]
    for modem in emulator.modems:
        row = found[modem.name]
        assert row["status"] == "identified" and row["device"] == modem.device
        assert (row["iccid"], row["imsi"]) == (modem.iccid, modem.imsi)
        assert row["manufacturer"] and row["model"] and row["signalDbm"] == -73
    assert [found[m.name]["operator"] for m in emulator.modems] == [of_imsi(m.imsi) for m in emulator.modems]
    for i in range(5):
        assert found[f"silent-{i}"]["status"] == "no answer"
        assert found[f"silent-{i}"]["iccid"] is None and found[f"silent-{i}"]["action"] is None


def test_eight_silent_ports_take_2_s_not_16(tmp_path):
    from sandesh.workers import discover as discovery

    with modems(tmp_path, count=0, silent=8):
        ports = discovery.matching([f"{tmp_path}/*"])
        started = time.monotonic()
        found = discovery.discover(ports, {})
        elapsed = time.monotonic() - started
    assert [row["status"] for row in found] == ["no answer"] * 8
    assert 1.9 < elapsed < 3.0, elapsed


def test_shows_registered_and_unregistered_sims_and_changes_nothing_without_apply(runtime, sandesh, tmp_path):
    with modems(tmp_path, count=2) as emulator:
        known, new = emulator.modems
        register_emulated(runtime, [("known-1", known.device)], "test")
        before, listed = events(runtime), sandesh("sim", "list")["sims"]
        found = discover(sandesh, tmp_path)
        assert events(runtime) == before, "a discover without --apply appends nothing"
        assert sandesh("sim", "list")["sims"] == listed
    assert found["applied"] is False and isinstance(found["seconds"], float)
    rows = by_port(found, tmp_path)
    assert set(rows[known.name]) == {"port", "device", "usb", "status", "reason", "manufacturer", "model", "iccid",
                                     "imsi", "operator", "signalDbm", "sim", "action", "name", "movedFrom"}
    known_id = next(s["id"] for s in listed if s["name"] == "known-1")
    assert rows[known.name]["sim"] == {"id": known_id, "name": "known-1", "port": known.device}
    assert rows[known.name]["action"] is None, "the same device under another name is not a move"
    assert rows[new.name]["sim"] is None and rows[new.name]["action"] == "add"
    assert rows[new.name]["name"] == f"{rows[new.name]['operator']}-{new.iccid[-4:]}"


def test_apply_adds_new_sims_and_moves_one_found_on_another_port(runtime, sandesh, tmp_path):
    with modems(tmp_path, count=3) as emulator:
        moved, first, second = emulator.modems
        gone = sandesh("sim", "add", "--name", "moved-1", "--port", str(tmp_path / "was-here"))
        runtime.sandesh.sims.identify_sim(gone["id"], moved.iccid, moved.imsi)  # it answered there before
        sandesh("sim", "add", "--name", "pool-1", "--port", "loop://")
        found = by_port(discover(sandesh, tmp_path, "--apply", "--name-prefix", "pool-"), tmp_path)
        again = by_port(discover(sandesh, tmp_path), tmp_path)
    assert found[moved.name]["action"] == "move" and found[moved.name]["movedFrom"] == str(tmp_path / "was-here")
    assert [found[m.name]["name"] for m in (first, second)] == ["pool-2", "pool-3"]
    sims = {s["name"]: s for s in sandesh("sim", "list")["sims"]}
    assert sims["moved-1"]["port"] == str(tmp_path / moved.name) and sims["moved-1"]["id"] == gone["id"]
    for modem, name in ((first, "pool-2"), (second, "pool-3")):
        assert (sims[name]["port"], sims[name]["iccid"], sims[name]["imsi"]) == (str(tmp_path / modem.name),
                                                                              modem.iccid, modem.imsi)
    lines = [line for line in audit(sandesh) if line["simId"] in {sims[n]["id"] for n in ("moved-1", "pool-2", "pool-3")}]
    assert [(line["action"], line["actor"]) for line in lines[-3:]] == [("sim.port_changed", "tester"),
                                                                       ("sim.added", "tester"), ("sim.added", "tester")]
    assert all(row["action"] is None for row in again.values()), "a second run finds nothing to change"


@contextmanager
def dispatcher_process(env):
    """A dispatcher that reports its process (host and pid) as `sandesh worker dispatch` does."""
    from sandesh.domain.settings import Settings
    from sandesh.scripts.service.bootstrap import bootstrap

    runtime = bootstrap(Settings.from_env(env), pool_size=6, process="dispatch")
    try:
        with running_dispatcher(runtime, host="rack-1") as running:
            yield running
    finally:
        runtime.close()


def wait_for_heartbeat(sandesh, name, timeout=15.0):
    deadline = time.monotonic() + timeout
    while not (sim := {s["name"]: s for s in sandesh("sim", "list")["sims"]}[name])["heartbeatAt"] \
            or sim["state"] != "active":
        assert time.monotonic() < deadline, sim
        time.sleep(0.2)


def test_a_port_a_running_dispatcher_holds_is_refused_and_never_opened(runtime, sandesh, env, tmp_path):
    with modems(tmp_path, count=2) as emulator:
        driven, other = emulator.modems
        register_emulated(runtime, [("driven-1", str(tmp_path / driven.name))], "test")
        sim_id = {s["name"]: s for s in sandesh("sim", "list")["sims"]}["driven-1"]["id"]
        runtime.sandesh.sims.update_sim(sim_id, None, "test", {"host": "rack-1"})
        with dispatcher_process(env) as running:
            wait_for_heartbeat(sandesh, "driven-1")
            with serial.Serial(other.device, exclusive=True):  # another program holds this one
                found = by_port(discover(sandesh, tmp_path), tmp_path)
            named = sandesh.run("sim", "discover", "--ports", str(tmp_path / driven.name))
    held = found[driven.name]
    assert held["status"] == "held" and held["iccid"] is None
    assert held["reason"] == (f"held by dispatcher {running.me} on {socket.gethostname()} (pid {os.getpid()}) "
                              "for SIM driven-1")
    assert held["sim"]["name"] == "driven-1"
    assert found[other.name]["status"] == "held"
    assert found[other.name]["reason"] == "another process holds the port open (its exclusive lock)"
    assert named.returncode == 2 and named.stdout == ""
    assert str(tmp_path / driven.name) in named.stderr and running.me in named.stderr
    assert socket.gethostname() in named.stderr


def test_no_pin_is_ever_shown(runtime, sandesh, tmp_path):
    """A SIM's PIN is sealed and never printed: not in JSON, not in the table, not on stderr."""
    with modems(tmp_path, count=2) as emulator:
        locked, registered = emulator.modems
        locked.pin = "7395"
        locked.set_pin_state("SIM PIN")
        register_emulated(runtime, [("pinned-1", registered.device)], "test")
        sandesh("sim", "update", "pinned-1", "--pin", "8642")
        as_json = sandesh.run("sim", "discover", "--ports", f"{tmp_path}/*", "--apply", "--name-prefix", "pinned-")
        sandesh("sim", "update", "pinned-2", "--pin", "7395")
        as_table = on_a_terminal(sandesh, "sim", "discover", "--ports", f"{tmp_path}/*")
    rows = by_port(orjson.loads(as_json.stdout), tmp_path)
    assert rows[locked.name]["status"] == "PIN required" and rows[locked.name]["iccid"] == locked.iccid
    assert rows[locked.name]["imsi"] is None and rows[locked.name]["sim"]["name"] == "pinned-2"
    assert "PIN required" in as_table and "pinned-1" in as_table and "PORT" in as_table
    for output in (as_json.stdout, as_json.stderr, as_table):
        assert "8642" not in output and "7395" not in output


def on_a_terminal(sandesh, *args):
    """What the command prints when its stdout is a terminal."""
    master, slave = os.openpty()
    try:
        process = subprocess.Popen([sys.executable, "-m", "sandesh.scripts.service.cli", *args], cwd=sandesh.cwd,
                                   env={**sandesh.env, "PYTHONPATH": str(ROOT)}, stdout=slave,
                                   stderr=subprocess.PIPE)
        os.close(slave)
        output = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the command ended and closed the terminal
                break
            if not chunk:
                break
            output += chunk
        assert process.wait(timeout=30) == 0, process.stderr.read()
        return output.decode() + process.stderr.read().decode()
    finally:
        os.close(master)
