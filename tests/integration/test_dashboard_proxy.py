"""The dashboard's cookies behind the TLS proxy (docs/dashboard.md, "Security"), in process
with falcon's test client.  Apart from test_dashboard.py: Playwright's sync API holds an event
loop in the test thread for that module, and the test client runs one of its own."""
import falcon.testing
import pytest

from sandesh.api.app import create_app
from sandesh.projections.storage.group_commit import GroupCommit


@pytest.mark.parametrize("peer, proto, secure", [("127.0.0.1", "https", True), ("192.0.2.9", "https", False),
                                                ("127.0.0.1", None, False)])
def test_behind_the_tls_proxy_cookies_are_secure_and_host_prefixed(runtime, peer, proto, secure):
    """Only a trusted proxy's X-Forwarded-Proto: https makes the cookies Secure with the __Host- prefix."""
    app = falcon.testing.TestClient(create_app(
        runtime.sandesh, runtime.connection, route_window=60, health=runtime.health,
        commits=GroupCommit(runtime.sandesh.log.append_events), trusted_proxies=("127.0.0.1",)))
    answer = app.simulate_get("/dashboard/sign-in", remote_addr=peer,
                              headers={"X-Forwarded-Proto": proto} if proto else {})
    cookie = answer.headers["set-cookie"]
    assert cookie.startswith("__Host-sandesh_csrf=" if secure else "sandesh_csrf=")
    assert ("Secure" in cookie) is secure and "HttpOnly" in cookie and "SameSite=Strict" in cookie


@pytest.mark.parametrize("peer, proto, sent", [("127.0.0.1", "https", True), ("192.0.2.9", "https", False),
                                              ("127.0.0.1", None, False)])
def test_over_tls_every_answer_sends_hsts(runtime, peer, proto, sent):
    """Strict-Transport-Security on the API's answers and the dashboard's pages alike, when the
    request came over TLS; a proxy that is not trusted cannot claim it."""
    app = falcon.testing.TestClient(create_app(
        runtime.sandesh, runtime.connection, route_window=60, health=runtime.health,
        commits=GroupCommit(runtime.sandesh.log.append_events), trusted_proxies=("127.0.0.1",)))
    for path in ("/v1/health", "/dashboard/sign-in", "/v1/sms/balance"):
        answer = app.simulate_get(path, remote_addr=peer, headers={"X-Forwarded-Proto": proto} if proto else {})
        assert (answer.headers.get("strict-transport-security") == "max-age=31536000") is sent, path
