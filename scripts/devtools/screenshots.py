"""The dashboard's pages as a new owner sees them, for docs/dashboard.md.

    .venv/bin/python -m scripts.devtools.screenshots LINK [--email E] [--out docs/dashboard] [--operator]

LINK is the set-password link `sandesh up` prints for the demo owner. It sets the password,
signs in, creates a client, sends two messages with its key, sends a campaign from an uploaded
CSV file, keeps a contact list and a template, and saves a PNG of each page; then the Overview
and the Send page again as a phone shows them (360 by 740); then the Overview, Send, the
campaign and Messages in Nepali (`ne-*.png`), at desktop and phone width, and English again.
With --operator, LINK and --email are a member of the operator team's, and the pages are the
operator team's (scripts/devtools/screenshots_ops.py).
Needs Playwright (the test extras), Chromium at /usr/bin/chromium, and a Devanagari font for the
Nepali texts (Debian's fonts-lohit-deva).
"""
from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import requests

PASSWORD = "a demo password for screenshots"
PAGES = (("overview", "Overview"), ("clients", "API clients"), ("messages", "Messages"), ("webhooks", "Webhooks"),
         ("audit", "Audit log"), ("opt-outs", "Opt-outs"), ("people", "People"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="screenshots", description=__doc__.split("\n\n")[0])
    parser.add_argument("link", help="the set-password link `sandesh up` printed")
    parser.add_argument("--email", default="owner@demo.example", help="the person the link is for")
    parser.add_argument("--out", default="docs/dashboard", help="where the PNGs go (default docs/dashboard)")
    parser.add_argument("--operator", action="store_true", help="the operator team's pages")
    args = parser.parse_args(argv)
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sys.stderr.write("screenshots needs Playwright: .venv/bin/pip install -e '.[test]'\n")
        return 2
    parts = urlsplit(args.link)
    base = f"{parts.scheme}://{parts.netloc}"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1200, "height": 800})
        if args.operator:
            from .screenshots_ops import take

            take(page, base, args.link, args.email, PASSWORD, out)
            browser.close()
            return 0
        page.goto(args.link)
        if page.get_by_label("Password").count():  # not when the link was used by an earlier run
            page.get_by_label("Password").fill(PASSWORD)
            page.get_by_role("button", name="Set password").click()
        page.goto(base + "/dashboard/sign-in")
        page.screenshot(path=str(out / "sign-in.png"))
        page.get_by_label("Email").fill(args.email)
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        workspace = re.search(r"/dashboard/w/([^/]+)/", page.url)
        if workspace is None:
            sys.stderr.write(f"signing in did not reach a workspace's page: {page.url}\n")
            return 1
        root = f"{base}/dashboard/w/{workspace.group(1)}"
        page.goto(root + "/clients")
        page.get_by_role("button", name="Create client").click()  # its brand: the workspace's name
        key = page.get_by_role("status").locator("code").first.inner_text()
        page.screenshot(path=str(out / "client-created.png"), full_page=True)
        for number in ("9779841000001", "9779801000002"):
            requests.post(base + "/v1/sms/send", json={"to": number, "text": "Namaste from the dashboard"},
                          headers={"x-api-key": key}, timeout=10).raise_for_status()
        time.sleep(4)  # the emulated modems deliver them
        for path, _ in PAGES:
            page.goto(f"{root}/{path}")
            page.screenshot(path=str(out / f"{path}.png"), full_page=True)
        page.goto(root + "/messages")
        page.locator("a[href*='/messages/msg_']").first.click()
        page.screenshot(path=str(out / "timeline.png"), full_page=True)
        campaign = sending(page, root, out)
        phone = browser.new_context(viewport={"width": 360, "height": 740}, is_mobile=True, has_touch=True,
                                    device_scale_factor=2).new_page()
        phone.goto(base + "/dashboard/sign-in")
        phone.get_by_label("Email").fill(args.email)
        phone.get_by_label("Password").fill(PASSWORD)
        phone.get_by_role("button", name="Sign in").click()
        phone.goto(root + "/overview")
        phone.screenshot(path=str(out / "phone-overview.png"))
        phone.get_by_text("Menu", exact=True).tap()
        phone.screenshot(path=str(out / "phone-menu.png"))
        phone.goto(root + "/send")
        phone.screenshot(path=str(out / "phone-send.png"), full_page=True)
        in_nepali(page, phone, root, campaign, out)
        browser.close()
    print(f"screenshots in {out}: sign-in, client-created, timeline, " + ", ".join(p for p, _ in PAGES)
          + ", send, send-preview, campaign, contacts, contact-list, templates, phone-overview, phone-menu, phone-send"
          + ", and ne-overview, ne-send, ne-campaign, ne-messages, ne-phone-overview, ne-phone-send")
    return 0


def in_nepali(page: Any, phone: Any, root: str, campaign: str, out: Path) -> None:
    """The person chooses नेपाली (kept with them: the phone's session shows it too), the pages
    are saved, and English is chosen again, so that the next run's labels are English."""
    page.goto(root + "/overview")
    page.get_by_role("button", name="नेपाली").click()
    for path, name in (("overview", "ne-overview"), ("send", "ne-send"), ("messages", "ne-messages")):
        page.goto(f"{root}/{path}")
        page.screenshot(path=str(out / f"{name}.png"), full_page=True)
    page.goto(campaign)
    page.screenshot(path=str(out / "ne-campaign.png"), full_page=True)
    for path in ("overview", "send"):
        phone.goto(f"{root}/{path}")
        phone.screenshot(path=str(out / f"ne-phone-{path}.png"), full_page=path == "send")
    page.get_by_role("button", name="English").click()


def sending(page: Any, root: str, out: Path) -> str:
    """A template, a contact list from a CSV file, and a campaign to it: each page saved; the
    campaign's address."""
    page.goto(root + "/templates")
    page.get_by_label("Name").fill("Holiday")
    page.get_by_label("Text").fill("नमस्ते {नाम}, भोलि बिदा छ। Tomorrow is a holiday.")
    page.get_by_role("button", name="Save the template").click()
    page.screenshot(path=str(out / "templates.png"), full_page=True)
    listed = out / "parents.csv"
    listed.write_text("नाम,mobile,class\nराम,9841000003,5\nसीता,+977 980-100-0004,6\nहरि,12345,6\n", encoding="utf-8-sig")
    page.goto(root + "/contacts")
    page.get_by_label("Name").fill("Parents of class 5 and 6")
    page.get_by_label("Upload a list").set_input_files(str(listed))
    page.get_by_role("button", name="Save the list").click()
    page.screenshot(path=str(out / "contact-list.png"), full_page=True)
    page.goto(root + "/contacts")
    page.screenshot(path=str(out / "contacts.png"), full_page=True)
    page.goto(root + "/send")
    page.get_by_label("Upload a list").set_input_files(str(listed))
    page.get_by_label("Template").select_option(label="Holiday")
    page.wait_for_timeout(800)  # the hints under the message
    page.screenshot(path=str(out / "send.png"), full_page=True)
    page.get_by_role("button", name="Preview").click()
    page.screenshot(path=str(out / "send-preview.png"), full_page=True)
    page.get_by_role("button", name=re.compile(r"^Send \d+ messages?$")).click()
    time.sleep(4)  # the emulated modems deliver them
    page.reload()
    page.screenshot(path=str(out / "campaign.png"), full_page=True)
    listed.unlink()
    return page.url.split("?")[0]


if __name__ == "__main__":
    sys.exit(main())
