"""Sending from the dashboard (docs/dashboard.md, "Sending") in a real browser: Playwright driving
Chromium against a real `sandesh serve`, with emulated modems driven by a real dispatcher and
the projections worker following the log, so that what the phones get is what was sent."""
from __future__ import annotations

import csv
import datetime
import io
import itertools
import time
from pathlib import Path
from typing import Any, Iterator

import openpyxl
import orjson
import pytest
from playwright.sync_api import Browser, Page, expect

from sandesh.domain.bs import bs_iso
from sandesh.scripts.service.emulator import Emulator
from tests.integration.test_dashboard import PASSWORD, add_person, browser, set_password, sign_in  # noqa: F401

_numbers = itertools.count(4_100_001)


def numbers(n: int) -> list[str]:
    return [f"98{next(_numbers):08d}" for _ in range(n)]


@pytest.fixture(scope="module")
def phones(phones, projections_worker) -> Emulator:
    """The pool of tests/conftest.py, with the projections worker following the log."""
    return phones


@pytest.fixture(scope="module")
def shop(sandesh, runtime) -> dict[str, str]:
    """An active workspace of NPR 100, promotional hours off (promotions go at any hour)."""
    workspace = sandesh("workspace", "create", "--name", "Sweets of Patan")["id"]
    sandesh("workspace", "activate", workspace)
    sandesh("workspace", "credit", workspace, "10000")
    sandesh("workspace", "set-promo-hours", workspace, "off")
    return {"id": workspace}


@pytest.fixture(scope="module")
def people(sandesh, shop, server, browser) -> dict[str, str]:
    """The shop's owner and a viewer, their passwords set."""
    found = {}
    for role in ("owner", "viewer"):
        added = add_person(sandesh, shop["id"], f"{role}@patan.example", role=role)
        context = browser.new_context()
        set_password(context.new_page(), server, added)
        context.close()
        found[role] = added["email"]
    return found


@pytest.fixture
def owner_page(browser: Browser, server, people) -> Iterator[Page]:
    context = browser.new_context()
    page = context.new_page()
    sign_in(page, server, people["owner"])
    yield page
    context.close()


def received(phones: Emulator, numbers_: list[str], timeout: float = 30) -> dict[str, dict[str, Any]]:
    """What each of these numbers' phones got, once all have."""
    wanted = {f"977{n}" for n in numbers_}
    deadline = time.monotonic() + timeout
    while True:
        got = {m["to"]: m for m in phones.received if m["to"] in wanted}
        if set(got) == wanted:
            return got
        assert time.monotonic() < deadline, f"{len(got)} of {len(wanted)} phones got their text"
        time.sleep(0.2)


def balance(sandesh, shop) -> int:
    return sandesh("workspace", "show", shop["id"])["balance"]


def test_three_numbers_in_three_notations_are_sent_and_the_phones_get_the_text(owner_page, server, shop, phones,
                                                                                sandesh):
    page = owner_page
    a, b, c = numbers(3)
    page.get_by_role("link", name="Send", exact=True).click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Send")
    page.get_by_label("Recipients").fill(f"+977 {a[:3]}-{a[3:6]}-{a[6:]}\n977 {b}, {c}")
    page.get_by_label("Message").fill("Tomorrow is a holiday: the shop opens at 10.")
    expect(page.locator("#hints")).to_contain_text("1 segment · GSM-7")
    page.get_by_role("button", name="Preview").click()
    expect(page.locator(".preview")).to_contain_text("Total cost NPR 3.00")
    page.get_by_role("button", name="Send 3 messages").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Campaign")
    got = received(phones, [a, b, c])
    assert {m["text"] for m in got.values()} == {"Tomorrow is a holiday: the shop opens at 10."}


