"""The dashboard (docs/dashboard.md) in a real browser: Playwright driving Debian's Chromium
against a real `sandesh serve`, people added with the real `sandesh user` command."""
from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import urlsplit

import orjson
import pyotp
import pytest
import requests
from playwright.sync_api import Browser, Page, expect, sync_playwright

from sandesh.domain.clock import parse_iso

CHROMIUM = "/usr/bin/chromium"
PASSWORD = "a long enough passphrase"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"the dashboard's tests need Chromium at {CHROMIUM}: scripts/test.sh installs it", pytrace=False)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh browser profile: no cookies."""
    context = browser.new_context()
    yield context.new_page()
    context.close()


@pytest.fixture(scope="module")
def workspaces(sandesh: Any) -> dict[str, str]:
    acme = sandesh("workspace", "create", "--name", "Acme Pasal", "--types", "transactional,otp",
                   "--rate", "otp=150")
    sandesh("workspace", "activate", acme["id"])
    sandesh("workspace", "credit", acme["id"], "123456")
    other = sandesh("workspace", "create", "--name", "Other")
    return {"acme": acme["id"], "other": other["id"]}


def add_person(sandesh: Any, workspace: str, email: str, role: str = "owner") -> dict[str, Any]:
    return sandesh("user", "add", "--email", email, "--name", "Asha Owner", "--workspace", workspace, "--role", role)


def link_path(added: dict[str, Any]) -> str:
    return urlsplit(added["setPasswordLink"]).path


def set_password(page: Page, server: Any, added: dict[str, Any], password: str = PASSWORD) -> None:
    page.goto(server.url + link_path(added))
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Set password").click()


def password_was_set(page: Page) -> None:
    expect(page.get_by_role("status")).to_have_text("Your password is set. Sign in with it.")


def sign_in(page: Page, server: Any, email: str, password: str = PASSWORD) -> None:
    page.goto(server.url + "/dashboard/sign-in")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()


def audit_shows(page: Page, url: str, text: str, timeout: float = 10.0) -> None:
    """Open the Audit log page at `url` again until a line has `text`: the page reads a followed
    read model, which trails the log by about a second (docs/dashboard.md, "Audit log")."""
    deadline = time.monotonic() + timeout
    while True:
        page.goto(url)
        if page.locator("table.audit tbody tr", has_text=text).count():
            return
        assert time.monotonic() < deadline, f"no line with {text!r} on {url} after {timeout} s"
        page.wait_for_timeout(100)


@pytest.fixture(scope="module")
def owner(sandesh: Any, workspaces: dict[str, str], server: Any, browser: Browser) -> dict[str, Any]:
    """The owner of Acme Pasal, with their password set."""
    added = add_person(sandesh, workspaces["acme"], "Owner@Example.com")
    context = browser.new_context()
    page = context.new_page()
    set_password(page, server, added)
    password_was_set(page)
    context.close()
    return added


def test_user_add_prints_a_one_time_link(sandesh, workspaces):
    added = add_person(sandesh, workspaces["acme"], "  New.Person@Example.com ", role="viewer")
    assert (added["email"], added["role"], added["workspaceId"]) == ("new.person@example.com", "viewer",
                                                                     workspaces["acme"])
    assert added["passwordSet"] is False
    assert re.fullmatch(r"http://127\.0\.0\.1:8000/dashboard/set-password/person_[0-9a-f]{32}\.[\w-]{43}",
                        added["setPasswordLink"])
    listed = sandesh("user", "list", "--workspace", workspaces["acme"])["people"]
    assert "new.person@example.com" in [p["email"] for p in listed]
    assert not any("hash" in key.lower() or "token" in key.lower() for key in listed[0])


def test_a_short_password_is_refused_beside_the_field(page, server, sandesh, workspaces):
    added = add_person(sandesh, workspaces["acme"], "short@example.com")
    set_password(page, server, added, "too short")
    field = page.get_by_label("Password")
    expect(field).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#password-error")).to_have_text("Use at least 12 characters.")
    assert sandesh("user", "list", "--workspace", workspaces["acme"])["people"][-1]["passwordSet"] is False


def test_the_owner_signs_in_and_sees_the_overview_of_their_workspace(page, server, owner, workspaces):
    sign_in(page, server, "owner@example.com")
    expect(page).to_have_url(f"{server.url}/dashboard/w/{workspaces['acme']}/overview")
    expect(page.get_by_role("heading", level=1)).to_have_text("Overview")
    expect(page.locator("main").get_by_text("Acme Pasal")).to_be_visible()
    expect(page.locator("header .workspace")).to_have_text("Acme Pasal")  # on every page, beside Menu on a phone
    facts = page.locator("dl.state")
    expect(facts).to_contain_text("active")
    expect(facts).to_contain_text("NPR 1,234.56")
    expect(facts).to_contain_text("transactional, otp")
    expect(page.get_by_role("row", name="otp NPR 1.50")).to_be_visible()


def test_the_session_cookie_is_http_only_and_strict(page, server, owner):
    sign_in(page, server, "owner@example.com")
    [session] = [c for c in page.context.cookies() if c["name"] == "sandesh_session"]
    assert session["httpOnly"] and session["sameSite"] == "Strict"
    assert not session["secure"]  # plain HTTP here; behind the TLS proxy: Secure and __Host-


def test_pages_allow_no_inline_script_and_no_framing(page, server):
    response = page.goto(server.url + "/dashboard/sign-in")
    policy = response.headers["content-security-policy"]
    assert "default-src 'self'" in policy and "frame-ancestors 'none'" in policy and "unsafe-inline" not in policy
    assert response.headers["cache-control"] == "no-store"
    assert page.locator("script").count() == 0  # scripts are files, on the pages that use them


def test_the_session_id_changes_at_sign_in(page, server, owner):
    page.context.add_cookies([{"name": "sandesh_session", "value": "chosen-by-someone-else", "url": server.url}])
    sign_in(page, server, "owner@example.com")
    [session] = [c for c in page.context.cookies() if c["name"] == "sandesh_session"]
    assert session["value"] != "chosen-by-someone-else"


def test_a_link_sets_a_password_once(page, server, owner):
    page.goto(server.url + link_path(owner))
    expect(page.get_by_role("heading", level=1)).to_have_text("Link not valid")


def test_a_wrong_password_answers_as_an_unknown_email_does(server, owner):
    browser_like = requests.Session()
    answers = []
    for email in ("owner@example.com", "nobody@example.com"):
        form = browser_like.get(server.url + "/dashboard/sign-in")
        token = re.search(r'name="csrf" value="([0-9a-f]+)"', form.text).group(1)
        answer = browser_like.post(server.url + "/dashboard/sign-in",
                                   data={"csrf": token, "email": email, "password": "not the password"})
        answers.append((answer.status_code, answer.text.replace(email, "EMAIL")))
    assert answers[0] == answers[1]
    assert "Email or password is wrong." in answers[0][1]


def test_a_post_without_its_csrf_token_is_403(server, owner):
    answer = requests.post(server.url + "/dashboard/sign-in", data={"email": "owner@example.com",
                                                                    "password": PASSWORD}, allow_redirects=False)
    assert answer.status_code == 403
    assert "sandesh_session" not in answer.cookies


def test_the_dashboard_asks_for_no_api_key(server):
    answer = requests.get(server.url + "/dashboard/sign-in")
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/html")


def test_an_unknown_dashboard_page_is_a_page_that_says_not_found(page, server):
    response = page.goto(server.url + "/dashboard/no-such-page")
    assert response.status == 404 and response.headers["content-type"].startswith("text/html")
    expect(page.get_by_role("heading", level=1)).to_have_text("Not found")
    assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
    assert requests.get(server.url + "/v1/no-such-path").json()["code"] == "not_found"  # the API's stays JSON


def test_another_workspaces_overview_is_not_found(page, server, owner, workspaces):
    sign_in(page, server, "owner@example.com")
    response = page.goto(f"{server.url}/dashboard/w/{workspaces['other']}/overview")
    assert response.status == 404
    expect(page.get_by_role("heading", level=1)).to_have_text("Not found")
    assert "Other" not in page.content()


def test_sign_out_ends_the_session(page, server, owner, workspaces):
    sign_in(page, server, "owner@example.com")
    [session] = [c for c in page.context.cookies() if c["name"] == "sandesh_session"]
    page.get_by_role("button", name="Sign out", exact=True).click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Sign in")
    overview = f"{server.url}/dashboard/w/{workspaces['acme']}/overview"
    replayed = requests.get(overview, cookies={"sandesh_session": session["value"]}, allow_redirects=False)
    assert replayed.status_code == 303 and replayed.headers["location"] == "/dashboard/sign-in"


def test_sign_out_everywhere_ends_the_other_sessions(browser, server, owner, workspaces):
    first, second = browser.new_context().new_page(), browser.new_context().new_page()
    for tab in (first, second):
        sign_in(tab, server, "owner@example.com")
    first.get_by_role("button", name="Sign out everywhere").click()
    second.reload()
    expect(second.get_by_role("heading", level=1)).to_have_text("Sign in")
    first.context.close()
    second.context.close()


def test_a_disabled_person_cannot_sign_in(page, server, sandesh, workspaces):
    added = add_person(sandesh, workspaces["acme"], "leaver@example.com", role="developer")
    set_password(page, server, added)
    password_was_set(page)
    sandesh("user", "disable", "leaver@example.com")
    sign_in(page, server, "leaver@example.com")
    expect(page.get_by_role("alert")).to_have_text("Email or password is wrong.")
    sandesh("user", "enable", "leaver@example.com")
    sign_in(page, server, "leaver@example.com")
    expect(page.get_by_role("heading", level=1)).to_have_text("Overview")


def test_people_changes_are_audited_with_their_actors(sandesh, owner, workspaces):
    done = sandesh.run("audit", "--workspace", workspaces["acme"])
    lines = [orjson.loads(text) for text in done.stdout.splitlines()]
    changes = [(line["action"], line["actor"], line["details"].get("email")) for line in lines]
    assert ("person.added", "tester", "owner@example.com") in changes
    assert ("person.password_set", "user:owner@example.com", "owner@example.com") in changes


def test_failed_sign_ins_are_throttled_and_the_page_says_how_long(page, server, sandesh, workspaces):
    """5 failures of one account in 15 minutes: the next try waits, whatever its password; on the
    service clock, the wait ends."""
    added = add_person(sandesh, workspaces["acme"], "forgetful@example.com")
    set_password(page, server, added)
    password_was_set(page)
    for _ in range(5):
        sign_in(page, server, "forgetful@example.com", "not my password")
        expect(page.get_by_role("alert")).to_have_text("Email or password is wrong.")
    sign_in(page, server, "forgetful@example.com")
    expect(page.get_by_role("alert")).to_have_text("Too many failed sign-ins. Wait 15 minutes and try again.")
    sandesh("clock", "advance", "900")
    sign_in(page, server, "forgetful@example.com")
    expect(page.get_by_role("heading", level=1)).to_have_text("Overview")


def test_a_session_ends_after_30_idle_minutes(page, server, owner, sandesh, workspaces):
    sign_in(page, server, "owner@example.com")
    sandesh("clock", "advance", str(30 * 60))
    page.reload()
    expect(page.get_by_role("heading", level=1)).to_have_text("Sign in")


def test_a_reset_prints_a_new_link_and_the_old_one_stops(page, server, sandesh, workspaces):
    added = add_person(sandesh, workspaces["acme"], "reset@example.com")
    again = sandesh("user", "reset", "reset@example.com")
    page.goto(server.url + link_path(added))
    expect(page.get_by_role("heading", level=1)).to_have_text("Link not valid")
    set_password(page, server, again)
    password_was_set(page)


# API clients (docs/dashboard.md, "API clients")

@pytest.fixture(scope="module")
def developer(sandesh: Any, server: Any, browser: Browser, workspaces: dict[str, str]) -> str:
    """A developer of Acme Pasal with their password set; their email."""
    context = browser.new_context()
    page = context.new_page()
    set_password(page, server, add_person(sandesh, workspaces["acme"], "dev@example.com", role="developer"))
    password_was_set(page)
    context.close()
    return "dev@example.com"


def test_a_developer_creates_a_client_and_sees_its_key_once(page, server, sandesh, workspaces, developer):
    sign_in(page, server, developer)
    page.get_by_role("link", name="API clients").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("API clients")
    page.get_by_label("Webhook URL").fill("http://example.com/hook")
    page.get_by_role("button", name="Create client").click()
    expect(page.locator("#webhook-error")).to_have_text("webhook URL must begin with https:// and name a host")
    page.get_by_label("Webhook URL").fill("")
    with page.expect_response(lambda r: r.request.method == "POST") as posted:
        page.get_by_role("button", name="Create client").click()
    assert posted.value.headers["cache-control"] == "no-store"
    key = page.get_by_role("status").locator("code").first.inner_text()
    assert re.fullmatch(r"sk_live_[0-9a-f]{48}", key)
    secret = page.get_by_role("status").locator("code").nth(1).inner_text()
    assert copied(page, server, "Copy key") == key
    assert copied(page, server, "Copy secret") == secret and secret.startswith("whsec_")
    assert requests.get(server.url + "/v1/sms/balance", headers={"x-api-key": key}).status_code == 200
    page.get_by_role("link", name="API clients").click()
    assert key not in page.content()  # shown once

    # its brand is the workspace's name until the operator team grants the one asked for
    row = page.get_by_role("row", name=re.compile(re.escape(key[:12])))
    expect(row.get_by_role("rowheader")).to_contain_text("Acme Pasal")
    row.get_by_text("Ask for a brand", exact=True).click()
    row.get_by_label("Brand to ask for").fill("Dev Shop")
    row.get_by_role("button", name="Ask the operator team").click()
    row = page.get_by_role("row", name=re.compile("Dev Shop"))
    expect(row.get_by_role("rowheader")).to_contain_text("Acme Pasal")
    expect(row).to_contain_text("Asked for: Dev Shop (the operator team decides)")

    row.get_by_role("button", name="Rotate key").click()
    newer = page.get_by_role("status").locator("code").first.inner_text()
    assert newer != key
    assert requests.get(server.url + "/v1/sms/balance", headers={"x-api-key": key}).status_code == 401

    row = page.get_by_role("row", name=re.compile("Dev Shop"))
    row.get_by_label("Grace hours").fill("0")
    row.get_by_role("button", name="Rotate webhook secret").click()
    expect(page.get_by_role("status")).to_contain_text("whsec_")

    row = page.get_by_role("row", name=re.compile("Dev Shop"))
    row.get_by_text("Edit", exact=True).click()
    row.get_by_label("Edit webhook URL").fill("http://example.com/hook")
    row.get_by_role("button", name="Save").click()
    row = page.get_by_role("row", name=re.compile("Dev Shop"))
    expect(row).to_contain_text("webhook URL must begin with https:// and name a host")
    expect(row.get_by_label("Edit brand")).to_have_count(0)
    row.get_by_label("Edit webhook URL").fill("https://localhost:9443/hooks")  # private: allowed in the tests
    row.get_by_role("button", name="Save").click()
    expect(page.get_by_role("row", name=re.compile("Dev Shop"))).to_contain_text("https://localhost:9443/hooks")

    # keyword replies: the reply URL and default reply are the workspace's; its keywords the operator team's
    client_id = page.get_by_role("row", name=re.compile("Dev Shop")).locator(".id").inner_text()

    def replies() -> Any:
        return page.locator("section.keywords").filter(has=page.locator(f"form[action$='/{client_id}/replies']"))

    expect(replies()).to_contain_text("Keywords: none yet: ask the operator team")
    replies().get_by_label("Default reply").fill("x" * 100 + " – too long")  # a dash: UCS-2, 70 characters
    replies().get_by_role("button", name="Save keyword replies").click()
    expect(replies()).to_contain_text("default reply: it is longer than one SMS (70 characters in UCS-2)")
    replies().get_by_label("Reply URL").fill("https://localhost:9443/results")
    replies().get_by_label("Default reply").fill("Results are out on Friday.")
    replies().get_by_role("button", name="Save keyword replies").click()
    expect(replies().get_by_label("Reply URL")).to_have_value("https://localhost:9443/results")
    expect(replies().get_by_label("Default reply")).to_have_value("Results are out on Friday.")

    page.get_by_role("row", name=re.compile("Dev Shop")).get_by_role("button", name="Disable").click()
    row = page.get_by_role("row", name=re.compile("Dev Shop"))
    expect(row).to_contain_text("disabled")
    row.get_by_role("button", name="Enable").click()
    expect(page.get_by_role("row", name=re.compile("Dev Shop"))).to_contain_text("enabled")

    done = sandesh.run("audit", "--workspace", workspaces["acme"])
    actions = [(line["action"], line["actor"]) for line in map(orjson.loads, done.stdout.splitlines())]
    for action in ("client.created", "client.brand_requested", "client.key_rotated", "client.secret_rotated",
                   "client.updated", "client.disabled", "client.enabled"):
        assert (action, "user:dev@example.com") in actions


def copied(page: Page, server: Any, button: str) -> str:
    """What the page's copy button puts on the clipboard (the browser lets this origin read it)."""
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.url)
    clicked = page.get_by_role("button", name=button)
    text = clicked.get_attribute("data-copy")
    clicked.click()
    # written (another button clicked within its 3 s reads "Copied" too)
    expect(page.locator(f'button[data-copy="{text}"]')).to_have_text("Copied")
    return page.evaluate("navigator.clipboard.readText()")


