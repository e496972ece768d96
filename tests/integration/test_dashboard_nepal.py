"""The dashboard speaks its people's time and money (docs/dashboard.md, "Times and money"):
Nepal time with UTC on hover, date filters as Nepal calendar days, amounts in NPR; the Messages
table fits a 1280-pixel window; a workspace's own address opens its Overview; and the console's
list of workspaces leads to each workspace's pages.  In Chromium against a real `sandesh serve`."""
from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import requests
from playwright.sync_api import Page, expect

from sandesh.domain.bs import bs_text
from sandesh.projections import follower
from tests.integration.test_dashboard import browser, page, sign_in  # noqa: F401 (fixtures)
from tests.integration.test_dashboard_filters import FAILED, Workspace, ended, listed
from tests.integration.test_dashboard_ops import operator, ops  # noqa: F401 (fixtures)

NEPAL = ZoneInfo("Asia/Kathmandu")


def times_read_in_nepal_with_utc_on_hover(page: Page) -> int:
    """Every <time> of the page shows its instant in Nepal time, with the same instant in UTC as
    its title; how many there are."""
    times = page.locator("main time")
    for shown in times.all():
        at = datetime.fromisoformat(shown.get_attribute("datetime").replace("Z", "+00:00"))
        assert shown.inner_text() == at.astimezone(NEPAL).strftime("%Y-%m-%d %H:%M:%S")
        assert shown.get_attribute("title") == at.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    return times.count()


def speaks_no_utc_and_no_paisa(page: Page) -> None:
    text = page.locator("main").inner_text()
    assert not re.search(r"\(UTC[),]|UTC days|Times are UTC", text), text
    assert "paisa" not in text


@pytest.fixture(scope="module")
def shop(sandesh: Any, server: Any, browser: Any) -> Workspace:  # noqa: F811
    return Workspace(sandesh, server, browser, "Kanchan Tea")


def test_messages_show_nepal_time_with_utc_on_hover_and_their_cost_in_npr(page, shop, runtime, route):  # noqa: F811
    message_id = shop.send("Alpha", "9779841000601")
    ended(runtime, message_id, FAILED)
    follower.catch_up(runtime)
    shop.page_of(page, "messages")
    expect(page.get_by_role("columnheader", name="Created (Nepal time)")).to_be_visible()
    row = page.get_by_role("row", name=re.compile(message_id))
    expect(row.locator("td.money")).to_have_text("NPR 1.00")  # a segment at a new workspace's rate
    expect(row.locator(".bs")).to_have_text(bs_text(runtime.clock.now()))  # today's date in Bikram Sambat
    assert times_read_in_nepal_with_utc_on_hover(page) >= 1
    speaks_no_utc_and_no_paisa(page)

    page.get_by_role("link", name=message_id).click()
    expect(page.locator("ol.timeline")).to_contain_text("cost: NPR 1.00")
    expect(page.locator("ol.timeline")).to_contain_text("refund: NPR 1.00")
    assert times_read_in_nepal_with_utc_on_hover(page) >= 2
    speaks_no_utc_and_no_paisa(page)


def test_every_page_of_a_workspace_speaks_nepal_time_and_npr(page, shop, sandesh, server):  # noqa: F811
    sandesh("optout", "add", shop.id, "9779841000602")
    sign_in(page, server, shop.email)
    for name in ("overview", "clients", "messages", "webhooks", "opt-outs", "people", "audit"):
        page.goto(f"{server.url}/dashboard/w/{shop.id}/{name}")
        speaks_no_utc_and_no_paisa(page)
        times_read_in_nepal_with_utc_on_hover(page)
    expect(page.get_by_role("columnheader", name="When (Nepal time)")).to_be_visible()
    credited = page.get_by_role("row", name=re.compile("workspace.credited"))
    expect(credited).to_contain_text("amount: NPR 10,000.00")
    page.goto(f"{server.url}/dashboard/w/{shop.id}/opt-outs")
    expect(page.get_by_role("columnheader", name="Since (Nepal time)")).to_be_visible()
    assert times_read_in_nepal_with_utc_on_hover(page) == 1


