"""A reply through a HiLink stick or an Android phone reaches the client's webhook once, even
across restarts of the workers: the reply lands on the device while no dispatcher runs and the
webhook sender was killed; the stick's delete of it fails once (as a crash between the record and
the delete would leave it), so it is read again; a real `sandesh worker webhooks` posts it to a
real HTTPS receiver; the workers restart once more and nothing is posted twice."""
from __future__ import annotations

import time
from typing import Any, Iterator

import orjson
import pytest

from sandesh.scripts.service.android_emulator import AndroidPhone
from sandesh.scripts.service.hilink_emulator import HilinkDevice
from tests import contract
from tests.conftest import running_dispatcher, wait_for_status
from tests.helpers import funded_workspace, send, sims, until
from tests.integration.test_keywords import Worker


@pytest.fixture(scope="module")
def shop(runtime: Any, sandesh: Any, receiver: Any) -> tuple[str, str]:
    """(workspace, client id): a client whose webhook is the receiver's."""
    workspace = funded_workspace(runtime.sandesh, "Device replies", 100_000)
    client = sandesh("client", "create", "--workspace", workspace, "--brand", "Pasal",
                     "--webhook-url", receiver.url("/pasal/hooks"))
    return workspace, client["id"]


@pytest.fixture
def device(request: Any) -> Iterator[Any]:
    made = HilinkDevice(send_seconds=0.05) if request.param == "hilink" else AndroidPhone()
    with made as running:
        contract.devices.add(f"127.0.0.1:{running.port}")
        yield running


def inbound_posts(receiver: Any, text: str) -> list[dict[str, Any]]:
    bodies = [orjson.loads(r.body) for r in receiver.received if r.path == "/pasal/hooks"]
    return [b for b in bodies if b.get("type") == "message.inbound" and b.get("text") == text]


@pytest.mark.parametrize("device", ["hilink", "android"], indirect=True)
def test_a_reply_reaches_the_clients_webhook_once_across_restarts_of_the_workers(
        runtime, sandesh, env, receiver, shop, device):
    name = f"replies-{type(device).__name__.lower()}"
    sandesh("sim", "add", "--name", name, "--port", device.port_url())
    webhooks = Worker(env, receiver)
    try:
        with running_dispatcher(runtime) as dispatcher:
            dispatcher.heartbeat_seconds = 0.3
            until(lambda: sims(sandesh)[name]["state"] == "active", timeout=30)
            message = send(runtime, shop, "Your order is ready")
            wait_for_status(runtime, [message.id], {"delivered"})
        webhooks.kill()

        text = f"{name}: धन्यवाद, भोलि आउँछु"
        device.receive("+" + message.to, text)  # while no worker runs
        if isinstance(device, HilinkDevice):
            device.fail_next("sms/delete-sms", 100001)  # read and recorded, then still on the stick
        with running_dispatcher(runtime) as dispatcher:
            dispatcher.heartbeat_seconds = 0.3
            [reply] = until(lambda: [r for r in sandesh("inbound", "list")["replies"] if r["text"] == text],
                            timeout=30)
            assert reply["inReplyTo"] == message.id
            if isinstance(device, HilinkDevice):
                until(lambda: not device.inbox, timeout=30)  # read again, deleted at last
            time.sleep(1.0)  # a few more looks at the device
        webhooks.start()
        [posted] = until(lambda: inbound_posts(receiver, text), timeout=30)
        assert (posted["id"], posted["inReplyTo"]) == (reply["id"], message.id)

        webhooks.kill()
        webhooks.start()
        with running_dispatcher(runtime) as dispatcher:  # the workers restarted once more
            dispatcher.heartbeat_seconds = 0.3
            time.sleep(2.0)
        assert len(inbound_posts(receiver, text)) == 1
        assert len([r for r in sandesh("inbound", "list")["replies"] if r["text"] == text]) == 1
    finally:
        webhooks.process.terminate()
        webhooks.process.wait(timeout=30)
        sandesh("sim", "disable", name)