def test_a_csv_with_a_devanagari_column_fills_a_template_sent_as_ucs2_and_charged_its_segments(
        owner_page, server, shop, phones, tmp_path, sandesh):
    page = owner_page
    a, b = numbers(2)
    names = {a: "राम", b: "सीता"}
    path = tmp_path / "parents.csv"
    path.write_bytes("\ufeffनाम,mobile\n".encode() + f"{names[a]},{a}\n{names[b]},+977{b}\n".encode())
    before = balance(sandesh, shop)
    page.goto(f"{server.url}/dashboard/w/{shop['id']}/send")
    page.get_by_label("Upload a list").set_input_files(str(path))
    page.get_by_label("Message").fill("नमस्ते {नाम}, भोलि बिदा छ।")
    page.get_by_role("button", name="Preview").click()
    preview = page.locator(".preview")
    expect(preview).to_contain_text("UCS-2")
    expect(preview).to_contain_text(f"नमस्ते {names[a]}, भोलि बिदा छ।")
    page.get_by_role("button", name="Send 2 messages").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Campaign")
    got = received(phones, [a, b])
    for number, name in names.items():
        assert got[f"977{number}"]["text"] == f"नमस्ते {name}, भोलि बिदा छ।"
        assert got[f"977{number}"]["encoding"] == "UCS-2"
    assert before - balance(sandesh, shop) == 2 * 100  # one segment each, at NPR 1 a segment


def test_an_opted_out_a_bad_and_a_duplicate_number_are_refused_in_the_preview_with_their_reasons(
        owner_page, server, shop, sandesh):
    page = owner_page
    good, stopped = numbers(2)
    sandesh("optout", "add", shop["id"], f"977{stopped}")
    page.goto(f"{server.url}/dashboard/w/{shop['id']}/send")
    page.get_by_label("Recipients").fill(f"{good}\n{stopped}\n12345\n{good}")
    page.get_by_label("Message").fill("Dashain offer: 20% off")
    page.get_by_label("Type").select_option("promotional")
    page.get_by_role("button", name="Preview").click()
    rows = page.locator("table.refused tbody tr")
    expect(rows).to_have_count(3)
    assert rows.all_inner_texts() == [f"2\t977{stopped}\topted out of promotional messages",
                                      "3\t12345\tnot a Nepal mobile number",
                                      f"4\t977{good}\ta duplicate of line 1"]
    expect(page.get_by_role("button", name="Send 1 message")).to_be_visible()


def test_a_campaign_larger_than_the_balance_is_refused_whole_with_nothing_charged(owner_page, server, shop, sandesh):
    page = owner_page
    page.goto(f"{server.url}/dashboard/w/{shop['id']}/send")
    page.get_by_label("Recipients").fill("\n".join(numbers(120)))  # NPR 120 against less than NPR 100
    page.get_by_label("Message").fill("Too many for the balance")
    page.get_by_role("button", name="Preview").click()
    before = balance(sandesh, shop)
    page.get_by_role("button", name="Send 120 messages").click()
    expect(page.locator(".preview .error")).to_contain_text("nothing was sent")
    expect(page.locator(".preview .error")).to_contain_text(f"NPR {(12000 - before) / 100:,.2f}")
    assert balance(sandesh, shop) == before


def test_a_scheduled_campaign_canceled_is_refunded(owner_page, server, shop, sandesh, runtime):
    page = owner_page
    before = balance(sandesh, shop)
    page.goto(f"{server.url}/dashboard/w/{shop['id']}/send")
    page.get_by_label("Recipients").fill("\n".join(numbers(3)))
    page.get_by_label("Message").fill("The meeting is on Sunday.")
    page.get_by_label("Send at (Nepal time, optional)").fill("2099-01-01T09:30")
    page.get_by_role("button", name="Preview").click()
    expect(page.locator("#send_at-error")).to_contain_text("30 days ahead")
    nepal = datetime.timezone(datetime.timedelta(hours=5, minutes=45))
    soon = datetime.datetime.fromtimestamp(runtime.clock.now() + 86400, nepal).strftime("%Y-%m-%dT%H:%M")
    page.get_by_label("Send at (Nepal time, optional)").fill(soon)
    page.get_by_role("button", name="Preview").click()
    page.get_by_role("button", name="Send 3 messages").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Campaign")
    assert before - balance(sandesh, shop) == 300
    expect(page.locator("[data-count=waiting]")).to_have_text("3", timeout=10_000)
    page.get_by_role("button", name="Cancel what has not left").click()
    expect(page.get_by_role("status")).to_contain_text("3 messages canceled and refunded")
    assert balance(sandesh, shop) == before
    rows = list(csv.reader(io.StringIO(page.request.get(page.url.split("?")[0] + "/results.csv").text().lstrip("\ufeff"))))
    assert rows[0] == ["number", "message id", "status", "error", "cost (NPR)", "created (UTC)",
                       "created (BS, Nepal day)"]
    assert [r[2] for r in rows[1:]] == ["canceled"] * 3
    assert {r[6] for r in rows[1:]} == {bs_iso(datetime.datetime.fromisoformat(rows[1][5].replace("Z", "+00:00")).timestamp())}


