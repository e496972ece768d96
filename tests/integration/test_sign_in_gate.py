"""The sign-in forms' first door (docs/dashboard.md, "Signing in"; api/dashboard/gate.py): an
address may post 60 times in 15 minutes and its network (/24, /48) 300, counted in the API
process's memory; past that a post is answered at once, 429 with Retry-After, before its body
is read or a try recorded.  A real `sandesh serve` behind a trusted proxy's X-Forwarded-For."""
from __future__ import annotations

import re

import pytest
import requests

from tests.conftest import Server

CSRF = re.compile(r'name="csrf" value="([^"]+)"')


@pytest.fixture(scope="module")
def server(env):
    running = Server({**env, "SANDESH_TRUSTED_PROXIES": "127.0.0.1"}, workers=1)
    yield running
    running.stop()


def post(server, http: requests.Session, address: str, **fields: str) -> requests.Response:
    return http.post(server.url + "/dashboard/sign-in", data={"csrf": "forged", "email": "x@y.example",
                                                              "password": "guess", **fields},
                     headers={"X-Forwarded-For": address}, allow_redirects=False, timeout=30)


def test_an_address_past_sixty_posts_is_refused_from_memory_before_its_try_is_recorded(server, runtime):
    http = requests.Session()
    page = http.get(server.url + "/dashboard/sign-in", headers={"X-Forwarded-For": "203.0.113.7"}, timeout=30)
    assert {post(server, http, "203.0.113.7").status_code for _ in range(60)} == {403}  # no token: counted all the same
    refused = post(server, http, "203.0.113.7", csrf=CSRF.search(page.text).group(1), email="gated@y.example")
    assert refused.status_code == 429 and "Too many sign-in tries" in refused.text
    assert 1 <= int(refused.headers["Retry-After"]) <= 15
    assert len(refused.content) < 300 and refused.headers["Content-Security-Policy"]
    with runtime.connection() as conn:
        recorded = conn.execute("SELECT count(*) AS n FROM sign_in_failures WHERE key LIKE %s",
                                ("%gated@y.example%",)).fetchone()["n"]
    assert recorded == 0, "refused before the try was read"
    assert post(server, http, "203.0.113.8").status_code == 403, "another address has its own allowance"
    page = http.get(server.url + "/dashboard/sign-in", headers={"X-Forwarded-For": "203.0.113.7"}, timeout=30)
    assert page.status_code == 429 and "csrf" not in page.text, "its page too, unrendered"


def test_a_network_past_three_hundred_posts_is_refused_whatever_its_addresses(server):
    http = requests.Session()
    for host in range(5):
        assert {post(server, http, f"2001:db8:5:{host}::1").status_code for _ in range(60)} == {403}
    refused = post(server, http, "2001:db8:5:99::1")  # a new /64 of the same /48
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
    assert post(server, http, "2001:db8:6::1").status_code == 403, "another /48"

