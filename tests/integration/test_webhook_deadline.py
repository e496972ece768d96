"""Every webhook attempt ends by its deadline (docs/design.md, "Webhook sender"), against
receivers on real sockets that drip their answer or stream one without end.  A module of its
own: the deliveries it leaves waiting are no other test's."""
from __future__ import annotations

import itertools
import socket
import time

import pytest

from sandesh.domain.sending import parse_send
from sandesh.domain.webhook import TIMEOUT
from sandesh.workers import webhook_guard
from sandesh.workers.webhook_schedule import LEASE
from sandesh.workers.webhooks import WebhookSender
from tests.helpers import funded_workspace
from tests.integration.test_webhooks import lifecycle
from tests.receiver import Dripping

_numbers = itertools.count(30_000_000)


@pytest.fixture(scope="module")
def workspace(runtime):
    return funded_workspace(runtime.sandesh, "Deadlines", 10**7, "t")


@pytest.fixture
def sender(runtime, receiver):
    running = WebhookSender(runtime, http=webhook_guard.session(True, str(receiver.ca_file)))
    yield running
    running.close()


@pytest.mark.parametrize("mode, outcome", [("head", "no answer within 10 s"), ("body", 200), ("endless", 200)])
def test_an_attempt_ends_by_its_deadline_however_the_receiver_drips_or_streams(runtime, workspace, receiver, sender,
                                                                              mode, outcome):
    """Connecting, TLS, the head and the body read together end within 10 s (the interface's
    "2xx within 10 seconds"); of an answer's body at most 64 KiB is read.  A 200 whose head came
    in time is delivered.  With a timeout per read, a receiver dripping a byte every 5 s held its
    attempt, and its thread, for as long as it liked (docs/design.md, "Webhook sender")."""
    dripping = Dripping(receiver.ca, mode)
    try:
        client, _, _ = runtime.sandesh.operators.create_client(workspace, "Dripping", dripping.url("/d"), 1000, "t")
        request, _ = parse_send({"to": f"97798{next(_numbers):08d}", "text": "drip"})
        message = runtime.sandesh.sending.send(client.id, workspace, request, 100)
        lifecycle(runtime, message, ("fail", "x"))
        sender.follow()
        with runtime.connection() as conn:
            [delivery_id] = [r["id"] for r in conn.execute("SELECT id FROM webhook_deliveries WHERE client_id = %s",
                                                            (client.id,))]
        started = time.monotonic()
        sender.attempt(delivery_id)
        took = time.monotonic() - started
        with runtime.connection() as conn:
            [row] = conn.execute("SELECT * FROM webhook_deliveries WHERE client_id = %s", (client.id,)).fetchall()
        attempt = row["history"][-1]
        assert took < TIMEOUT + 1.0, took
        if outcome == 200:
            assert (attempt["statusCode"], row["state"]) == (200, "delivered"), attempt
        else:
            assert attempt["statusCode"] is None and attempt["error"] == outcome, attempt
        if mode == "endless":  # 64 KiB read, the connection shut: the stream stops at once, not at the deadline
            assert took < 2.0, took
            deadline = time.monotonic() + 2
            while not dripping.closed_at:
                assert time.monotonic() < deadline, "the connection stayed open"
                time.sleep(0.05)
    finally:
        dripping.close()




class Silent:
    """`count` loopback addresses whose port never answers a connect: a listener with a full
    backlog drops every further SYN, as a host behind a black-holing firewall does."""

    def __init__(self, count: int):
        self.listeners, self.fillers, self.addresses = [], [], [f"127.0.0.{n}" for n in range(2, 2 + count)]
        self.port = 0
        for address in self.addresses:
            listener = socket.socket()
            listener.bind((address, self.port))
            self.port = listener.getsockname()[1]  # one port on every address
            listener.listen(0)
            self.listeners.append(listener)
            for _ in range(3):
                filler = socket.socket()
                filler.setblocking(False)
                try:
                    filler.connect((address, self.port))
                except BlockingIOError:
                    pass
                self.fillers.append(filler)

    def close(self) -> None:
        for sock in self.listeners + self.fillers:
            sock.close()


@pytest.mark.parametrize("resolver", ["silent addresses", "a hung lookup"])
def test_an_attempt_ends_by_its_deadline_however_long_resolving_and_connecting_take(runtime, workspace, sender,
                                                                                   monkeypatch, resolver):
    """Resolution, every address's connect, TLS, head and body all fall within the 10 s: a host
    with 20 addresses that never answer, or a resolver that never answers, held an attempt for
    10 s an address (200 s, past the 60 s lease, so the delivery was leased again and could be
    posted twice) or for as long as the lookup took."""
    silent = Silent(20)
    real = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):
        if host != "black-hole.example":
            return real(host, port, *args, **kwargs)
        if resolver == "a hung lookup":
            time.sleep(3 * TIMEOUT)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port)) for address in silent.addresses]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    try:
        client, _, _ = runtime.sandesh.operators.create_client(workspace, "Black hole",
                                                           f"https://black-hole.example:{silent.port}/d", 1000, "t")
        request, _ = parse_send({"to": f"97798{next(_numbers):08d}", "text": "nobody home"})
        message = runtime.sandesh.sending.send(client.id, workspace, request, 100)
        lifecycle(runtime, message, ("fail", "x"))
        sender.follow()
        with runtime.connection() as conn:
            [delivery_id] = [r["id"] for r in conn.execute("SELECT id FROM webhook_deliveries WHERE client_id = %s",
                                                            (client.id,))]
        started = time.monotonic()
        sender.attempt(delivery_id)
        took = time.monotonic() - started
        with runtime.connection() as conn:
            [row] = conn.execute("SELECT * FROM webhook_deliveries WHERE client_id = %s", (client.id,)).fetchall()
        assert took < TIMEOUT + 1.0, took
        assert row["history"][-1]["statusCode"] is None and row["state"] == "waiting", row["history"]
        assert LEASE > TIMEOUT + 1.0, "a delivery's lease outlasts any attempt"
    finally:
        silent.close()