def test_without_javascript_a_new_key_is_shown_to_select_and_no_button_is(browser, server, developer):
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    try:
        sign_in(page, server, developer)
        page.get_by_role("link", name="API clients").click()
        page.get_by_role("button", name="Create client").click()
        key = page.get_by_role("status").locator("code").first
        expect(key).to_have_text(re.compile(r"sk_live_[0-9a-f]{48}"))
        assert key.evaluate("code => getComputedStyle(code).userSelect") != "none"
        expect(page.get_by_role("button", name="Copy key")).to_be_hidden()
    finally:
        context.close()


def test_a_viewer_reads_the_clients_and_changes_nothing(page, server, sandesh, workspaces):
    added = add_person(sandesh, workspaces["acme"], "viewer@example.com", role="viewer")
    set_password(page, server, added)
    password_was_set(page)
    sign_in(page, server, "viewer@example.com")
    page.goto(f"{server.url}/dashboard/w/{workspaces['acme']}/clients")
    expect(page.get_by_role("heading", level=1)).to_have_text("API clients")
    expect(page.get_by_role("button", name="Create client")).to_have_count(0)
    token = page.locator("input[name=csrf]").first.input_value()
    answer = page.request.post(f"{server.url}/dashboard/w/{workspaces['acme']}/clients",
                               form={"csrf": token, "brand": "Sneaky"})
    assert answer.status == 403


