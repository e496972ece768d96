"""Real device families through the whole sending path: a dispatcher drives each profile of the
emulator, the operator's `sandesh sim` commands set a SIM's PIN, plan and balance query, and
`sandesh sim probe` tells what is on a port (docs/operations.md, "Modems").  Real PostgreSQL,
pseudo-terminals, the real `sandesh` command."""
import re
import subprocess
import sys
import time
from contextlib import contextmanager

import orjson
import pytest

from sandesh.domain.operators import of_imsi
from sandesh.domain.sending import parse_send
from sandesh.domain.sim_plan import next_day, next_month
from tests.helpers import funded_workspace
from sandesh.scripts.service.commands import register_emulated
from sandesh.scripts.service.emulator import Emulator
from sandesh.scripts.service.emulator_profiles import PROFILES
from tests.conftest import running_dispatcher, wait_for_status


_numbers = iter(range(10_000_000, 99_999_999))
_first = iter(range(30, 1000, 4))  # each emulator's modems get indexes (so ICCIDs) of their own


@pytest.fixture(scope="module")
def account(runtime):
    ws = funded_workspace(runtime.sandesh, "Real modems", 10**8, "t")
    return ws, runtime.sandesh.operators.create_client(ws, "R", None, 1000, "t")[0].id


def send(runtime, account, text="Your order has shipped", to=None):
    request, problems = parse_send({"to": to or f"97798{next(_numbers):08d}", "text": text})
    assert not problems
    return runtime.sandesh.sending.send(account[1], account[0], request, 100 * request.segments)


def sims(sandesh):
    return {s["name"]: s for s in sandesh("sim", "list")["sims"]}


def until(check, timeout=10.0, every=0.1):
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(every)
    return found


@contextmanager
def pool(runtime, sandesh, count=1, profiles=("3gpp",), **options):
    """Emulated modems registered as SIMs; disabled afterwards, so later tests drive only their own."""
    options = {"report_delay": 0.05, "cmgs_seconds": 0.1, "busy_seconds": 0.3, **options}
    with Emulator(sims=count, first=next(_first), profiles=profiles, **options) as emulator:
        register_emulated(runtime, emulator.devices(), "test")
        try:
            yield emulator
        finally:
            for name, _ in emulator.devices():
                sandesh("sim", "disable", name)


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_a_device_of_each_family_sends_gets_its_report_and_a_reply(runtime, account, sandesh, name):
    with pool(runtime, sandesh, profiles=(name,)) as emulator, running_dispatcher(runtime):
        modem = emulator.modems[0]
        message = send(runtime, account, to=f"97798{next(_numbers):08d}")
        wait_for_status(runtime, [message.id], {"delivered"})
        recipient = "+" + runtime.sandesh.history.message(message.id).to
        modem.inject_inbound(recipient, f"Thanks ({name})")
        reply = until(lambda: [r for r in sandesh("inbound", "list")["replies"] if r["text"] == f"Thanks ({name})"])
        assert reply[0]["inReplyTo"] == message.id
        listed = sims(sandesh)[modem.name]
        assert (listed["manufacturer"], listed["model"]) == (modem.profile.manufacturer.strip(),
                                                            modem.profile.model.strip())
        assert listed["state"] == "active" and listed["iccid"] == modem.iccid
        assert listed["reports"] in ("direct", "stored") and listed["inbound"] == "indicated"
        until(lambda: not modem.store and not modem.status_store)  # read, saved, then deleted


def test_a_device_that_announces_nothing_is_polled(runtime, account, sandesh):
    import dataclasses

    from sandesh.scripts.service import emulator_profiles

    silent = dataclasses.replace(PROFILES["3gpp"], name="silent", cnmi_test="+CNMI: (0),(0),(0),(0,2),(0)")
    emulator_profiles.PROFILES["silent"] = silent
    try:
        with pool(runtime, sandesh, profiles=("silent",)) as emulator, running_dispatcher(runtime) as dispatcher:
            dispatcher.heartbeat_seconds = 0.3
            for worker in dispatcher.sims.values():
                worker.report_soon()
            modem = emulator.modems[0]
            message = send(runtime, account)
            wait_for_status(runtime, [message.id], {"delivered"})  # a stored report, found by reading the store
            modem.inject_inbound("+" + runtime.sandesh.history.message(message.id).to, "polled reply")
            until(lambda: [r for r in sandesh("inbound", "list")["replies"] if r["text"] == "polled reply"])
            listed = sims(sandesh)[modem.name]
            assert (listed["cnmi"], listed["reports"], listed["inbound"]) == ("0,0,0,2,0", "stored", "polled")
    finally:
        del emulator_profiles.PROFILES["silent"]


