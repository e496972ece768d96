"""The operator team's pages as a new operator sees them, for docs/dashboard.md
(`scripts.devtools.screenshots LINK --operator --email E`).

LINK is the set-password link `sandesh user add --operator` printed, against `scripts/up.sh`'s
demo (system clock). It sets the password, signs in, sets up an authenticator app (the code
computed from the key the page shows), creates and credits a workspace, and saves a PNG of
each page. Needs pyotp (the test extras).
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any


def take(page: Any, base: str, link: str, email: str, password: str, out: Path) -> None:
    import pyotp

    page.goto(link)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Set password").click()
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(password)
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
    for name, path in (("ops-workspaces", "workspaces"), ("ops-sims", "sims"), ("ops-traffic", "traffic"),
                       ("ops-audit", "audit"), ("ops-people", "people")):
        page.goto(f"{base}/dashboard/ops/{path}")
        if path == "sims":
            time.sleep(4)  # one refresh of the page by its script
        page.screenshot(path=str(out / f"{name}.png"), full_page=True)
    page.goto(f"{base}/dashboard/ops/sims")
    page.locator("table.sims tbody th a").first.click()
    page.screenshot(path=str(out / "ops-sim.png"), full_page=True)
    print(f"screenshots in {out}: ops-workspaces, ops-workspace, ops-sims, ops-sim, ops-traffic, ops-audit, ops-people")