def test_a_brand_posted_by_a_workspace_sets_no_brand(page, server, sandesh, owner, workspaces):
    """A client's brand is the operator team's to set: a brand posted to Create client or to a
    client's Edit, as an older page posted it, is not taken; the client has the workspace's name."""
    made = sandesh("client", "create", "--workspace", workspaces["acme"], "--brand", "Posted")
    sign_in(page, server, "owner@example.com")
    page.goto(f"{server.url}/dashboard/w/{workspaces['acme']}/clients")
    token = page.locator("input[name=csrf]").first.input_value()
    base = f"{server.url}/dashboard/w/{workspaces['acme']}/clients"
    edited = page.request.post(f"{base}/{made['id']}/update", form={"csrf": token, "brand": "PayPal",
                                                                     "webhook_url": ""}, max_redirects=0)
    assert edited.status == 303
    assert sandesh("client", "show", made["id"])["brand"] == "Posted"
    before = {c["id"] for c in sandesh("client", "list", "--workspace", workspaces["acme"])["clients"]}
    assert page.request.post(base, form={"csrf": token, "brand": "PayPal"}).status == 200
    [new] = [c for c in sandesh("client", "list", "--workspace", workspaces["acme"])["clients"] if c["id"] not in before]
    assert new["brand"] == "Acme Pasal"