def test_a_pin_is_entered_a_wrong_one_quarantines_once_and_a_new_one_releases(runtime, account, sandesh):
    with pool(runtime, sandesh) as emulator, running_dispatcher(runtime):
        modem = emulator.modems[0]
        modem.set_pin_state("SIM PIN")  # the SIM was swapped for one with a PIN, and the modem restarted
        sandesh("sim", "update", modem.name, "--port", modem.device + "x")  # ... found again on its port:
        sandesh("sim", "update", modem.name, "--port", modem.device)       # the dispatcher opens it anew
        listed = until(lambda: (s := sims(sandesh)[modem.name])["state"] == "quarantined" and s)
        assert listed["pin"] is None and "asks for its PIN" in listed["reason"]
        done = command(sandesh, "sim", "update", modem.name, "--pin", "-", stdin="4321\n")  # a wrong one
        assert done.returncode == 0, done.stderr
        assert orjson.loads(done.stdout)["pin"] == "set" and "4321" not in done.stdout
        listed = until(lambda: (s := sims(sandesh)[modem.name])["pin"] == "refused" and s)
        assert listed["state"] == "quarantined" and "refused its PIN" in listed["reason"]
        time.sleep(3)  # the thread opens the port again and again: never with the refused PIN
        assert modem.pin_tries == 2 and modem.pin_state == "SIM PIN"
        sandesh("sim", "update", modem.name, "--pin", "1234")
        listed = until(lambda: (s := sims(sandesh)[modem.name])["state"] == "active" and s)
        assert listed["pin"] == "set" and modem.pin_state == "READY"
        message = send(runtime, account)
        wait_for_status(runtime, [message.id], {"delivered"})
    trail = audit(sandesh)
    actions = [line["action"] for line in trail if line["simId"] == listed["id"]]
    assert actions.count("sim.pin_set") == 2 and actions.count("sim.quarantined") == 2
    assert actions.count("sim.released") == 2  # each new PIN ended the quarantine for the PIN
    # the PINs nowhere, though an id's hex digits may hold the same four
    assert not re.search(r"(?<![0-9a-f])(4321|1234)(?![0-9a-f])", str(trail))


def test_a_sim_at_its_daily_cap_rests_until_nepal_midnight_and_the_pool_works_around_it(runtime, account, sandesh):
    with pool(runtime, sandesh, count=2) as emulator, running_dispatcher(runtime) as dispatcher:
        capped, other = emulator.modems
        sandesh("sim", "update", capped.name, "--daily-cap", "2")
        live(dispatcher, capped.name, "daily_cap", 2)
        ids = [send(runtime, account, to=f"97798{next(_numbers):08d}").id for _ in range(6)]
        wait_for_status(runtime, ids, {"delivered"})
        assert len([m for m in capped.sent]) == 2 and len(other.sent) == 4
        listed = until(lambda: (s := sims(sandesh)[capped.name])["state"] == "resting" and s)
        now = runtime.clock.now()
        assert listed["reason"] == "daily cap of 2 parts reached" and listed["partsToday"] == 2
        assert listed["resumesAt"] == iso_of(next_day(now))
        sandesh("clock", "advance", str(next_day(now) - now + 1))  # past Nepal midnight on the service clock
        until(lambda: sims(sandesh)[capped.name]["state"] == "active")
        assert sims(sandesh)[capped.name]["partsToday"] == 0


