"""The operator team's console under /dashboard/ops in a real browser
(docs/dashboard.md, "The operator team's console"): Playwright driving Debian's Chromium
against a real `sandesh serve`, the real `sandesh` command beside it, emulated modems driven by
a real dispatcher.  The browser, sign-in and set-password helpers are test_dashboard.py's."""
from __future__ import annotations

import re
import time
from typing import Any, Iterator

import pytest
import requests
from playwright.sync_api import Browser, BrowserContext, Page, expect

from sandesh.domain.sending import parse_send
from sandesh.scripts.service.commands import register_emulated
from sandesh.scripts.service.emulator import Emulator
from tests.conftest import running_dispatcher
from tests.helpers import funded_workspace
from tests.integration.test_dashboard import (add_person, browser, code_now, page, password_was_set,  # noqa: F401
                                              set_password, sign_in)

OPERATOR = "ops@example.com"
OPS_PAGES = ("/dashboard/ops", "/dashboard/ops/workspaces", "/dashboard/ops/sims", "/dashboard/ops/sims/rows",
             "/dashboard/ops/traffic", "/dashboard/ops/messages?id=msg_0", "/dashboard/ops/replies",
             "/dashboard/ops/audit", "/dashboard/ops/people")


@pytest.fixture(scope="module")
def operator(sandesh: Any, server: Any, browser: Browser) -> Iterator[BrowserContext]:  # noqa: F811
    """A member of the operator team, signed in, in a browser context the tests share."""
    context = operator_context(sandesh, server, browser, OPERATOR)
    yield context
    context.close()


def operator_context(sandesh: Any, server: Any, browser: Browser, email: str) -> BrowserContext:  # noqa: F811
    """A browser context where a new member of the operator team has signed in (a second factor
    is required: they set up an authenticator app right after their password)."""
    added = sandesh("user", "add", "--email", email, "--name", "Ops Team", "--operator")
    context = browser.new_context()
    first = context.new_page()
    set_password(first, server, added)
    password_was_set(first)
    sign_in(first, server, email)
    expect(first.get_by_role("heading", level=1)).to_have_text("Set up an authenticator app")
    first.get_by_label("Authentication code").fill(code_now(sandesh, first.locator("code.secret").inner_text()))
    first.get_by_role("button", name="Verify").click()
    expect(first.get_by_role("heading", level=1)).to_have_text("Workspaces")
    first.close()
    return context


@pytest.fixture
def ops(operator: BrowserContext) -> Iterator[Page]:
    opened = operator.new_page()
    yield opened
    opened.close()


def heading(page: Page) -> Any:
    return page.get_by_role("heading", level=1)


def send(server: Any, key: str, to: str = "9779812345678") -> requests.Response:
    return requests.post(server.url + "/v1/sms/send", headers={"x-api-key": key},
                         json={"to": to, "text": "Your order has shipped", "messageType": "transactional"}, timeout=10)


def audit(sandesh: Any, *args: str) -> list[dict[str, Any]]:
    import orjson

    return [orjson.loads(line) for line in sandesh.run("audit", *args).stdout.splitlines() if line.strip()]


def test_a_workspace_member_gets_404_on_every_ops_page(page, server, sandesh):  # noqa: F811
    workspace = sandesh("workspace", "create", "--name", "Members only")["id"]
    sim = sandesh("sim", "add", "--name", "members-only", "--port", "loop://", "--host", "nowhere")["id"]
    sandesh("sim", "disable", sim)
    for path in OPS_PAGES:  # someone not signed in is sent to sign in
        answer = requests.get(server.url + path, allow_redirects=False, timeout=5)
        assert (answer.status_code, answer.headers["location"]) == (303, "/dashboard/sign-in"), path
    set_password(page, server, add_person(sandesh, workspace, "member@example.com"))
    sign_in(page, server, "member@example.com")
    expect(heading(page)).to_have_text("Overview")
    for path in OPS_PAGES + (f"/dashboard/ops/workspaces/{workspace}", f"/dashboard/ops/sims/{sim}"):
        assert page.goto(server.url + path).status == 404, path
    expect(heading(page)).to_have_text("Not found")
    token = page.locator("input[name=csrf]").first.get_attribute("value")
    for path in (f"/dashboard/ops/workspaces/{workspace}/activate", "/dashboard/ops/sms/off",
                 "/dashboard/ops/workspaces", f"/dashboard/ops/workspaces/{workspace}/promo-hours",
                 f"/dashboard/ops/workspaces/{workspace}/shred-texts", "/dashboard/ops/sims",
                 f"/dashboard/ops/sims/{sim}/settings", f"/dashboard/ops/sims/{sim}/pin"):
        answer = page.request.post(server.url + path, form={
            "csrf": token, "reason": "x", "name": "x", "port": "loop://", "baud": "9600", "hours": "off",
            "confirm": "Members only", "pin": "1234"})
        assert answer.status == 404, path
    assert sandesh("workspace", "show", workspace)["status"] == "pending"
    assert sandesh("workspace", "show", workspace)["promotionalHours"] is not None
    assert [(s["baud"], s["pin"]) for s in sandesh("sim", "list")["sims"] if s["id"] == sim] == [(115200, None)]
    assert [s for s in sandesh("sim", "list")["sims"] if s["name"] == "x"] == []
    assert page.request.get(server.url + "/dashboard/ops/sims", max_redirects=0).status == 404


