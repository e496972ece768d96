"""`sandesh emulator --register`: virtual modems registered as SIMs through the driver, and
found again by ICCID when a restarted emulator gives them new pseudo-terminals."""
import os
import signal
import subprocess
import sys

import orjson

from tests.conftest import ROOT


def start(env):
    process = subprocess.Popen([sys.executable, "-m", "sandesh.scripts.service.cli", "emulator", "--sims", "2", "--register"],
                               cwd=ROOT, env={**env, "PYTHONPATH": str(ROOT)}, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    modems = [orjson.loads(process.stdout.readline()) for _ in range(2)]
    return process, modems


def stop(process):
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=15) == 0


def test_register_then_restart_moves_the_same_sims_to_their_new_ports(env, sandesh):
    process, modems = start(env)
    try:
        sims = {s["name"]: s for s in sandesh("sim", "list")["sims"]}
        for modem in modems:
            sim = sims[modem["name"]]
            assert (sim["port"], sim["iccid"], sim["imsi"]) == (modem["device"], modem["iccid"], modem["imsi"])
    finally:
        stop(process)
    held = [os.openpty() for _ in range(2)]  # take the freed /dev/pts numbers: the restart gets new ones
    process, again = start(env)
    try:
        assert {m["device"] for m in again}.isdisjoint(m["device"] for m in modems)
        after = {s["name"]: s for s in sandesh("sim", "list")["sims"]}
        assert len(after) == 2
        for modem in again:
            assert after[modem["name"]]["id"] == sims[modem["name"]]["id"]
            assert after[modem["name"]]["port"] == modem["device"]
    finally:
        stop(process)
        for pair in held:
            for fd in pair:
                os.close(fd)
    done = sandesh.run("audit")
    actions = [orjson.loads(line)["action"] for line in done.stdout.splitlines()]
    assert actions.count("sim.added") == 2 and actions.count("sim.port_changed") == 2
