"""The driver against real device families as the emulator plays them (scripts/service/emulator_profiles.py),
over pseudo-terminals opened by the same pyserial code that opens /dev/ttyUSB0: the device asked,
not assumed (docs/operations.md, "Modems")."""
import dataclasses
import time
from contextlib import contextmanager

import pytest

from sandesh.domain.pdu import decode_status_report, encode_submit
from sandesh.domain.sim import PIN, SIM_FAULT
from sandesh.scripts.service.emulator import VirtualModem
from sandesh.scripts.service.emulator_profiles import PROFILES
from sandesh.workers.device import DIRECT, INDICATED, NONE, POLLED, STORED, SimNotReady, StepFailed, negotiate
from sandesh.workers.modem import Modem, Refused, Timeouts

TO = "9779812345678"
QUICK = Timeouts(command=2.0, prompt=2.0, submit=5.0, ussd=3.0)

# What Sandesh must learn and choose for each family (docs/operations.md, "Device profiles tested").
EXPECTED = {
    "3gpp": ("Sandesh", "EMU25", "EMU25-1.0", "2,1,0,1,0", DIRECT),
    "huawei": ("huawei", "E1752", "11.126.13.00.00", "2,1,0,1,0", DIRECT),
    "zte": ("ZTE INCORPORATED", "K3565-Z", "BD_P673A2V1.0.0B09", "2,1,0,2,0", STORED),
    "simcom": ("SIMCOM_Ltd", "SIMCOM_SIM800L", "1418B05SIM800L24", "2,1,0,1,0", DIRECT),
    "quectel": ("Quectel", "EC25", "EC25EFAR06A01M4G", "2,1,0,1,0", DIRECT),
    "cinterion": ("Cinterion", "MC75i", "REVISION 04.004", "2,1,0,2,1", STORED),
    "wavecom": ("WAVECOM MODEM", "MULTIBAND  900E  1800", None, "2,1,0,1,0", DIRECT),
    "telit": ("Telit", "GL865-DUAL V3", "16.01.152", "2,1,0,1,0", DIRECT),
}


def opened(virtual: VirtualModem, **options) -> Modem:
    driver = Modem(virtual.device, timeouts=QUICK, **options)
    driver.transcript = []
    driver.open()
    return driver


@contextmanager
def driving(profile="3gpp", **options):
    """A virtual modem playing `profile` and a driver on its port, every exchange recorded."""
    with VirtualModem("p", 3, profile=profile, **options) as virtual:
        driver = opened(virtual)
        try:
            yield virtual, driver
        finally:
            driver.close()


def asked(driver: Modem, command: str) -> list:
    return [e for e in driver.transcript if e.command == command]


def test_every_profile_is_tested():
    assert set(EXPECTED) == set(PROFILES)


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_each_family_is_identified_and_given_modes_it_takes(name):
    with driving(name, cmgs_seconds=0.05) as (virtual, driver):
        device = negotiate(driver)
        manufacturer, model, firmware, cnmi, reports = EXPECTED[name]
        assert (device.manufacturer, device.model, device.firmware) == (manufacturer, model, firmware)
        assert (device.iccid, device.imsi) == (virtual.iccid, virtual.imsi)
        assert (device.cnmi, device.reports, device.inbound) == (cnmi, reports, INDICATED)
        assert virtual.cnmi == tuple(int(v) for v in cnmi.split(","))  # what the device holds now
        [mr] = [driver.send_part(p.pdu, p.length) for p in encode_submit(TO, f"hello {name}")]
        assert virtual.sent[-1]["mr"] == mr and virtual.network.received[-1]["text"] == f"hello {name}"


def test_a_cpin_answer_without_ok_completes_the_command_at_once_for_a_known_family():
    """Old Wavecom firmware sends `+CPIN: READY` and nothing after it (gammu F_CPIN_NO_OK)."""
    with driving("wavecom", busy_seconds=0) as (virtual, driver):
        started = time.monotonic()
        negotiate(driver)
        assert time.monotonic() - started < 1.0 < QUICK.command
        [cpin] = asked(driver, "AT+CPIN?")
        assert cpin.answer == ["+CPIN: READY"] and cpin.final == "(none)"


def test_an_unknown_device_that_omits_ok_after_cpin_costs_half_a_second_once():
    quirky = dataclasses.replace(PROFILES["3gpp"], cpin_no_ok=True)
    with driving(quirky) as (virtual, driver):
        started = time.monotonic()
        assert driver.command("AT+CPIN?", complete_on="+CPIN:") == ["+CPIN: READY"]
        first = time.monotonic() - started
        started = time.monotonic()
        assert driver.command("AT+CPIN?", complete_on="+CPIN:") == ["+CPIN: READY"]
        assert 0.4 < first < 1.0 and time.monotonic() - started < 0.2  # learned: at once from then on


