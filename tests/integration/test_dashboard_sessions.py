"""Sessions follow the person (docs/dashboard.md, "Sessions"), over plain HTTP as a browser
without JavaScript sends it: "Sign out everywhere" takes a session that gave the code too;
disabling a person ends their sessions at once; an authenticator app is replaced only with a
code of the current one or the password."""
from __future__ import annotations

import re
import time

import pyotp
import pytest
import requests

from sandesh.domain import totp
from scripts.devtools.corpus_dashboard import Browser
from tests.conftest import Server

PASSWORD = "correct horse battery staple"
CSRF = re.compile(r'name="csrf" value="([^"]+)"')


@pytest.fixture(scope="module")
def server(env):
    running = Server(env, workers=1)
    yield running
    running.stop()


def now(sandesh) -> float:
    from sandesh.domain.clock import parse_iso

    return parse_iso(sandesh("clock", "show")["now"])


def signed_in(browser: Browser) -> bool:
    """The session opens the dashboard (a signed-out one lands on the sign-in page)."""
    return "/dashboard/sign-in" not in browser.http.get(browser.base + "/dashboard", timeout=30).url


def post(browser: Browser, page: str, action: str, **fields: str) -> requests.Response:
    token = CSRF.search(browser.http.get(browser.base + page, timeout=30).text).group(1)
    return browser.http.post(browser.base + action, data={"csrf": token, **fields}, timeout=30)


@pytest.fixture(scope="module")
def owner(sandesh, server):
    """An owner with an authenticator app, signed in on one browser."""
    workspace = sandesh("workspace", "create", "--name", "Sessions")["id"]
    sandesh("workspace", "activate", workspace)
    added = sandesh("user", "add", "--email", "owner@sessions.example", "--name", "Owner", "--workspace", workspace,
                    "--role", "owner")
    browser = Browser(server.url, now=lambda: now(sandesh))
    browser.set_password(added["setPasswordLink"], PASSWORD)
    browser.sign_in(added["email"], PASSWORD)
    secret = browser.enroll(PASSWORD)
    return {"email": added["email"], "secret": secret, "workspace": workspace}


def a_browser(server, sandesh) -> Browser:
    return Browser(server.url, now=lambda: now(sandesh))


def next_step(sandesh) -> None:
    """The next code step of the service clock: a code is accepted once."""
    sandesh("clock", "advance", str(totp.STEP))


def test_signing_out_everywhere_takes_a_fully_signed_in_session(owner, server, sandesh):
    """Someone who knows only the password cannot end the person's sessions at will."""
    next_step(sandesh)
    victim = a_browser(server, sandesh)
    victim.sign_in(owner["email"], PASSWORD, totp_secret=owner["secret"])
    half = a_browser(server, sandesh)
    landed = post(half, "/dashboard/sign-in", "/dashboard/sign-in", email=owner["email"], password=PASSWORD)
    assert landed.url.endswith("/dashboard/sign-in/code")
    post(half, "/dashboard/sign-in/code", "/dashboard/sign-out-everywhere")
    assert signed_in(victim), "a session that owes its code ended only itself"

    next_step(sandesh)
    other = a_browser(server, sandesh)
    other.sign_in(owner["email"], PASSWORD, totp_secret=owner["secret"])
    post(other, "/dashboard", "/dashboard/sign-out-everywhere")
    assert not signed_in(victim) and not signed_in(other)


def test_disabling_a_person_ends_their_sessions_at_once(sandesh, server):
    workspace = sandesh("workspace", "create", "--name", "Disabled")["id"]
    sandesh("workspace", "activate", workspace)
    added = sandesh("user", "add", "--email", "dev@sessions.example", "--name", "Dev", "--workspace", workspace,
                    "--role", "developer")
    browser = a_browser(server, sandesh)
    browser.set_password(added["setPasswordLink"], PASSWORD)
    browser.sign_in(added["email"], PASSWORD)
    assert signed_in(browser)
    sandesh("user", "disable", added["email"])
    sandesh("user", "enable", added["email"])
    assert not signed_in(browser), "the session ended with the disabling and did not come back with enabling"


