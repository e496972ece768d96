"""Promotional hours (docs/api.md, "Promotional hours"; docs/operations.md,
"Workspaces and clients") through `sandesh serve`, the `sandesh` command and the test clock,
across midnight Nepal time."""
import orjson
import pytest
import requests

from sandesh.domain.clock import iso, parse_iso
from sandesh.domain.promo_hours import DAY, NEPAL_OFFSET

TO = "9779812345678"
KATHMANDU = {"start": "08:00", "end": "20:00", "timeZone": "Asia/Kathmandu"}


@pytest.fixture(scope="module", autouse=True)
def a_route(route):
    return route


@pytest.fixture(scope="module")
def account(sandesh):
    ws = sandesh("workspace", "create", "--name", "Quiet", "--rate", "promotional=40")["id"]
    sandesh("workspace", "activate", ws)
    sandesh("workspace", "credit", ws, "10000")
    client = sandesh("client", "create", "--workspace", ws, "--brand", "Quiet", "--rate-limit", "1000")
    return {"id": ws, "key": client["key"]}


def send(server, key, **body):
    return requests.post(server.url + "/v1/sms/send", timeout=10,
                         headers={"x-api-key": key, "content-type": "application/json"},
                         data=orjson.dumps({"to": TO, "text": "Tihar sale: 20% off", **body}))


def get(server, key, path):
    return requests.get(server.url + path, headers={"x-api-key": key}, timeout=5).json()


def advance_to_nepal(sandesh, runtime, hh_mm):
    """Move the test clock forward to the next `hh_mm` in Nepal."""
    hours, minutes = (int(part) for part in hh_mm.split(":"))
    local = (runtime.clock.now() + NEPAL_OFFSET) % DAY
    sandesh("clock", "advance", str((hours * 3600 + minutes * 60 - local) % DAY))


def test_the_hours_are_08_to_20_unless_set_and_shown_by_workspace_show_and_the_balance(server, sandesh, account):
    assert sandesh("workspace", "show", account["id"])["promotionalHours"] == KATHMANDU
    assert get(server, account["key"], "/v1/sms/balance")["promotionalHours"] == KATHMANDU
    changed = sandesh("workspace", "set-promo-hours", account["id"], "09:30-18:00")
    assert changed["promotionalHours"] == {**KATHMANDU, "start": "09:30", "end": "18:00"}
    assert sandesh("workspace", "set-promo-hours", account["id"], "off")["promotionalHours"] is None
    assert get(server, account["key"], "/v1/sms/balance")["promotionalHours"] is None
    assert sandesh("workspace", "set-promo-hours", account["id"], "08:00-20:00")["promotionalHours"] == KATHMANDU
    lines = [orjson.loads(line) for line in sandesh.run("audit", "--workspace", account["id"]).stdout.splitlines()]
    assert [line["details"]["hours"] for line in lines if line["action"] == "workspace.promo_hours_set"] == [
        "09:30-18:00", "off", "08:00-20:00"]
    refused = sandesh.run("workspace", "set-promo-hours", account["id"], "8pm")
    assert refused.returncode == 2 and "HH:MM-HH:MM" in refused.stderr


def test_across_midnight_a_promotion_waits_for_8_00_and_otp_and_transactional_do_not(server, sandesh, runtime,
                                                                                      account):
    from sandesh.workers.dispatcher import Dispatcher

    advance_to_nepal(sandesh, runtime, "23:30")
    opening = iso((runtime.clock.now() + 8.5 * 3600) // 60 * 60)  # 08:00 Nepal time, the next day
    promo = send(server, account["key"], messageType="promotional")
    assert promo.status_code == 202
    assert {k: promo.json()[k] for k in ("status", "sendAt", "cost")} == {
        "status": "scheduled", "sendAt": opening, "cost": 40}
    assert (get(server, account["key"], f"/v1/sms/messages/{promo.json()['messageId']}")["sendAt"]) == opening
    early = send(server, account["key"], messageType="promotional", sendAt=iso(runtime.clock.now() + 3 * 3600))
    assert early.json()["sendAt"] == opening  # asked for 02:30, inside the quiet hours: moved to the opening
    for kind in ("transactional", "otp"):
        assert send(server, account["key"], messageType=kind).json()["status"] == "queued"
    short = send(server, account["key"], messageType="promotional", validFor=3600)
    assert short.status_code == 400 and short.json()["details"][0]["path"] == ["validFor"]
    assert get(server, account["key"], "/v1/sms/balance")["balance"]["amount"] == 10000 - 40 - 40 - 100 - 100

    advance_to_nepal(sandesh, runtime, "07:59")
    assert Dispatcher(runtime).release_scheduled() == 0
    sandesh("clock", "advance", "61")
    assert Dispatcher(runtime).release_scheduled() == 2
    assert get(server, account["key"], f"/v1/sms/messages/{promo.json()['messageId']}")["status"] == "queued"
    assert parse_iso(opening) <= runtime.clock.now()
