"""GET /v1/health and GET /v1/ready on a running `sandesh serve`, without a key: the process
answers; ready names what keeps it from working (no route, projections far behind)."""
from __future__ import annotations

import requests


from sandesh.api.health import MAX_LAG
from sandesh.domain.message import accept
from sandesh.domain.release import VERSION
from sandesh.domain.sending import parse_send
from sandesh.projections import follower
from tests.helpers import funded_workspace
from tests.conftest import Route


def get(server, path, **headers):
    return requests.get(f"{server.url}{path}", timeout=10, headers=headers)


def test_health_answers_without_a_key_with_the_release_it_runs(server):
    answer = get(server, "/v1/health", **{"x-request-id": "lb-probe-1"})
    assert (answer.status_code, answer.json()) == (200, {"status": "ok", "version": VERSION})
    assert answer.headers["content-type"] == "application/json"
    assert answer.headers["x-request-id"] == "lb-probe-1"
    assert requests.post(f"{server.url}/v1/health", timeout=10).status_code == 405


def test_ready_is_503_with_the_reason_until_a_sim_is_a_route(server, runtime, sandesh):
    follower.catch_up(runtime)
    answer = get(server, "/v1/ready")
    assert answer.status_code == 503 and answer.headers["retry-after"] == "2"
    body = answer.json()
    assert body["ready"] is False and body["reasons"] == ["no SIM is a route: sends answer 503 unavailable"]
    assert body["checks"]["database"] == "ok" and body["checks"]["route"] is False
    assert set(body["checks"]["projectionLag"]) == {"messages", "counters", "otps", "audit", "campaigns", "feed"}

    sim = sandesh("sim", "add", "--name", "ready-route", "--port", "loop://")
    reported = Route(runtime, sim["id"])  # reported healthy every few seconds, as a dispatcher does
    try:
        answer = get(server, "/v1/ready")
        assert (answer.status_code, answer.json()["ready"], answer.json()["reasons"]) == (200, True, [])
        assert answer.json()["checks"]["route"] is True and "retry-after" not in answer.headers

        # projections far behind the log (no worker follows it here): not ready, and by how much
        workspace = funded_workspace(runtime.sandesh, "Lagging", 10**9, "t")
        client, _, _ = runtime.sandesh.operators.create_client(workspace, "Lagging", None, 1000, "t")
        request, _ = parse_send({"to": "9779812345678", "text": "lag"})
        for start in range(0, MAX_LAG + 1, 1000):
            runtime.sandesh.log.append_events([event for _ in range(1000) for event in accept(
                client_id=client.id, workspace_id=workspace, to=request.to, text=request.text,
                message_type="transactional", segments=1, encoding=request.encoding, cost=1,
                idempotency_key=None, request_hash=None, at=runtime.clock.now()).collect_events()])
        body = get(server, "/v1/ready").json()
        assert body["ready"] is False
        assert f"projection messages is more than {MAX_LAG} events behind the log" in body["reasons"]
        assert body["checks"]["projectionLag"]["messages"] == MAX_LAG + 1  # counted up to the cap
        assert body["checks"]["projectionLag"]["otps"] == 0  # nothing of its own waits
        follower.catch_up(runtime)
        assert get(server, "/v1/ready").status_code == 200
    finally:
        reported.close()