def test_an_operator_creates_credits_and_activates_a_workspace_and_its_owner_sends(ops, browser, server, sandesh,  # noqa: F811
                                                                                   runtime, route):
    from sandesh.projections import follower

    ops.goto(server.url + "/dashboard")
    expect(heading(ops)).to_have_text("Workspaces")
    ops.get_by_label("Name").fill("Himal Tea")
    ops.get_by_role("checkbox", name="promotional").uncheck()
    ops.get_by_label("Rate for otp").fill("1.5x")
    ops.get_by_role("button", name="Create workspace").click()
    expect(ops.locator("#rate-otp-error")).to_contain_text("not an amount in NPR")
    ops.get_by_label("Rate for otp").fill("1.50")
    ops.get_by_role("button", name="Create workspace").click()
    expect(heading(ops)).to_have_text("Himal Tea")
    workspace = ops.url.rsplit("/", 1)[1]
    shown = sandesh("workspace", "show", workspace)
    assert (shown["status"], shown["allowedTypes"], shown["rates"]["otp"]) == ("pending", ["transactional", "otp"],
                                                                               150)
    ops.get_by_label("Amount (NPR)").fill("0")
    ops.get_by_role("button", name="Credit").click()
    expect(ops.locator("#amount-error")).to_have_text("a credit must be a positive whole number of paisa")
    ops.get_by_label("Amount (NPR)").fill("500.50")
    ops.get_by_label("Note").fill("invoice 2026-117")
    ops.get_by_role("button", name="Credit").click()
    expect(ops.locator("dl.state")).to_contain_text("NPR 500.50")
    ops.get_by_role("button", name="Activate").click()
    expect(ops.locator("dl.state")).to_contain_text("active")
    ops.get_by_role("button", name="Activate").click()
    expect(ops.locator("#status-error")).to_have_text("workspace is active; only a pending workspace can be activated")

    ops.goto(f"{server.url}/dashboard/w/{workspace}/people")  # part 1's page, open to the operator team
    ops.get_by_label("Email").fill("tea-owner@example.com")
    ops.get_by_label("Name").fill("Tea Owner")
    ops.get_by_label("Role", exact=True).select_option("owner")
    ops.get_by_role("button", name="Invite").click()
    link = ops.get_by_role("status").locator("code").inner_text()
    owner = browser.new_context().new_page()
    set_password(owner, server, {"setPasswordLink": link})
    sign_in(owner, server, "tea-owner@example.com")
    owner.get_by_role("link", name="API clients").click()
    owner.get_by_role("button", name="Create client").click()  # its brand: the workspace's name
    key = owner.get_by_role("status").locator("code").first.inner_text()
    owner.context.close()
    answer = send(server, key)
    assert answer.status_code == 202, answer.text
    assert sandesh("workspace", "show", workspace)["balance"] == 50050 - 100
    follower.catch_up(runtime)  # the messages read model, as the projections worker follows it
    ops.goto(server.url + "/dashboard/ops/workspaces")
    listed = ops.get_by_role("row", name=re.compile("Himal Tea"))
    expect(listed).to_contain_text("active")
    expect(listed).to_contain_text("NPR 499.50")
    expect(listed.locator("time")).to_have_text(re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"))  # last activity

    trail = [(line["action"], line["actor"]) for line in audit(sandesh, "--workspace", workspace)]
    assert [a for a in trail if a[0].startswith("workspace.")] == [
        ("workspace.created", f"user:{OPERATOR}"), ("workspace.credited", f"user:{OPERATOR}"),
        ("workspace.activated", f"user:{OPERATOR}")]
    credited = [line for line in audit(sandesh, "--workspace", workspace) if line["action"] == "workspace.credited"]
    assert credited[0]["details"] == {"amount": 50050, "note": "invoice 2026-117"}


def test_an_operator_suspends_reinstates_and_sets_rates_types_and_a_clients_rate_limit(ops, server, sandesh):
    workspace = sandesh("workspace", "create", "--name", "Rates Co")["id"]
    client = sandesh("client", "create", "--workspace", workspace, "--brand", "Rates Co")["id"]
    ops.goto(f"{server.url}/dashboard/ops/workspaces/{workspace}")
    ops.get_by_role("button", name="Reinstate").click()
    expect(ops.locator("#status-error")).to_have_text(
        "workspace is pending; only a suspended workspace can be reinstated")
    ops.get_by_role("button", name="Suspend").click()
    expect(ops.locator("dl.state")).to_contain_text("suspended")
    ops.get_by_role("button", name="Reinstate").click()
    expect(ops.locator("dl.state")).to_contain_text("active")

    ops.get_by_label("Rate for promotional").fill("0.40")
    ops.get_by_role("button", name="Set rates").click()
    expect(heading(ops)).to_have_text("Rates Co")
    for box in ("transactional", "otp", "promotional"):
        ops.locator("form[action$='/types']").get_by_role("checkbox", name=box).uncheck()
    ops.get_by_role("button", name="Set allowed types").click()
    expect(ops.locator("#types-error")).to_have_text("tick at least one message type")
    ops.locator("form[action$='/types']").get_by_role("checkbox", name="otp").check()
    ops.get_by_role("button", name="Set allowed types").click()
    expect(ops.locator("dl.state")).to_contain_text("otp")
    shown = sandesh("workspace", "show", workspace)
    assert (shown["rates"]["promotional"], shown["allowedTypes"]) == (40, ["otp"])

    ops.get_by_label("Rate limit of Rates Co").fill("0")
    ops.get_by_role("button", name="Set rate limit").click()
    expect(ops.locator(f"#rate-limit-{client}-error")).to_contain_text("at least 1")
    ops.get_by_label("Rate limit of Rates Co").fill("200")
    ops.get_by_role("button", name="Set rate limit").click()
    expect(ops.get_by_label("Rate limit of Rates Co")).to_have_value("200")
    assert sandesh("client", "show", client)["rateLimit"] == 200
    actions = [(line["action"], line["actor"]) for line in audit(sandesh, "--workspace", workspace)]
    assert ("client.updated", f"user:{OPERATOR}") in actions and ("workspace.types_set", f"user:{OPERATOR}") in actions


def test_the_operator_team_grants_or_dismisses_the_brand_a_workspace_asks_for(ops, server, sandesh, runtime):
    """A client's brand is set by the operator team alone, like a registered sender ID: what a
    workspace asks for waits in the console's Brand requests until it is granted or dismissed."""
    workspace = sandesh("workspace", "create", "--name", "Chiya Pasal")["id"]
    chiya = sandesh("client", "create", "--workspace", workspace, "--brand", "Chiya")["id"]
    ghar = sandesh("client", "create", "--workspace", workspace, "--brand", "Ghar")["id"]
    asks = runtime.sandesh.operators.request_brand  # what an owner's Ask for a brand calls
    asks(chiya, "Chiya Ghar", "user:owner@chiya.example")
    asks(ghar, "Ghar Pasal", "user:owner@chiya.example")
    ops.goto(server.url + "/dashboard/ops/workspaces")
    requests_table = ops.locator("table.brand-requests")
    expect(requests_table.get_by_role("row", name=re.compile("Chiya Ghar"))).to_contain_text("Chiya Pasal")
    asks(chiya, "Chiya House", "user:owner@chiya.example")  # asked again after the operator looked
    requests_table.get_by_role("row", name=re.compile("Chiya Ghar")).get_by_role("button", name="Grant").click()
    expect(ops.locator(f"#brand-{chiya}-error")).to_have_text(
        "the brand asked for is now 'Chiya House', not 'Chiya Ghar'")
    assert sandesh("client", "show", chiya)["brand"] == "Chiya"

    requests_table.get_by_role("row", name=re.compile("Chiya House")).get_by_role("button", name="Grant").click()
    requests_table.get_by_role("row", name=re.compile("Ghar Pasal")).get_by_role("button", name="Dismiss").click()
    expect(ops.locator("table.brand-requests")).to_have_count(0)  # nothing waits
    shown = {c["id"]: (c["brand"], c["brandRequested"]) for c in sandesh("client", "list", "--workspace", workspace)["clients"]}
    assert shown == {chiya: ("Chiya House", None), ghar: ("Ghar", None)}
    trail = [(line["action"], line["actor"], line["details"]) for line in audit(sandesh, "--workspace", workspace)]
    assert ("client.updated", f"user:{OPERATOR}", {"changes": {"brand": "Chiya House"}}) in trail
    assert ("client.brand_request_dismissed", f"user:{OPERATOR}", {"brand": "Ghar Pasal"}) in trail


def test_the_service_audit_log_shows_the_changes_of_sims_and_the_switch(ops, server, sandesh, route, runtime):
    from sandesh.projections import follower

    sandesh("sim", "disable", "route-1")
    sandesh("sim", "enable", "route-1")
    ops.goto(server.url + "/dashboard/ops/sims")
    ops.locator("#sim-route-1").get_by_role("button", name="Disable route-1").click()
    expect(ops.locator("#sim-route-1 td.state")).to_have_text("disabled")
    ops.locator("#sim-route-1").get_by_role("button", name="Enable route-1").click()
    expect(ops.locator("#sim-route-1 td.state")).to_have_text("active")
    follower.catch_up(runtime)  # no projections worker runs in this module (the Traffic test counts on it)
    ops.goto(server.url + "/dashboard/ops/audit?action=sim.enabled")
    expect(heading(ops)).to_have_text("Audit log")
    actors = ops.locator("table.audit tbody tr td:nth-child(2)").all_inner_texts()
    assert f"user:{OPERATOR}" in actors and "tester" in actors  # the command's and the console's changes
    assert set(ops.locator("table.audit tbody tr td:nth-child(3)").all_inner_texts()) == {"sim.enabled"}
    ops.get_by_label("Person").select_option(OPERATOR)
    ops.get_by_role("button", name="Filter").click()
    assert set(ops.locator("table.audit tbody tr td:nth-child(2)").all_inner_texts()) == {f"user:{OPERATOR}"}
    assert ops.get_by_label("Client").count() == 0  # a SIM's line has no client
    options = ops.get_by_label("Action").locator("option").all_inner_texts()
    assert "sms.disabled" in options and not [o for o in options if o.startswith(("client.", "workspace."))]
    ops.goto(server.url + f"/dashboard/ops/audit?person={OPERATOR}&action=person.totp_enrolled")
    assert ops.locator("table.audit tbody tr td:nth-child(3)").all_inner_texts() == ["person.totp_enrolled"]


def test_an_operator_adds_a_colleague_and_disables_enables_and_relinks_anyone(ops, server, sandesh):
    ops.goto(server.url + "/dashboard/ops/people")
    expect(heading(ops)).to_have_text("People of the service")
    ops.get_by_label("Email").fill("not an email")
    ops.get_by_label("Name").fill("Second Shift")
    ops.get_by_role("button", name="Add operator").click()
    expect(ops.locator("#email-error")).to_contain_text("is not an email address")
    ops.get_by_label("Email").fill("second-shift@example.com")
    ops.get_by_role("button", name="Add operator").click()
    first = ops.get_by_role("status").locator("code").inner_text()
    assert "Set your password" in requests.get(first, timeout=10).text
    listed = {p["email"]: p for p in sandesh("user", "list")["people"]}
    assert (listed["second-shift@example.com"]["role"], listed["second-shift@example.com"]["workspaceId"]) == (
        "operator", None)

    ops.get_by_role("button", name="Disable second-shift@example.com").click()
    expect(ops.locator("tr", has_text="second-shift@example.com")).to_contain_text("disabled")
    assert {p["email"]: p for p in sandesh("user", "list")["people"]}["second-shift@example.com"]["disabled"] is True
    ops.get_by_role("button", name="Enable second-shift@example.com").click()
    expect(ops.locator("tr", has_text="second-shift@example.com")).to_contain_text("invited")
    ops.get_by_role("button", name="New link second-shift@example.com").click()
    again = ops.get_by_role("status").locator("code").inner_text()
    assert again != first and "Link not valid" in requests.get(first, timeout=10).text  # the old one stopped
    ops.get_by_role("button", name=f"Disable {OPERATOR}").click()
    expect(ops.locator("tr", has_text=OPERATOR).locator("p.error")).to_have_text(
        "you cannot disable yourself: ask another operator")
    actions = [line["action"] for line in audit(sandesh) if line["actor"] == f"user:{OPERATOR}"
               and line["details"].get("email") == "second-shift@example.com"]
    assert actions == ["person.added", "person.disabled", "person.enabled", "person.link_issued"]


def test_the_sim_pool_shows_a_change_made_with_the_cli_within_5_seconds_without_reloading(ops, server, sandesh,
                                                                                        route):
    problems: list[str] = []
    ops.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
    ops.goto(server.url + "/dashboard/ops/sims")
    expect(heading(ops)).to_have_text("SIM pool")
    row = ops.locator("#sim-route-1")
    expect(row.locator("td.state")).to_have_text("active")
    expect(row.locator("meter")).to_have_attribute("max", "30")
    ops.evaluate("window.notReloaded = true")
    sandesh("sim", "disable", "route-1")
    expect(row.locator("td.state")).to_have_text("disabled", timeout=5000)
    sandesh("sim", "enable", "route-1")
    expect(row.locator("td.state")).to_have_text("active", timeout=5000)
    assert ops.evaluate("window.notReloaded") is True
    assert problems == []  # the script ran under the page's Content-Security-Policy

    row.get_by_role("button", name="Disable route-1").click()
    expect(row.locator("td.state")).to_have_text("disabled")
    row.get_by_role("button", name="Enable route-1").click()
    expect(row.locator("td.state")).to_have_text("active")
    actions = [line["action"] for line in audit(sandesh) if line["actor"] == f"user:{OPERATOR}"]
    assert actions[-2:] == ["sim.disabled", "sim.enabled"]


def test_a_host_whose_sims_went_silent_shows_at_a_glance(ops, server, sandesh, route):
    ops.goto(server.url + "/dashboard/ops/sims")
    host = ops.locator("li.host", has_text="any")
    expect(host).to_contain_text("1 of 1 enabled SIMs reporting")
    expect(host).not_to_have_class(re.compile("silent"))
    with route.silent():
        sandesh("clock", "advance", "61")  # past the route window, with no heartbeat since
        expect(host).to_have_class(re.compile("silent"), timeout=5000)
        expect(host).to_contain_text("0 of 1 enabled SIMs reporting")
        expect(ops.locator("#sim-route-1 td.state")).to_contain_text("unreachable")
    expect(host).not_to_have_class(re.compile("silent"), timeout=5000)


def test_the_alerts_that_hold_show_on_the_sim_pool_page(ops, server, runtime):
    ops.goto(server.url + "/dashboard/ops/sims")
    alerts = ops.locator("ul.alerts")
    expect(alerts).to_contain_text("No alert holds now")
    alert = runtime.sandesh.alerts.raise_alert("sim_unusable", "route-1", "Sandesh: SIM route-1 unusable: no answer")
    expect(alerts.locator("li.sim_unusable")).to_contain_text("Sandesh: SIM route-1 unusable: no answer since ",
                                                              timeout=5000)  # the page refreshes itself
    runtime.sandesh.alerts.clear(alert.id)
    expect(alerts).to_contain_text("No alert holds now", timeout=5000)


def test_a_sim_quarantined_by_a_failing_modem_shows_its_reason_and_is_released_from_the_page(ops, server, sandesh,
                                                                                             runtime, route):
    workspace = funded_workspace(runtime.sandesh, "Quarantine", 10**6, "t")
    client = runtime.sandesh.operators.create_client(workspace, "Q", None, 1000, "t")[0].id
    sandesh("sim", "disable", "route-1")  # the emulated modem alone sends
    with Emulator(sims=1, first=500, report_delay=0.05, cmgs_seconds=0.1) as emulator, running_dispatcher(runtime):
        register_emulated(runtime, emulator.devices(), "test")
        modem = emulator.modems[0]
        ops.goto(server.url + "/dashboard/ops/sims")
        row = ops.locator(f"#sim-{modem.name}")
        expect(row.locator("td.state")).to_have_text("active", timeout=15000)
        modem.fail_next("AT+CMGS", "+CMS ERROR: 8")  # barred: the SIM's fault
        request, problems = parse_send({"to": "9779812345670", "text": "to a barred SIM"})
        assert not problems
        runtime.sandesh.sending.send(client, workspace, request, 100)
        expect(row.locator("td.state")).to_contain_text("quarantined", timeout=15000)
        expect(row.locator(".reason")).to_contain_text("CMS 8")
        release = row.locator("form", has=ops.get_by_role("button", name=f"Release {modem.name}"))
        action, token = release.get_attribute("action"), release.locator("input[name=csrf]").get_attribute("value")
        row.get_by_role("button", name=f"Release {modem.name}").click()
        expect(row.locator("td.state")).to_have_text("active", timeout=10000)
        again = ops.request.post(server.url + action, form={"csrf": token})  # from a tab that still showed it
        assert again.status == 400
        assert re.search(f'id="sim-{modem.name}".*?SIM is not quarantined.*?</tr>', again.text(), re.DOTALL)
        request, _ = parse_send({"to": "9779812345671", "text": "after the release"})
        runtime.sandesh.sending.send(client, workspace, request, 100)
        expect(row.locator("td.today")).to_contain_text(re.compile(r"^[12] messages? \([12] parts?\)"),
                                                         timeout=15000)  # the first, too, if it was sent again
        sandesh("sim", "disable", modem.name)
    sandesh("sim", "enable", "route-1")
    released = [line for line in audit(sandesh) if line["action"] == "sim.released"]
    assert released[-1]["actor"] == f"user:{OPERATOR}"


def test_switching_sms_off_from_the_page_makes_the_api_answer_503_sms_disabled(ops, server, sandesh, route,
                                                                              active_client):
    ops.goto(server.url + "/dashboard/ops/traffic")
    expect(heading(ops)).to_have_text("Traffic")
    ops.get_by_role("button", name="Switch off").click()
    expect(ops.locator("#reason-error")).to_be_visible()
    ops.get_by_label("Reason").fill("maintenance until 14:00")
    ops.get_by_role("button", name="Switch off").click()
    expect(ops.locator("#switch-state")).to_contain_text("off: maintenance until 14:00")
    deadline = time.monotonic() + 2
    while (answer := send(server, active_client["key"])).status_code != 503 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert (answer.status_code, answer.json()["code"]) == (503, "sms_disabled")
    ops.get_by_role("button", name="Switch on").click()
    expect(ops.locator("#switch-state")).to_contain_text("on")
    deadline = time.monotonic() + 2
    while (answer := send(server, active_client["key"])).status_code != 202 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert answer.status_code == 202, answer.text
    actions = [(line["action"], line["actor"]) for line in audit(sandesh)]
    assert ("sms.disabled", f"user:{OPERATOR}") in actions and ("sms.enabled", f"user:{OPERATOR}") in actions


def test_traffic_shows_the_queue_the_minutes_the_lag_and_the_readiness_checks(ops, server, runtime, route,
                                                                              active_client):
    from sandesh.projections import follower

    for _ in range(3):
        assert send(server, active_client["key"]).status_code == 202
    ops.goto(server.url + "/dashboard/ops/traffic")
    lag = ops.locator("table.lag tr", has_text="messages").locator("td")
    assert int(lag.inner_text()) >= 3  # no projections worker runs here: the followed read models wait
    follower.catch_up(runtime)
    ops.reload()
    expect(lag).to_have_text("0")
    waiting = ops.locator("table.queue tr", has_text="transactional").locator("td").first
    assert int(waiting.inner_text()) >= 3  # route-1 is a route, and nothing drives its modem
    expect(ops.locator("#readiness")).to_have_text("Ready.")
    title = ops.locator("svg.chart title").text_content()
    assert re.search(r"\b([3-9]|\d\d+) accepted", title), title


def sim_named(sandesh: Any, name: str) -> dict[str, Any]:
    return next(sim for sim in sandesh("sim", "list")["sims"] if sim["name"] == name)


def test_an_operator_adds_a_sim_updates_its_plan_and_sets_and_clears_its_pin(ops, server, sandesh):
    ops.goto(server.url + "/dashboard/ops/sims")
    add = ops.locator("form[action='/dashboard/ops/sims']")
    add.get_by_label("Name").fill("sim_9")
    add.get_by_label("Pace", exact=True).fill("31")
    add.get_by_role("button", name="Add SIM").click()
    expect(ops.locator("#name-error")).to_contain_text("must not start with 'sim_'")
    expect(ops.locator("#port-error")).to_be_visible()
    expect(ops.locator("#pace-error")).to_contain_text("at most 30")
    expect(ops.get_by_label("Pace", exact=True)).to_have_attribute("aria-invalid", "true")
    add.get_by_label("Name").fill("ntc-9")
    add.get_by_label("Port").fill("loop://")
    add.get_by_label("Host").fill("modems-9")  # no dispatcher of the module drives it
    add.get_by_label("Pace", exact=True).fill("")
    add.get_by_label("Daily cap").fill("500")
    add.get_by_label("Balance USSD code").fill("*400#")
    add.get_by_label("Minimum credit (NPR)").fill("25")
    add.get_by_role("button", name="Add SIM").click()
    expect(heading(ops)).to_have_text("SIM ntc-9")
    added = sim_named(sandesh, "ntc-9")
    assert (added["port"], added["baud"], added["host"], added["dailyCap"], added["balanceUssd"],
            added["minCredit"], added["pin"]) == ("loop://", 115200, "modems-9", 500, "*400#", 2500, None)
    expect(ops.locator("#pin-state")).to_have_text("not set")

    ops.get_by_role("button", name="Update SIM").click()
    expect(ops.locator("#sim-error")).to_have_text("nothing to change: type a new value in a field")
    ops.get_by_label("Balance USSD code").fill("400")
    ops.get_by_role("button", name="Update SIM").click()
    expect(ops.locator("#balance_ussd-error")).to_contain_text("USSD code")
    assert sim_named(sandesh, "ntc-9")["balanceUssd"] == "*400#"
    ops.get_by_label("Port").fill("loop://?logging=debug")
    ops.get_by_label("Balance USSD code").fill("*400#")
    ops.get_by_label("Daily cap").fill("")  # emptied: the SIM has no daily cap
    ops.get_by_label("Monthly cap").fill("9000")
    ops.get_by_label("Pace", exact=True).fill("20")
    ops.get_by_role("button", name="Update SIM").click()
    expect(ops.get_by_label("Pace", exact=True)).to_have_value("20")
    updated = sim_named(sandesh, "ntc-9")
    assert (updated["port"], updated["dailyCap"], updated["monthlyCap"], updated["pace"]) == (
        "loop://?logging=debug", None, 9000, 20)

    pin = ops.get_by_label("New PIN")
    expect(pin).to_have_attribute("type", "password")
    pin.fill("12")
    ops.get_by_role("button", name="Set PIN").click()
    expect(ops.locator("#pin-error")).to_have_text("a SIM PIN is 4 to 8 digits")
    ops.get_by_label("New PIN").fill("4321")
    ops.get_by_role("button", name="Set PIN").click()
    expect(ops.locator("#pin-state")).to_have_text("set")
    assert "4321" not in ops.content()
    assert sim_named(sandesh, "ntc-9")["pin"] == "set"
    ops.get_by_role("button", name="Clear PIN").click()
    expect(ops.locator("#pin-state")).to_have_text("not set")
    assert sim_named(sandesh, "ntc-9")["pin"] is None
    sandesh("sim", "disable", "ntc-9")

    trail = [(line["action"], line["actor"]) for line in audit(sandesh) if line["simId"] == added["id"]]
    assert trail[:6] == [(action, f"user:{OPERATOR}") for action in (
        "sim.added", "sim.updated", "sim.port_changed", "sim.updated", "sim.pin_set", "sim.pin_set")]


def test_an_operator_sets_promotional_hours_and_erases_texts_only_after_typing_the_workspaces_name(
        ops, server, sandesh, route):
    workspace = sandesh("workspace", "create", "--name", "Erase Co")["id"]
    sandesh("workspace", "activate", workspace)
    sandesh("workspace", "credit", workspace, "10000")
    key = sandesh("client", "create", "--workspace", workspace, "--brand", "Erase Co")["key"]
    message = send(server, key).json()["messageId"]
    ops.goto(f"{server.url}/dashboard/ops/workspaces/{workspace}")
    expect(ops.locator("#promo-hours")).to_have_text("08:00-20:00, Nepal time")
    hours = ops.get_by_label("Hours (Nepal time)")
    hours.fill("25:00-26:00")
    ops.get_by_role("button", name="Set promotional hours").click()
    expect(ops.locator("#hours-error")).to_contain_text("must be HH:MM-HH:MM")
    hours.fill("off")
    ops.get_by_role("button", name="Set promotional hours").click()
    expect(ops.locator("#promo-hours")).to_have_text("off: promotions never wait")
    assert sandesh("workspace", "show", workspace)["promotionalHours"] is None
    hours.fill("21:00-07:30")
    ops.get_by_role("button", name="Set promotional hours").click()
    expect(ops.locator("#promo-hours")).to_have_text("21:00-07:30, Nepal time")
    shown = sandesh("workspace", "show", workspace)["promotionalHours"]
    assert (shown["start"], shown["end"]) == ("21:00", "07:30")

    def accepted_text() -> Any:
        return sandesh("message", "history", message)["events"][0]["text"]

    assert accepted_text() == "Your order has shipped"
    confirm = ops.get_by_label("Type the workspace's name")
    confirm.fill("erase co")
    ops.get_by_role("button", name="Erase texts").click()
    expect(ops.locator("#confirm-error")).to_have_text("type the workspace's name exactly to erase its texts")
    assert accepted_text() == "Your order has shipped"
    confirm.fill("Erase Co")
    ops.get_by_role("button", name="Erase texts").click()
    expect(ops.get_by_role("status")).to_have_text("Texts erased: 1 key destroyed.")
    assert accepted_text() is None
    ops.reload()  # the answer was a redirect: a reload erases nothing again
    expect(ops.get_by_role("status")).to_have_text("Texts erased: 1 key destroyed.")
    trail = [(line["action"], line["actor"]) for line in audit(sandesh, "--workspace", workspace)]
    assert [a for a in trail if a[0] in ("workspace.promo_hours_set", "workspace.texts_shredded")] == [
        ("workspace.promo_hours_set", f"user:{OPERATOR}"), ("workspace.promo_hours_set", f"user:{OPERATOR}"),
        ("workspace.texts_shredded", f"user:{OPERATOR}")]


def test_the_message_id_box_opens_a_message_in_its_workspace_or_says_there_is_no_such_message(
        ops, server, route, active_client):
    message = send(server, active_client["key"]).json()["messageId"]  # not projected yet: found in the log
    ops.goto(server.url + "/dashboard/ops/traffic")
    ops.get_by_label("Message id").fill(message)
    ops.get_by_role("button", name="Find message").click()
    expect(heading(ops)).to_have_text("Message timeline")
    assert ops.url == f"{server.url}/dashboard/w/{active_client['workspace']}/messages/{message}"
    ops.get_by_label("Message id").fill("msg_0000")
    with ops.expect_response(lambda answer: "/dashboard/ops/messages" in answer.url) as answered:
        ops.get_by_role("button", name="Find message").click()
    assert answered.value.status == 404
    expect(ops.locator("#find-message-error")).to_have_text("no such message: msg_0000")
    expect(ops.get_by_label("Message id")).to_have_value("msg_0000")


def test_replies_are_listed_newest_first_50_a_page_with_the_message_each_answers(ops, server, sandesh, runtime,
                                                                                 route, active_client):
    app = runtime.sandesh
    message = send(server, active_client["key"], to="9779812345673").json()["messageId"]

    def reply(text: str, answers: str | None) -> str:
        part = app.dispatch.store_reply_part(None, route.sim_id, "9779812345673", None, 1, 1, text)
        return app.dispatch.finish_reply(part.id, app.history.message(answers) if answers else None).id

    reply("Yes please, deliver tomorrow", message)
    for n in range(50):
        reply(f"who is this? {n}", None)
    ops.goto(server.url + "/dashboard")
    ops.get_by_role("link", name="Replies").click()
    expect(heading(ops)).to_have_text("Replies")
    rows = ops.locator("table.replies tbody tr")
    expect(rows).to_have_count(50)
    listed = [line["text"] for line in sandesh("inbound", "list", "--limit", "50")["replies"]]
    assert rows.locator("td.text").all_inner_texts() == listed
    ops.get_by_role("link", name="Older").click()
    answered = ops.get_by_role("row", name=re.compile("Yes please, deliver tomorrow"))
    expect(answered).to_contain_text("Acme")
    answered.get_by_role("link", name=message).click()
    expect(heading(ops)).to_have_text("Message timeline")
    ops.goto(server.url + "/dashboard/ops/replies")
    ops.get_by_label("Unattributed only").check()
    ops.get_by_role("button", name="Show replies").click()
    expect(rows).to_have_count(50)
    expect(rows.filter(has_text="Yes please")).to_have_count(0)
    expect(rows.first).to_contain_text("no message: unattributed")


def test_the_sim_pool_refreshing_itself_does_not_keep_an_unattended_session_alive(server, sandesh, browser,  # noqa: F811
                                                                                    route):
    """Last of the module: the clock it moves ends every other session of the module too."""
    context = operator_context(sandesh, server, browser, "night-shift@example.com")
    try:
        watching = context.new_page()
        watching.goto(server.url + "/dashboard/ops/sims")
        expect(heading(watching)).to_have_text("SIM pool")
        sandesh("clock", "advance", str(20 * 60))  # no one clicks; the page goes on refreshing
        with watching.expect_response(lambda answer: answer.url.endswith("/dashboard/ops/sims/rows")):
            pass
        expect(heading(watching)).to_have_text("SIM pool")
        sandesh("clock", "advance", str(15 * 60))  # 35 minutes since the last click: the session ended
        expect(heading(watching)).to_have_text("Sign in", timeout=8000)
    finally:
        context.close()
