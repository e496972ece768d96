"""The dashboard's searches, filters, pages and chart (docs/dashboard.md: "Messages", "Overview",
"Webhooks", "Audit log") and a webhook secret rotated from it with a grace period, in Chromium
against a real `sandesh serve`, with messages sent through the real API."""
from __future__ import annotations

import csv
import io
import re
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import requests
from playwright.sync_api import Page, expect

from sandesh.domain.bs import bs_iso
from sandesh.domain.sending import parse_send
from sandesh.domain.signature import SignatureError, verify_signature
from sandesh.domain.webhook import delivery_id
from sandesh.projections import follower
from tests.integration.test_dashboard import (add_person, audit_shows, browser, page,  # noqa: F401 (fixtures)
                                              password_was_set, set_password, sign_in)
from tests.integration.test_webhooks import deliver, lifecycle, sender  # noqa: F401 (a fixture)

DELIVERED = (("submit",), ("accept",), ("report", 0))
UNDELIVERED = (("submit",), ("accept",), ("report", 0x45))
SENT = (("submit",), ("accept",))
FAILED = (("fail", "no SIM could send it"),)


class Workspace:
    """A funded workspace with two clients (their keys by brand) and a viewer signed in at will."""

    def __init__(self, sandesh: Any, server: Any, browser: Any, name: str, **webhook_urls: str):
        self.sandesh, self.server = sandesh, server
        self.id = sandesh("workspace", "create", "--name", name, "--types", "transactional,promotional")["id"]
        sandesh("workspace", "activate", self.id)
        sandesh("workspace", "credit", self.id, "1000000")
        sandesh("workspace", "set-promo-hours", self.id, "off")  # a promotion goes out at any hour of the run
        self.clients = {}
        for brand in ("Alpha", "Beta"):
            url = ("--webhook-url", webhook_urls[brand]) if brand in webhook_urls else ()
            self.clients[brand] = sandesh("client", "create", "--workspace", self.id, "--brand", brand,
                                          "--rate-limit", "1000", *url)
        self.email = f"viewer-{self.id}@example.com"
        context = browser.new_context()
        tab = context.new_page()
        set_password(tab, server, add_person(sandesh, self.id, self.email, role="viewer"))
        password_was_set(tab)
        context.close()
        self.http = requests.Session()

    def send(self, brand: str, to: str, message_type: str = "transactional") -> str:
        sent = self.http.post(self.server.url + "/v1/sms/send", headers={"x-api-key": self.clients[brand]["key"]},
                              json={"to": to, "text": "Your order is packed", "messageType": message_type})
        assert sent.status_code == 202, sent.text
        return sent.json()["messageId"]

    def page_of(self, page: Page, name: str) -> None:
        sign_in(page, self.server, self.email)
        page.goto(f"{self.server.url}/dashboard/w/{self.id}/{name}")


def ended(runtime: Any, message_id: str, steps: tuple[tuple[Any, ...], ...]) -> None:
    """The message moved as the dispatcher moves it, and the read models caught up."""
    lifecycle(runtime, runtime.sandesh.history.message(message_id), *steps)
    follower.catch_up(runtime)


def listed(page: Page) -> list[str]:
    return page.locator("table.messages tbody th a").all_inner_texts()


def today(sandesh: Any) -> str:
    """Today in Nepal: the date filters are Nepal calendar days."""
    now = datetime.fromisoformat(sandesh("clock", "show")["now"].replace("Z", "+00:00"))
    return now.astimezone(ZoneInfo("Asia/Kathmandu")).date().isoformat()


# Messages (docs/dashboard.md, "Messages")