def test_another_workspaces_client_is_not_found(page, server, sandesh, owner, workspaces):
    theirs = sandesh("client", "create", "--workspace", workspaces["other"], "--brand", "Theirs")
    sign_in(page, server, "owner@example.com")
    page.goto(f"{server.url}/dashboard/w/{workspaces['acme']}/clients")
    token = page.locator("input[name=csrf]").first.input_value()
    answer = page.request.post(f"{server.url}/dashboard/w/{workspaces['acme']}/clients/{theirs['id']}/disable",
                               form={"csrf": token})
    assert answer.status == 404
    assert page.goto(f"{server.url}/dashboard/w/{workspaces['other']}/clients").status == 404
    assert sandesh("client", "show", theirs["id"])["enabled"] is True


def test_the_audit_log_shows_the_workspaces_changes_newest_first(page, server, sandesh, owner, workspaces,
                                                                  projections_worker):
    made = sandesh("--actor", "first-operator", "client", "create", "--workspace", workspaces["acme"],
                   "--brand", "Audited")
    sandesh("--actor", "second-operator", "client", "disable", made["id"])
    sign_in(page, server, "owner@example.com")
    page.get_by_role("link", name="Audit log").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Audit log")
    audit_shows(page, page.url, "second-operator")
    rows = page.locator("table.audit tbody tr").all_inner_texts()
    created = [i for i, row in enumerate(rows) if "first-operator" in row and "client.created" in row]
    disabled = [i for i, row in enumerate(rows) if "second-operator" in row and "client.disabled" in row]
    assert len(created) == len(disabled) == 1 and disabled[0] < created[0]
    assert any("tester" in row and "workspace.credited" in row and "amount: NPR 1,234.56" in row for row in rows)
    # key prefixes (sk_live_3f9a) show what changed; a whole key, a secret or a hash never
    assert not any("hash" in row or "whsec_" in row or re.search(r"sk_live_[0-9a-f]{5}", row) for row in rows)
    assert page.goto(f"{server.url}/dashboard/w/{workspaces['other']}/audit").status == 404


