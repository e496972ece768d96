"""The modem emulator, driven through real pseudo-terminals with a pyserial client."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import serial

from sandesh.domain import pdu
from sandesh.scripts.service.emulator import Emulator, VirtualModem, tpdu_length

ROOT = Path(__file__).resolve().parents[2]
FINAL = ("OK", "ERROR", "+CMS ERROR", "+CME ERROR")
PHONE = "+9779812345678"


@pytest.fixture
def emu(tmp_path):
    with Emulator(2, phones_log=str(tmp_path / "phones.jsonl"), report_delay=0.1) as emulator:
        yield emulator


def open_port(modem: VirtualModem, timeout: float = 2) -> serial.Serial:
    return serial.serial_for_url(modem.device, baudrate=115200, timeout=timeout)


@pytest.fixture
def port(emu):
    """A client on the first modem, set up as the driver does: no echo, numeric errors, direct reports."""
    with open_port(emu.modems[0]) as client:
        at(client, "ATE0")
        assert at(client, "AT+CMEE=1") == ["OK"]
        assert at(client, "AT+CMGF=0") == ["OK"]
        assert at(client, "AT+CNMI=2,1,0,1,0") == ["OK"]
        yield client


def lines_until_final(client: serial.Serial) -> list[str]:
    lines = []
    while True:
        raw = client.readline()
        assert raw, f"timed out; so far {lines}"
        line = raw.decode().strip()
        if line:
            lines.append(line)
            if line.startswith(FINAL):
                return lines


def at(client: serial.Serial, command: str) -> list[str]:
    client.write(command.encode() + b"\r")
    return lines_until_final(client)


def read_prompt(client: serial.Serial) -> bytes:
    seen = b""
    while not seen.endswith(b"> "):
        byte = client.read(1)
        assert byte, f"no prompt; so far {seen!r}"
        seen += byte
    return seen


def send_pdu(client: serial.Serial, pdu: str, length: int) -> list[str]:
    client.write(f"AT+CMGS={length}\r".encode())
    assert read_prompt(client) == b"\r\n> "
    client.write(pdu.encode() + b"\x1a")
    return lines_until_final(client)


def read_line(client: serial.Serial) -> str:
    while True:
        raw = client.readline()
        assert raw, "timed out waiting for a line"
        if raw.strip():
            return raw.decode().strip()


# --- the basic dialogue ------------------------------------------------------------

def test_at_answers_ok_with_real_framing_and_echo_by_default(emu):
    with open_port(emu.modems[0]) as client:
        client.write(b"AT\r")
        assert client.read(len(b"AT\r\r\nOK\r\n")) == b"AT\r\r\nOK\r\n"
        client.write(b"ATE0\r")
        assert client.read(len(b"ATE0\r\r\nOK\r\n")) == b"ATE0\r\r\nOK\r\n"
        client.write(b"AT\r")
        assert client.read(6) == b"\r\nOK\r\n"


def test_ate1_turns_echo_back_on(port):
    port.write(b"ATE1\r")
    assert port.read(6) == b"\r\nOK\r\n"
    port.write(b"AT+CSQ\r")
    expected = b"AT+CSQ\r\r\n+CSQ: 20,99\r\n\r\nOK\r\n"
    assert port.read(len(expected)) == expected


def test_unknown_command_is_an_error(port):
    assert at(port, "AT+NONSENSE") == ["ERROR"]


def test_pin_state(emu, port):
    assert at(port, "AT+CPIN?") == ["+CPIN: READY", "OK"]
    emu.modems[0].set_pin_state("SIM PIN")
    assert at(port, "AT+CPIN?") == ["+CPIN: SIM PIN", "OK"]
    assert at(port, "AT+CMGL=4") == ["+CMS ERROR: 311"]
    assert at(port, "AT+CIMI") == ["+CME ERROR: 11"]


def test_identities_differ_per_modem(emu):
    seen = []
    for modem in emu.modems:
        with open_port(modem) as client:
            at(client, "ATE0")
            ccid = at(client, "AT+CCID")
            imsi = at(client, "AT+CIMI")
            imei = at(client, "AT+CGSN")
        assert ccid[1:] == imsi[1:] == imei[1:] == ["OK"]
        iccid = ccid[0].removeprefix("+CCID: ")
        assert iccid == modem.iccid and iccid.isdigit() and 19 <= len(iccid) <= 20 and iccid.startswith("8997701")
        assert imsi[0] == modem.imsi and imsi[0].startswith("429") and len(imsi[0]) == 15
        seen.append((iccid, imsi[0], imei[0]))
    assert len({s[0] for s in seen}) == len({s[1] for s in seen}) == len({s[2] for s in seen}) == 2
    assert emu.devices() == [(m.name, m.device) for m in emu.modems]
    assert emu.modems[0].device.startswith("/dev/pts/")


def test_signal_registration_and_service_centre(emu, port):
    modem = emu.modems[0]
    assert at(port, "AT+CSQ") == ["+CSQ: 20,99", "OK"]
    assert at(port, "AT+CREG?") == ["+CREG: 0,1", "OK"]
    assert at(port, "AT+CEREG?") == ["+CEREG: 0,1", "OK"]
    modem.set_signal(3)
    modem.set_registration(0)
    assert at(port, "AT+CSQ") == ["+CSQ: 3,99", "OK"]
    assert at(port, "AT+CREG?") == ["+CREG: 0,0", "OK"]
    assert at(port, "AT+CSCA?") == ['+CSCA: "+9779800000000",145', "OK"]
    assert at(port, "AT+CMGF?") == ["+CMGF: 0", "OK"]
    assert at(port, "AT+CSMS=0") == ["+CSMS: 1,1,1", "OK"]
    assert at(port, "AT+CNMA") == ["OK"]
    assert at(port, 'AT+CPMS="SM","SM","SM"') == ["+CPMS: 0,20,0,20,0,20", "OK"]
    assert at(port, "AT+CPMS?") == ['+CPMS: "SM",0,20,"SM",0,20,"SM",0,20', "OK"]


def test_unsolicited_lines_between_an_answer_and_its_ok(emu, port):
    emu.modems[0].interleave("RING", "^RSSI: 20")
    assert at(port, "AT+CSQ") == ["+CSQ: 20,99", "RING", "^RSSI: 20", "OK"]
    emu.modems[0].emit("RING")
    assert read_line(port) == "RING"


# --- sending -----------------------------------------------------------------------

def test_cmgs_prompt_pdu_and_reference(emu, port):
    [part] = pdu.encode_submit("9779812345678", "hello")
    assert send_pdu(port, part.pdu, part.length) == ["+CMGS: 0", "OK"]
    [part] = pdu.encode_submit("9779812345678", "again")
    assert send_pdu(port, part.pdu, part.length) == ["+CMGS: 1", "OK"]
    assert [r["text"] for r in emu.received] == ["hello", "again"]
    assert emu.received[0]["sim"] == "emu-1" and emu.received[0]["parts"] == 1
    logged = [json.loads(line) for line in Path(emu.network.phones_log).read_text().splitlines()]
    assert logged == emu.received


def test_message_reference_wraps_at_255(emu, port):
    emu.modems[0].next_mr = 254
    [part] = pdu.encode_submit("9779812345678", "x", status_report=False)
    refs = [send_pdu(port, part.pdu, part.length)[0] for _ in range(3)]
    assert refs == ["+CMGS: 254", "+CMGS: 255", "+CMGS: 0"]


def test_wrong_length_is_an_invalid_pdu(emu, port):
    [part] = pdu.encode_submit("9779812345678", "hello")
    assert part.length == tpdu_length(part.pdu)
    assert send_pdu(port, part.pdu, part.length + 1) == ["+CMS ERROR: 304"]
    assert send_pdu(port, "00zz", 1) == ["+CMS ERROR: 304"]
    assert emu.received == []


def test_status_report_arrives_after_the_delay(emu, port):
    [part] = pdu.encode_submit("9779812345678", "hello")
    started = time.monotonic()
    assert send_pdu(port, part.pdu, part.length) == ["+CMGS: 0", "OK"]
    header = read_line(port)
    assert time.monotonic() - started >= 0.09
    report_pdu = read_line(port)
    assert header == f"+CDS: {tpdu_length(report_pdu)}"
    report = pdu.decode_status_report(report_pdu)
    assert (report.message_reference, report.status, report.recipient.lstrip("+")) == (0, 0x00, "9779812345678")


def test_scripted_reports_temporary_then_final_and_failures(emu, port):
    emu.modems[0].script_reports((0x20, 0x00), 0x46, None)
    [part] = pdu.encode_submit("9779812345678", "hello")
    for mr in range(3):
        assert send_pdu(port, part.pdu, part.length) == [f"+CMGS: {mr}", "OK"]
    statuses = []
    for _ in range(3):
        assert read_line(port).startswith("+CDS: ")
        report = pdu.decode_status_report(read_line(port))
        statuses.append((report.message_reference, report.status))
    assert sorted(statuses) == [(0, 0x00), (0, 0x20), (1, 0x46)]
    port.timeout = 0.3
    assert port.readline() == b""  # the third part's carrier never reports


def test_no_report_without_cnmi_or_when_not_requested(emu):
    with open_port(emu.modems[0], timeout=0.3) as client:
        at(client, "ATE0")
        [part] = pdu.encode_submit("9779812345678", "hello")
        assert send_pdu(client, part.pdu, part.length) == ["+CMGS: 0", "OK"]
        assert client.readline() == b""
    assert emu.modems[0].reports[0]["emitted"] is False


def test_multipart_message_is_reassembled_for_the_phone(emu, port):
    text = "नमस्ते " * 20
    parts = pdu.encode_submit("9779812345678", text, reference=7)
    assert len(parts) > 1
    for part in reversed(parts):
        assert send_pdu(port, part.pdu, part.length)[-1] == "OK"
    assert len(emu.received) == 1
    message = emu.received[0]
    assert (message["text"], message["parts"], message["encoding"]) == (text, len(parts), "UCS-2")
    assert message["to"].lstrip("+") == "9779812345678"


def test_escape_aborts_the_prompt(emu, port):
    port.write(b"AT+CMGS=20\r")
    read_prompt(port)
    port.write(b"0031\x1b")
    assert lines_until_final(port) == ["OK"]
    assert emu.received == [] and emu.modems[0].next_mr == 0
    assert at(port, "AT") == ["OK"]


# --- inbound and the store ---------------------------------------------------------

def test_inbound_is_stored_announced_listed_read_and_deleted(emu, port):
    text = "a" * 200
    indexes = emu.modems[0].inject_inbound(PHONE, text, parts_order=[2, 1], duplicate=[1], reference=9)
    assert indexes == [0, 1, 2]
    assert [read_line(port) for _ in range(3)] == [f'+CMTI: "SM",{i}' for i in indexes]
    listing = at(port, "AT+CMGL=4")
    assert listing[-1] == "OK"
    heads, bodies = listing[:-1:2], listing[1:-1:2]
    assert heads == [f"+CMGL: {i},0,,{tpdu_length(b)}" for i, b in zip(indexes, bodies)]
    delivered = [pdu.decode_deliver(b) for b in bodies]
    assert [d.sequence for d in delivered] == [2, 1, 1]
    assert {d.reference for d in delivered} == {9} and delivered[0].total == 2
    assert delivered[1].text + delivered[0].text == text
    assert delivered[1].sender.lstrip("+") == PHONE.lstrip("+")

    read = at(port, "AT+CMGR=1")
    assert read[0] == f"+CMGR: 1,,{tpdu_length(read[1])}" and read[2] == "OK"  # CMGL marked it read
    assert at(port, "AT+CMGD=1") == ["OK"]
    assert at(port, "AT+CMGR=1") == ["+CMS ERROR: 321"]
    assert len(at(port, "AT+CMGL=4")) == 5
    assert at(port, "AT+CMGD=0,4") == ["OK"]
    assert at(port, "AT+CMGL=4") == ["OK"]


def test_full_store_refuses_inbound_until_cleared(tmp_path):
    with Emulator(1, store_capacity=3, report_delay=0.1) as emu, open_port(emu.modems[0]) as client:
        modem = emu.modems[0]
        at(client, "ATE0")
        at(client, "AT+CNMI=2,1,0,1,0")
        modem.fill_store()
        assert at(client, "AT+CPMS?")[0] == '+CPMS: "SM",3,3,"SM",3,3,"SM",3,3'
        assert modem.inject_inbound(PHONE, "lost?") == []
        assert modem.memory_full
        [part] = pdu.encode_submit("9779812345678", "hello")
        assert send_pdu(client, part.pdu, part.length) == ["+CMS ERROR: 322"]
        assert at(client, "AT+CMGD=0,4") == ["OK"]
        assert read_line(client) == '+CMTI: "SM",0'  # the SMSC retried
        assert not modem.memory_full
        assert pdu.decode_deliver(at(client, "AT+CMGR=0")[1]).text == "lost?"


# --- misbehaviour ------------------------------------------------------------------

def test_fail_next(emu, port):
    modem = emu.modems[0]
    modem.fail_next("AT+CSQ", "ERROR")
    assert at(port, "AT+CSQ") == ["ERROR"]
    assert at(port, "AT+CSQ") == ["+CSQ: 20,99", "OK"]
    modem.fail_next("AT+CMGS", "+CMS ERROR: 42")
    [part] = pdu.encode_submit("9779812345678", "hello")
    assert send_pdu(port, part.pdu, part.length) == ["+CMS ERROR: 42"]
    assert send_pdu(port, part.pdu, part.length) == ["+CMGS: 0", "OK"]
    assert len(emu.received) == 1


def test_silence(emu, port):
    modem = emu.modems[0]
    port.timeout = 0.2
    modem.silence(0.3)
    port.write(b"AT\r")
    assert port.read(100) == b""
    time.sleep(0.15)
    assert at(port, "AT") == ["OK"]
    modem.silence()
    port.write(b"AT\r")
    assert port.read(100) == b""
    modem.silence(0)
    assert at(port, "AT") == ["OK"]


def test_hung_prompt_recovers_with_escape(emu, port):
    emu.modems[0].hang_prompt()
    [part] = pdu.encode_submit("9779812345678", "hello")
    port.timeout = 0.3
    port.write(f"AT+CMGS={part.length}\r".encode())
    assert port.read(10) == b""
    port.write(part.pdu.encode() + b"\x1a")
    assert port.read(10) == b""
    port.write(b"\x1b")
    assert lines_until_final(port) == ["OK"]
    assert emu.received == []
    assert send_pdu(port, part.pdu, part.length) == ["+CMGS: 0", "OK"]


def test_hang_after_pdu_sends_but_never_answers(emu, port):
    emu.modems[0].hang_after_pdu()
    [part] = pdu.encode_submit("9779812345678", "hello", status_report=False)
    port.timeout = 0.3
    port.write(f"AT+CMGS={part.length}\r".encode())
    read_prompt(port)
    port.write(part.pdu.encode() + b"\x1a")
    assert port.read(10) == b""
    assert [r["text"] for r in emu.received] == ["hello"]


def test_vanish_makes_reads_and_writes_fail(emu, port):
    modem = emu.modems[0]
    device = modem.device
    modem.vanish()
    with pytest.raises(serial.SerialException):
        port.write(b"AT\r")
        port.read(10)
    with pytest.raises(serial.SerialException):
        serial.serial_for_url(device, baudrate=115200, timeout=1).close()


def test_reset_reboots(emu, port):
    assert at(port, "AT+CFUN=1,1") == ["OK"]
    assert read_line(port) == "RDY"
    port.write(b"AT+CMGL=4\r")
    assert lines_until_final(port) == ["AT+CMGL=4", "+CMS ERROR: 512"]  # echo is back on after boot
    assert at(port, "AT+CNMI?") == ["AT+CNMI?", "+CMS ERROR: 512"]
    assert [read_line(port), read_line(port)] == ["+CPIN: READY", "SMS DONE"]  # the boot ends
    assert at(port, "AT+CNMI?") == ["AT+CNMI?", "+CNMI: 0,0,0,0,0", "OK"]


# --- the command -------------------------------------------------------------------



def test_sixteen_bit_inbound_reference_and_standalone_modem():
    with VirtualModem("solo", 42) as modem, open_port(modem) as client:
        at(client, "ATE0")
        at(client, "AT+CNMI=2,1,0,1,0")
        assert modem.inject_inbound("NTC", "b" * 160 + "c", reference=0x1234) == [0, 1]
        assert [read_line(client) for _ in range(2)] == ['+CMTI: "SM",0', '+CMTI: "SM",1']
        bodies = at(client, "AT+CMGL=4")[1:-1:2]
        delivered = [pdu.decode_deliver(b) for b in bodies]
        assert [(d.reference, d.total, d.sequence) for d in delivered] == [(0x1234, 2, 1), (0x1234, 2, 2)]
        assert len(delivered[0].text) == 152


def test_report_probabilities_and_fail_next_with_full_prefix(emu, port):
    modem = emu.modems[0]
    modem.set_report_probabilities({0x45: 1.0})
    modem.fail_next("AT+CMGS=", "+CMS ERROR: 38")
    [part] = pdu.encode_submit("9779812345678", "hello")
    assert send_pdu(port, part.pdu, part.length) == ["+CMS ERROR: 38"]
    assert send_pdu(port, part.pdu, part.length) == ["+CMGS: 0", "OK"]
    assert read_line(port).startswith("+CDS: ")
    assert pdu.decode_status_report(read_line(port)).status == 0x45
    modem.set_report_probabilities({0x21: 1.0})
    assert send_pdu(port, part.pdu, part.length) == ["+CMGS: 1", "OK"]
    statuses = []
    for _ in range(2):
        read_line(port)
        statuses.append(pdu.decode_status_report(read_line(port)).status)
    assert statuses == [0x21, 0x00]
