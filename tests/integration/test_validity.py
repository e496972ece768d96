"""Nothing arrives too late: an OTP whose code expired, or a message whose `validFor` ran out,
is never handed to a modem; it ends failed and refunded.  Each SUBMIT's TP-VP follows what is
left of the message's life.  Real PostgreSQL, emulated modems, the test clock."""
import threading
import time

import pytest

from sandesh.domain.pdu import decode_submit
from sandesh.domain.ports import Caller
from sandesh.domain.sending import OtpSendRequest, parse_send
from tests.helpers import funded_workspace
from sandesh.scripts.service.commands import register_emulated
from sandesh.scripts.service.emulator import Emulator
from tests.conftest import running_dispatcher, wait_for_status


@pytest.fixture(scope="module")
def emulator(runtime):
    with Emulator(sims=1, report_delay=0.05) as running:
        register_emulated(runtime, running.devices(), "test")
        yield running


@pytest.fixture(scope="module")
def account(runtime):
    ws = funded_workspace(runtime.sandesh, "Validity", 100_000, "t")
    client = runtime.sandesh.operators.create_client(ws, "Valid", None, 1000, "t")[0]
    return ws, client.id


def balance(runtime, workspace_id):
    with runtime.connection() as conn:
        return conn.execute("SELECT balance FROM workspaces WHERE id = %s", (workspace_id,)).fetchone()["balance"]


def wait_for(runtime, message_id, statuses, timeout=15.0):
    wait_for_status(runtime, [message_id], statuses, timeout)


def submits_to(emulator, number):
    return [decode_submit(p["pdu"]) for p in emulator.modems[0].sent if p["to"] == number]


def send_otp(runtime, account, to):
    """A code sent as POST /v1/sms/otp/send does, at 100 paisa; the message that carries it."""
    caller = Caller(client_id=account[1], workspace_id=account[0], brand="Valid", workspace_status="active",
                    rates={"transactional": 100, "otp": 100, "promotional": 100},
                    allowed_types=["transactional", "otp", "promotional"], sms_enabled=True, has_route=True,
                    promo_hours=None)
    return runtime.sandesh.otp.send_otp(caller, OtpSendRequest(to, "login", None), "198.51.100.1").message


def send(runtime, account, to, text, valid_for=None):
    body = {"to": to, "text": text, **({"validFor": valid_for} if valid_for else {})}
    request, problems = parse_send(body)
    assert not problems
    return runtime.sandesh.sending.send(account[1], account[0], request, 100 * request.segments)


def test_an_otp_whose_code_expired_while_no_dispatcher_ran_is_never_sent_and_is_refunded(runtime, emulator, account,
                                                                                          sandesh):
    before = balance(runtime, account[0])
    message = send_otp(runtime, account, "9779841000001")
    assert balance(runtime, account[0]) == before - 100, "charged at acceptance"
    sandesh("clock", "advance", "301")  # past the code's 5 minutes
    with running_dispatcher(runtime):
        wait_for(runtime, message.id, {"failed"})
    found = runtime.sandesh.history.message(message.id)
    assert found.error == "expired before it could be sent: its code expired"
    assert submits_to(emulator, "9779841000001") == [], "nothing reached the phone"
    assert balance(runtime, account[0]) == before, "refunded: nothing reached the network"


def test_a_message_whose_valid_for_ran_out_is_never_sent_and_is_refunded(runtime, emulator, account, sandesh):
    before = balance(runtime, account[0])
    message = send(runtime, account, "9779841000002", "Flash sale until 11:00", valid_for=60)
    sandesh("clock", "advance", "61")
    with running_dispatcher(runtime):
        wait_for(runtime, message.id, {"failed"})
    assert runtime.sandesh.history.message(message.id).error == "expired before it could be sent: its validity period ended"
    assert submits_to(emulator, "9779841000002") == []
    assert balance(runtime, account[0]) == before


def test_an_otps_submit_asks_for_no_more_than_its_codes_life(runtime, emulator, account, sandesh):
    with running_dispatcher(runtime):
        message = send_otp(runtime, account, "9779841000003")
        wait_for(runtime, message.id, {"sent", "delivered"})
        [submit] = submits_to(emulator, "9779841000003")
        assert submit.validity_minutes == 5  # the smallest step of a relative TP-VP; the code lives 5 minutes

        timed = send(runtime, account, "9779841000004", "Your table is ready", valid_for=601)
        plain = send(runtime, account, "9779841000005", "Thank you for your order")
        wait_for(runtime, timed.id, {"sent", "delivered"})
        wait_for(runtime, plain.id, {"sent", "delivered"})
    [timed_submit] = submits_to(emulator, "9779841000004")
    [plain_submit] = submits_to(emulator, "9779841000005")
    assert timed_submit.validity_minutes == 15, "what is left (just over 10 min), rounded up to a step"
    assert plain_submit.validity_minutes == 24 * 60, "24 hours stays the default"


def test_a_message_that_expires_while_leased_is_not_sent(runtime, emulator, account, sandesh):
    """Expiry is checked again just before AT+CMGS."""
    with running_dispatcher(runtime) as dispatcher:
        worker = next(iter(dispatcher.sims.values()))
        gate = threading.Event()
        original = worker._send

        def late_send(message_id):
            gate.wait(10)  # leased, not yet submitted: the clock moves on meanwhile
            original(message_id)

        worker._send = late_send
        message = send(runtime, account, "9779841000006", "Doors close at 6", valid_for=60)
        deadline = time.monotonic() + 10
        while not worker.busy:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        sandesh("clock", "advance", "61")
        gate.set()
        wait_for(runtime, message.id, {"failed"})
    assert runtime.sandesh.history.message(message.id).error == "expired before it could be sent: its validity period ended"
    assert submits_to(emulator, "9779841000006") == []