def test_the_date_filters_are_nepal_calendar_days(page, shop, sandesh, runtime, route):  # noqa: F811
    """A message accepted at 18:30 UTC is on the next day in Nepal (UTC+05:45)."""
    now = datetime.fromtimestamp(runtime.clock.now(), timezone.utc)
    evening = now.replace(hour=18, minute=30, second=0, microsecond=0)
    if evening <= now:
        evening += timedelta(days=1)
    sandesh("clock", "advance", str((evening - now).total_seconds()))
    message_id = shop.send("Beta", "9779841000603")
    follower.catch_up(runtime)
    utc_day, nepal_day = evening.date(), evening.date() + timedelta(days=1)
    shop.page_of(page, "messages")
    page.get_by_label("Client").select_option(label="Beta")
    for day, found in ((nepal_day, [message_id]), (utc_day, [])):
        page.get_by_label("From").fill(day.isoformat())
        page.get_by_label("To", exact=True).fill(day.isoformat())
        page.get_by_role("button", name="Search").click()
        assert listed(page) == found, day
    page.get_by_label("From").fill(nepal_day.isoformat())
    page.get_by_label("To", exact=True).fill("")
    page.get_by_role("button", name="Search").click()
    cell = page.get_by_role("row", name=re.compile(message_id)).locator("time")
    expect(cell).to_have_text(re.compile(rf"^{nepal_day.isoformat()} 00:15:\d\d$"))
    expect(cell).to_have_attribute("title", re.compile(rf"^{utc_day.isoformat()} 18:30:\d\d UTC$"))


def test_the_messages_table_fits_a_1280_pixel_window(browser, shop, server, runtime, route):  # noqa: F811
    for n in range(3):
        ended(runtime, shop.send("Alpha", f"97798410007{n:02d}", "promotional"), FAILED)
    follower.catch_up(runtime)
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    tab = context.new_page()
    shop.page_of(tab, "messages")
    expect(tab.locator("table.messages tbody tr").first.locator("time")).to_be_visible()
    table = tab.locator("table.messages").bounding_box()
    main = tab.locator("main").evaluate("main => { const r = main.getBoundingClientRect();"
                                        " const s = getComputedStyle(main);"
                                        " return {left: r.left + parseFloat(s.paddingLeft),"
                                        " right: r.right - parseFloat(s.paddingRight)}; }")
    assert table["x"] >= main["left"] - 0.5 and table["x"] + table["width"] <= main["right"] + 0.5, (table, main)
    for cell in tab.locator("table.messages tr > *").all():
        box = cell.bounding_box()
        assert box["x"] + box["width"] <= table["x"] + table["width"] + 0.5, cell.inner_text()
    assert tab.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
    context.close()


def test_a_workspaces_own_address_opens_its_overview(page, shop, server, sandesh):  # noqa: F811
    root = f"{server.url}/dashboard/w/{shop.id}"
    for address in (root, root + "/"):
        answer = requests.get(address, allow_redirects=False)  # not signed in: as the Overview answers
        assert (answer.status_code, answer.headers["location"]) == (303, "/dashboard/sign-in")
    sign_in(page, server, shop.email)
    for address in (root, root + "/"):
        response = page.goto(address)
        assert response.request.redirected_from is not None
        expect(page).to_have_url(f"{root}/overview")
        expect(page.get_by_role("heading", level=1)).to_have_text("Overview")
    other = sandesh("workspace", "create", "--name", "Someone else's")["id"]
    for address in (f"{server.url}/dashboard/w/{other}", f"{server.url}/dashboard/w/{other}/"):
        assert page.goto(address).status == 404  # not theirs: as the Overview answers
        expect(page.get_by_role("heading", level=1)).to_have_text("Not found")


def test_the_consoles_list_of_workspaces_leads_to_each_workspaces_own_pages(ops, shop, server):  # noqa: F811
    ops.goto(server.url + "/dashboard/ops/workspaces")
    row = ops.get_by_role("row", name=re.compile("Kanchan Tea"))
    expect(row).to_contain_text("NPR ")
    expect(ops.get_by_role("columnheader", name="Last activity (Nepal time)")).to_be_visible()
    assert times_read_in_nepal_with_utc_on_hover(ops) >= 1
    speaks_no_utc_and_no_paisa(ops)
    row.get_by_role("link", name="Overview").click()
    expect(ops).to_have_url(f"{server.url}/dashboard/w/{shop.id}/overview")
    expect(ops.get_by_role("heading", level=1)).to_have_text("Overview")
    ops.goto(server.url + "/dashboard/ops/workspaces")
    expect(row.get_by_role("link", name="Messages")).to_have_attribute("href", f"/dashboard/w/{shop.id}/messages")
    row.get_by_role("link", name="Kanchan Tea").click()
    expect(ops).to_have_url(f"{server.url}/dashboard/ops/workspaces/{shop.id}")
    speaks_no_utc_and_no_paisa(ops)
    for address in ("/dashboard/ops/traffic", "/dashboard/ops/replies", "/dashboard/ops/audit", "/dashboard/ops/sims"):
        ops.goto(server.url + address)
        speaks_no_utc_and_no_paisa(ops)
        times_read_in_nepal_with_utc_on_hover(ops)