def test_command_not_support_ends_at_once_and_a_refused_command_is_not_asked_again():
    """Huawei sticks lack AT+CCID and (3G) AT+CEREG?: each costs no time, once."""
    with driving("huawei") as (virtual, driver):
        started = time.monotonic()
        with pytest.raises(Refused, match="COMMAND NOT SUPPORT"):
            driver.command("AT+CCID")
        assert time.monotonic() - started < 0.3
        device = negotiate(driver)
        assert time.monotonic() - started < 1.0
        assert device.iccid == virtual.iccid  # from AT^ICCID?, whose answer is not an unsolicited ^ line
        for _ in range(3):
            assert driver.health().registered
        assert [e.final for e in asked(driver, "AT+CEREG?")] == ["COMMAND NOT SUPPORT"]  # once, not per heartbeat
        assert len(asked(driver, "AT+CREG?")) == 3


def test_narrow_cnmi_ranges_are_read_not_guessed():
    """A Cinterion MC75i answers +CMS ERROR: 538 to AT+CNMI=2,1,0,1,0; its AT+CNMI=? says what it takes."""
    with driving("cinterion", busy_seconds=0) as (virtual, driver):
        device = negotiate(driver)
        assert [e.command for e in driver.transcript if e.command.startswith("AT+CNMI")] == [
            "AT+CNMI=?", "AT+CNMI=2,1,0,2,1"]
        assert (device.reports, device.cnmi) == (STORED, "2,1,0,2,1")


def test_a_setting_the_device_lists_but_refuses_is_followed_by_the_next():
    """Qualcomm-based ZTE sticks list direct reports (ds 1) in AT+CNMI=? and refuse them."""
    with driving("zte") as (virtual, driver):
        device = negotiate(driver)
        tried = [(e.command, e.final) for e in driver.transcript if e.command.startswith("AT+CNMI=")]
        assert tried[1:] == [("AT+CNMI=2,1,0,1,0", "+CMS ERROR: 303"), ("AT+CNMI=1,1,0,1,0", "+CMS ERROR: 303"),
                             ("AT+CNMI=3,1,0,1,0", "+CMS ERROR: 303"), ("AT+CNMI=2,1,0,2,0", "OK")]
        assert device.reports == STORED
        assert device.iccid == virtual.iccid  # no AT+CCID: read from EF_ICCID with AT+CRSM, pairs swapped back
        assert asked(driver, "AT+CRSM=176,12258,0,0,10")[0].answer[0].startswith('+CRSM: 144,0,"98')


def test_busy_answers_after_power_up_are_waited_out_not_failures():
    with driving("quectel", busy_seconds=1.2) as (virtual, driver):
        device = negotiate(driver)
        busy = [e for e in driver.transcript if e.final == "+CME ERROR: 14"]
        assert busy and all(e.command == "AT+CPIN?" for e in busy)
        assert device.iccid == virtual.iccid


def test_sms_commands_refused_until_sms_ready_are_waited_out():
    """SIMCom answers ERROR to SMS commands until it prints "SMS Ready"."""
    with driving("simcom", busy_seconds=1.0) as (virtual, driver):
        negotiate(driver)
        pdu_mode = asked(driver, "AT+CMGF=0")
        assert [e.final for e in pdu_mode[:-1]] and {e.final for e in pdu_mode[:-1]} == {"ERROR"}
        assert pdu_mode[-1].final == "OK"


def test_vendor_lines_between_the_prompt_and_cmgs_and_seconds_per_submit(tmp_path):
    """Huawei prints ^RSSI/^MODE/… anywhere, also inside a submit; the network takes seconds per part."""
    unsolicited = []
    with VirtualModem("huawei", 3, profile="huawei") as virtual:  # the profile's own 2 s per +CMGS
        driver = Modem(virtual.device, on_unsolicited=unsolicited.append)  # production time-outs
        driver.open()
        try:
            negotiate(driver)
            started = time.monotonic()
            [mr] = [driver.send_part(p.pdu, p.length) for p in encode_submit(TO, "slow network")]
            assert 1.9 < time.monotonic() - started < 4
            assert virtual.sent[-1]["mr"] == mr
            assert any(u.line.startswith("^") for u in unsolicited)
        finally:
            driver.close()


def test_echo_that_stays_on_after_ate0():
    with driving() as (virtual, driver):
        virtual.echo_sticky = True
        device = negotiate(driver)
        assert virtual.echo and device.iccid == virtual.iccid
        [mr] = [driver.send_part(p.pdu, p.length) for p in encode_submit(TO, "echoed")]
        assert virtual.sent[-1]["mr"] == mr


