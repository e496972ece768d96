"""Opt-outs of promotional messages (docs/api.md, "Opt-out"; docs/operations.md, "Opt-outs"), end
to end: replies typed on emulated phones reach real pseudo-terminal modems driven by a real
dispatcher, sends go to a running `sandesh serve`, webhooks to a real HTTPS receiver, all on
real PostgreSQL."""
import itertools
import threading
import time

import orjson
import pytest
import requests

from sandesh.domain.optout import START, STOP, confirmation
from sandesh.projections import optouts
from tests.helpers import funded_workspace
from sandesh.scripts.service.commands import register_emulated
from sandesh.scripts.service.emulator import Emulator
from sandesh.workers import webhook_guard
from sandesh.workers.webhooks import WebhookSender
from tests.conftest import running_dispatcher, wait_for_status

_numbers = itertools.count(10_000_001)
_paths = itertools.count(1)


def a_number():
    return f"97798{next(_numbers):08d}"


@pytest.fixture(scope="module")
def phones(runtime, receiver):
    """Two emulated modems, driven by a dispatcher (whose heartbeats make them the routes), and a
    webhook sender following the log."""
    with Emulator(sims=2, report_delay=0.05) as emulator:
        register_emulated(runtime, emulator.devices(), "test")
        with running_dispatcher(runtime):
            sender = WebhookSender(runtime, http=webhook_guard.session(True, str(receiver.ca_file)))
            stop = threading.Event()
            thread = threading.Thread(target=sender.run, args=(stop,), daemon=True)
            thread.start()
            try:
                yield emulator
            finally:
                stop.set()
                thread.join(timeout=10)
                sender.close()


class Account:
    """An active, funded workspace and one client of it with a key (and a webhook URL on the
    receiver, when given one)."""

    def __init__(self, runtime, server, name, receiver=None):
        self.runtime, self.server = runtime, server
        self.workspace = funded_workspace(runtime.sandesh, name, 10**6, "t")
        runtime.sandesh.operators.set_promo_hours(self.workspace, "off", "t")  # promotions go at once, at any hour
        self.path = f"/optout/{next(_paths)}"
        url = receiver.url(self.path) if receiver else None
        client, self.key, _ = runtime.sandesh.operators.create_client(self.workspace, name, url, 1000, "t")
        self.client = client.id

    def send(self, to, message_type="transactional", text="Dashain offer: 20% off all sweets"):
        return requests.post(self.server.url + "/v1/sms/send", json={"to": to, "text": text, "messageType": message_type},
                             headers={"x-api-key": self.key}, timeout=10)

    def send_otp(self, to):
        return requests.post(self.server.url + "/v1/sms/otp/send", json={"to": to, "purpose": "login"},
                             headers={"x-api-key": self.key}, timeout=10)

    def balance(self):
        return requests.get(self.server.url + "/v1/sms/balance", headers={"x-api-key": self.key},
                            timeout=10).json()["balance"]["amount"]

    def opted_out(self, number):
        with self.runtime.connection() as conn:
            return number in optouts.opted_out(conn, self.workspace, [number])


@pytest.fixture(scope="module")
def shop(runtime, server, receiver, phones):
    return Account(runtime, server, "Mithai Ghar", receiver)


def delivered_and_replied(runtime, phones, message_id, text):
    """Wait until the message is delivered, then type `text` on its recipient's phone, back to
    the SIM it came from (so the reply is attributed to it)."""
    wait_for_status(runtime, [message_id], {"delivered"})
    message = runtime.sandesh.history.message(message_id)
    with runtime.connection() as conn:
        name = conn.execute("SELECT name FROM sims WHERE id = %s", (message.sim_id,)).fetchone()["name"]
    phones.modem(name).inject_inbound("+" + message.to, text)


def inbound_events(receiver, path, count, timeout=20.0):
    deadline = time.monotonic() + timeout
    while True:
        found = [orjson.loads(r.body) for r in receiver.at(path) if r.headers["x-service-event"] == "message.inbound"]
        if len(found) >= count:
            return found
        assert time.monotonic() < deadline, f"{len(found)} of {count} message.inbound events"
        time.sleep(0.05)


