"""Keyword services (docs/api.md, "Keyword services"), end to end: an SMS whose first word is a
client's keyword, from a number nothing was ever sent to, reaches emulated modems driven by a
real dispatcher; a real `sandesh worker webhooks` posts it to the client's webhook and calls its
reply URL (a real HTTPS receiver), and the URL's answer reaches the phone once, charged as a
send.  A failing URL gives the default reply; a keyword is unique across the pool."""
from __future__ import annotations

import subprocess
import sys
import time
from urllib.parse import parse_qs

import orjson
import pytest

from sandesh.projections import sim_health
from tests.conftest import ROOT
from tests.helpers import funded_workspace, until


class Worker:
    """A real `sandesh worker webhooks`, which a test may kill and start again."""

    def __init__(self, env, receiver):
        self.env = {**env, "REQUESTS_CA_BUNDLE": str(receiver.ca_file), "PYTHONPATH": str(ROOT)}
        self.start()

    def start(self) -> None:
        self.process = subprocess.Popen([sys.executable, "-m", "sandesh.scripts.service.cli", "worker", "webhooks"],
                                        cwd=ROOT, env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(timeout=10)


@pytest.fixture(scope="module")
def webhooks_worker(env, receiver, runtime):
    worker = Worker(env, receiver)
    yield worker
    worker.process.terminate()
    worker.process.wait(timeout=30)


@pytest.fixture(scope="module")
def school(runtime, sandesh, receiver, phones, webhooks_worker):
    """A workspace with NPR 10.00 and its client, with a webhook, the keyword RESULT and a reply URL."""
    workspace = funded_workspace(runtime.sandesh, "School", 1000)
    made = sandesh("client", "create", "--workspace", workspace, "--brand", "School",
                   "--webhook-url", receiver.url("/school/hooks"))
    shown = sandesh("client", "update", made["id"], "--keyword", "result", "--reply-url",
                    receiver.url("/school/results"), "--default-reply", "Results are not out yet.")
    assert (shown["keywords"], shown["defaultReply"]) == (["RESULT"], "Results are not out yet.")
    return {"workspace": workspace, "id": made["id"]}


def texted(runtime, phones, number: str, text: str) -> str:
    """`text` from `number` to a SIM of the pool that is usable now (a modem whose port another
    process still holds is not, until it lets go); the SIM's name."""
    def usable() -> list[str]:
        with runtime.connection() as conn:
            pool = sim_health.pool(conn, runtime.clock.now(), runtime.settings.route_window)
        return sorted(sim["name"] for sim in pool if sim["usable"] and sim["name"].startswith("emu-"))

    name = until(usable, timeout=120, every=0.2)[0]
    phones.modem(name).inject_inbound(number, text)
    return name


def reached(phones, number: str, count: int = 1, timeout: float = 30.0) -> list[str]:
    """The texts the phone of `number` received, once there are `count`."""
    return until(lambda: len(got := [m["text"] for m in phones.received if m["to"].lstrip("+") == number.lstrip("+")])
                 >= count and got, timeout)


def balance(runtime, workspace: str) -> int:
    with runtime.connection() as conn:
        return conn.execute("SELECT balance FROM workspaces WHERE id = %s", (workspace,)).fetchone()["balance"]


def test_a_keyword_sms_reaches_the_webhook_and_the_reply_url_whose_answer_reaches_the_phone_once(
        runtime, receiver, phones, school):
    receiver.answer("/school/results", (200, "Roll 1234: passed, GPA 3.6\n"))
    sim = texted(runtime, phones, "+9779841999001", "result 1234")
    [call] = receiver.wait("/school/results", 1, timeout=30)
    assert parse_qs(call.body.decode()) == {"from": ["+9779841999001"], "to": [sim], "text": ["result 1234"],
                                            "keyword": ["RESULT"]}
    [hook] = receiver.wait("/school/hooks", 1, timeout=30)
    event = orjson.loads(hook.body)
    assert (event["type"], event["from"], event["text"]) == ("message.inbound", "+9779841999001", "result 1234")
    assert "inReplyTo" not in event
    assert reached(phones, "9779841999001") == ["Roll 1234: passed, GPA 3.6"]
    assert until(lambda: balance(runtime, school["workspace"]) == 900)  # one transactional segment
    time.sleep(2)  # nothing more comes: neither a second call nor a second answer
    assert len(receiver.at("/school/results")) == 1 and reached(phones, "9779841999001") == \
        ["Roll 1234: passed, GPA 3.6"]
    with runtime.connection() as conn:
        assert conn.execute("SELECT service FROM replies WHERE id = %s", (event["id"],)).fetchone()["service"] is None


def test_a_failing_reply_url_gives_the_default_reply(runtime, receiver, phones, school):
    receiver.answer("/school/results", (500, "oops"))
    texted(runtime, phones, "+9779841999002", "RESULT 99")
    receiver.wait("/school/results", 2, timeout=30)
    assert reached(phones, "9779841999002") == ["Results are not out yet."]


def test_an_answer_longer_than_one_sms_is_not_sent_and_the_default_reply_is(runtime, receiver, phones, school):
    receiver.answer("/school/results", (200, "x" * 161))
    texted(runtime, phones, "+9779841999003", "Result 7")
    receiver.wait("/school/results", 3, timeout=30)
    assert reached(phones, "9779841999003") == ["Results are not out yet."]


def test_an_sms_whose_first_word_is_no_keyword_calls_nothing(runtime, receiver, phones, school):
    texted(runtime, phones, "+9779841999004", "resulting in nothing")
    time.sleep(3)
    assert len(receiver.at("/school/results")) == 3
    assert not [m for m in phones.received if m["to"].endswith("9841999004")]


def test_a_keyword_already_taken_is_refused(runtime, sandesh, school):
    workspace = funded_workspace(runtime.sandesh, "Other school", 0)
    other = sandesh("client", "create", "--workspace", workspace, "--brand", "Other")
    taken = sandesh.run("client", "update", other["id"], "--keyword", "Result")
    assert taken.returncode != 0 and f"RESULT is client {school['id']}'s already" in taken.stderr
    reserved = sandesh.run("client", "update", other["id"], "--keyword", "stop")
    assert reserved.returncode != 0 and "STOP is a word Sandesh answers itself" in reserved.stderr
    bad = sandesh.run("client", "update", other["id"], "--keyword", "two words")
    assert bad.returncode != 0 and "must be one word" in bad.stderr
    assert sandesh("client", "update", other["id"], "--keyword", "marks")["keywords"] == ["MARKS"]
    assert sandesh("client", "update", other["id"], "--no-keyword", "MARKS")["keywords"] == []


def test_a_sender_killed_while_the_url_answers_gives_the_default_reply_once_after_its_restart(
        runtime, sandesh, receiver, phones, school, webhooks_worker):
    receiver.answer("/school/results", ("hang", 6, 200, "Too late to be sent"))
    texted(runtime, phones, "+9779841999005", "result 5")
    receiver.wait("/school/results", 4, timeout=30)
    webhooks_worker.kill()  # kill -9 while the URL is answering: its answer is never read
    webhooks_worker.start()
    time.sleep(2)
    assert not [m for m in phones.received if m["to"].endswith("9841999005")], "asked, not yet given up on"
    sandesh("clock", "advance", "31")  # past the time a sender that asked must have answered in
    assert reached(phones, "9779841999005") == ["Results are not out yet."]
    time.sleep(7)  # the first URL's answer came and went: nothing more is sent, and the URL is not called again
    assert len(receiver.at("/school/results")) == 4
    assert [m["text"] for m in phones.received if m["to"].endswith("9841999005")] == ["Results are not out yet."]
