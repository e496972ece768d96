"""The dashboard on a phone (docs/dashboard.md, "On a phone"): every page at 360×740 in Chromium
as a phone (a touch screen, a mobile viewport) fits the screen, with nothing clipped, controls
a finger can hit, text a phone does not zoom into, labels above fields, and the sections and
Sign out behind "Menu".  Against a real `sandesh serve`, with a real dispatcher and emulated
modems, so that the pages show real messages and campaigns."""
from __future__ import annotations

import re
from typing import Any, Iterator

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from sandesh.scripts.service.emulator import Emulator
from tests.integration.test_dashboard import (PASSWORD, add_person, browser, link_path, set_password,  # noqa: F401
                                              sign_in)
from tests.integration.test_dashboard_ops import operator_context, send

PHONE = {"viewport": {"width": 360, "height": 740}, "is_mobile": True, "has_touch": True, "device_scale_factor": 2}
WORKSPACE_PAGES = ("overview", "send", "campaigns", "contacts", "templates", "clients", "messages", "webhooks",
                   "opt-outs", "people", "audit")
OPS_PAGES = ("/dashboard/ops/workspaces", "/dashboard/ops/sims", "/dashboard/ops/traffic", "/dashboard/ops/replies",
             "/dashboard/ops/audit", "/dashboard/ops/people", "/dashboard/ops/messages?id=msg_0")

# Every element outside a table's own scrolling box ends within the screen, and so does its text:
# nothing runs off it, clipped by the page's overflow.  Returns those that do not, as tag.class "text".
OUTSIDE = """(width) => {
  const out = [];
  for (const el of document.body.querySelectorAll("*")) {
    if (el.closest(".scroll") || el.closest("script")) continue;
    const box = el.getBoundingClientRect();
    if (box.width === 0 || box.height === 0) continue;
    if (box.right > width + 0.5 || box.left < -0.5 || el.scrollWidth > Math.max(el.clientWidth, box.width) + 1) {
      out.push(`${el.tagName.toLowerCase()}.${el.className} "${(el.textContent || "").trim().slice(0, 40)}" ${box.left}-${box.right}`);
    }
  }
  return out;
}"""
# The visible controls smaller than 44 by 44 CSS pixels (WCAG 2.2's target size; links inside
# text and tables are exempt as inline targets).
SMALL = """() => {
  const out = [];
  for (const el of document.querySelectorAll("button, input, select, textarea, summary, header nav a")) {
    const box = el.getBoundingClientRect();
    const style = getComputedStyle(el);
    if (box.width === 0 || style.visibility === "hidden" || el.type === "hidden") continue;
    if (box.width < 44 || box.height < 44) out.push(`${el.tagName.toLowerCase()} "${el.textContent.trim() || el.name}" ${box.width}x${box.height}`);
  }
  return out;
}"""
# Fields and text under 16 px, and labels not above their field.
SMALL_TEXT = """() => {
  const out = [];
  for (const el of document.querySelectorAll("body, main p, input, select, textarea, button")) {
    const box = el.getBoundingClientRect();
    if (el !== document.body && box.width === 0) continue;
    const size = parseFloat(getComputedStyle(el).fontSize);
    if (size < 16) out.push(`${el.tagName.toLowerCase()} ${size}px`);
  }
  return out;
}"""
BESIDE = """() => {
  const out = [];
  for (const label of document.querySelectorAll("main .panel label[for]")) {
    const field = document.getElementById(label.htmlFor);
    if (!field || field.type === "checkbox" || field.type === "radio") continue;
    const a = label.getBoundingClientRect(), b = field.getBoundingClientRect();
    if (a.width === 0 || b.width === 0) continue;
    if (a.bottom > b.top + 0.5) out.push(label.textContent.trim());
  }
  return out;
}"""


def fits(page: Page, where: str) -> None:
    """The page as a phone shows it: no sideways scroll, nothing off the screen, controls a
    finger can hit, 16-pixel text and fields, labels above their fields."""
    assert page.evaluate(OUTSIDE, 360) == [], f"{where}: off the screen"
    assert page.evaluate("window.innerWidth") == 360, f"{where}: the phone zoomed out"
    assert page.evaluate("document.documentElement.scrollWidth") <= 360, f"{where} scrolls sideways"
    assert page.evaluate(SMALL) == [], f"{where}: controls under 44×44"
    assert page.evaluate(SMALL_TEXT) == [], f"{where}: text under 16 px"
    assert page.evaluate(BESIDE) == [], f"{where}: labels beside their fields"


def within_screen(page: Page, locator: Any) -> None:
    box = locator.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 360, box


@pytest.fixture(scope="module")
def phones(phones, projections_worker) -> Emulator:
    """The pool of tests/conftest.py, with the projections worker following the log."""
    return phones