def until(condition, timeout=20.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "not within the time"
        time.sleep(0.05)


def test_stop_holds_back_promotional_sends_only_and_start_lets_them_go_again(runtime, phones, shop, receiver,
                                                                             sandesh):
    """A promotional send to an opted-out number answers 403 recipient_opted_out, nothing
    charged; transactional and OTP messages are never blocked; the reply is still delivered as
    `message.inbound`."""
    number = a_number()
    first = shop.send(number, "promotional")
    assert first.status_code == 202
    delivered_and_replied(runtime, phones, first.json()["messageId"], "  stop ")

    [stop] = inbound_events(receiver, shop.path, 1)
    assert (stop["from"], stop["text"], stop["inReplyTo"]) == ("+" + number, "  stop ", first.json()["messageId"])
    assert shop.opted_out(number), "the opt-out commits with the reply the webhook tells of"
    [listed] = sandesh("optout", "list", shop.workspace)["optOuts"]
    assert (listed["number"], listed["source"], listed["replyId"]) == (number, "reply", stop["id"])

    before = shop.balance()
    for to in (number, "+" + number):
        refused = shop.send(to, "promotional")
        assert refused.status_code == 403 and refused.json()["code"] == "recipient_opted_out"
    assert shop.balance() == before, "nothing charged"
    transactional = shop.send(number, "transactional", "Your order 1042 is ready")
    assert transactional.status_code == 202
    assert shop.send_otp(number).status_code == 202
    assert shop.balance() < before

    delivered_and_replied(runtime, phones, transactional.json()["messageId"], "START")
    [_, start] = inbound_events(receiver, shop.path, 2)
    assert start["text"] == "START"
    assert not shop.opted_out(number)
    assert sandesh("optout", "list", shop.workspace)["optOuts"] == []
    assert shop.send(number, "promotional").status_code == 202
    audited = [line for line in sandesh.run("audit", "--workspace", shop.workspace).stdout.splitlines()
               if '"optout.' in line]
    assert audited == [], "a recipient's own STOP and START are not operator changes"


def test_a_nepali_stop_word_to_a_transactional_message_opts_out_of_that_workspace_only(runtime, server, phones,
                                                                                         shop, receiver):
    other = Account(runtime, server, "Other Shop")
    number = a_number()
    receipt = shop.send(number, "transactional", "Your receipt: NPR 450")
    assert receipt.status_code == 202
    delivered_and_replied(runtime, phones, receipt.json()["messageId"], "रोक")
    until(lambda: shop.opted_out(number))
    assert shop.send(number, "promotional").json()["code"] == "recipient_opted_out"
    assert not other.opted_out(number)
    assert other.send(number, "promotional").status_code == 202


def test_a_stop_word_that_answers_no_message_opts_out_of_nothing(runtime, phones, sandesh):
    stranger = a_number()
    phones.modems[0].inject_inbound("+" + stranger, "STOP")
    until(lambda: any(r["from"] == "+" + stranger for r in sandesh("inbound", "list", "--unattributed")["replies"]))
    with runtime.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM opt_outs WHERE number = %s", (stranger,)).fetchone()["n"] == 0


def test_operators_add_list_and_remove_opt_outs_each_audited_and_acting_at_once(runtime, server, phones, sandesh):
    account = Account(runtime, server, "Call Centre")
    ws, number = account.workspace, a_number()
    added = sandesh("--actor", "asha", "optout", "add", ws, "+" + number)
    assert (added["number"], added["optedOut"], added["changed"], added["source"]) == (number, True, True, "operator")
    refused = account.send(number, "promotional")  # the running API sees it on the next send
    assert refused.status_code == 403 and refused.json()["code"] == "recipient_opted_out"
    again = sandesh("--actor", "asha", "optout", "add", ws, number)
    assert (again["optedOut"], again["changed"]) == (True, False)
    assert [o["number"] for o in sandesh("optout", "list", ws)["optOuts"]] == [number]

    removed = sandesh("--actor", "ravi", "optout", "remove", ws, number)
    assert (removed["optedOut"], removed["changed"]) == (False, True)
    assert account.send(number, "promotional").status_code == 202
    assert sandesh("optout", "list", ws)["optOuts"] == []

    lines = [orjson.loads(line) for line in sandesh.run("audit", "--workspace", ws).stdout.splitlines()]
    changes = [(line["action"], line["actor"], line["workspaceId"], line["details"]["number"]) for line in lines
               if line["action"].startswith("optout.")]
    assert changes == [("optout.added", "asha", ws, number), ("optout.removed", "ravi", ws, number)]


@pytest.mark.parametrize("args, says", [
    (("optout", "add", "WS", "9812345678"), "not a Nepal mobile number"),
    (("optout", "remove", "WS", "+1 555 0100"), "not a Nepal mobile number"),
    (("optout", "add", "ws_nope", "9779812345678"), "no workspace 'ws_nope'"),
    (("optout", "list", "ws_nope"), "no workspace 'ws_nope'"),
])
def test_a_bad_number_or_an_unknown_workspace_exits_2_and_records_nothing(runtime, sandesh, args, says):
    ws = funded_workspace(runtime.sandesh, "Typo", 0, "t")
    done = sandesh.run(*[ws if a == "WS" else a for a in args])
    assert done.returncode == 2 and says in done.stderr and done.stdout == ""
    assert not [line for line in sandesh.run("audit", "--workspace", ws).stdout.splitlines() if '"optout.' in line]


def test_every_optout_command_has_help(sandesh):
    for words in (("optout",), ("optout", "add"), ("optout", "remove"), ("optout", "list")):
        done = sandesh.run(*words, "--help")
        assert done.returncode == 0 and "usage: sandesh optout" in done.stdout


def test_opting_out_is_idempotent_in_the_log(runtime):
    """Opting out an opted-out number appends nothing, whether an operator or a STOP reply asks;
    the reply itself is still recorded."""
    from sandesh.domain.optout import optout_id
    from sandesh.domain.sending import parse_send

    app = runtime.sandesh
    ws = funded_workspace(app, "Twice", 10**4, "t")
    client = app.operators.create_client(ws, "Twice", None, 1000, "t")[0].id
    number = a_number()
    assert app.operators.opt_out(ws, number, "operator", "t") is True
    assert app.operators.opt_out(ws, "+" + number, "operator", "t") is False
    assert app.operators.opt_in(ws, a_number(), "operator", "t") is False
    request, _ = parse_send({"to": number, "text": "Receipt"})
    message = app.sending.send(client, ws, request, 100)
    reply = app.dispatch.store_reply_part(None, "sim_x", "+" + number, None, 1, 1, "STOP")
    assert app.dispatch.finish_reply(reply.id, app.history.message(message.id)).complete
    assert [type(e).__name__ for e in app.log.events_of(optout_id(ws, number))] == ["Opened", "OptedOut"]
    with runtime.connection() as conn:
        assert optouts.find(conn, ws, number)["source"] == "operator"


def test_a_replay_rebuilds_the_opt_outs_from_the_log(runtime, server, phones, sandesh):
    """`sandesh replay` drops the read models and folds the log again: the opt-outs, from replies
    and from operators, are there as before, and sends are refused as before."""
    from sandesh.domain.sending import parse_send

    app = runtime.sandesh
    account = Account(runtime, server, "Replayed")
    by_reply, by_operator, back_in = a_number(), a_number(), a_number()
    request, _ = parse_send({"to": by_reply, "text": "Offer", "messageType": "promotional"})
    message = app.sending.send(account.client, account.workspace, request, 100)
    reply = app.dispatch.store_reply_part(None, "sim_x", "+" + by_reply, None, 1, 1, "Unsubscribe")
    app.dispatch.finish_reply(reply.id, app.history.message(message.id))
    app.operators.opt_out(account.workspace, by_operator, "operator", "t")
    app.operators.opt_out(account.workspace, back_in, "operator", "t")
    app.operators.opt_in(account.workspace, back_in, "operator", "t")
    before = sandesh("optout", "list", account.workspace)["optOuts"]
    assert [(o["number"], o["source"]) for o in before] == [(by_reply, "reply"), (by_operator, "operator")]

    assert sandesh.run("replay").returncode == 0
    assert sandesh("optout", "list", account.workspace)["optOuts"] == before
    assert sandesh("replay", "--check", "registry")["ok"] is True
    for number in (by_reply, by_operator):
        assert account.send(number, "promotional").json()["code"] == "recipient_opted_out"
    assert account.send(back_in, "promotional").status_code == 202


def phone_got(phones, number):
    return [m["text"] for m in phones.received if m["to"].lstrip("+") == number]


def test_nepali_words_opt_out_and_in_with_confirmations_and_help_is_answered_once_a_day(runtime, server, phones,
                                                                                        sandesh):
    """BAND and बन्द opt out, SURU back in, each confirmed in its word's language once the
    workspace confirms; HELP gets the help text once a day; each answer reaches the phone."""
    school = Account(runtime, server, "Vidyalaya")
    sandesh("workspace", "set-confirmations", school.workspace, "on")
    shown = sandesh("workspace", "set-help-text", school.workspace, "Phone the office: 01-4412345")
    assert (shown["helpText"], shown["confirmations"]) == ("Phone the office: 01-4412345", True)
    for stop_word, language in (("BAND", "en"), ("बन्द", "ne")):
        number = a_number()
        notice = school.send(number, "promotional", "Admissions open")
        assert notice.status_code == 202
        delivered_and_replied(runtime, phones, notice.json()["messageId"], stop_word)
        until(lambda: school.opted_out(number))
        assert school.send(number, "promotional").json()["code"] == "recipient_opted_out"
        until(lambda: len(phone_got(phones, number)) == 2)
        assert phone_got(phones, number)[1] == confirmation(STOP, language, "Vidyalaya")
        receipt = school.send(number, "transactional", "Fee received")
        delivered_and_replied(runtime, phones, receipt.json()["messageId"], "suru")
        until(lambda: not school.opted_out(number))
        assert school.send(number, "promotional").status_code == 202
        until(lambda: confirmation(START, "en", "Vidyalaya") in phone_got(phones, number))

    asked = a_number()
    notice = school.send(asked, "transactional", "Exam on Sunday")
    for word in ("HELP", "सहयोग"):
        delivered_and_replied(runtime, phones, notice.json()["messageId"], word)
    until(lambda: phone_got(phones, asked)[1:] == ["Phone the office: 01-4412345"])
    time.sleep(2)
    assert phone_got(phones, asked)[1:] == ["Phone the office: 01-4412345"], "once a day"
