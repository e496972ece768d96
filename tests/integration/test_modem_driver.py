"""The modem driver (workers/modem.py) against the emulator over real pseudo-terminals, opened
by the same pyserial code that opens /dev/ttyUSB0 in production."""
import threading
import time

import pytest

from sandesh.domain.cms import Action, classify
from sandesh.domain.pdu import decode_deliver, decode_status_report, encode_submit
from sandesh.scripts.service.emulator import Emulator
from sandesh.workers.device import SimNotReady, negotiate
from sandesh.workers.modem import (CmsError, CommandTimeout, Modem, ModemError, PortGone, PromptTimeout, Refused,
                                   Timeouts, Unsolicited)

TO = "9779812345678"
QUICK = Timeouts(command=1.0, prompt=1.0, submit=1.5)


class Events:
    """Collects unsolicited lines from a driver's reader."""

    def __init__(self):
        self.items: list[Unsolicited] = []
        self.changed = threading.Condition()

    def __call__(self, event: Unsolicited) -> None:
        with self.changed:
            self.items.append(event)
            self.changed.notify_all()

    def wait_for(self, prefix: str, count: int = 1, timeout: float = 5.0) -> list[Unsolicited]:
        deadline = time.monotonic() + timeout
        with self.changed:
            while True:
                found = [e for e in self.items if e.line.startswith(prefix)]
                if len(found) >= count or time.monotonic() > deadline:
                    return found
                self.changed.wait(timeout=0.05)


@pytest.fixture
def emulator():
    with Emulator(sims=2, report_delay=0.05) as running:
        yield running


@pytest.fixture
def events():
    return Events()


@pytest.fixture
def modem(emulator, events):
    driver = Modem(emulator.modems[0].device, timeouts=QUICK, on_unsolicited=events)
    driver.open()
    negotiate(driver)
    yield driver
    driver.close()


def send(modem, text, reference=None):
    return [modem.send_part(part.pdu, part.length)
            for part in encode_submit(TO, text, reference=reference)]


def test_init_reads_the_sims_identity_and_health(emulator, modem):
    virtual = emulator.modems[0]
    identity = negotiate(modem)
    assert (identity.iccid, identity.imsi) == (virtual.iccid, virtual.imsi)
    assert identity.iccid != emulator.modems[1].iccid
    health = modem.health()
    assert health.registered and health.signal_dbm == -113 + 2 * virtual.rssi


def test_a_single_gsm7_part_reaches_the_phone_and_its_report_matches_its_mr(emulator, modem, events):
    [mr] = send(modem, "Namaste from Sandesh {ok}")
    assert emulator.received[-1]["text"] == "Namaste from Sandesh {ok}"
    [report] = events.wait_for("+CDS:")
    decoded = decode_status_report(report.pdu)
    assert (decoded.message_reference, decoded.recipient, decoded.outcome) == (mr, TO, "delivered")


def test_a_six_part_devanagari_message_is_reassembled_exactly(emulator, modem, events):
    text = "नमस्ते " * 57 + "क" * 3  # 402 UTF-16 units: exactly 6 parts of 67
    mrs = send(modem, text, reference=77)
    assert len(mrs) == 6 and len(set(mrs)) == 6
    deadline = time.monotonic() + 5
    while not emulator.received or emulator.received[-1]["parts"] != 6:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert emulator.received[-1]["text"] == text and emulator.received[-1]["encoding"] == "UCS-2"
    reports = [decode_status_report(r.pdu) for r in events.wait_for("+CDS:", count=6)]
    assert sorted(r.message_reference for r in reports) == sorted(mrs)  # matched per part


def test_multipart_gsm7_with_escapes_and_ucs2_with_emoji(emulator, modem):
    for text in ("€{[x]}" * 60, "Dashain greetings 🙏🏽🎉 " * 8):
        send(modem, text, reference=9)
        assert emulator.received[-1]["text"] == text


def test_unsolicited_lines_between_a_command_and_its_ok_are_classified(emulator, modem, events):
    emulator.modems[0].interleave("RING", "^RSSI: 17", '+CMTI: "SM",3')
    assert modem.command("AT+CSQ") == [f"+CSQ: {emulator.modems[0].rssi},99"]  # the answer alone, not the others
    events.wait_for("+CMTI:")
    assert [e.line for e in events.items] == ["RING", "^RSSI: 17", '+CMTI: "SM",3']


def test_inbound_parts_out_of_order_and_duplicated_are_all_read_then_deleted(emulator, modem, events):
    text = "Ma pachhi phone garchhu. " * 14  # 350 septets: 3 GSM-7 parts
    emulator.modems[0].inject_inbound("+9779801112222", text, parts_order=[3, 1, 2], duplicate=[1], reference=42)
    assert len(events.wait_for("+CMTI:", count=4)) == 4
    stored = modem.stored()
    parts = [decode_deliver(pdu) for _, pdu in stored]
    assert [p.sequence for p in parts] == [3, 1, 1, 2]
    assert {(p.sender, p.reference, p.total) for p in parts} == {("+9779801112222", 42, 3)}
    by_sequence = {p.sequence: p.text for p in parts}
    assert "".join(by_sequence[i] for i in (1, 2, 3)) == text
    for index, _ in stored:
        modem.delete_stored(index)
    assert modem.stored() == []


