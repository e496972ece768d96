"""The dashboard in Nepali and English (docs/dashboard.md, "Languages"), in Chromium against a
real `sandesh serve`: the sign-in page follows Accept-Language; a person who chooses नेपाली sees
every workspace page in Nepali, money in NPR's Nepali form, and keeps the choice in another
browser after signing in again; no page at 360 px scrolls sideways in Nepali; a refusal of the
domain reads in Nepali with the value typed in it."""
from __future__ import annotations

import re
from typing import Any, Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from sandesh.api.dashboard.i18n import CATALOGS
from sandesh.domain.recipients import MAX_FIELD
from tests.integration.test_dashboard import add_person, browser, password_was_set, set_password, sign_in  # noqa: F401

NE = CATALOGS["ne"].gettext
PAGES = ("overview", "send", "campaigns", "contacts", "templates", "clients", "messages", "webhooks", "opt-outs",
         "people", "audit")
DEVANAGARI = re.compile(r"[\u0900-\u097F]")


@pytest.fixture(scope="module")
def shop(sandesh: Any, server: Any, browser: Browser) -> dict[str, Any]:  # noqa: F811
    workspace = sandesh("workspace", "create", "--name", "Bhaktapur Kirana")
    sandesh("workspace", "activate", workspace["id"])
    sandesh("workspace", "credit", workspace["id"], "12345678")  # NPR 1,23,456.78
    added = add_person(sandesh, workspace["id"], "kirana@example.com")
    context = browser.new_context()
    page = context.new_page()
    set_password(page, server, added)
    password_was_set(page)
    context.close()
    return {"id": workspace["id"], "email": "kirana@example.com"}


@pytest.fixture
def nepali_browser(browser: Browser) -> Iterator[Page]:  # noqa: F811
    context = browser.new_context(locale="ne-NP", extra_http_headers={"Accept-Language": "ne-NP,ne;q=0.9,en;q=0.5"})
    yield context.new_page()
    context.close()


def test_the_sign_in_page_follows_accept_language(nepali_browser: Page, server: Any):
    nepali_browser.goto(server.url + "/dashboard/sign-in")
    expect(nepali_browser.locator("html")).to_have_attribute("lang", "ne")
    expect(nepali_browser.get_by_role("heading", level=1)).to_have_text(NE("Sign in"))
    expect(nepali_browser.get_by_role("button", name="English")).to_be_visible()


def test_a_person_who_chooses_nepali_sees_every_page_in_nepali_and_keeps_it(browser: Browser, server: Any,  # noqa: F811
                                                                           shop: dict[str, Any]):
    context = browser.new_context(extra_http_headers={"Accept-Language": "en-GB,en"})
    page = context.new_page()
    sign_in(page, server, shop["email"])
    expect(page.locator("html")).to_have_attribute("lang", "en")
    page.get_by_role("button", name="नेपाली").click()
    expect(page.locator("html")).to_have_attribute("lang", "ne")
    for name in PAGES:
        page.goto(f"{server.url}/dashboard/w/{shop['id']}/{name}")
        expect(page.locator("html")).to_have_attribute("lang", "ne")
        heading = page.get_by_role("heading", level=1).inner_text()
        assert DEVANAGARI.search(heading) or heading in ("API", "Webhooks"), (name, heading)
        nav = page.get_by_role("navigation", name=NE("Workspace")).inner_text()
        assert NE("Messages") in nav and NE("Overview") in nav
    page.goto(f"{server.url}/dashboard/w/{shop['id']}/overview")
    expect(page.locator("main")).to_contain_text("नेरू 1,23,456.78")
    today = page.locator("dd.today").inner_text()  # the Bikram Sambat day first, its month in Devanagari
    assert re.fullmatch(r"\d{1,2} [\u0900-\u097F]+ 20\d\d \d{4}-\d\d-\d\d", today), today
    page.get_by_role("button", name=NE("Sign out"), exact=True).click()
    context.close()

    elsewhere = browser.new_context(extra_http_headers={"Accept-Language": "en"})  # another browser: no cookie
    page = elsewhere.new_page()
    sign_in(page, server, shop["email"])
    expect(page.locator("html")).to_have_attribute("lang", "ne")  # kept with the person
    page.get_by_role("button", name="English").click()
    expect(page.locator("html")).to_have_attribute("lang", "en")
    expect(page.locator("main")).to_contain_text("NPR 1,23,456.78")
    elsewhere.close()


def test_no_workspace_page_scrolls_sideways_in_nepali_on_a_phone(browser: Browser, server: Any,  # noqa: F811
                                                                 shop: dict[str, Any]):
    context = browser.new_context(viewport={"width": 360, "height": 740})
    page = context.new_page()
    sign_in(page, server, shop["email"])
    if page.locator("html").get_attribute("lang") != "ne":
        page.get_by_text("Menu", exact=True).click()  # on a phone the switch is in the Menu
        page.get_by_role("button", name="नेपाली").click()
    for name in PAGES:
        page.goto(f"{server.url}/dashboard/w/{shop['id']}/{name}")
        expect(page.locator("html")).to_have_attribute("lang", "ne")
        wide = page.evaluate("document.documentElement.scrollWidth")
        assert wide <= 360, f"{name} is {wide} px wide at 360 px"
    context.close()


def in_nepali(browser: Browser, server: Any, shop: dict[str, Any], path: str) -> Page:  # noqa: F811
    """The shop's page `path`, signed in, in Nepali (chosen with the header's button if it is not)."""
    page = browser.new_context(extra_http_headers={"Accept-Language": "en"}).new_page()
    sign_in(page, server, shop["email"])
    page.goto(f"{server.url}/dashboard/w/{shop['id']}/{path}")
    if page.locator("html").get_attribute("lang") != "ne":
        page.get_by_role("button", name="नेपाली").click()
    expect(page.locator("html")).to_have_attribute("lang", "ne")
    return page


def test_a_refusal_of_the_domain_is_said_in_nepali_with_what_was_typed(browser: Browser, server: Any,  # noqa: F811
                                                                      shop: dict[str, Any]):
    """The domain marks its refusals (domain/said.py): the Overview's balance alert refuses `lots`
    in the page's language, with `lots` in the sentence."""
    page = in_nepali(browser, server, shop, "overview")
    page.get_by_label(NE("Balance alert: e-mail the owners when the balance falls below (NPR)")).fill("lots")
    page.get_by_role("button", name=NE("Save the balance alert")).click()
    said = NE("%(typed)s is not an amount in NPR (e.g. 10 or 12.50)") % {"typed": "'lots'"}
    assert DEVANAGARI.search(said), said
    expect(page.locator("#balance_alert_error")).to_have_text(said)
    page.context.close()


def test_a_refused_list_is_said_in_nepali_with_its_row(browser: Browser, server: Any,  # noqa: F811
                                                       shop: dict[str, Any], tmp_path: Any):
    """The upload reader's refusals are marked too (api/uploads), and keep their values across
    the child process that reads the file (domain/said.py, `packed`)."""
    page = in_nepali(browser, server, shop, "send")
    path = tmp_path / "long.csv"
    path.write_text("phone,name\n9812345678,Sita\n9812345679," + "x" * (MAX_FIELD + 1) + "\n")
    page.get_by_label(NE("Upload a list")).set_input_files(str(path))
    page.get_by_role("button", name=NE("Preview"), exact=True).click()
    said = NE("Row %(row)s has a cell longer than %(most)s characters.") % {"row": "3", "most": MAX_FIELD}
    assert DEVANAGARI.search(said), said
    expect(page.locator("#file-error")).to_have_text(said)
    page.context.close()