def test_messages_are_filtered_by_status_type_client_and_dates(page, server, sandesh, runtime, route, browser):
    shop = Workspace(sandesh, server, browser, "Filtered")
    failed = shop.send("Alpha", "9779841000001")
    promoted = shop.send("Beta", "9779841000002", "promotional")
    ended(runtime, failed, FAILED)
    earlier = today(sandesh)
    sandesh("clock", "advance", str(2 * 86_400))
    later_one = shop.send("Alpha", "9779841000003")
    follower.catch_up(runtime)
    shop.page_of(page, "messages")
    expect(page.get_by_role("heading", level=1)).to_have_text("Messages")
    assert set(listed(page)) == {failed, promoted, later_one}
    assert listed(page)[0] == later_one  # newest first

    page.get_by_label("Status").select_option("failed")
    page.get_by_role("button", name="Search").click()
    assert listed(page) == [failed]
    page.get_by_label("Status").select_option("")
    page.get_by_label("Type").select_option("promotional")
    page.get_by_role("button", name="Search").click()
    assert listed(page) == [promoted]
    page.get_by_label("Type").select_option("")
    page.get_by_label("Client").select_option(label="Alpha")
    page.get_by_role("button", name="Search").click()
    assert set(listed(page)) == {failed, later_one}
    page.get_by_label("From").fill(today(sandesh))
    page.get_by_role("button", name="Search").click()
    assert listed(page) == [later_one]
    page.get_by_label("From").fill("")
    page.get_by_label("To", exact=True).fill(earlier)
    page.get_by_role("button", name="Search").click()
    assert listed(page) == [failed]
    # the same days in Bikram Sambat: with BS after them, or in Devanagari digits
    later_bs = bs_iso(datetime.fromisoformat(today(sandesh)).replace(tzinfo=ZoneInfo("Asia/Kathmandu")).timestamp())
    page.get_by_label("From").fill(later_bs + " BS")
    page.get_by_label("To", exact=True).fill(later_bs.translate(str.maketrans("0123456789", "०१२३४५६७८९")))
    page.get_by_role("button", name="Search").click()
    assert listed(page) == [later_one]
    page.get_by_label("From").fill("")
    page.get_by_label("To", exact=True).fill(bs_iso(datetime.fromisoformat(earlier).replace(
        tzinfo=ZoneInfo("Asia/Kathmandu")).timestamp()))
    page.get_by_role("button", name="Search").click()
    assert listed(page) == [failed]
    page.get_by_label("Search").fill("+9779841000003")
    page.get_by_role("button", name="Search").click()
    expect(page.get_by_role("row")).to_have_count(2)
    expect(page.get_by_role("row", name=re.compile("No message matches"))).to_be_visible()  # sent later than `to`

    response = page.goto(f"{server.url}/dashboard/w/{shop.id}/messages?from=yesterday")
    assert response.status == 400
    expect(page.locator("#from-error")).to_have_text("'yesterday' is not a date (YYYY-MM-DD, AD or BS)")
    expect(page.get_by_label("From")).to_have_attribute("aria-invalid", "true")


def test_every_message_that_matches_downloads_as_csv_with_its_bs_day(page, server, sandesh, runtime, route, browser):
    shop = Workspace(sandesh, server, browser, "Exported")
    earlier = shop.send("Beta", "9779841000009")
    sandesh("clock", "advance", str(2 * 86_400))
    workspace, client = shop.id, shop.clients["Alpha"]["id"]
    request, _ = parse_send({"to": "9779841000010", "text": "Sale", "messageType": "transactional"})
    many = [runtime.sandesh.sending.send(client, workspace, request, 100).id for _ in range(1_005)]  # past a read's 1,000
    follower.catch_up(runtime)
    shop.page_of(page, "messages")
    later_bs = bs_iso(datetime.fromisoformat(today(sandesh)).replace(tzinfo=ZoneInfo("Asia/Kathmandu")).timestamp())
    page.get_by_label("From").fill(later_bs + " BS")
    page.get_by_role("button", name="Search").click()
    with page.expect_download() as downloading:
        page.get_by_role("link", name="Download every message that matches (CSV, with BS dates)").click()
    download = downloading.value
    assert download.suggested_filename == f"messages-{workspace}.csv"
    text = open(download.path(), encoding="utf-8-sig").read()
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == ["number", "message id", "client", "type", "status", "error", "segments", "cost (NPR)",
                       "created (UTC)", "created (BS, Nepal day)"]
    assert sorted(row[1] for row in rows[1:]) == sorted(many), "every one from that BS day, none before"
    assert {(row[0], row[2], row[3], row[6], row[7], row[9]) for row in rows[1:]} == {
        ("9779841000010", "Alpha", "transactional", "1", "1.00", later_bs)}
    assert earlier not in text
    wrong = page.request.get(f"{server.url}/dashboard/w/{workspace}/messages.csv?from=yesterday")
    assert wrong.status == 400 and "is not a date" in wrong.text()


def test_messages_come_50_a_page_with_next_and_previous(page, server, sandesh, runtime, route, browser):
    shop = Workspace(sandesh, server, browser, "Paged")
    sent = [shop.send("Alpha", f"97798410001{n:02d}") for n in range(62)]
    shop.send("Beta", "9779841000200")  # another client's: filtered out below
    follower.catch_up(runtime)
    shop.page_of(page, "messages")
    page.get_by_label("Client").select_option(label="Alpha")
    page.get_by_role("button", name="Search").click()
    first = listed(page)
    assert len(first) == 50
    expect(page.get_by_role("link", name="Previous")).to_have_count(0)
    page.get_by_role("link", name="Next").click()
    rest = listed(page)
    assert len(rest) == 12 and set(first) | set(rest) == set(sent)
    expect(page.get_by_role("link", name="Next")).to_have_count(0)
    expect(page.get_by_label("Client")).to_have_value(shop.clients["Alpha"]["id"])  # the filter stays
    page.get_by_role("link", name="Previous").click()
    assert listed(page) == first
    expect(page.get_by_role("link", name="Previous")).to_have_count(0)


