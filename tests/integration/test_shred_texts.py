"""Erasing a workspace's texts on an append-only log (crypto-shredding): `sandesh workspace
shred-texts WS` destroys the keys its texts are encrypted under.  Afterwards no text of it can
be read from the log, a read model or a dump of the database, nor from `message history`;
every count, cost and status stays, a replay still equals the live models, other workspaces
keep their texts, and the workspace's next send gets a new key."""
from __future__ import annotations

import itertools
import time

import orjson
import pytest

from sandesh.domain.usecases.dispatch import SKIP
from sandesh.domain.message import TEXT_ERASED
from sandesh.domain.ports import Caller
from sandesh.domain.sending import OtpSendRequest, parse_send
from sandesh.projections import follower
from sandesh.projections.storage import text_keys
from tests.helpers import funded_workspace
from sandesh.workers import webhook_guard
from sandesh.workers.webhooks import WebhookSender
from tests.integration.test_projections import all_read_models
from tests.integration.test_webhooks import deliver, lifecycle

_numbers = itertools.count(20_000_000)
SECRET = "Erase-me"  # in every text of the erased workspace
KEPT = "Keep-me"


@pytest.fixture
def sender(runtime, receiver):
    running = WebhookSender(runtime, http=webhook_guard.session(True, str(receiver.ca_file)))
    yield running
    running.close()


def send(app, client, workspace, text, message_type="transactional"):
    request, problems = parse_send({"to": f"97798{next(_numbers):08d}", "text": text, "messageType": message_type})
    assert not problems
    return app.sending.send(client, workspace, request, 100 * request.segments)