def test_a_monthly_cap_and_a_slower_pace(runtime, account, sandesh):
    with pool(runtime, sandesh, count=2) as emulator, running_dispatcher(runtime) as dispatcher:
        monthly, paced = emulator.modems
        sandesh("sim", "update", monthly.name, "--monthly-cap", "1")
        sandesh("sim", "update", paced.name, "--pace", "4")
        live(dispatcher, monthly.name, "monthly_cap", 1)
        live(dispatcher, paced.name, "pace", 4)
        ids = [send(runtime, account).id for _ in range(6)]
        # 1 + 4 parts of room, one of which the pool holds for OTP (docs/design.md, "Pacing")
        until(lambda: len(monthly.sent) + len(paced.sent) == 4, timeout=15)
        time.sleep(1.5)
        assert (len(monthly.sent), len(paced.sent)) == (1, 3)  # the rest waits: nothing refused
        listed = sims(sandesh)
        assert listed[monthly.name]["state"] == "resting" and listed[monthly.name]["partsThisMonth"] == 1
        assert listed[monthly.name]["resumesAt"] == iso_of(next_month(runtime.clock.now()))
        assert listed[paced.name]["state"] == "active" and listed[paced.name]["partsPerWindow"] == 4
        statuses = {runtime.sandesh.history.message(m).status for m in ids}
        assert statuses <= {"queued", "sent", "delivered"} and "queued" in statuses
        sandesh("sim", "update", paced.name, "--pace", "off")
        until(lambda: len(paced.sent) == 5, timeout=15)  # read live: the waiting messages leave within seconds


def test_every_sim_resting_is_503_unavailable_and_nothing_is_charged(runtime, account, sandesh, server):
    import requests

    key = runtime.sandesh.operators.create_client(account[0], "Rest", None, 1000, "t")[1]
    headers = {"x-api-key": key, "content-type": "application/json"}
    # An OTP: a pool of one SIM with one part left holds that part for OTP (docs/design.md, "Pacing").
    body = {"to": f"97798{next(_numbers):08d}", "text": "123456 is your code", "messageType": "otp"}
    with runtime.connection() as conn:
        for row in conn.execute("SELECT name FROM sims WHERE enabled").fetchall():
            sandesh("sim", "disable", row["name"])
    with pool(runtime, sandesh) as emulator, running_dispatcher(runtime) as dispatcher:
        name = emulator.modems[0].name
        sandesh("sim", "update", name, "--daily-cap", "1")
        live(dispatcher, name, "daily_cap", 1)
        until(lambda: requests.post(server.url + "/v1/sms/send", json=body, headers=headers, timeout=5).status_code
              == 202)
        until(lambda: sims(sandesh)[name]["state"] == "resting")
        until(lambda: requests.post(server.url + "/v1/sms/send", json=body, headers=headers, timeout=5).status_code
              == 503)
        balance = requests.get(server.url + "/v1/sms/balance", headers=headers, timeout=5).json()["balance"]
        answer = requests.post(server.url + "/v1/sms/send", json=body, headers=headers, timeout=5)
        assert (answer.status_code, answer.json()["code"]) == (503, "unavailable")
        assert requests.get(server.url + "/v1/sms/balance", headers=headers, timeout=5).json()["balance"] == balance


def test_low_credit_quarantines_a_sim_before_its_sends_fail_and_more_credit_releases_it(runtime, account, sandesh,
                                                                                      server):
    import requests

    with pool(runtime, sandesh, profiles=("huawei",)) as emulator, running_dispatcher(runtime) as dispatcher:
        modem = emulator.modems[0]
        modem.credit, modem.part_price = 14.0, 1.5  # NPR: the network refuses a part once credit is gone
        sandesh("sim", "update", modem.name, "--balance-ussd", "*400#", "--min-credit", "10", "--balance-every", "2")
        dispatcher.heartbeat_seconds = 0.3
        listed = until(lambda: (s := sims(sandesh)[modem.name])["credit"] == 1400 and s)
        assert listed["creditReply"] == "Your balance is Rs. 14.00. Valid till 2027-12-31."
        assert listed["minCredit"] == 1000
        ids = [send(runtime, account).id for _ in range(6)]
        listed = until(lambda: (s := sims(sandesh)[modem.name])["state"] == "quarantined" and s, timeout=20)
        assert listed["reason"] == (f"credit NPR {listed['credit'] / 100:.2f} is below the minimum NPR 10.00 "
                                    "(*400#)") and listed["credit"] < 1000
        assert modem.credit >= modem.part_price, "quarantined before the network refused a part"
        assert {runtime.sandesh.history.message(m).status for m in ids} <= {"queued", "sent", "delivered"}
        metrics = requests.get(server.url + "/metrics", timeout=5).text
        assert f'sandesh_sim_credit_paisa{{sim="{listed["id"]}"}} {float(listed["credit"])}' in metrics
        modem.credit = 100.0  # topped up
        sandesh("clock", "advance", "901")  # asked again every 15 minutes while quarantined for credit
        until(lambda: sims(sandesh)[modem.name]["state"] == "active", timeout=15)
        wait_for_status(runtime, ids, {"delivered"})
        actions = [line["action"] for line in audit(sandesh) if line["simId"] == listed["id"]]
        assert actions[-2:] == ["sim.quarantined", "sim.recovered"]