def test_stored_reports_land_in_the_store_the_device_names():
    """ZTE and Huawei sticks store reports in "SR" and announce +CDSI: "SR",<index>."""
    announced = []
    with VirtualModem("zte", 3, profile="zte", report_delay=0.05, cmgs_seconds=0) as virtual:
        driver = Modem(virtual.device, timeouts=QUICK, on_unsolicited=announced.append)
        driver.open()
        try:
            negotiate(driver)
            [mr] = [driver.send_part(p.pdu, p.length) for p in encode_submit(TO, "report me")]
            deadline = time.monotonic() + 3
            while not any(u.line.startswith("+CDSI:") for u in announced):
                assert time.monotonic() < deadline
                time.sleep(0.02)
            [cdsi] = [u.line for u in announced if u.line.startswith("+CDSI:")]
            index = int(cdsi.rsplit(",", 1)[1])
            assert cdsi.startswith('+CDSI: "SR",') and virtual.first_index <= index
            driver.command('AT+CPMS="SR"')
            report = decode_status_report(driver.read_stored(index))
            assert (report.message_reference, report.recipient) == (mr, TO)
        finally:
            driver.close()


def test_direct_reports_are_not_chosen_where_they_would_need_acknowledging():
    """With AT+CSMS service 1, +CDS must be acknowledged with AT+CNMA (TS 27.005 §3.4.1): a device
    that cannot go back to service 0 gets its reports stored instead."""
    with driving() as (virtual, driver):
        virtual.csms = 1
        virtual.fail_next("AT+CSMS=0", "ERROR")
        device = negotiate(driver)
        assert (device.cnmi, device.reports) == ("2,1,0,2,0", STORED)


def test_a_device_without_indications_is_polled():
    silent = dataclasses.replace(PROFILES["3gpp"], cnmi_test="+CNMI: (0),(0),(0),(0),(0)")
    with driving(silent) as (virtual, driver):
        device = negotiate(driver)
        assert (device.cnmi, device.reports, device.inbound, device.polls) == ("0,0,0,0,0", NONE, POLLED, True)


def test_the_pin_is_entered_when_the_sim_asks_and_a_refused_one_never_again():
    with driving() as (virtual, driver):
        virtual.set_pin_state("SIM PIN")
        with pytest.raises(SimNotReady) as needed:
            negotiate(driver)
        assert needed.value.kind == PIN and "--pin" in str(needed.value)
        with pytest.raises(SimNotReady) as refused:
            negotiate(driver, "0000")
        assert refused.value.kind == PIN and virtual.pin_tries == 2
        with pytest.raises(SimNotReady) as again:
            negotiate(driver, "0000", pin_refused=True)
        assert again.value.kind == PIN and virtual.pin_tries == 2  # not tried: 3 wrong tries lock a SIM
        assert all("0000" not in e.command for e in driver.transcript)  # never shown, even to a probe
        device = negotiate(driver, "1234")
        assert virtual.pin_state == "READY" and device.iccid == virtual.iccid


def test_a_locked_sim_is_named_as_such():
    with driving() as (virtual, driver):
        virtual.set_pin_state("SIM PUK")
        with pytest.raises(SimNotReady, match="SIM PUK") as locked:
            negotiate(driver, "1234")
        assert locked.value.kind == SIM_FAULT


@pytest.mark.parametrize("name", ["3gpp", "huawei"])
def test_the_balance_query_is_read_whether_the_device_packs_ussd_or_not(name):
    with driving(name) as (virtual, driver):
        virtual.credit = 123.45
        device = negotiate(driver)
        request = device.ussd_request("*400#")
        assert request == ("2A1A0C3602" if name == "huawei" else "*400#")  # gammu's F_ENCODED_USSD
        mode, raw, dcs = driver.ussd(request)
        assert (mode, dcs) == (0, 15)
        assert device.ussd_text(raw, dcs) == "Your balance is Rs. 123.45. Valid till 2027-12-31."


def test_a_failed_step_names_itself_the_command_and_the_answer():
    refusing = dataclasses.replace(PROFILES["3gpp"], cnmi_test="+CNMI: (0-3),(0-3),(0-3),(0-2),(0,1)",
                                   cnmi_refused_ds=frozenset({0, 1, 2}))
    with driving(refusing) as (virtual, driver):
        with pytest.raises(StepFailed) as failed:
            negotiate(driver)
        assert failed.value.step == "indications" and "+CMS ERROR: 303" in str(failed.value)