@pytest.fixture(scope="module")
def shop(sandesh, server, browser, phones) -> dict[str, str]:  # noqa: F811
    """A workspace with a long name, an owner, a client whose messages went out, a campaign, a
    contact list and a template."""
    workspace = sandesh("workspace", "create", "--name", "Kathmandu Valley Cooperative Savings and Credit")["id"]
    sandesh("workspace", "activate", workspace)
    sandesh("workspace", "credit", workspace, "99700")
    key = sandesh("client", "create", "--workspace", workspace, "--brand", "Cooperative")["key"]
    for n in range(3):
        assert send(server, key, f"97798{n:08d}").status_code == 202
    added = add_person(sandesh, workspace, "owner@cooperative.example")
    context = browser.new_context()
    page = context.new_page()
    set_password(page, server, added)
    sign_in(page, server, added["email"])
    w = f"{server.url}/dashboard/w/{workspace}"
    page.goto(f"{w}/send")
    page.get_by_label("Recipients").fill("9812300001\n9812300002")
    page.get_by_label("Message").fill("The annual meeting is on Saturday at 11.")
    page.get_by_role("button", name="Preview").click()
    page.get_by_role("button", name="Send 2 messages").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Campaign")
    campaign = page.url
    page.goto(f"{w}/contacts")
    page.get_by_label("Name").fill("Members of the savings group")
    page.get_by_label("Numbers").fill("9812300001, 9812300002")
    page.get_by_role("button", name="Save the list").click()
    contact_list = page.url.split("?")[0]
    page.goto(f"{w}/templates")
    page.get_by_label("Name").fill("Meeting")
    page.get_by_label("Text").fill("The annual meeting is on Saturday at 11.")
    page.get_by_role("button", name="Save the template").click()
    context.close()
    return {"id": workspace, "email": added["email"], "campaign": campaign, "list": contact_list}


@pytest.fixture
def phone(browser: Browser) -> Iterator[BrowserContext]:  # noqa: F811
    context = browser.new_context(**PHONE)
    yield context
    context.close()


def test_every_workspace_page_fits_a_phone_and_the_balance_and_a_message_id_are_on_the_screen(phone, server, shop):
    page = phone.new_page()
    page.goto(server.url + "/dashboard/sign-in")
    fits(page, "sign-in")
    sign_in(page, server, shop["email"])
    w = f"{server.url}/dashboard/w/{shop['id']}"
    expect(page.get_by_role("heading", level=1)).to_have_text("Overview")
    balance = page.locator("dt:text-is('Balance') + dd")
    expect(balance).to_have_text(re.compile(r"^NPR 99\d\.\d\d$"))
    within_screen(page, balance)
    for name in WORKSPACE_PAGES:
        page.goto(f"{w}/{name}")
        fits(page, name)
    page.goto(f"{w}/messages")
    first = page.locator("table.messages tbody th a").first
    within_screen(page, first)
    expect(first).to_have_text(re.compile(r"^msg_\w{8}…$"), use_inner_text=True)
    full = first.locator(".id-short").get_attribute("title")
    first.click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Message timeline")
    page.wait_for_load_state()
    fits(page, "a message's timeline")
    expect(page.locator("main")).to_contain_text(full)
    for url, where in ((shop["campaign"], "a campaign"), (shop["list"], "a contact list")):
        page.goto(url)
        fits(page, where)
    page.goto(f"{w}/send")
    page.get_by_label("Contact list").select_option(label="Members of the savings group (2)")
    page.get_by_role("button", name="Preview").click()
    fits(page, "a preview")


def test_the_menu_opens_the_sections_and_sign_out_by_touch_and_by_keyboard(phone, server, shop):
    page = phone.new_page()
    sign_in(page, server, shop["email"])
    header = page.locator("header")
    expect(header).to_contain_text("Kathmandu Valley Cooperative Savings and Credit")
    menu = page.get_by_text("Menu", exact=True)
    expect(page.get_by_role("link", name="Messages")).to_be_hidden()
    expect(page.get_by_role("button", name="Sign out", exact=True)).to_be_hidden()
    assert header.bounding_box()["height"] < 120, "the header is one short band"
    menu.tap()
    page.get_by_role("link", name="Messages").tap()
    expect(page.get_by_role("heading", level=1)).to_have_text("Messages")
    # by keyboard: the summary takes the focus, shows it, and opens with Enter
    page.locator("summary").focus()
    assert page.locator("summary").evaluate("el => getComputedStyle(el).outlineStyle") != "none"
    page.keyboard.press("Enter")
    sign_out = page.get_by_role("button", name="Sign out", exact=True)
    expect(sign_out).to_be_visible()
    fits(page, "the open menu")
    sign_out.tap()
    expect(page.get_by_role("heading", level=1)).to_have_text("Sign in")


def test_the_set_password_and_code_pages_and_the_operator_console_fit_a_phone(phone, server, sandesh, browser,
                                                                             shop):  # noqa: F811
    page = phone.new_page()
    added = add_person(sandesh, shop["id"], "clerk@cooperative.example", role="sender")
    page.goto(server.url + link_path(added))
    fits(page, "set-password")
    operator = operator_context(sandesh, server, browser, "ops@cooperative.example")
    operator.close()
    sign_in(page, server, "ops@cooperative.example")
    expect(page.get_by_role("heading", level=1)).to_have_text(re.compile("code", re.I))
    fits(page, "the code page")
    ops = operator_context(sandesh, server, browser, "ops2@cooperative.example")
    cookies = ops.cookies()
    ops.close()
    phone.add_cookies(cookies)
    for path in OPS_PAGES + (f"/dashboard/ops/workspaces/{shop['id']}",):
        page.goto(server.url + path)
        fits(page, path)


def test_a_wide_screen_keeps_its_header_as_it_was(browser, server, shop):  # noqa: F811
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    sign_in(page, server, shop["email"])
    expect(page.locator("summary")).to_be_hidden()
    expect(page.get_by_role("link", name="Messages")).to_be_visible()
    expect(page.get_by_role("button", name="Sign out", exact=True)).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    context.close()