def test_probe_tells_what_is_on_a_port_without_registering_it(runtime, sandesh):
    with Emulator(sims=2, first=next(_first), profiles=("cinterion", "3gpp")) as emulator:
        cinterion, broken = emulator.modems
        probed = sandesh("sim", "probe", cinterion.device)
        assert probed["ok"] and (probed["manufacturer"], probed["model"]) == ("Cinterion", "MC75i")
        assert probed["iccid"] == cinterion.iccid and probed["operator"] == of_imsi(cinterion.imsi)
        assert probed["uses"] == {"messageStore": "SM", "cnmi": "2,1,0,2,1", "reports": "stored",
                                  "inbound": "indicated", "polls": True, "family": "cinterion", "ussd": "text"}
        assert probed["supports"]["AT+CNMI=?"] == "+CNMI: (0-3),(0,1),(0,2,3),(0,2),(1)"
        assert {"command": "AT+CNMI=2,1,0,2,1", "answer": [], "final": "OK"} in probed["dialogue"]
        with runtime.connection() as conn:
            assert conn.execute("SELECT 1 FROM sims WHERE iccid = %s", (cinterion.iccid,)).fetchone() is None
        broken.smsc = ""  # no SMS service centre on the SIM
        done = sandesh.run("sim", "probe", broken.device)
        assert done.returncode == 1
        failed = orjson.loads(done.stdout)
        assert failed["ok"] is False and failed["failedStep"] == "service centre"
        assert "no SMS service centre" in done.stderr and 'AT+CSCA? -> +CSCA: "+",145 | OK' in done.stderr


def test_sim_add_takes_a_plan_and_refuses_a_bad_one(sandesh):
    added = sandesh("sim", "add", "--name", "planned-1", "--port", "/dev/ttyUSB9", "--daily-cap", "200",
                    "--pace", "10", "--balance-ussd", "*400#", "--min-credit", "12.50")
    assert (added["dailyCap"], added["monthlyCap"], added["pace"]) == (200, None, 10)
    assert (added["balanceUssd"], added["minCredit"], added["pin"]) == ("*400#", 1250, None)
    updated = sandesh("sim", "update", "planned-1", "--daily-cap", "off", "--monthly-cap", "6000")
    assert (updated["dailyCap"], updated["monthlyCap"]) == (None, 6000)
    for args, says in ((("--pace", "31"), "at most 30"), (("--min-credit", "1.234"), "amount in NPR"),
                       (("--balance-ussd", "400"), "USSD code"), (("--pin", "12"), "4 to 8 digits")):
        done = sandesh.run("sim", "update", "planned-1", *args)
        assert done.returncode == 2 and says in done.stderr, (args, done.stderr)
    sandesh("sim", "disable", "planned-1")


def test_replay_rebuilds_the_sims_as_the_live_writer_wrote_them(sandesh):
    """Devices learned, PINs set and refused, plans, credit answers and quarantines: one path."""
    done = sandesh.run("replay", "--check")
    assert done.returncode == 0, done.stdout


def iso_of(moment):
    from sandesh.domain.clock import iso

    return iso(moment)


def audit(sandesh):
    done = sandesh.run("audit")
    assert done.returncode == 0, done.stderr
    return [orjson.loads(line) for line in done.stdout.splitlines()]


def command(sandesh, *args, stdin=""):
    """The real `sandesh` command with something on its stdin; its CompletedProcess."""
    from tests.conftest import ROOT

    return subprocess.run([sys.executable, "-m", "sandesh.scripts.service.cli", *args], input=stdin, capture_output=True,
                          text=True, env={**sandesh.env, "PYTHONPATH": str(ROOT)}, cwd=sandesh.cwd, timeout=60)


def live(dispatcher, name, setting, value):
    """Until the running dispatcher has read an operator's change (within a second)."""
    until(lambda: any(w.name == name and w.sim.get(setting) == value for w in dispatcher.sims.values()))