@pytest.mark.parametrize("code, action", [(42, Action.RETRY_ELSEWHERE), (1, Action.REJECT),
                                          (29, Action.QUARANTINE), (304, Action.ALERT), (500, Action.RETRY)])
def test_cms_errors_are_raised_with_their_code_and_the_next_send_works(emulator, modem, code, action):
    emulator.modems[0].fail_next("AT+CMGS", f"+CMS ERROR: {code}")
    with pytest.raises(CmsError) as raised:
        send(modem, "first")
    assert raised.value.code == code and classify(raised.value.code) == action
    send(modem, "second")
    assert emulator.received[-1]["text"] == "second"


@pytest.mark.parametrize("word", ["ERROR", "COMMAND NOT SUPPORT", "TOO MANY PARAMETERS"])
def test_a_refusal_in_any_devices_words_ends_the_command_at_once(emulator, modem, word):
    """Huawei answers COMMAND NOT SUPPORT or TOO MANY PARAMETERS where 3GPP says ERROR: each ends
    the command as soon as it arrives, never after the command's time-out."""
    emulator.modems[0].fail_next("AT+CSQ", word)
    started = time.monotonic()
    with pytest.raises(Refused, match=rf"^{word} after AT\+CSQ$") as raised:
        modem.command("AT+CSQ")
    assert time.monotonic() - started < 0.3 < QUICK.command
    assert raised.value.word == word and "AT+CSQ" in modem.refused
    assert modem.command("AT+CSQ") == [f"+CSQ: {emulator.modems[0].rssi},99"]  # the next command is answered


def test_silence_times_out_and_recovery_brings_the_modem_back(emulator, modem):
    emulator.modems[0].silence(1.5)
    with pytest.raises(CommandTimeout):
        modem.command("AT+CSQ")
    assert modem.recover()
    send(modem, "after silence")
    assert emulator.received[-1]["text"] == "after silence"


def test_a_hung_prompt_times_out_is_aborted_with_esc_and_the_modem_answers_again(emulator, modem):
    emulator.modems[0].hang_prompt()
    with pytest.raises(CommandTimeout, match="prompt"):
        send(modem, "never sent")
    modem.sync()
    send(modem, "sent after the hang")
    assert [m["text"] for m in emulator.received] == ["sent after the hang"]


def test_no_answer_after_the_pdu_is_a_timeout_whose_outcome_is_unknown(emulator, modem):
    emulator.modems[0].hang_after_pdu(deliver=True)
    with pytest.raises(CommandTimeout):
        send(modem, "maybe sent")
    assert emulator.received[-1]["text"] == "maybe sent"  # why the dispatcher must reconcile, not resend
    assert modem.recover()
    send(modem, "next")


def test_a_vanished_port_raises_port_gone_and_recovery_reports_it(emulator, modem):
    emulator.modems[0].vanish()
    with pytest.raises(PortGone):
        for _ in range(3):
            modem.command("AT")
    assert modem.recover() is False


def test_memory_full_is_cms_322_and_deleting_stored_messages_clears_it(emulator, modem):
    virtual = emulator.modems[0]
    virtual.fill_store()
    virtual.inject_inbound("+9779801112222", "no room")
    with pytest.raises(CmsError) as raised:
        send(modem, "blocked")
    assert classify(raised.value.code) == Action.CLEAR_STORE
    for index, _ in modem.stored():
        modem.delete_stored(index)
    send(modem, "after clearing")
    assert emulator.received[-1]["text"] == "after clearing"


def test_a_sim_that_is_not_ready_refuses_init(emulator, events):
    emulator.modems[1].set_pin_state("SIM PIN")
    driver = Modem(emulator.modems[1].device, timeouts=QUICK, on_unsolicited=events)
    driver.open()
    try:
        with pytest.raises(SimNotReady):
            negotiate(driver)
    finally:
        driver.close()


def test_a_modem_reset_comes_back(emulator, modem):
    modem.command("AT+CFUN=1,1")
    time.sleep(0.7)
    negotiate(modem)
    send(modem, "after reset")
    assert emulator.received[-1]["text"] == "after reset"


def test_one_sims_trouble_never_blocks_another(emulator, events):
    stuck, healthy = (Modem(m.device, timeouts=QUICK, on_unsolicited=events) for m in emulator.modems)
    for driver in (stuck, healthy):
        driver.open()
        negotiate(driver)
    emulator.modems[0].silence(None)
    failures = []
    blocked = threading.Thread(target=lambda: failures.append(pytest.raises(ModemError, send, stuck, "stuck")))
    blocked.start()
    started = time.monotonic()
    for i in range(3):
        send(healthy, f"healthy {i}")
    assert time.monotonic() - started < 1.0
    blocked.join()
    # a silent modem never shows the prompt: the send times out before any part left (safe to send elsewhere)
    assert [type(f.value) for f in failures] == [PromptTimeout]
    emulator.modems[0].silence(0)
    assert [m["text"] for m in emulator.received] == ["healthy 0", "healthy 1", "healthy 2"]
    for driver in (stuck, healthy):
        driver.close()