def test_a_viewer_cannot_send_nor_change_contacts_or_templates(browser, server, shop, people):
    context = browser.new_context()
    page = context.new_page()
    sign_in(page, server, people["viewer"])
    expect(page.get_by_role("link", name="Campaigns")).to_be_visible()
    expect(page.get_by_role("link", name="Send", exact=True)).to_have_count(0)
    w = f"{server.url}/dashboard/w/{shop['id']}"
    assert page.request.get(f"{w}/send").status == 403
    page.goto(f"{w}/templates")
    expect(page.get_by_role("button", name="Save the template")).to_have_count(0)
    token = page.locator("input[name=csrf]").first.input_value()
    for path, form in (("send", {"recipients": "9812345678", "text": "x", "type": "transactional"}),
                       ("send/confirm", {"token": "any"}), ("templates", {"name": "Sneaky", "text": "x"}),
                       ("contacts", {"name": "Sneaky", "recipients": "9812345678"})):
        assert page.request.post(f"{w}/{path}", form={"csrf": token, **form}).status == 403, path
    page.goto(f"{w}/templates")
    expect(page.locator("table.templates")).not_to_contain_text("Sneaky")
    context.close()


def test_a_double_submit_sends_once(owner_page, server, shop, phones, sandesh):
    page = owner_page
    (a,) = numbers(1)
    page.goto(f"{server.url}/dashboard/w/{shop['id']}/send")
    page.get_by_label("Recipients").fill(a)
    page.get_by_label("Message").fill("Sent once, whatever the clicks.")
    page.get_by_role("button", name="Preview").click()
    form = page.locator("form[action$='/send/confirm']")
    token, csrf = form.locator("input[name=token]").input_value(), form.locator("input[name=csrf]").input_value()
    before = balance(sandesh, shop)
    answers = [page.request.post(f"{server.url}/dashboard/w/{shop['id']}/send/confirm",
                                 form={"csrf": csrf, "token": token}, max_redirects=0) for _ in range(3)]
    assert [a.status for a in answers] == [303, 303, 303]
    assert len({a.headers["location"] for a in answers}) == 1, "one campaign"
    received(phones, [a])
    time.sleep(1)
    assert [m["to"] for m in phones.received].count(f"977{a}") == 1
    assert before - balance(sandesh, shop) == 100


@pytest.fixture(scope="module")
def school(sandesh, server, browser) -> dict[str, str]:
    """Another workspace, its owner's password set."""
    workspace = sandesh("workspace", "create", "--name", "Valley School")["id"]
    sandesh("workspace", "activate", workspace)
    sandesh("workspace", "credit", workspace, "1000")
    added = add_person(sandesh, workspace, "owner@valley.example")
    context = browser.new_context()
    set_password(context.new_page(), server, added)
    context.close()
    return {"id": workspace, "owner": added["email"]}


def workbook(path: Path, rows: list[list[Any]]) -> Path:
    book = openpyxl.Workbook()
    for row in rows:
        book.active.append(row)
    book.save(path)
    return path


