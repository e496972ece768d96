"""Android phones running SMS Gateway for Android: the driver (workers/android.py) against the
phone emulator over real HTTP, then a phone in the pool beside a serial modem, registered with
`sandesh sim add` and driven by the dispatcher through its link, with real PostgreSQL."""
import time

import pytest

from sandesh.scripts.service.android_emulator import AndroidPhone
from sandesh.scripts.service.commands import register_emulated
from sandesh.scripts.service.emulator import Emulator
from sandesh.workers import android, links
from sandesh.workers.android import Android
from sandesh.workers.modem import CommandTimeout, ModemError, NotSubmitted, PortGone
from tests import contract
from tests.conftest import running_dispatcher, wait_for_status
from tests.helpers import fails_over, funded_client, send, sims, until

TO = "9779812345678"


@pytest.fixture
def phone():
    with AndroidPhone() as running:
        contract.devices.add(f"127.0.0.1:{running.port}")
        yield running


@pytest.fixture
def driver(phone):
    opened = Android(phone.port_url(), timeout=3, sleep=lambda s: time.sleep(min(s, 0.05)))
    yield opened
    opened.close()


def test_a_wrong_password_is_said_without_it_and_the_phones_health_counts(phone, driver):
    with pytest.raises(ModemError, match="refused the user and password") as refused:
        Android(phone.port_url().replace(phone.password, "not-it"), timeout=3).open()
    assert "not-it" not in str(refused.value)
    assert driver.open() == phone.model
    assert driver.health().registered
    phone.battery = 5  # the app's `fail`
    assert not driver.health().registered


def test_a_message_goes_out_once_under_sandeshs_id_even_when_posted_again(phone, driver):
    driver.open()
    driver.send("msg_1", TO, "तपाईंको पार्सल आइपुग्यो", None)
    assert [(s["id"], s["to"], s["text"]) for s in phone.sent] == [("msg_1", "+" + TO, "तपाईंको पार्सल आइपुग्यो")]
    driver.send("msg_1", TO, "तपाईंको पार्सल आइपुग्यो", None)  # an answer lost: posted again, the phone has it
    assert len(phone.sent) == 1
    time.sleep(0.3)
    assert driver.state("msg_1") == ("Delivered", None)
    assert driver.state("msg_unknown") is None


def test_a_refusal_proves_nothing_went_and_a_sleeping_phone_is_an_unknown_outcome(phone, driver, monkeypatch):
    driver.open()
    phone.refused_numbers.add(TO)
    with pytest.raises(NotSubmitted, match="RESULT_ERROR_GENERIC_FAILURE"):
        driver.send("msg_2", TO, "refused", None)
    monkeypatch.setattr(android, "SENT_WITHIN", 0.5)
    phone.asleep = True
    with pytest.raises(CommandTimeout):
        driver.send("msg_3", "9779812345679", "held", None)
    assert phone.sent == []
    phone.vanish()
    with pytest.raises(PortGone):
        driver.health()


def test_the_inbox_is_read_in_order_from_a_cursor(phone, driver):
    driver.open()
    for n in range(3):
        phone.receive("+9779800000001", f"reply {n}")
        time.sleep(0.002)
    found = driver.inbox(None)
    assert [m.text for m in found] == ["reply 0", "reply 1", "reply 2"]
    assert [m.text for m in driver.inbox(found[1].created_at)] == ["reply 1", "reply 2"]


# The pool

@pytest.fixture(scope="module")
def account(runtime):
    return funded_client(runtime.sandesh, "Android")


def replies(sandesh, text):
    return [r for r in sandesh("inbound", "list")["replies"] if r["text"] == text]


def test_a_phone_sends_reports_replies_once_across_a_restart_and_its_messages_fail_over(
        runtime, account, sandesh, phone):
    phone.receive("+9779800000009", "an old message, from before Sandesh")
    with Emulator(sims=1, first=300, report_delay=0.05) as serial:
        register_emulated(runtime, serial.devices(), "test")
        modem = serial.modems[0]
        sandesh("sim", "disable", modem.name)  # the phone alone first
        added = sandesh("sim", "add", "--name", "phone", "--port", phone.port_url())
        assert added["port"] == f"android://sms@127.0.0.1:{phone.port}" and added["portSecret"] == "set"
        with running_dispatcher(runtime) as dispatcher:
            dispatcher.heartbeat_seconds = 0.3
            listed = until(lambda: (s := sims(sandesh)["phone"])["state"] == "active" and s)
            assert (listed["manufacturer"], listed["model"]) == ("android", phone.model)
            text = "नमस्ते! तपाईंको OTP होइन, अर्डर पठाइयो। " * 2
            message = send(runtime, account, text)
            wait_for_status(runtime, [message.id], {"delivered"})
            assert [(s["id"], s["text"]) for s in phone.sent] == [(message.id, text)]
            phone.receive("+" + message.to, "धन्यवाद")
            reply = until(lambda: replies(sandesh, "धन्यवाद"))
            assert reply[0]["inReplyTo"] == message.id
        assert not replies(sandesh, "an old message, from before Sandesh")
        phone.receive("+" + message.to, "while nobody listened")
        with running_dispatcher(runtime) as dispatcher:  # the workers restarted
            dispatcher.heartbeat_seconds = 0.3
            until(lambda: replies(sandesh, "while nobody listened"))
            time.sleep(1.0)  # a few more looks at the inbox
            assert len(replies(sandesh, "धन्यवाद")) == 1 and len(replies(sandesh, "while nobody listened")) == 1

            phone.undelivered_numbers.add("9779812340000")
            failed = send(runtime, account, "to a phone that is off", to="9779812340000")
            wait_for_status(runtime, [failed.id], {"undelivered"})

            fails_over(runtime, account, sandesh, phone, "phone", serial)
        sandesh("sim", "disable", "phone")