def test_a_developer_opts_a_number_out_and_back_in(page, server, sandesh, workspaces, developer):
    sign_in(page, server, developer)
    page.get_by_role("link", name="Opt-outs").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Opt-outs")
    page.get_by_label("Number").fill("12345")
    page.get_by_role("button", name="Opt out").click()
    expect(page.locator("#number-error")).to_contain_text("is not a Nepal mobile number")
    page.get_by_label("Number").fill("+977 9812345678".replace(" ", ""))
    page.get_by_role("button", name="Opt out").click()
    row = page.get_by_role("row", name=re.compile("9779812345678"))
    expect(row).to_contain_text("operator")
    listed = sandesh("optout", "list", workspaces["acme"])["optOuts"]
    assert [o["number"] for o in listed] == ["9779812345678"]
    row.get_by_role("button", name="Opt in").click()
    expect(page.get_by_role("row", name=re.compile("9779812345678"))).to_have_count(0)
    done = sandesh.run("audit", "--workspace", workspaces["acme"])
    actions = [(line["action"], line["actor"]) for line in map(orjson.loads, done.stdout.splitlines())]
    assert ("optout.added", "user:dev@example.com") in actions and ("optout.removed", "user:dev@example.com") in actions

    # what the workspace answers a recipient's words with
    page.get_by_label("Help text").fill("सहयोग " * 60)
    page.get_by_role("button", name="Save replies").click()
    expect(page.locator("#replies-error")).to_contain_text("the help text needs 6 SMS (UCS-2); at most 3")
    page.get_by_label("Help text").fill("Phone the shop: 01-4412345")
    page.get_by_label(re.compile("Confirm each opt-out")).check()
    page.get_by_role("button", name="Save replies").click()
    expect(page.get_by_label("Help text")).to_have_value("Phone the shop: 01-4412345")
    expect(page.get_by_label(re.compile("Confirm each opt-out"))).to_be_checked()
    shown = sandesh("workspace", "show", workspaces["acme"])
    assert (shown["helpText"], shown["confirmations"]) == ("Phone the shop: 01-4412345", True)


