"""The HiLink driver (workers/hilink.py) against the HiLink emulator over real HTTP on 127.0.0.1:
the device's quirks that its users report are met without a second send."""
import time

import pytest

from sandesh.scripts.service.hilink_emulator import MAX_SESSIONS, HilinkDevice
from sandesh.workers.hilink import BadPort, Hilink, HilinkPort, Inbound
from sandesh.workers.modem import CommandTimeout, NotSubmitted, PortGone
from tests import contract

TO = "9779812345678"


@pytest.fixture(params=["stick", "router"])
def device(request):
    login = {"username": "admin", "password": "p@ss:w0rd"} if request.param == "router" else {}
    with HilinkDevice(**login) as running:
        contract.devices.add(f"127.0.0.1:{running.port}")
        yield running


@pytest.fixture
def driver(device):
    opened = Hilink(device.port_url(), timeout=3, sleep=lambda s: time.sleep(min(s, 0.1)))
    yield opened
    opened.close()


def test_it_tells_what_the_device_and_its_sim_are(device, driver):
    identity = driver.open()
    assert (identity.model, identity.imei, identity.imsi, identity.iccid) == (
        device.model, device.imei, device.imsi, device.iccid)
    health = driver.health()
    assert health.registered and health.signal_dbm == device.rssi_dbm
    device.registered = False
    assert not driver.health().registered


def test_a_devanagari_message_goes_out_once_and_its_report_comes_to_the_inbox(device, driver):
    driver.open()
    driver.send(TO, "तपाईंको पार्सल आइपुग्यो")
    assert [(s.to, s.text) for s in device.sent] == [("+" + TO, "तपाईंको पार्सल आइपुग्यो")]
    time.sleep(0.3)
    taken: list[Inbound] = []
    assert driver.inbox(taken.append) == 1
    assert [(m.sender, m.report) for m in taken] == [("+" + TO, True)]
    assert device.inbox == {}


def test_sends_one_after_another_wait_for_the_last_instead_of_meeting_113004(device, driver):
    driver.open()
    device.send_seconds = 0.3
    for n in range(3):
        driver.send(TO, f"order {n}")
    assert [s.text for s in device.sent] == ["order 0", "order 1", "order 2"]
    device.fail_next("sms/send-sms", 113004, 113004)  # as when something else sends through the device meanwhile
    driver.send(TO, "order 3")
    assert [s.text for s in device.sent][-1:] == ["order 3"] and len(device.sent) == 4


@pytest.mark.parametrize("code", [125002, 125003])
def test_a_token_the_device_forgot_is_renewed_and_the_send_made_once(device, driver, code):
    driver.open()
    device.fail_next("sms/send-sms", code)
    driver.send(TO, "after a session error")
    device.expire_sessions()  # idle past its timeout: every token and login forgotten
    driver.send(TO, "after the device forgot us")
    assert [s.text for s in device.sent] == ["after a session error", "after the device forgot us"]


def test_a_refusal_proves_nothing_went_and_a_lost_answer_is_an_unknown_outcome(device, driver):
    driver.open()
    device.fail_next("sms/send-sms", 100005)
    with pytest.raises(NotSubmitted):
        driver.send(TO, "refused")
    device.refused_numbers.add(TO)
    with pytest.raises(NotSubmitted):
        driver.send(TO, "failed by the network")
    assert device.sent == []
    device.refused_numbers.clear()
    device.send_seconds = 0.5
    original = driver._await_sent

    def vanish_after_the_post(number):
        device.vanish()  # the stick is pulled out after it took the request
        original(number)

    driver._await_sent = vanish_after_the_post
    with pytest.raises(CommandTimeout):
        driver.send(TO, "gone midway")
    with pytest.raises(PortGone):
        driver.health()
    device.come_back()
    time.sleep(0.6)
    assert driver.health().registered, "plugged in again, it answers on a new session"
    assert [s.text for s in device.sent] == ["gone midway"], "what it took before it went, it sent once"


def test_the_inbox_is_drained_and_a_message_is_deleted_only_once_taken(device, driver):
    driver.open()
    for n in range(60):  # more than one page
        device.receive("+9779800000001", f"reply {n}")

    def failing(message):
        if message.text == "reply 30":
            raise RuntimeError("the database is down")

    with pytest.raises(RuntimeError):
        driver.inbox(failing)
    assert len(device.inbox) == 30, "what was not recorded stays on the device"
    taken = []
    while driver.inbox(taken.append):
        pass
    assert [m.text for m in taken] == [f"reply {n}" for n in range(30, 60)] and device.inbox == {}


def test_closing_logs_out_so_a_router_never_runs_out_of_sessions(device):
    for _ in range(MAX_SESSIONS + 2):
        driver = Hilink(device.port_url(), timeout=3)
        driver.open()
        driver.health()
        driver.close()
    assert device.sessions == 0


def test_the_balance_comes_by_ussd(device, driver):
    driver.open()
    assert driver.ussd("*400#") == "Your balance is Rs. 50.00. Valid till 2027-12-31."


def test_a_port_url_is_read_or_refused_with_a_sentence_and_shown_without_its_password():
    port = HilinkPort.parse("hilink://admin:p%40ss@192.168.1.1:8080")
    assert (port.host, port.port, port.username, port.password) == ("192.168.1.1", 8080, "admin", "p@ss")
    assert port.shown() == "hilink://admin:***@192.168.1.1:8080"
    assert HilinkPort.parse("hilink://192.168.8.1").shown() == "hilink://192.168.8.1"
    for bad, says in [("hilink://", "names the device's address"), ("hilink://admin@192.168.8.1", "both a user"),
                      ("hilink://192.168.8.1:99999", "1 to 65535"), ("hilink://192.168.8.1/api", "nothing else after")]:
        with pytest.raises(BadPort, match=says):
            HilinkPort.parse(bad)


def test_a_wrong_password_is_said_and_an_absent_device_is_gone():
    with HilinkDevice(username="admin", password="right") as device:
        contract.devices.add(f"127.0.0.1:{device.port}")
        wrong = device.port_url().replace(":right@", ":not-it@")
        with pytest.raises(Exception, match="refused the user and password") as refused:
            Hilink(wrong, timeout=3).open()
        assert "not-it" not in str(refused.value)
        port = device.port
    with pytest.raises(PortGone, match="does not answer"):
        Hilink(f"hilink://127.0.0.1:{port}", timeout=1).open()
