"""A workspace's balance alert (docs/operations.md, "Alerts"): an owner sets it on the Overview
(or an operator with `sandesh workspace set-balance-alert`); when the balance falls below it, the
notifier e-mails each owner once, through a real SMTP server (aiosmtpd) on this machine, and the
Overview says so; once more when the balance is topped up again; no one else is e-mailed."""
from __future__ import annotations

import email
import email.policy
import re
from email.message import EmailMessage, Message
from typing import Any, Iterator

import pytest
from aiosmtpd.controller import Controller
from playwright.sync_api import Page, expect

from sandesh.domain.sending import parse_send
from sandesh.workers.notifier import Notifier
from tests.conftest import free_port
from tests.integration.test_dashboard import add_person, browser, page, set_password, sign_in  # noqa: F401


class Mailbox:
    """What the SMTP server was handed: each message with its envelope's recipients."""

    def __init__(self) -> None:
        self.messages: list[tuple[list[str], Message]] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802 - aiosmtpd's name
        self.messages.append((list(envelope.rcpt_tos), email.message_from_bytes(envelope.content, policy=email.policy.default)))
        return "250 OK"

    def to(self, address: str) -> list[Message]:
        return [m for rcpt, m in self.messages if address in rcpt]


@pytest.fixture(scope="module")
def mailbox() -> Iterator[tuple[Mailbox, int]]:
    box, port = Mailbox(), free_port()
    controller = Controller(box, hostname="127.0.0.1", port=port)
    controller.start()
    yield box, port
    controller.stop()


@pytest.fixture(scope="module")
def env(env: dict[str, str], mailbox: tuple[Mailbox, int]) -> dict[str, str]:
    return {**env, "SANDESH_SMTP_URL": f"smtp://127.0.0.1:{mailbox[1]}", "SANDESH_MAIL_FROM": "alerts@sandesh.example"}


@pytest.fixture(scope="module")
def shop(sandesh: Any, server: Any, browser: Any) -> dict[str, Any]:  # noqa: F811
    made = sandesh("workspace", "create", "--name", "Ram Pasal", "--types", "transactional")
    sandesh("workspace", "activate", made["id"])
    sandesh("workspace", "credit", made["id"], "1000")
    client = sandesh("client", "create", "--workspace", made["id"], "--brand", "RamPasal")
    owners = [add_person(sandesh, made["id"], f"owner{n}@rampasal.example") for n in (1, 2)]
    add_person(sandesh, made["id"], "dev@rampasal.example", role="developer")
    context = browser.new_context()
    set_password(context.new_page(), server, owners[0])
    context.close()
    return {"id": made["id"], "client": client["id"]}


def spend(runtime: Any, shop: dict[str, Any], paisa: int) -> None:
    request, problems = parse_send({"to": "9779841000123", "text": "Sale today", "messageType": "transactional"})
    assert not problems
    runtime.sandesh.sending.send(shop["client"], shop["id"], request, paisa)


def test_a_threshold_is_checked(sandesh, shop):
    for bad, why in (("abc", "is not an amount in NPR"), ("-5", "is not an amount in NPR"),
                     ("5.001", "is not an amount in NPR"), ("100000001", "at most NPR 1,00,00,000")):
        refused = sandesh.run("workspace", "set-balance-alert", shop["id"], bad)
        assert refused.returncode != 0 and why in refused.stderr, (bad, refused.stderr)
    assert sandesh("workspace", "set-balance-alert", shop["id"], "off")["balanceAlert"] is None


def test_an_owner_sets_it_and_each_owner_is_emailed_once_when_the_balance_falls_below(
        page: Page, server, runtime, sandesh, shop, mailbox):  # noqa: F811
    box, _ = mailbox
    sign_in(page, server, "owner1@rampasal.example")
    page.goto(f"{server.url}/dashboard/w/{shop['id']}/overview")
    field = page.get_by_label("Balance alert: e-mail the owners when the balance falls below (NPR)")
    field.fill("lots")
    page.get_by_role("button", name="Save the balance alert").click()
    expect(page.locator("#balance_alert_error")).to_contain_text("is not an amount in NPR")
    field.fill("5")
    page.get_by_role("button", name="Save the balance alert").click()
    expect(field).to_have_value("5.00")
    assert sandesh("workspace", "show", shop["id"])["balanceAlert"] == 500
    audit = runtime.sandesh.history.audit(shop["id"])
    assert [line["actor"] for line in audit if line["action"] == "workspace.balance_alert_set"] == [
        "user:owner1@rampasal.example"], "the refused try and `off` while off record nothing"

    notifier = Notifier(runtime)
    notifier.step()
    assert box.messages == [], "NPR 10.00 is above NPR 5.00"
    spend(runtime, shop, 600)
    notifier.step()
    notifier.step()
    [first] = box.to("owner1@rampasal.example")
    [second] = box.to("owner2@rampasal.example")
    assert box.to("dev@rampasal.example") == [] and len(box.messages) == 2
    assert first["Subject"] == "Sandesh: low balance: workspace Ram Pasal, NPR 4.00, below NPR 5.00"
    assert first["From"] == "Sandesh <alerts@sandesh.example>" and second["Subject"] == first["Subject"]
    assert f"/dashboard/w/{shop['id']}/overview" in first.get_content()
    page.reload()
    expect(page.locator(".balance-low")).to_contain_text("The balance has been below NPR 5.00")

    sandesh("workspace", "credit", shop["id"], "2000")
    notifier.step()
    notifier.step()
    ended = [m["Subject"] for m in box.to("owner1@rampasal.example")]
    assert ended == [first["Subject"], "Sandesh: recovered: balance low, Ram Pasal, after 0 s"]
    assert len(box.messages) == 4
    page.reload()
    expect(page.locator(".balance-low")).to_have_count(0)
    [alert] = [a for a in sandesh("alerts", "status")["ended"] if a["subject"] == shop["id"]]
    assert (alert["told"], alert["toldCleared"], alert["failed"]) == (2, 2, 0)


