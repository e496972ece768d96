"""The emulator as its own process (`python -m sandesh.scripts.service.emulator`): it prints its
modems, takes commands on stdin and stops on SIGTERM."""
import json
import os
import signal
import subprocess
import sys

import serial

from tests.conftest import ROOT
from tests.unit.test_emulator import PHONE, at, read_line


def test_command_prints_modems_takes_commands_and_stops_on_sigterm(tmp_path):
    process = subprocess.Popen(
        [sys.executable, "-m", "sandesh.scripts.service.emulator", "--sims", "2", "--phones-log", str(tmp_path / "p.jsonl")],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        modems = [json.loads(process.stdout.readline()) for _ in range(2)]
        assert [m["name"] for m in modems] == ["emu-1", "emu-2"]
        assert modems[0]["device"] != modems[1]["device"] and modems[0]["iccid"] != modems[1]["iccid"]
        with serial.serial_for_url(modems[1]["device"], baudrate=115200, timeout=2) as client:
            at(client, "ATE0")
            at(client, "AT+CNMI=2,1,0,1,0")
            process.stdin.write(json.dumps({"sim": "emu-2", "inbound": {"from": PHONE, "text": "hi"}}) + "\n")
            process.stdin.flush()
            assert json.loads(process.stdout.readline()) == {"ok": True, "stored": [0]}
            assert read_line(client) == '+CMTI: "SM",0'
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=5) == 0
    finally:
        process.kill()
