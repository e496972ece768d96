"""A client's OTP message (docs/api.md, "OTP messages that apps fill in"): its own template in
any language, the WebOTP line and Android's app hash, set with `sandesh client update`, sent
through a real dispatcher and emulated modems, and the code verified."""
from __future__ import annotations

import re
import time
from typing import Any

import orjson
import pytest
import requests

from sandesh.domain.client import Client
from sandesh.projections import follower
from sandesh.scripts.service.emulator import Emulator
from tests.conftest import wait_for_status
from tests.integration.test_corpus import replays_equal
from tests.integration.test_dashboard import browser  # noqa: F401

TEMPLATE = "{brand}: तपाईंको प्रमाणीकरण कोड {code} हो। यो {minutes} मिनेटमा सकिन्छ।"
APP_HASH = "FA+9qCX9VSu"


@pytest.fixture(scope="module")
def shop(sandesh) -> dict[str, str]:
    ws = sandesh("workspace", "create", "--name", "Sasto Pasal", "--types", "transactional,otp")["id"]
    sandesh("workspace", "activate", ws)
    sandesh("workspace", "credit", ws, "100000")
    made = sandesh("client", "create", "--workspace", ws, "--brand", "Sasto", "--rate-limit", "1000")
    return {"id": made["id"], "key": made["key"], "workspace": ws}


def otp(server, key: str, to: str, **more: Any) -> requests.Response:
    return requests.post(server.url + "/v1/sms/otp/send", json={"to": to, "purpose": "login", **more},
                         headers={"x-api-key": key}, timeout=10)


def received(server, runtime, phones: Emulator, key: str, to: str, **more: Any) -> tuple[dict[str, Any], str]:
    """An OTP to `to`, delivered: what the phone received, and the message's id."""
    answer = otp(server, key, to, **more)
    assert answer.status_code == 202, answer.text
    message_id = answer.json()["messageId"]
    wait_for_status(runtime, [message_id], {"delivered"})
    [got] = [m for m in phones.received if m["to"] == to][-1:]
    return got, message_id