def test_an_authenticator_app_is_replaced_only_with_a_code_of_the_current_one_or_the_password(owner, server, sandesh):
    next_step(sandesh)
    browser = a_browser(server, sandesh)
    browser.sign_in(owner["email"], PASSWORD, totp_secret=owner["secret"])
    page = browser.http.get(browser.base + "/dashboard/authenticator", timeout=30).text
    assert "Code of your current app, or your password" in page
    new_secret = re.search(r'<code class="secret">([A-Z2-7]+)</code>', page).group(1)
    new_code = pyotp.TOTP(new_secret).at(int(now(sandesh)))
    refused = post(browser, "/dashboard/authenticator", "/dashboard/authenticator", code=new_code, current="")
    assert refused.status_code == 400 and "a code it shows now, or your password" in refused.text
    wrong = post(browser, "/dashboard/authenticator", "/dashboard/authenticator", code=new_code, current="not it")
    assert wrong.status_code == 400
    replaced = post(browser, "/dashboard/authenticator", "/dashboard/authenticator", code=new_code, current=PASSWORD)
    assert replaced.status_code == 200 and replaced.url.endswith("/overview"), replaced.url

    next_step(sandesh)
    again = a_browser(server, sandesh)
    again.sign_in(owner["email"], PASSWORD, totp_secret=new_secret)
    assert signed_in(again), "the new app's codes sign in"
    owner["secret"] = new_secret


def test_a_first_app_is_set_up_with_the_password_not_by_a_session_alone(sandesh, server):
    """A stolen session cannot set up an app of its own for a person without one and lock them out."""
    workspace = sandesh("workspace", "create", "--name", "No app yet")["id"]
    sandesh("workspace", "activate", workspace)
    added = sandesh("user", "add", "--email", "noapp@sessions.example", "--name", "Dev", "--workspace", workspace,
                    "--role", "developer")
    browser = a_browser(server, sandesh)
    browser.set_password(added["setPasswordLink"], PASSWORD)
    browser.sign_in(added["email"], PASSWORD)
    page = browser.http.get(browser.base + "/dashboard/authenticator", timeout=30).text
    assert 'label for="current">Your password<' in page
    secret = re.search(r'<code class="secret">([A-Z2-7]+)</code>', page).group(1)
    code = pyotp.TOTP(secret).at(int(now(sandesh)))
    refused = post(browser, "/dashboard/authenticator", "/dashboard/authenticator", code=code, current="")
    assert refused.status_code == 400 and "type your password too" in refused.text
    assert post(browser, "/dashboard/authenticator", "/dashboard/authenticator", code=code,
                current="not it").status_code == 400
    done = post(browser, "/dashboard/authenticator", "/dashboard/authenticator", code=code, current=PASSWORD)
    assert done.status_code == 200 and done.url.endswith("/overview"), done.url


@pytest.mark.parametrize("field", ["csrf", "code"])
def test_a_field_no_token_or_code_could_hold_is_refused_never_an_error(owner, server, sandesh, field):
    """A CSRF token or an authentication code with characters outside ASCII (Devanagari, Arabic-Indic
    digits) is a refusal like any wrong one: 403 for the token, the code page again for the code."""
    next_step(sandesh)
    browser = a_browser(server, sandesh)
    landed = post(browser, "/dashboard/sign-in", "/dashboard/sign-in", email=owner["email"], password=PASSWORD)
    assert landed.url.endswith("/dashboard/sign-in/code")
    if field == "csrf":
        answer = browser.http.post(browser.base + "/dashboard/sign-in/code", timeout=30,
                                   data={"csrf": "टोकन-" + "a" * 58, "code": "123456"})
        assert answer.status_code == 403
    else:
        answer = post(browser, "/dashboard/sign-in/code", "/dashboard/sign-in/code", code="١٢٣٤٥٦")
        assert answer.status_code == 200 and "That code is not right" in answer.text


def test_past_the_queue_of_password_checks_the_sign_in_page_is_503_and_records_no_try(server, runtime):
    """Password checks wait on their own thread, a start a second (api/waiting.py, Hashing): 14
    sign-ins at once fill its queue, and the others are told to come back before anything of
    them is recorded, so a try refused for want of time counts as no failure."""
    from concurrent.futures import ThreadPoolExecutor

    def try_once(n: int) -> requests.Response:
        browser = Browser(server.url, now=time.time)
        return post(browser, "/dashboard/sign-in", "/dashboard/sign-in", email=f"crowd{n}@sessions.example",
                    password="not the password")

    with ThreadPoolExecutor(14) as pool:
        answers = list(pool.map(try_once, range(14)))
    busy = [a for a in answers if a.status_code == 503]
    checked = [a for a in answers if a.status_code == 200]
    assert len(checked) == 9 and len(busy) == 5, [a.status_code for a in answers]
    assert all(int(a.headers["Retry-After"]) >= 1 and "Try again in" in a.text for a in busy)
    with runtime.connection() as conn:
        recorded = conn.execute("SELECT count(DISTINCT key) AS n FROM sign_in_failures WHERE key LIKE 'account:crowd%%'"
                                ).fetchone()["n"]
    assert recorded == 9, "the checked tries failed; the busy ones were never tries"