def test_a_developer_redelivers_a_webhook_of_their_workspace(page, server, sandesh, runtime, workspaces, developer):
    from sandesh.domain.webhook import new_delivery

    mine = sandesh("client", "create", "--workspace", workspaces["acme"], "--brand", "Hooked")
    theirs = sandesh("client", "create", "--workspace", workspaces["other"], "--brand", "Elsewhere")
    made = [new_delivery(client["id"], "message.status", f"msg_{client['id']}", "delivered", {"status": "delivered"},
                         at=runtime.clock.now()) for client in (mine, theirs)]
    runtime.sandesh.webhooks.add_deliveries(made)
    sign_in(page, server, developer)
    page.get_by_role("link", name="Webhooks").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Webhooks")
    row = page.get_by_role("row", name=re.compile(made[0].id))
    expect(row).to_contain_text("Hooked")
    expect(page.get_by_role("row", name=re.compile(made[1].id))).to_have_count(0)
    row.get_by_role("button", name="Redeliver").click()
    expect(page.get_by_role("row", name=re.compile("Hooked"))).to_have_count(2)  # the new delivery too
    token = page.locator("input[name=csrf]").first.input_value()
    other = page.request.post(f"{server.url}/dashboard/w/{workspaces['acme']}/webhooks/{made[1].id}/redeliver",
                              form={"csrf": token})
    assert other.status == 404
    done = sandesh.run("audit", "--workspace", workspaces["acme"])
    assert any(line["action"] == "webhook.redelivered" and line["actor"] == "user:dev@example.com"
               for line in map(orjson.loads, done.stdout.splitlines()))


def test_a_developer_redelivers_an_outage_of_a_client_from_the_webhooks_page(page, server, sandesh, runtime,
                                                                              workspaces, developer):
    from datetime import datetime
    from zoneinfo import ZoneInfo

    from sandesh.domain.webhook import new_delivery

    mine = sandesh("client", "create", "--workspace", workspaces["acme"], "--brand", "Outage")
    theirs = sandesh("client", "create", "--workspace", workspaces["other"], "--brand", "Theirs")
    now = runtime.clock.now()
    dead = []
    for n, client in enumerate((mine, mine, theirs)):
        delivery = new_delivery(client["id"], "message.status", f"msg_outage_{client['id']}_{n}", "delivered",
                                {"n": n}, at=now - 1800 + n)
        runtime.sandesh.webhooks.add_deliveries([delivery])
        for _ in range(3):  # three 404s: dead
            delivery = runtime.sandesh.webhooks.record_attempt(delivery, 404, None, 0.1)
        dead.append(delivery.id)
    sign_in(page, server, developer)
    page.get_by_role("link", name="Webhooks").click()
    page.get_by_label("Client of the outage").select_option(label="Outage")
    page.get_by_role("button", name="Redeliver all").click()
    expect(page.locator("#since-error")).to_contain_text("the time the outage began")
    since = datetime.fromtimestamp(now - 3600, ZoneInfo("Asia/Kathmandu")).strftime("%Y-%m-%dT%H:%M")
    page.get_by_label("Since (Nepal time)").fill(since)
    page.get_by_role("button", name="Redeliver all").click()
    expect(page.get_by_role("status")).to_have_text("Redelivered 2 deliveries.")
    expect(page.get_by_role("row", name=re.compile("Outage"))).to_have_count(4)  # each dead one, and its event anew
    states = {d["redeliveryOf"]: d["state"] for d in sandesh("webhooks", "list", "--client", mine["id"])["deliveries"]}
    assert states == {None: "dead", dead[0]: "attempting", dead[1]: "attempting"}
    token = page.locator("input[name=csrf]").first.input_value()  # another workspace's client: refused
    forged = page.request.post(f"{server.url}/dashboard/w/{workspaces['acme']}/webhooks/outage",
                               form={"csrf": token, "outage_client": theirs["id"], "since": since})
    assert forged.status == 400 and "no such client in this workspace" in forged.text()
    lines = [orjson.loads(line) for line in sandesh.run("audit", "--workspace", workspaces["acme"]).stdout.splitlines()]
    [line] = [line for line in lines if line["action"] == "webhook.redelivered" and line["clientId"] == mine["id"]]
    assert line["actor"] == "user:dev@example.com" and line["details"]["count"] == 2