def test_a_contact_list_from_a_workbook_and_a_template_send_each_contact_its_own_text(
        owner_page, server, shop, phones, sandesh, tmp_path):
    page = owner_page
    a, b, stopped = numbers(3)
    sandesh("optout", "add", shop["id"], f"977{stopped}")
    page.goto(f"{server.url}/dashboard/w/{shop['id']}/contacts")
    expect(page.get_by_role("heading", level=1)).to_have_text("Contacts")
    page.get_by_label("Name").fill("Class 5 parents")
    page.get_by_label("Upload a list").set_input_files(str(workbook(tmp_path / "class5.xlsx", [
        ["name", "Mobile"], ["Ram", int(a)], ["Sita", f"+977 {b}"], ["Hari", stopped]])))
    page.get_by_role("button", name="Save the list").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Class 5 parents")
    expect(page.get_by_role("status")).to_contain_text("3 contacts saved")
    rows = page.locator("table.contacts tbody tr")
    expect(rows).to_have_count(3)
    expect(rows.filter(has_text=f"977{stopped}")).to_contain_text("opted out")
    expect(rows.filter(has_text=f"977{a}")).to_contain_text("Ram")
    page.get_by_role("button", name=f"Remove 977{b}").click()
    expect(page.get_by_role("status")).to_contain_text("removed")
    expect(rows).to_have_count(2)

    page.goto(f"{server.url}/dashboard/w/{shop['id']}/templates")
    page.get_by_label("Name").fill("Meeting")
    page.get_by_label("Text").fill("Namaste {name}, the parents' meeting is on Sunday.")
    page.get_by_role("button", name="Save the template").click()
    expect(page.locator("table.templates")).to_contain_text("Namaste {name}")

    page.goto(f"{server.url}/dashboard/w/{shop['id']}/send")
    page.get_by_label("Contact list").select_option(label="Class 5 parents (2)")
    page.get_by_label("Template").select_option(label="Meeting")
    expect(page.get_by_label("Message")).to_have_value("Namaste {name}, the parents' meeting is on Sunday.")
    page.get_by_label("Type").select_option("promotional")
    page.get_by_role("button", name="Preview").click()
    expect(page.locator("table.refused")).to_contain_text("opted out of promotional messages")
    page.get_by_role("button", name="Send 1 message").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Campaign")
    expect(page.locator("dl.state")).to_contain_text("Meeting")
    got = received(phones, [a])
    assert got[f"977{a}"]["text"] == "Namaste Ram, the parents' meeting is on Sunday."

    lines = [orjson.loads(line) for line in sandesh.run("audit", "--workspace", shop["id"]).stdout.splitlines()]
    changes = {line["action"]: line for line in lines if line["action"].startswith(("contacts.", "template."))}
    assert set(changes) == {"contacts.list_created", "contacts.added", "contacts.removed", "template.saved"}
    assert changes["contacts.added"]["details"]["contacts"] == 3
    assert changes["contacts.added"]["actor"] == "user:owner@patan.example"
    audited = orjson.dumps(lines).decode()
    assert a not in audited and "Ram" not in audited and "Namaste" not in audited


def test_contact_data_is_the_workspaces_own_and_shredding_its_texts_erases_it(browser, server, school, shop,
                                                                              sandesh):
    context = browser.new_context()
    page = context.new_page()
    sign_in(page, server, school["owner"])
    (a,) = numbers(1)
    page.goto(f"{server.url}/dashboard/w/{school['id']}/contacts")
    page.get_by_label("Name").fill("Teachers")
    page.get_by_label("Numbers").fill(a)
    page.get_by_role("button", name="Save the list").click()
    list_url = page.url.split("?")[0]
    page.goto(f"{server.url}/dashboard/w/{school['id']}/templates")
    page.get_by_label("Name").fill("Holiday")
    page.get_by_label("Text").fill("School is closed tomorrow.")
    page.get_by_role("button", name="Save the template").click()
    # the shop's people never see them
    shop_context = browser.new_context()
    shop_page = shop_context.new_page()
    sign_in(shop_page, server, "owner@patan.example")
    assert shop_page.request.get(list_url).status == 404
    assert shop_page.request.get(list_url.replace(school["id"], shop["id"])).status == 404
    shop_page.goto(f"{server.url}/dashboard/w/{shop['id']}/templates")
    expect(shop_page.locator("table.templates")).not_to_contain_text("Holiday")
    shop_context.close()

    sandesh("workspace", "shred-texts", school["id"])
    time.sleep(1.2)  # what the server had read of the key, it forgets within a second
    page.goto(f"{server.url}/dashboard/w/{school['id']}/templates")
    expect(page.locator("table.templates tbody tr").filter(has_text="Holiday")).to_contain_text("erased")
    expect(page.locator("table.templates")).not_to_contain_text("School is closed")
    context.close()