def test_without_an_smtp_server_the_alert_is_recorded_as_not_emailed(runtime, sandesh, shop, mailbox):
    from dataclasses import replace

    box, _ = mailbox
    sandesh("workspace", "set-balance-alert", shop["id"], "100")
    sandesh("clock", "advance", "660")  # past the 10 minutes after its last alert ended
    notifier = Notifier(runtime)
    notifier.settings = replace(runtime.settings, smtp_url=None)
    before = len(box.messages)
    notifier.step()
    [alert] = [a for a in sandesh("alerts", "status")["holding"] if a["subject"] == shop["id"]]
    assert (alert["told"], alert["failed"]) == (0, 2) and len(box.messages) == before


def decoded(message: EmailMessage) -> tuple[str, str]:
    """The subject and the text of a message as its reader sees them."""
    return str(message["Subject"]), message.get_content().replace("\r\n", "\n")


def test_the_notifier_as_it_runs_emails_each_owner_in_the_language_they_chose(runtime, sandesh, env, mailbox):
    import subprocess
    import sys

    from tests.conftest import ROOT
    from tests.helpers import until

    box, _ = mailbox
    made = sandesh("workspace", "create", "--name", "Sita Pasal", "--types", "transactional")["id"]
    sandesh("workspace", "activate", made)
    sandesh("workspace", "credit", made, "1000")
    shop = {"id": made, "client": sandesh("client", "create", "--workspace", made, "--brand", "SitaPasal")["id"]}
    sita = add_person(sandesh, made, "sita@sitapasal.example")
    add_person(sandesh, made, "hari@sitapasal.example")
    runtime.sandesh.people.choose_language(sita["id"], "ne")
    sandesh("workspace", "set-balance-alert", made, "5")
    worker = subprocess.Popen([sys.executable, "-m", "sandesh.scripts.service.cli", "worker", "notifier"], cwd=ROOT,
                              env={**env, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        spend(runtime, shop, 600)
        [nepali] = until(lambda: box.to("sita@sitapasal.example"), timeout=20)
        [english] = until(lambda: box.to("hari@sitapasal.example"))
        subject, text = decoded(nepali)
        assert subject == "Sandesh: कम ब्यालेन्स: कार्यक्षेत्र Sita Pasal, नेरू 4.00, नेरू 5.00 भन्दा कम"
        assert text.startswith(subject + "\n\nकार्यक्षेत्रको ब्यालेन्स, यसका रिचार्जहरू र यो सूचनाको सीमा यसको सारांशमा")
        assert f"/dashboard/w/{made}/overview" in text
        assert decoded(english)[0] == "Sandesh: low balance: workspace Sita Pasal, NPR 4.00, below NPR 5.00"

        sandesh("workspace", "credit", made, "2000")
        ended = until(lambda: (m := box.to("sita@sitapasal.example"))[1:] and m[1], timeout=20)
        assert re.fullmatch(r"Sandesh: ब्यालेन्स फेरि पुग्यो: Sita Pasal, \d+ (सेकेन्ड|मिनेट) पछि", decoded(ended)[0])
        assert decoded(until(lambda: (m := box.to("hari@sitapasal.example"))[1:] and m[1]))[0].startswith(
            "Sandesh: recovered: balance low, Sita Pasal, after ")
    finally:
        worker.terminate()
        worker.wait(timeout=30)


def test_a_subject_is_one_line_whatever_it_is_given(mailbox):
    """A workspace's name is in the subject; a line break in it neither breaks the message nor
    adds a header.  (Last in the module: the others count the mailbox's messages.)"""
    from sandesh.workers import mail

    box, port = mailbox
    assert mail.send(f"smtp://127.0.0.1:{port}", "alerts@sandesh.example", "owner@line.example",
                     "Balance of Acme\nBcc: thief@example.com below NPR 500", "Top it up.") is None
    [told] = box.to("owner@line.example")
    assert told["Subject"] == "Balance of Acme Bcc: thief@example.com below NPR 500" and told["Bcc"] is None
    assert not box.to("thief@example.com")