# Overview (docs/dashboard.md, "Overview")

def test_the_overview_charts_outcomes_per_hour_and_the_delivery_rate_per_operator(page, server, sandesh, runtime,
                                                                                 route, browser):
    shop = Workspace(sandesh, server, browser, "Charted")
    outcomes = [("9779841000301", DELIVERED), ("9779851000302", DELIVERED), ("9779861000303", FAILED),  # NTC
                ("9779801000304", DELIVERED), ("9779811000305", UNDELIVERED), ("9779821000306", SENT)]  # Ncell
    for number, steps in outcomes:
        ended(runtime, shop.send("Alpha", number), steps)
    shop.send("Beta", "9779611000307")  # Smart Telecom, still queued: no outcome
    follower.catch_up(runtime)
    shop.page_of(page, "overview")
    chart = page.get_by_role("img", name=re.compile("Messages per hour by outcome, the last 24 hours"))
    expect(chart).to_have_accessible_name(re.compile(
        r"7 in all:\s+3 delivered, 1 sent, 1 failed, 1 undelivered, 1 other"))
    expect(chart.locator("rect.delivered")).to_have_count(1)  # all in this hour: one bar, a segment each
    expect(chart.locator("rect.delivered title")).to_have_text("3 delivered in the hour 1 h ago")
    rates = page.locator("table.rates tbody tr")
    expect(rates).to_have_count(2)
    expect(page.get_by_role("row", name=re.compile("^Nepal Telecom"))).to_have_text(re.compile(r"3\s*2\s*67%"))
    expect(page.get_by_role("row", name=re.compile("^Ncell"))).to_have_text(re.compile(r"3\s*1\s*33%"))


# Webhooks (docs/dashboard.md, "Webhooks"), and a secret rotated with a grace period

@pytest.fixture(scope="module")
def hooked(sandesh: Any, server: Any, browser: Any, receiver: Any) -> Workspace:
    receiver.answer("/down", 500)
    return Workspace(sandesh, server, browser, "Hooked", Alpha=receiver.url("/up"), Beta=receiver.url("/down"))


def test_deliveries_are_filtered_by_state_and_client(page, runtime, route, hooked, receiver, sender):
    up, down = hooked.send("Alpha", "9779841000401"), hooked.send("Beta", "9779841000402")
    for message_id in (up, down):
        ended(runtime, message_id, FAILED)
    deliver(sender)
    receiver.wait("/up", 1)
    receiver.wait("/down", 1)
    hooked.page_of(page, "webhooks")
    expect(page.get_by_role("heading", level=1)).to_have_text("Webhooks")
    rows = page.locator("table.webhooks tbody tr")
    expect(rows).to_have_count(2)
    page.get_by_label("State").select_option("delivered")
    page.get_by_role("button", name="Filter").click()
    expect(rows).to_have_count(1)
    expect(rows).to_contain_text("Alpha")
    page.get_by_label("State").select_option("waiting")
    page.get_by_role("button", name="Filter").click()
    expect(rows).to_have_count(1)
    expect(rows).to_contain_text("Beta")
    page.get_by_label("State").select_option("")
    page.get_by_label("Client").select_option(label="Alpha")
    page.get_by_role("button", name="Filter").click()
    expect(rows).to_have_count(1)
    expect(rows).to_contain_text("delivered")
    page.get_by_label("State").select_option("dead")
    page.get_by_role("button", name="Filter").click()
    expect(rows).to_have_text("No delivery matches.")


def test_a_deliverys_page_lists_its_attempts(page, server, sandesh, runtime, route, browser, hooked, sender):
    message_id = hooked.send("Beta", "9779841000403")
    ended(runtime, message_id, FAILED)
    deliver(sender)
    hooked.page_of(page, "webhooks")
    made = delivery_id(message_id, "failed")
    page.get_by_role("link", name=made).click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Webhook delivery")
    expect(page.locator("dl.facts")).to_contain_text("waiting")
    expect(page.get_by_role("row", name=re.compile("^1 "))).to_contain_text("500")
    expect(page.get_by_role("button", name="Redeliver")).to_have_count(0)  # a viewer
    theirs = Workspace(sandesh, server, browser, "Not theirs")
    other = browser.new_context().new_page()
    sign_in(other, server, theirs.email)
    assert other.goto(f"{server.url}/dashboard/w/{theirs.id}/webhooks/{made}").status == 404
    other.context.close()


def signed_webhook(runtime: Any, hooked: Workspace, receiver: Any, sender: Any,
                   to: str) -> tuple[Any, str, list[str]]:
    """A message of Alpha fails: its webhook as the receiver got it, its signature's `t=` and `v1=` parts."""
    before = len(receiver.at("/up"))
    ended(runtime, hooked.send("Alpha", to), FAILED)
    deliver(sender)
    received = receiver.wait("/up", before + 1)[-1]
    stamp, *signed = received.headers["x-service-signature"].split(",")
    return received, stamp, signed


