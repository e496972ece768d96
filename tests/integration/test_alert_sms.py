"""Alerts by SMS through the pool itself (docs/operations.md, "Alerts"): two emulated modems on
pseudo-terminals, driven by a real dispatcher; one goes silent, and the notifier texts the
operator's number once, through the other SIM, after the condition's delay, charged to no
workspace; and once more, "recovered", when the modem answers again."""
from __future__ import annotations

from typing import Any, Iterator

import pytest

from sandesh.projections import sim_health
from sandesh.workers.notifier import Notifier
from tests.conftest import running_dispatcher
from tests.helpers import until

OPERATOR = "9779812345678"


@pytest.fixture(scope="module")
def env(env: dict[str, str]) -> dict[str, str]:
    """A route window of 6 s: each SIM is asked how it is every 2 s (workers/dispatcher.py)."""
    return {**env, "SANDESH_ROUTE_WINDOW": "6"}


@pytest.fixture(scope="module")
def modems(runtime: Any) -> Iterator[Any]:
    from sandesh.scripts.service.commands import register_emulated
    from sandesh.scripts.service.emulator import Emulator

    with Emulator(sims=2, report_delay=0.05) as emulator:
        register_emulated(runtime, emulator.devices(), "test")
        with running_dispatcher(runtime):
            yield emulator


def usable(runtime: Any) -> set[str]:
    with runtime.connection() as conn:
        pool = sim_health.pool(conn, runtime.clock.now(), runtime.settings.route_window)
    return {sim["name"] for sim in pool if sim["usable"]}


def texts_to(modems: Any, number: str) -> list[dict[str, Any]]:
    return [m for m in modems.received if m["to"].lstrip("+") == number]


def test_a_bad_sms_destination_is_refused(sandesh):
    refused = sandesh.run("alerts", "add", "sms:+15551234567")
    assert refused.returncode != 0 and "is not an SMS destination" in refused.stderr


def test_a_silent_modem_texts_the_operator_once_through_the_other_sim_and_once_when_it_answers(
        runtime, sandesh, modems):
    added = sandesh("alerts", "add", f"sms:{OPERATOR}", "--only", "sim_unusable")
    assert added["url"] == f"sms:+{OPERATOR}"
    sandesh("alerts", "tune", "sim_unusable", "--after", "2")
    until(lambda: usable(runtime) == {"emu-1", "emu-2"}, timeout=60)
    notifier = Notifier(runtime)
    notifier.step()
    assert texts_to(modems, OPERATOR) == []

    modems.modem("emu-1").silence()
    until(lambda: "emu-1" not in usable(runtime), timeout=30, every=0.2)
    notifier.step()
    assert not sandesh("alerts", "status")["holding"], "it must hold for its delay first"
    sandesh("clock", "advance", "3")  # within the route window: the other SIM stays a route
    [alert] = until(lambda: notifier.step() or sandesh("alerts", "status")["holding"], timeout=10, every=0.5)
    assert alert["subject"] == "emu-1" and alert["text"].startswith("Sandesh: SIM emu-1 unusable: unreachable")
    [message_id] = alert["messages"]
    [texted] = until(lambda: texts_to(modems, OPERATOR), timeout=30, every=0.2)
    assert texted["sim"] == "emu-2" and texted["text"] == alert["text"]
    history = sandesh("message", "history", message_id)
    assert (history["workspaceId"], history["events"][0]["cost"]) == ("operators", 0), "charged to no workspace"
    for _ in range(3):  # none between
        notifier.step()
    assert len(texts_to(modems, OPERATOR)) == 1

    modems.modem("emu-1").silence(0)
    until(lambda: "emu-1" in usable(runtime), timeout=60, every=0.2)
    until(lambda: notifier.step() or not sandesh("alerts", "status")["holding"], timeout=10, every=0.5)
    texted = until(lambda: len(got := texts_to(modems, OPERATOR)) == 2 and got, timeout=30, every=0.2)
    assert texted[1]["text"].startswith("Sandesh: recovered: SIM emu-1 unusable, after ")
    assert texted[1]["sim"] == "emu-2", "the SIM it is about is usable again, and the other is preferred"
    [ended] = [a for a in sandesh("alerts", "status")["ended"] if a["id"] == alert["id"]]
    assert (ended["told"], ended["toldCleared"], len(ended["messages"])) == (1, 1, 2)
    for _ in range(3):
        notifier.step()
    assert len(texts_to(modems, OPERATOR)) == 2


def test_alerts_test_texts_the_operator(sandesh, modems):
    told = sandesh("alerts", "test")["told"]
    assert [t["error"] for t in told] == [None] and told[0]["messageId"].startswith("msg_")
    until(lambda: [m for m in texts_to(modems, OPERATOR) if m["text"] == "Sandesh: a test alert"], timeout=30)


def test_the_alerts_and_their_sms_survive_a_replay(sandesh, modems):
    before = sandesh("alerts", "status")
    assert any(alert["messages"] for alert in before["ended"])
    sandesh("replay", "registry")
    after = sandesh("alerts", "status")
    assert (after["holding"], after["ended"]) == (before["holding"], before["ended"])
    assert sandesh("replay", "--check", "registry")["ok"] is True