def test_a_phone_is_asked_after_each_awaiting_message_in_turn_not_only_the_oldest(
        runtime, account, sandesh, phone, monkeypatch):
    """Two messages whose reports never come fill a look of two: the third is still asked after."""
    monkeypatch.setattr(links.AndroidLink, "AWAITING_PER_LOOK", 2)
    phone.unreported_numbers |= {"9779812340001", "9779812340002"}
    sandesh("sim", "add", "--name", "patient", "--port", phone.port_url())
    with running_dispatcher(runtime) as dispatcher:
        dispatcher.heartbeat_seconds = 0.3
        silent = [send(runtime, account, "no report comes", to=number) for number in sorted(phone.unreported_numbers)]
        wait_for_status(runtime, [m.id for m in silent], {"sent"})
        heard = send(runtime, account, "this one is reported")
        wait_for_status(runtime, [heard.id], {"delivered"})
        assert {m.id: runtime.sandesh.history.message(m.id).status for m in silent} == {m.id: "sent" for m in silent}
    sandesh("sim", "disable", "patient")


def test_a_signed_phone_posts_what_it_receives_and_each_fate_at_once_and_nothing_is_recorded_twice(
        runtime, account, sandesh, server, monkeypatch):
    from dataclasses import replace

    import requests

    from sandesh.api.devices import signature

    monkeypatch.setattr(runtime, "settings", replace(runtime.settings, public_url=server.url))
    with AndroidPhone(name="phone-2") as phone:
        contract.devices.add(f"127.0.0.1:{phone.port}")
        added = sandesh("sim", "add", "--name", "signed", "--port", phone.port_url(signed=True))
        assert phone.signing_key not in repr(added) and added["port"] == f"android://sms@127.0.0.1:{phone.port}"
        with running_dispatcher(runtime) as dispatcher:
            dispatcher.heartbeat_seconds = 0.3
            until(lambda: sims(sandesh)["signed"]["state"] == "active")
            assert {h["event"] for h in phone.webhooks.values()} == {"sms:received", "sms:delivered", "sms:failed"}
            assert {h["url"] for h in phone.webhooks.values()} == {f"{server.url}/devices/{added['id']}/events"}
            dispatcher.heartbeat_seconds = 3600  # no more looks at the phone: what comes now came by its posts
            for worker in dispatcher.sims.values():
                worker.report_soon()
            time.sleep(0.5)
            message = send(runtime, account, "Your table is booked")
            wait_for_status(runtime, [message.id], {"delivered"}, timeout=5)
            phone.receive("+" + message.to, "Thank you!")
            reply = until(lambda: replies(sandesh, "Thank you!"), timeout=5)
            assert reply[0]["inReplyTo"] == message.id
            assert ("sms:received", 204) in phone.posted and ("sms:delivered", 204) in phone.posted
            dispatcher.heartbeat_seconds = 0.3  # the inbox read again: the same message, recorded once
            for worker in dispatcher.sims.values():
                worker.report_soon()
            time.sleep(1.5)
            assert len(replies(sandesh, "Thank you!")) == 1

        url = f"{server.url}/devices/{added['id']}/events"
        body = b'{"event":"sms:received","payload":{"messageId":"abc1","sender":"+9779800000111","message":"forged"}}'
        now = str(int(time.time()))

        def post(key: str, timestamp: str, to: str = url) -> int:
            return requests.post(to, data=body, timeout=5, headers={
                "Content-Type": "application/json", "X-Timestamp": timestamp,
                "X-Signature": signature(key, body, timestamp)}).status_code

        assert post("not-the-key", now) == 401
        assert post(phone.signing_key, str(int(time.time()) - 3600)) == 401, "an old post replayed"
        assert post(phone.signing_key, now, f"{server.url}/devices/sim_nobody/events") == 404
        assert not replies(sandesh, "forged"), "a refused post records nothing"
        assert post(phone.signing_key, now) == 204
        assert post(phone.signing_key, now) == 204  # the same message again: taken, recorded once
        assert len(replies(sandesh, "forged")) == 1
        sandesh("sim", "disable", "signed")