def test_a_devanagari_template_with_webotp_and_an_app_hash_reaches_the_phone_and_its_code_verifies(
        server, runtime, sandesh, phones, shop):
    shown = sandesh("client", "update", shop["id"], "--otp-template", TEMPLATE, "--otp-web-domain", "Shop.Example.COM")
    assert (shown["otpTemplate"], shown["otpWebDomain"]) == (TEMPLATE, "shop.example.com")
    assert sandesh("client", "show", shop["id"])["otpWebDomain"] == "shop.example.com"

    got, message_id = received(server, runtime, phones, shop["key"], "9779812300001", appHash=APP_HASH)
    first, app_hash, webotp = got["text"].split("\n")
    code = re.fullmatch(r"Sasto: तपाईंको प्रमाणीकरण कोड ([0-9]{6}) हो। यो 5 मिनेटमा सकिन्छ।", first).group(1)
    assert (app_hash, webotp) == (APP_HASH, f"@shop.example.com #{code}")
    assert got["encoding"] == "UCS-2"
    looked_up = requests.get(f"{server.url}/v1/sms/messages/{message_id}", headers={"x-api-key": shop["key"]},
                             timeout=5).json()
    segments = -(-len(got["text"]) // 67) if len(got["text"]) > 70 else 1
    assert (looked_up["encoding"], looked_up["segments"]) == ("UCS-2", segments)
    rates = requests.get(server.url + "/v1/sms/balance", headers={"x-api-key": shop["key"]}, timeout=5).json()["rates"]
    assert looked_up["cost"] == rates["otp"] * segments
    verified = requests.post(server.url + "/v1/sms/otp/verify", headers={"x-api-key": shop["key"]}, timeout=10,
                             json={"to": "9779812300001", "purpose": "login", "code": code})
    assert verified.json()["verified"] is True

    # the settings removed: the default sentence again, no extra line
    sandesh("client", "update", shop["id"], "--otp-template", "", "--otp-web-domain", "")
    got, _ = received(server, runtime, phones, shop["key"], "9779812300002")
    assert re.fullmatch(r"[0-9]{6} is your Sasto verification code\. It expires in 5 minutes\.", got["text"])

    follower.catch_up(runtime)
    done = sandesh.run("audit", "--workspace", shop["workspace"])
    changes = [orjson.loads(line)["details"]["changes"] for line in done.stdout.splitlines()
               if orjson.loads(line)["action"] == "client.updated"]
    assert changes == [{"otp_template": TEMPLATE, "otp_web_domain": "shop.example.com"},
                       {"otp_template": None, "otp_web_domain": None}]


@pytest.mark.parametrize("args, said", [
    (("--otp-template", "Your code is ready"), "{code} exactly once"),
    (("--otp-template", "{code} and again {code}"), "{code} exactly once"),
    (("--otp-template", "{code} for {name}"), "unknown placeholder {name}"),
    (("--otp-template", "{code} {"), "a brace in the OTP template"),
    (("--otp-template", "{code} " + "नमस्ते " * 60), "at most 160 characters"),
    (("--otp-web-domain", "shop_example.com"), "not a host name"),
    (("--otp-template", "{code} is your code. Log in at https://sasto.example/login"),
     "the OTP template holds a web address or domain name ('https://sasto.example/login')"),
    (("--otp-template", "Sasto code {code}\n@other.example #123456"), "the OTP template must be one line"),
    (("--otp-template", "{code} @other #1"), "'@' followed by '#'"),
    (("--otp-template", "{code} \u202emoc.otsas"), "direction control (U+202E)"),
    (("--otp-template", "Not you? Call 9801234567. {code}"), "phone number ('9801234567')"),
    (("--brand", "sasto.example"), "the brand holds a web address or domain name ('sasto.example')"),
    (("--brand", "Sasto\u2067"), "the brand holds a direction control (U+2067)"),
])
def test_a_template_domain_or_brand_that_cannot_be_sent_is_refused_with_the_reason(sandesh, shop, args, said):
    before = sandesh("client", "show", shop["id"])
    done = sandesh.run("client", "update", shop["id"], *args)
    assert done.returncode == 2 and said in done.stderr, done.stderr
    assert sandesh("client", "show", shop["id"]) == before


def test_no_client_is_created_under_a_brand_that_could_phish(sandesh, shop):
    done = sandesh.run("client", "create", "--workspace", shop["workspace"], "--brand", "Sasto (sasto.example)")
    assert done.returncode == 2 and "web address or domain name ('sasto.example')" in done.stderr, done.stderr


def test_a_template_kept_from_before_the_rules_replays_as_it_was_and_the_default_text_goes_out(
        server, runtime, sandesh, phones, shop):
    """Events are forever: a log may hold a template that today's rules refuse (they check a
    command, never a replay).  It replays and shows as it was; a code goes out with the default
    text instead."""
    kept = "{code} is your Sasto code. Log in at sasto.example"
    client = runtime.sandesh.log.get(shop["id"], Client, "client")
    client.update(changes={"otp_template": kept}, actor="an earlier build", at=time.time())  # no check on an event
    runtime.sandesh.log.save(client)
    assert sandesh("client", "show", shop["id"])["otpTemplate"] == kept
    got, _ = received(server, runtime, phones, shop["key"], "9779812300004")
    assert re.fullmatch(r"[0-9]{6} is your Sasto verification code\. It expires in 5 minutes\.", got["text"])
    replays_equal(sandesh)
    sandesh("client", "update", shop["id"], "--otp-template", "")


def test_a_bad_app_hash_is_400_on_app_hash(server, shop):
    for bad in ("short", "FA+9qCX9VSu!", 12345678901, "FA+9qCX9VS-"):
        answer = otp(server, shop["key"], "9779812300003", appHash=bad)
        assert answer.status_code == 400, answer.text
        assert [d["path"] for d in answer.json()["details"]] == [["appHash"]]


def test_the_owner_sets_the_otp_message_on_the_api_clients_page_and_sees_it_as_a_phone_gets_it(
        server, runtime, sandesh, browser, shop):  # noqa: F811
    from playwright.sync_api import expect

    from tests.integration.test_dashboard import add_person, set_password, sign_in

    added = add_person(sandesh, shop["workspace"], "owner@sasto.example")
    page = browser.new_page()
    set_password(page, server, added)
    sign_in(page, server, added["email"])
    page.goto(f"{server.url}/dashboard/w/{shop['workspace']}/clients")
    otp_section = page.locator("section.otp", has=page.get_by_role("heading", name="Sasto"))
    expect(otp_section.locator("pre.sms")).to_have_text("123456 is your Sasto verification code. "
                                                         "It expires in 5 minutes.")
    expect(otp_section).to_contain_text("1 segment · GSM-7 · NPR")

    otp_section.get_by_label("OTP template").fill("{code} बाहेक {name}")
    otp_section.get_by_role("button", name="Save OTP message").click()
    expect(page.locator("section.otp p.error")).to_have_text(re.compile("unknown placeholder {name}"))
    otp_section = page.locator("section.otp", has=page.get_by_role("heading", name="Sasto"))
    otp_section.get_by_label("OTP template").fill("{code}: भेरिफाइ गर्न sasto.example/login")
    otp_section.get_by_role("button", name="Save OTP message").click()
    expect(page.locator("section.otp p.error")).to_have_text(
        "the OTP template holds a web address or domain name ('sasto.example/login'): links are how phishing works")

    # the brand is asked of the operator team, never set here
    row = page.get_by_role("row", name=re.compile("Sasto"))
    expect(row.get_by_label("Edit brand")).to_have_count(0)
    row.get_by_text("Ask for a brand", exact=True).click()
    row.get_by_label("Brand to ask for").fill("sasto.example")
    row.get_by_role("button", name="Ask the operator team").click()
    expect(page.get_by_role("row", name=re.compile("Sasto"))).to_contain_text(
        "the brand holds a web address or domain name ('sasto.example')")

    otp_section = page.locator("section.otp", has=page.get_by_role("heading", name="Sasto"))
    otp_section.get_by_label("OTP template").fill(TEMPLATE)
    otp_section.get_by_label("Web domain for WebOTP").fill("shop.example.com")
    otp_section.get_by_role("button", name="Save OTP message").click()
    otp_section = page.locator("section.otp", has=page.get_by_role("heading", name="Sasto"))
    expect(otp_section.locator("pre.sms")).to_have_text(
        "Sasto: तपाईंको प्रमाणीकरण कोड 123456 हो। यो 5 मिनेटमा सकिन्छ।\n@shop.example.com #123456")
    expect(otp_section).to_contain_text("2 segments · UCS-2 · NPR")
    assert sandesh("client", "show", shop["id"])["otpWebDomain"] == "shop.example.com"

    # a template kept from before the rules: shown as not sent, beside the text that goes instead
    client = runtime.sandesh.log.get(shop["id"], Client, "client")
    client.update(changes={"otp_template": "{code}: sasto.example"}, actor="an earlier build", at=time.time())
    runtime.sandesh.log.save(client)
    page.reload()
    otp_section = page.locator("section.otp", has=page.get_by_role("heading", name="Sasto"))
    expect(otp_section.locator("p.not-sent")).to_have_text(
        "Not sent as set: the OTP template holds a web address or domain name ('sasto.example'): links are how "
        "phishing works. The text above goes instead.")
    expect(otp_section.locator("pre.sms")).to_have_text(
        "123456 is your Sasto verification code. It expires in 5 minutes.\n@shop.example.com #123456")
    sandesh("client", "update", shop["id"], "--otp-template", "", "--otp-web-domain", "")
    page.close()