def strings(value):
    """Every string inside an event's state (nested lists and dicts included)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from strings(item)


def readable_texts(runtime):
    """What anyone holding the server key could read from the log: every event decrypted, and
    every sealed text in it opened where its key still exists."""
    app, found = runtime.sandesh, []
    for notification in app.log.recorder.select_notifications(start=1, limit=10**6):
        for text in strings(vars(app.log.mapper.to_domain_event(notification))):
            found.append(text)
            if text.startswith("tk1:"):
                found.append(app.texts.open(text) or "")
    return found


def dump(runtime):
    """Every row of every table but the keys, as text: the log (encrypted) and the read models,
    what a backup of them holds."""
    with runtime.connection() as conn:
        tables = [r["table_name"] for r in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
            " AND table_type = 'BASE TABLE' AND table_name <> 'text_keys'").fetchall()]
        return "\n".join(r["row"] for t in tables for r in conn.execute(f'SELECT t::text AS row FROM "{t}" t').fetchall())


def test_shredding_erases_every_text_of_one_workspace_and_keeps_everything_else(runtime, receiver, sender, sandesh):
    app = runtime.sandesh
    erased, kept = funded_workspace(app, "Erased", 10**6, "t"), funded_workspace(app, "Kept", 10**6, "t")
    client, _, _ = app.operators.create_client(erased, "Erased", receiver.url("/erase"), 1000, "t")
    other, _, _ = app.operators.create_client(kept, "Kept", None, 1000, "t")
    delivered = send(app, client.id, erased, f"{SECRET} order 4411 shipped")
    lifecycle(runtime, delivered, ("submit",), ("accept",), ("report", 0))
    waiting = send(app, client.id, erased, f"{SECRET} order 4412 is waiting")
    caller = Caller(client_id=client.id, workspace_id=erased, brand="Erased", workspace_status="active",
                    rates={"otp": 150}, allowed_types=["transactional", "otp"], sms_enabled=True, has_route=True, promo_hours=None)
    code = app.otp.send_otp(caller, OtpSendRequest(f"97798{next(_numbers):08d}", "login", None), "198.51.100.7")
    part = app.dispatch.store_reply_part(None, "sim_test", delivered.to[3:], None, 1, 1, f"{SECRET} reply 4413")
    reply = app.dispatch.finish_reply(part.id, app.history.message(delivered.id))
    other_message = send(app, other.id, kept, f"{KEPT} order 4414")
    deliver(sender)
    inbound = [orjson.loads(r.body) for r in receiver.wait("/erase", 3) if b"message.inbound" in r.body]
    assert [i["text"] for i in inbound] == [f"{SECRET} reply 4413"]  # delivered while the key existed
    assert any(SECRET in t for t in readable_texts(runtime))  # before: the texts can be read
    assert SECRET not in dump(runtime) and KEPT not in dump(runtime)  # never in clear in the database
    follower.catch_up(runtime)
    before = all_read_models(runtime)

    done = sandesh("workspace", "shred-texts", erased)
    assert done == {"workspaceId": erased, "keysDestroyed": 1}
    time.sleep(text_keys.KEY_CACHE_SECONDS + 0.1)  # what this process had read of the key, it forgets within 1 s

    # no text of the workspace can be read from the log, even with the server key
    assert not [t for t in readable_texts(runtime) if SECRET in t]
    assert SECRET not in dump(runtime)
    # history shows the text as null; every other field stays
    history = sandesh("message", "history", delivered.id)["events"]
    [accepted] = [e for e in history if e["type"] == "accepted"]
    [answer] = [e for e in history if e["type"] == "inbound"]
    assert (accepted["text"], accepted["cost"], answer["text"], answer["replyId"]) == (None, 100, None, reply.id)
    assert "delivered" in [e["type"] for e in history]
    # counts, costs and statuses: the read models did not change
    follower.catch_up(runtime)
    after = all_read_models(runtime)
    added = [line for line in after["audit_lines"] if line not in before["audit_lines"]]
    assert [line["action"] for line in added] == ["workspace.texts_shredded"]  # the erasure's own line alone
    assert {**after, "audit_lines": None} == {**before, "audit_lines": None}
    # the other workspace keeps its texts
    assert app.texts.open(app.history.message(other_message.id).text) == f"{KEPT} order 4414"
    assert any(KEPT in t for t in readable_texts(runtime))
    # audited
    actions = [orjson.loads(x) for x in sandesh.run("audit", "--workspace", erased).stdout.splitlines()]
    assert [a for a in actions if a["action"] == "workspace.texts_shredded"][0]["details"] == {"keys": 1}
    # a replay afterwards still equals the live models
    assert sandesh.run("replay").returncode == 0
    assert all_read_models(runtime) == after
    assert sandesh("replay", "--check")["ok"] is True
    # a message still waiting cannot go out any more: failed as erased, and refunded
    assert app.dispatch.submit_message(waiting.id, "sim_test").action == SKIP
    failed = app.history.message(waiting.id)
    assert (failed.status, failed.error) == ("failed", TEXT_ERASED)
    with runtime.connection() as conn:
        refunded = conn.execute("SELECT balance FROM workspaces WHERE id = %s", (erased,)).fetchone()["balance"]
    assert refunded == before_balance(before, erased) + waiting.cost
    # the next send gets a new key, and can be read
    fresh = send(app, client.id, erased, "A new text after erasure")
    sealed = app.history.message(fresh.id).text
    assert sealed.startswith("tk1:") and sealed.split(":")[1] != app.history.message(delivered.id).text.split(":")[1]
    assert app.texts.open(sealed) == "A new text after erasure"
    # the code's message was sealed under the same key: it is gone too
    otp_text = app.history.message(code.message.id).text
    assert otp_text.startswith("tk1:") and app.texts.open(otp_text) is None


def before_balance(models, workspace_id):
    [row] = [r for r in models["workspaces"] if r["id"] == workspace_id]
    return row["balance"]


def test_an_unknown_workspace_is_refused(sandesh):
    done = sandesh.run("workspace", "shred-texts", "ws_nope")
    assert done.returncode == 2 and "ws_nope" in done.stderr