def test_a_secret_rotated_from_the_dashboard_signs_twice_until_its_grace_ends(page, server, sandesh, runtime, route,
                                                                            hooked, receiver, sender):
    old = hooked.clients["Alpha"]["webhookSecret"]
    owner = f"owner-{hooked.id}@example.com"
    set_password(page, server, add_person(sandesh, hooked.id, owner))
    password_was_set(page)
    sign_in(page, server, owner)
    page.get_by_role("link", name="API clients").click()
    row = page.get_by_role("row", name=re.compile("Alpha"))
    expect(row).to_contain_text("1000 requests/s")
    row.get_by_label("Grace hours").fill("1")
    row.get_by_role("button", name="Rotate webhook secret").click()
    expect(page.get_by_role("status")).to_contain_text("the old one signs for 1 h")
    new = page.get_by_role("status").locator("code").first.inner_text()
    assert new.startswith("whsec_") and new != old

    during, stamp, signed = signed_webhook(runtime, hooked, receiver, sender, "9779841000501")
    now = runtime.clock.now()
    assert len(signed) == 2
    assert verify_signature(new, f"{stamp},{signed[0]}", during.body, now=now)
    assert verify_signature(old, f"{stamp},{signed[1]}", during.body, now=now)

    sandesh("clock", "advance", "3601")  # the grace of 1 hour ends
    after, _, signed = signed_webhook(runtime, hooked, receiver, sender, "9779841000502")
    now = runtime.clock.now()
    assert len(signed) == 1
    assert verify_signature(new, after.headers["x-service-signature"], after.body, now=now)
    with pytest.raises(SignatureError):
        verify_signature(old, after.headers["x-service-signature"], after.body, now=now)


# Audit log (docs/dashboard.md, "Audit log")

def test_the_audit_log_is_filtered_by_action_client_person_and_dates_50_a_page(page, server, sandesh, runtime,
                                                                               browser, projections_worker):
    shop = Workspace(sandesh, server, browser, "Audited")
    for _ in range(55):
        runtime.sandesh.operators.rotate_key(shop.clients["Alpha"]["id"], "busy-operator")
    earlier = today(sandesh)
    sandesh("clock", "advance", str(2 * 86_400))
    sandesh("--actor", "late-operator", "client", "disable", shop.clients["Beta"]["id"])
    shop.page_of(page, "audit")
    audit_shows(page, page.url, "late-operator")
    rows = page.locator("table.audit tbody tr")
    expect(rows).to_have_count(50)
    expect(rows.first).to_contain_text("client.disabled")  # newest first
    page.get_by_role("link", name="Next").click()
    expect(rows).to_have_count(len(sandesh.run("audit", "--workspace", shop.id).stdout.splitlines()) - 50)
    page.get_by_role("link", name="Previous").click()
    expect(rows).to_have_count(50)

    page.get_by_label("Action").select_option("client.key_rotated")
    page.get_by_role("button", name="Filter").click()
    expect(rows).to_have_count(50)
    page.get_by_role("link", name="Next").click()
    expect(rows).to_have_count(5)
    expect(rows.filter(has_text="client.key_rotated")).to_have_count(5)

    page.goto(f"{server.url}/dashboard/w/{shop.id}/audit")
    page.get_by_label("Client").select_option(label="Beta")
    page.get_by_role("button", name="Filter").click()
    expect(rows.filter(has_text="client.key_rotated")).to_have_count(0)
    expect(rows.filter(has_text="client.disabled")).to_have_count(1)
    expect(rows.filter(has_text="client.created")).to_have_count(1)

    page.goto(f"{server.url}/dashboard/w/{shop.id}/audit")
    page.get_by_label("Person").select_option(shop.email)
    page.get_by_role("button", name="Filter").click()
    expect(rows.filter(has_text="person.added")).to_have_count(1)  # about them, by the `sandesh` command
    expect(rows.filter(has_text="person.password_set")).to_have_count(1)  # by them
    expect(rows.filter(has_not_text=shop.email)).to_have_count(0)

    page.goto(f"{server.url}/dashboard/w/{shop.id}/audit")
    page.get_by_label("From").fill(today(sandesh))
    page.get_by_role("button", name="Filter").click()
    expect(rows).to_have_count(1)
    expect(rows).to_contain_text("late-operator")
    page.get_by_label("From").fill("")
    page.get_by_label("To", exact=True).fill(earlier)
    page.get_by_label("Action").select_option("client.disabled")
    page.get_by_role("button", name="Filter").click()
    expect(rows).to_have_text("No change matches.")
