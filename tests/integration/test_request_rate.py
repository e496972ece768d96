"""Per-client request rate (docs/api.md, "Limits"): shared by every worker process and every host."""
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from tests.conftest import Server


@pytest.fixture(scope="module")
def two_hosts(env):
    """Two independent `sandesh serve` instances (2 gunicorn workers each) on one database."""
    first, second = Server(env, workers=2), Server(env, workers=2)
    yield first, second
    first.stop()
    second.stop()


def _burst(urls, key, count):
    sessions = [requests.Session() for _ in urls]

    def one(i):
        return sessions[i % len(urls)].get(urls[i % len(urls)] + "/v1/sms/balance", headers={"x-api-key": key}, timeout=10)

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(one, range(count)))
    return answers, time.monotonic() - started


def _client(sandesh, active_client, *rate):
    return sandesh("client", "create", "--workspace", active_client["workspace"], "--brand", "Rate", *rate)


def test_the_rate_is_shared_across_hosts_and_workers(two_hosts, sandesh, active_client):
    key = _client(sandesh, active_client, "--rate-limit", "10")["key"]
    answers, elapsed = _burst([h.url for h in two_hosts], key, 60)
    allowed = sum(a.status_code == 200 for a in answers)
    limited = [a for a in answers if a.status_code == 429]
    # A burst of the per-second rate, then the rate itself; 2 hosts x 2 workers would allow 4x that.
    assert 10 <= allowed <= 10 + int(elapsed * 10) + 1, (allowed, elapsed)
    assert allowed + len(limited) == 60
    assert limited[0].json()["code"] == "rate_limited"
    assert limited[0].headers["Retry-After"] == "1"


def test_the_default_rate_is_20_per_second(two_hosts, sandesh, active_client):
    key = _client(sandesh, active_client)["key"]
    answers, elapsed = _burst([two_hosts[0].url], key, 45)
    allowed = sum(a.status_code == 200 for a in answers)
    assert 20 <= allowed <= 20 + int(elapsed * 20) + 1, (allowed, elapsed)


def test_the_rate_refills_with_the_clock(two_hosts, sandesh, active_client):
    key = _client(sandesh, active_client, "--rate-limit", "2")["key"]
    url = two_hosts[0].url + "/v1/sms/balance"
    codes = [requests.get(url, headers={"x-api-key": key}, timeout=5).status_code for _ in range(3)]
    assert codes[:2] == [200, 200] and codes[2] == 429
    sandesh("clock", "advance", "5")
    assert requests.get(url, headers={"x-api-key": key}, timeout=5).status_code == 200


def test_a_raised_rate_takes_effect_without_restart(two_hosts, sandesh, active_client):
    client = _client(sandesh, active_client, "--rate-limit", "1")
    url = two_hosts[1].url + "/v1/sms/balance"
    assert [requests.get(url, headers={"x-api-key": client["key"]}, timeout=5).status_code for _ in range(2)] == [200, 429]
    sandesh("client", "update", client["id"], "--rate-limit", "1000")
    sandesh("clock", "advance", "2")
    codes = [requests.get(url, headers={"x-api-key": client["key"]}, timeout=5).status_code for _ in range(20)]
    assert codes == [200] * 20


def test_rejected_requests_do_not_count_against_another_client(two_hosts, sandesh, active_client):
    noisy = _client(sandesh, active_client, "--rate-limit", "3")["key"]
    quiet = _client(sandesh, active_client, "--rate-limit", "3")["key"]
    answers, elapsed = _burst([two_hosts[0].url], noisy, 20)
    codes = [a.status_code for a in answers]
    allowed = codes.count(200)
    assert 3 <= allowed <= 3 + int(elapsed * 3) + 1 and allowed + codes.count(429) == 20, (codes, elapsed)
    assert requests.get(two_hosts[0].url + "/v1/sms/balance", headers={"x-api-key": quiet}, timeout=5).status_code == 200


def test_a_fast_clients_rate_counted_in_shares_is_never_exceeded(two_hosts, sandesh, active_client):
    """A rate of 50/s or more is counted a 2 % share at a time by each API process
    (docs/api.md, "Limits"): never more than the rate allows, at most a share per process less.
    The burst is 12 times the rate, so that it outruns the rate on a busy machine too."""
    key = _client(sandesh, active_client, "--rate-limit", "50")["key"]
    answers, elapsed = _burst([h.url for h in two_hosts], key, 600)
    allowed = sum(a.status_code == 200 for a in answers)
    limited = [a for a in answers if a.status_code == 429]
    assert allowed + len(limited) == 600
    # 2 hosts x 2 workers, each may hold back one share of 1 request
    assert 50 - 4 * 1 <= allowed <= 50 + int(elapsed * 50) + 1, (allowed, elapsed)
    assert limited and limited[0].headers["Retry-After"] == "1", (allowed, elapsed)