def test_a_viewer_finds_a_message_and_reads_its_timeline(page, server, sandesh, runtime, route, workspaces):
    from sandesh.projections import follower

    key = sandesh("client", "create", "--workspace", workspaces["acme"], "--brand", "Sender")["key"]
    sent = requests.post(server.url + "/v1/sms/send", headers={"x-api-key": key},
                         json={"to": "9779812345670", "text": "Your order is packed", "messageType": "transactional"})
    assert sent.status_code == 202, sent.text
    message_id = sent.json()["messageId"]
    follower.catch_up(runtime)
    set_password(page, server, add_person(sandesh, workspaces["acme"], "reader@example.com", role="viewer"))
    password_was_set(page)
    sign_in(page, server, "reader@example.com")
    page.get_by_role("link", name="Messages").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Messages")
    page.get_by_label("Search").fill("+9779812345670")
    page.get_by_role("button", name="Search").click()
    expect(page.get_by_role("row", name=re.compile(message_id))).to_contain_text("transactional")
    page.get_by_label("Search").fill("9779800000000")
    page.get_by_role("button", name="Search").click()
    expect(page.get_by_role("row", name=re.compile(message_id))).to_have_count(0)
    page.goto(f"{server.url}/dashboard/w/{workspaces['acme']}/messages?q={message_id}")
    page.get_by_role("link", name=message_id).click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Message timeline")
    expect(page.locator("ol.timeline")).to_contain_text("accepted")
    expect(page.locator("ol.timeline")).to_contain_text("Your order is packed")
    assert page.goto(f"{server.url}/dashboard/w/{workspaces['other']}/messages/{message_id}").status == 404
    assert page.goto(f"{server.url}/dashboard/w/{workspaces['acme']}/messages/msg_none").status == 404


def test_the_overview_counts_the_workspaces_messages_and_charts_the_last_24_hours(page, server, sandesh, runtime,
                                                                                 route, owner):
    from sandesh.projections import follower

    workspace = sandesh("workspace", "create", "--name", "Counted")["id"]
    sandesh("workspace", "activate", workspace)
    sandesh("workspace", "credit", workspace, "10000")
    key = sandesh("client", "create", "--workspace", workspace, "--brand", "Counted")["key"]
    for n in range(3):
        sent = requests.post(server.url + "/v1/sms/send", headers={"x-api-key": key},
                             json={"to": f"977981234567{n}", "text": "hello", "messageType": "transactional"})
        assert sent.status_code == 202, sent.text
    follower.catch_up(runtime)
    added = add_person(sandesh, workspace, "counter@example.com", role="viewer")
    set_password(page, server, added)
    password_was_set(page)
    sign_in(page, server, "counter@example.com")
    counted = page.locator("dl.counters")
    expect(counted).to_contain_text("Sent3")
    expect(counted).to_contain_text("Segments3")
    expect(counted).to_contain_text("SpentNPR 3.00")
    expect(page.get_by_role("img", name=re.compile("Messages per hour by outcome, the last 24 hours: 3 in all"))
           ).to_be_visible()


# People (docs/dashboard.md, "People page")

def test_an_owner_invites_a_person_changes_their_role_and_removes_them(browser, server, owner, workspaces):
    boss = browser.new_context().new_page()
    sign_in(boss, server, "owner@example.com")
    boss.get_by_role("link", name="People").click()
    expect(boss.get_by_role("heading", level=1)).to_have_text("People")
    boss.get_by_label("Email").fill("not an email")  # the field's type=email: the browser checks it first
    boss.get_by_label("Email").evaluate("field => field.type = 'text'")
    boss.get_by_label("Name").fill("Hari")
    boss.get_by_label("Role", exact=True).select_option("developer")
    boss.get_by_role("button", name="Invite").click()
    expect(boss.locator("#invite-email-error")).to_have_text("'not an email' is not an email address")
    boss.get_by_label("Email").fill("hari@example.com")
    boss.get_by_role("button", name="Invite").click()
    link = boss.get_by_role("status").locator("code").inner_text()
    assert link.startswith(f"{server.url}/dashboard/set-password/person_")

    hari = browser.new_context().new_page()
    set_password(hari, server, {"setPasswordLink": link})
    password_was_set(hari)
    sign_in(hari, server, "hari@example.com")
    expect(hari.get_by_role("heading", level=1)).to_have_text("Overview")
    hari.goto(f"{server.url}/dashboard/w/{workspaces['acme']}/people")
    expect(hari.get_by_role("button", name="Invite")).to_have_count(0)  # only owners manage people

    row = boss.get_by_role("row", name=re.compile("hari@example.com"))
    expect(row).to_contain_text("developer")
    row.get_by_label("New role").select_option("viewer")
    row.get_by_role("button", name="Change role").click()
    expect(boss.get_by_role("row", name=re.compile("hari@example.com"))).to_contain_text("viewer")
    hari.goto(f"{server.url}/dashboard/w/{workspaces['acme']}/clients")
    expect(hari.get_by_role("button", name="Create client")).to_have_count(0)  # a viewer now

    boss.get_by_role("row", name=re.compile("hari@example.com")).get_by_role("button", name="Remove").click()
    expect(boss.get_by_role("row", name=re.compile("hari@example.com"))).to_have_count(0)
    hari.reload()
    expect(hari.get_by_role("heading", level=1)).to_have_text("Sign in")  # their session ended with them
    expect(boss.get_by_role("row", name=re.compile("owner@example.com"))).to_contain_text("you")
    boss.context.close()
    hari.context.close()


