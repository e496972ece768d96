"""Long polls of GET /v1/events are bounded (docs/api.md, "GET /v1/events"): a client holds at
most SANDESH_FEED_POLLS waiting polls (shared out among the API's processes), and a process at
most half its connections' worth of them, so one tenant's many clients cannot fill the workers.
Past either bound a poll answers at once: 429 rate_limited with Retry-After.  A real
`sandesh serve` with one worker of 40 connections."""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from tests.conftest import Server
from tests.helpers import funded_workspace


@pytest.fixture(scope="module")
def server(env):
    running = Server(env, workers=1, args=("--worker-connections", "40"))
    yield running
    running.stop()


def key_of(runtime, name: str) -> str:
    ws = funded_workspace(runtime.sandesh, name, 0)
    return runtime.sandesh.operators.create_client(ws, name, None, 1000, "test")[1]


def poll(server, key: str, wait: int) -> requests.Response:
    return requests.get(server.url + "/v1/events", params={"wait": wait}, headers={"x-api-key": key}, timeout=60)


def holding(server, pool: ThreadPoolExecutor, key: str, polls: int) -> list:
    """`polls` long polls of the client, waiting."""
    return [pool.submit(poll, server, key, 8) for _ in range(polls)]


def test_a_client_holds_ten_waiting_polls_and_the_eleventh_is_told_when_to_come_back(server, runtime):
    greedy, other = key_of(runtime, "Greedy"), key_of(runtime, "Patient")
    with ThreadPoolExecutor(12) as pool:
        held = holding(server, pool, greedy, 10)
        time.sleep(2)  # all ten wait
        started = time.monotonic()
        refused = poll(server, greedy, 8)
        assert time.monotonic() - started < 1.0, "refused at once, not after waiting"
        assert refused.status_code == 429 and refused.json()["code"] == "rate_limited"
        assert int(refused.headers["Retry-After"]) >= 1
        assert poll(server, other, 1).status_code == 200  # another client waits as usual
        assert [f.result().status_code for f in held] == [200] * 10
    assert poll(server, greedy, 1).status_code == 200  # its polls answered: it may wait again


def test_the_processs_waiting_polls_are_bounded_whatever_the_clients(server, runtime):
    """40 connections: 20 waiting polls at most, whichever clients hold them."""
    keys = [key_of(runtime, f"Tenant {n}") for n in range(3)]
    with ThreadPoolExecutor(21) as pool:
        held = holding(server, pool, keys[0], 10) + holding(server, pool, keys[1], 10)
        time.sleep(2)
        refused = poll(server, keys[2], 8)
        assert refused.status_code == 429 and "every client's" in refused.json()["error"]
        assert int(refused.headers["Retry-After"]) >= 1
        assert requests.get(server.url + "/v1/sms/balance", headers={"x-api-key": keys[2]},
                            timeout=5).status_code == 200, "the rest of the connections serve everyone"
        assert [f.result().status_code for f in held] == [200] * 20
