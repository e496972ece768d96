"""The operator team's pages as a new operator sees them, for docs/dashboard.md.

    .venv/bin/sandesh user add --email ops@demo.example --name Ops --operator
    .venv/bin/python -m sandesh.scripts.screenshots_ops LINK [--email E] [--out docs/dashboard]

LINK is the set-password link `user add` printed, against `scripts/up.sh`'s demo (system
clock). It sets the password, signs in, sets up an authenticator app (the code computed from
the key the page shows), creates and credits a workspace, and saves a PNG of each page.
Needs Playwright and pyotp (the test extras) and Chromium at /usr/bin/chromium.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

PASSWORD = "a demo password for screenshots"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="screenshots_ops", description=__doc__.split("\n\n")[0])
    parser.add_argument("link", help="the set-password link `sandesh user add --operator` printed")
    parser.add_argument("--email", default="ops@demo.example", help="the operator the link is for")
    parser.add_argument("--out", default="docs/dashboard", help="where the PNGs go (default docs/dashboard)")
    args = parser.parse_args(argv)
    try:
        import pyotp
        from playwright.sync_api import sync_playwright
    except ImportError:
        sys.stderr.write("screenshots_ops needs Playwright and pyotp: .venv/bin/pip install -e '.[test]'\n")
        return 2
    parts = urlsplit(args.link)
    base = f"{parts.scheme}://{parts.netloc}"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1200, "height": 800})
        page.goto(args.link)
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Set password").click()
        page.get_by_label("Email").fill(args.email)
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        secret = page.locator("code.secret").inner_text()
        page.get_by_label("Authentication code").fill(pyotp.TOTP(secret).now())
        page.get_by_role("button", name="Verify").click()
        page.get_by_label("Name").fill("Himal Tea")
        page.get_by_role("checkbox", name="promotional").uncheck()
        page.get_by_label("Rate for otp").fill("1.50")
        page.get_by_role("button", name="Create workspace").click()
        page.get_by_label("Amount (NPR)").fill("5000")
        page.get_by_label("Note").fill("invoice 2026-117")
        page.get_by_role("button", name="Credit").click()
        page.screenshot(path=str(out / "ops-workspace.png"), full_page=True)
        page.goto(base + "/dashboard/ops/workspaces")
        page.screenshot(path=str(out / "ops-workspaces.png"), full_page=True)
        page.goto(base + "/dashboard/ops/sims")
        time.sleep(4)  # one refresh of the page by its script
        page.screenshot(path=str(out / "ops-sims.png"), full_page=True)
        page.goto(base + "/dashboard/ops/traffic")
        page.screenshot(path=str(out / "ops-traffic.png"), full_page=True)
        browser.close()
    print(f"screenshots in {out}: ops-workspaces, ops-workspace, ops-sims, ops-traffic")
    return 0


if __name__ == "__main__":
    sys.exit(main())