def test_people_of_another_workspace_are_not_found(page, server, sandesh, owner, workspaces):
    theirs = add_person(sandesh, workspaces["other"], "someone@other.example")
    sign_in(page, server, "owner@example.com")
    page.goto(f"{server.url}/dashboard/w/{workspaces['acme']}/people")
    token = page.locator("input[name=csrf]").first.input_value()
    answer = page.request.post(f"{server.url}/dashboard/w/{workspaces['acme']}/people/{theirs['id']}/remove",
                               form={"csrf": token})
    assert answer.status == 404
    assert page.goto(f"{server.url}/dashboard/w/{workspaces['other']}/people").status == 404
    assert "someone@other.example" in [p["email"] for p in sandesh("user", "list")["people"]]


# Authentication codes (docs/dashboard.md, "Authentication codes"), in a workspace of their own

@pytest.fixture(scope="module")
def guarded(sandesh: Any, server: Any, browser: Browser) -> dict[str, Any]:
    workspace = sandesh("workspace", "create", "--name", "Guarded")["id"]
    context = browser.new_context()
    page = context.new_page()
    for email, role in (("guard@example.com", "owner"), ("helper@example.com", "developer")):
        set_password(page, server, add_person(sandesh, workspace, email, role=role))
        password_was_set(page)
    context.close()
    return {"workspace": workspace}


def code_now(sandesh: Any, secret: str, later: float = 0) -> str:
    """The code an authenticator app shows at the service's time (the test clock moves it)."""
    return pyotp.TOTP(secret).at(parse_iso(sandesh("clock", "show")["now"]) + later)


def wrong(code: str) -> str:
    return code[:-1] + str((int(code[-1]) + 1) % 10)


def test_an_owner_requires_codes_and_sets_up_an_app_after_their_password(page, server, sandesh, guarded):
    sign_in(page, server, "guard@example.com")
    page.get_by_role("button", name="Require authentication codes for owners").click()
    expect(page.locator("dl.state")).to_contain_text("required for owners")
    page.get_by_role("button", name="Sign out", exact=True).click()

    sign_in(page, server, "guard@example.com")
    expect(page.get_by_role("heading", level=1)).to_have_text("Set up an authenticator app")
    expect(page.get_by_role("img", name="QR code for your authenticator app")).to_be_visible()
    overview = f"{server.url}/dashboard/w/{guarded['workspace']}/overview"
    assert page.request.get(overview, max_redirects=0).status == 303  # a waiting session opens nothing
    secret = page.locator("code.secret").inner_text()
    page.get_by_label("Authentication code").fill(wrong(code_now(sandesh, secret)))
    page.get_by_role("button", name="Verify").click()
    expect(page.locator("#code-error")).to_have_text("That code is not right: type the 6 digits the app shows now.")
    page.get_by_label("Authentication code").fill(code_now(sandesh, secret))
    page.get_by_role("button", name="Verify").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Overview")
    guarded["secret"] = secret
    done = sandesh.run("audit", "--workspace", guarded["workspace"])
    assert secret not in done.stdout and "person.totp_enrolled" in done.stdout


def test_a_code_is_asked_after_the_password_and_never_accepted_twice(browser, server, sandesh, guarded):
    sandesh("clock", "advance", "30")  # past the step the setup used
    first, second = browser.new_context().new_page(), browser.new_context().new_page()
    sign_in(first, server, "guard@example.com")
    expect(first.get_by_role("heading", level=1)).to_have_text("Authentication code")
    code = code_now(sandesh, guarded["secret"])
    first.get_by_label("Authentication code").fill(wrong(code))
    first.get_by_role("button", name="Verify").click()
    expect(first.locator("#code-error")).to_have_text("That code is not right: type the 6 digits the app shows now.")
    first.get_by_label("Authentication code").fill(code)
    first.get_by_role("button", name="Verify").click()
    expect(first.get_by_role("heading", level=1)).to_have_text("Overview")
    sign_in(second, server, "guard@example.com")
    second.get_by_label("Authentication code").fill(code)
    second.get_by_role("button", name="Verify").click()
    expect(second.locator("#code-error")).to_be_visible()
    first.context.close()
    second.context.close()


def test_a_developer_of_that_workspace_needs_no_code(page, server, guarded):
    sign_in(page, server, "helper@example.com")
    expect(page.get_by_role("heading", level=1)).to_have_text("Overview")


def test_the_people_table_is_rebuilt_from_the_log(sandesh):
    done = sandesh.run("replay", "--check", "registry")
    assert done.returncode == 0, done.stdout + done.stderr
