"""Authentication, gating, error bodies and request ids, against `sandesh serve` under gunicorn
and (for routes that do not exist yet in the product) the same app through falcon.testing."""
import logging
import re

import falcon
import falcon.testing
import orjson
import pytest
import requests

from sandesh.api.app import create_app
from sandesh.api.errors import ApiError
from sandesh.projections.storage.group_commit import GroupCommit


class Echo:
    """A POST route for the middleware tests, until the product's own POST endpoints exist."""

    async def on_post(self, req, resp):
        from sandesh.api.body import json_object

        resp.media = {"client": req.context.caller.client_id, "body": await json_object(req)}

    async def on_get(self, req, resp):
        raise RuntimeError("boom: secret internals")


@pytest.fixture(scope="module")
def app(runtime):
    application = create_app(runtime.sandesh, runtime.connection, route_window=runtime.settings.route_window,
                             health=runtime.health, commits=GroupCommit(runtime.sandesh.log.append_events))
    application.add_route("/v1/test/echo", Echo())
    application.add_route("/v1/test/echo/{token}", Echo())
    return falcon.testing.TestClient(application)


def balance(server, key=None, **headers):
    if key is not None:
        headers["x-api-key"] = key
    return requests.get(server.url + "/v1/sms/balance", headers=headers, timeout=5)


def test_balance_answers_for_a_key_made_with_client_create(server, active_client):
    answer = balance(server, active_client["key"])
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("application/json")
    assert answer.json() == {
        "workspaceStatus": "active",
        "balance": {"amount": 100000, "currency": "NPR"},
        "rates": {"transactional": 100, "otp": 100, "promotional": 100},
        "allowedTypes": ["transactional", "otp", "promotional"],
        "promotionalHours": {"start": "08:00", "end": "20:00", "timeZone": "Asia/Kathmandu"},
        "counters": {"sent": 0, "delivered": 0, "undelivered": 0, "failed": 0, "segments": 0, "spent": 0,
                     "otpSent": 0, "otpVerified": 0},
    }


def test_a_missing_key_and_an_invalid_key_have_distinct_texts(server):
    missing = balance(server)
    invalid = balance(server, "sk_live_" + "0" * 48)
    malformed = balance(server, "not-a-key")
    assert missing.status_code == invalid.status_code == malformed.status_code == 401
    assert missing.json()["code"] == invalid.json()["code"] == "unauthorized"
    assert "missing" in missing.json()["error"].lower()
    assert "invalid" in invalid.json()["error"].lower() and malformed.json() == invalid.json()


def test_key_rotation_stops_the_old_key_at_once_and_starts_the_new_one(server, sandesh, active_client):
    ws = active_client["workspace"]
    client = sandesh("client", "create", "--workspace", ws, "--brand", "Rotating")
    assert balance(server, client["key"]).status_code == 200
    rotated = sandesh("client", "rotate-key", client["id"])
    old, new = balance(server, client["key"]), balance(server, rotated["key"])
    assert old.status_code == 401 and "invalid" in old.json()["error"].lower()
    assert new.status_code == 200


def test_a_disabled_client_gets_403_client_disabled_and_keeps_its_history(server, sandesh, active_client):
    client = sandesh("client", "create", "--workspace", active_client["workspace"], "--brand", "Off")
    sandesh("client", "disable", client["id"])
    answer = balance(server, client["key"])
    assert answer.status_code == 403 and answer.json()["code"] == "client_disabled"
    sandesh("client", "enable", client["id"])
    assert balance(server, client["key"]).status_code == 200


@pytest.mark.parametrize("steps, get_status, post_code", [
    ([], 200, "workspace_pending"),
    (["activate", "suspend"], 200, "workspace_suspended"),
    (["activate"], 200, None),
])
def test_gating_by_workspace_status(app, sandesh, steps, get_status, post_code):
    """GET works for pending and suspended workspaces; POST needs an active one."""
    ws = sandesh("workspace", "create", "--name", "Gated")["id"]
    for step in steps:
        sandesh("workspace", step, ws)
    key = sandesh("client", "create", "--workspace", ws, "--brand", "G")["key"]
    got = app.simulate_get("/v1/sms/balance", headers={"x-api-key": key})
    assert got.status_code == get_status
    posted = app.simulate_post("/v1/test/echo", headers={"x-api-key": key}, json={"a": 1})
    if post_code:
        assert posted.status_code == 403 and posted.json["code"] == post_code
    else:
        assert posted.status_code == 200 and posted.json["body"] == {"a": 1}