def test_a_browser_that_signed_in_before_keeps_its_allowance_while_the_account_is_paced(sandesh, server, runtime):
    """OWASP's device cookies: guesses from many addresses pace the account (its next turn far
    ahead: others are told to come back), yet the person's own browser signs in at once."""
    from sandesh.domain.signin import SignInRefused

    workspace = sandesh("workspace", "create", "--name", "Paced")["id"]
    added = sandesh("user", "add", "--email", "paced@sessions.example", "--name", "Dev", "--workspace", workspace,
                    "--role", "developer")
    own = a_browser(server, sandesh)
    own.set_password(added["setPasswordLink"], PASSWORD)
    own.sign_in(added["email"], PASSWORD)
    assert any(c.name == "sandesh_device" for c in own.http.cookies)
    own.sign_out()
    refused = 0
    for n in range(60):  # an attacker's guesses from 60 addresses, each recorded as a failure
        try:
            runtime.sandesh.people.try_sign_in(added["email"], f"203.0.113.{n}")
        except SignInRefused:
            refused += 1
    assert refused, "the account is paced: later guesses are told to come back"
    stranger = post(a_browser(server, sandesh), "/dashboard/sign-in", "/dashboard/sign-in", email=added["email"],
                    password=PASSWORD)
    assert stranger.status_code == 429 and "Too many failed sign-ins" in stranger.text
    own.sign_in(added["email"], PASSWORD)
    assert signed_in(own)


def test_a_pages_csrf_token_made_with_chosen_cookies_is_no_device_cookie(sandesh, server, runtime):
    """One key per purpose (docs/dashboard.md, "Security"): a stranger who sends the sign-in page
    `sandesh_csrf=device` and `sandesh_session=<victim>|D` gets a CSRF token over the same words a
    device cookie's MAC covers; presented as the victim's device cookie, it lifts no wait."""
    from sandesh.domain.signin import SignInRefused

    workspace = sandesh("workspace", "create", "--name", "Forged")["id"]
    added = sandesh("user", "add", "--email", "victim@sessions.example", "--name", "Victim", "--workspace", workspace,
                    "--role", "developer")
    for n in range(60):  # guesses from 60 addresses pace the account: strangers wait
        try:
            runtime.sandesh.people.try_sign_in(added["email"], f"198.51.100.{n}")
        except SignInRefused:
            pass
    stranger = a_browser(server, sandesh)
    stranger.http.cookies.set("sandesh_csrf", "device")
    stranger.http.cookies.set("sandesh_session", f"{added['email']}|D")
    forged = CSRF.search(stranger.http.get(stranger.base + "/dashboard/sign-in", timeout=30).text).group(1)
    stranger.http.cookies.clear()
    stranger.http.cookies.set("sandesh_device", f"D.{forged}")
    answer = post(stranger, "/dashboard/sign-in", "/dashboard/sign-in", email=added["email"], password="a guess")
    assert answer.status_code == 429 and "Too many failed sign-ins" in answer.text
    assert int(answer.headers["Retry-After"]) >= 1


def test_a_device_cookie_is_given_after_the_code_not_after_the_password_alone(owner, sandesh, server):
    """The password alone is half a sign-in: its browser is trusted only once the code is right too."""
    next_step(sandesh)  # the owner's enrolment took this step's code
    browser = a_browser(server, sandesh)
    landed = post(browser, "/dashboard/sign-in", "/dashboard/sign-in", email=owner["email"], password=PASSWORD)
    assert landed.url.endswith("/dashboard/sign-in/code")
    assert not any(c.name == "sandesh_device" for c in browser.http.cookies)
    post(browser, "/dashboard/sign-in/code", "/dashboard/sign-in/code", code=browser.code(owner["secret"]))
    assert signed_in(browser)
    assert any(c.name == "sandesh_device" for c in browser.http.cookies)