def test_authentication_comes_before_gating(app):
    answer = app.simulate_post("/v1/test/echo", json={})
    assert answer.status_code == 401


def test_unknown_paths_are_404_not_found_in_json(server):
    answer = requests.get(server.url + "/v1/nothing/here", timeout=5)
    assert answer.status_code == 404
    assert answer.json() == {"error": "Not found.", "code": "not_found"}
    assert answer.headers["content-type"].startswith("application/json")


def test_wrong_methods_are_405_method_not_allowed_in_json(server, active_client):
    answer = requests.delete(server.url + "/v1/sms/balance", headers={"x-api-key": active_client["key"]}, timeout=5)
    assert answer.status_code == 405
    assert answer.json() == {"error": "Method not allowed for this path.", "code": "method_not_allowed"}


@pytest.mark.parametrize("body, content_type, detail_code", [
    (b"{not json", "application/json", "invalid_json"),
    (b"[1, 2]", "application/json", "invalid_type"),
    (b'"text"', "application/json", "invalid_type"),
    (b"", "application/json", "invalid_json"),
    (b'{"a": 1}', "text/plain", "invalid_content_type"),
    (b'{"a": 1}', None, "invalid_content_type"),
])
def test_invalid_bodies_are_400_invalid_request_with_details(app, active_client, body, content_type, detail_code):
    headers = {"x-api-key": active_client["key"]}
    if content_type:
        headers["content-type"] = content_type
    answer = app.simulate_post("/v1/test/echo", headers=headers, body=body)
    assert answer.status_code == 400
    assert answer.json["code"] == "invalid_request" and answer.json["error"]
    [item] = answer.json["details"]
    assert item["code"] == detail_code and item["path"] == [] and item["message"]


def test_content_type_with_charset_is_accepted(app, active_client):
    answer = app.simulate_post("/v1/test/echo", body=b'{"x": "\xe0\xa4\xa8"}',
                               headers={"x-api-key": active_client["key"], "content-type": "application/json; charset=utf-8"})
    assert answer.status_code == 200 and answer.json["body"] == {"x": "न"}


def test_unexpected_errors_are_500_server_error_logged_with_the_request_id(app, active_client, caplog):
    with caplog.at_level(logging.ERROR, logger="sandesh.api"):
        answer = app.simulate_get("/v1/test/echo", headers={"x-api-key": active_client["key"], "x-request-id": "req-42"})
    assert answer.status_code == 500 and answer.json["code"] == "server_error"
    assert "boom" not in answer.text and "Traceback" not in answer.text
    assert answer.json == {"error": "Unexpected error on the service side (request id req-42).", "code": "server_error"}
    logged = [(r.getMessage(), r.exc_info[0] if r.exc_info else None) for r in caplog.records if r.name == "sandesh.api"]
    assert logged == [("unexpected error in GET /v1/test/echo (request id req-42)", RuntimeError)]


def test_an_unexpected_errors_log_line_names_the_route_never_the_path_or_query(app, active_client, caplog):
    """A path can carry a secret (a set-password link's token): the line has the route template."""
    with caplog.at_level(logging.ERROR, logger="sandesh.api"):
        answer = app.simulate_get("/v1/test/echo/person_1.s3cr3t-t0ken", query_string="code=123456",
                                  headers={"x-api-key": active_client["key"], "x-request-id": "req-43"})
    assert answer.status_code == 500
    [line] = [r.getMessage() for r in caplog.records if r.name == "sandesh.api"]
    assert line == "unexpected error in GET /v1/test/echo/{token} (request id req-43)"


def test_every_response_carries_x_request_id_echoing_the_callers(server, active_client):
    mine = balance(server, active_client["key"], **{"x-request-id": "abc-123"})
    assert mine.headers["x-request-id"] == "abc-123"
    made = [answer.headers["x-request-id"] for answer in (balance(server, active_client["key"]), balance(server),
                                                          requests.get(server.url + "/nope", timeout=5))]
    assert [bool(re.fullmatch(r"[0-9a-f]{32}", made_id)) for made_id in made] == [True] * 3, made
    assert len(set(made)) == 3, "a new id for each request"


def test_every_error_code_has_one_status():
    assert ApiError("insufficient_balance").status == 402
    assert ApiError("sms_disabled").status == ApiError("unavailable").status == 503
    assert orjson.loads(orjson.dumps(ApiError("forbidden").body())) == {
        "error": "This message type is not allowed for the workspace.", "code": "forbidden"}
