"""The contract: GET /v1/openapi.json on a running `sandesh serve` is a valid OpenAPI 3.1
document that names every route the app has; schemathesis fuzzes every operation of it against
the live server with a funded key and finds no 5xx and nothing the document does not describe.

(Every other test's responses are checked against the same document by tests/contract.py.)"""
from __future__ import annotations

import subprocess
import sys

import falcon.inspect
import pytest
import requests
from openapi_spec_validator import validate

from sandesh.api.app import create_app
from sandesh.projections.storage.group_commit import GroupCommit
from tests.helpers import funded_workspace
from tests import contract

EXAMPLES = 100  # per operation and mode


def test_the_document_is_served_without_a_key_and_is_valid_openapi_3_1(server):
    answer = requests.get(server.url + "/v1/openapi.json", timeout=10)
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/json"
    document = answer.json()
    validate(document)  # raises on anything OpenAPI 3.1 does not allow
    assert document["openapi"] == "3.1.0"
    assert set(document["webhooks"]) == {"message.status", "message.inbound"}
    codes = set(document["components"]["schemas"]["Error"]["properties"]["code"]["enum"])
    assert {"invalid_request", "unauthorized", "insufficient_balance", "idempotency_conflict", "rate_limited",
            "sms_disabled", "unavailable", "server_error"} <= codes


def test_every_route_of_the_app_is_in_the_document(runtime):
    """Every route but the dashboard's HTML pages (docs/dashboard.md), which are not the API."""
    app = create_app(runtime.sandesh, runtime.connection, route_window=60, health=runtime.health,
                     commits=GroupCommit(runtime.sandesh.log.append_events))
    routes = {(route.path, method.method) for route in falcon.inspect.inspect_routes(app)
              for method in route.methods if not method.internal and not route.path.startswith(contract.DASHBOARD)}
    documented = {(path, method.upper()) for path, item in contract.DOCUMENT["paths"].items()
                  for method in item}
    assert routes - documented == set()
    assert documented - routes == {("/metrics", "GET")} or documented - routes == set()


def test_the_checker_finds_an_answer_that_differs_from_the_document():
    """The suite-wide check is not a formality: a missing field, an undocumented status, a
    missing x-request-id and a malformed webhook are each reported."""
    json = {"content-type": "application/json", "x-request-id": "r"}
    url = "http://127.0.0.1:1/v1/sms/balance"
    assert contract.check("GET", url, 200, json, b'{"workspaceStatus": "active"}')
    assert contract.check("GET", url, 418, json, b'{"error": "x", "code": "unauthorized"}')
    no_request_id = {"content-type": "application/json"}
    assert contract.check("GET", url, 401, no_request_id, b'{"error": "x", "code": "unauthorized"}')
    assert contract.check("GET", url, 401, json, b'{"error": "x", "code": "unauthorized"}') == []
    assert contract.check("GET", "http://127.0.0.1:1/nope", 200, json, b"{}")
    assert contract.check("GET", "http://127.0.0.1:1/nope", 404, json, b'{"error": "x", "code": "not_found"}') == []
    assert contract.check_webhook({"x-service-event": "message.status", "content-type": "application/json"},
                                  b'{"type": "message.status"}')


@pytest.fixture(scope="module")
def funded_key(runtime, sandesh):
    workspace = funded_workspace(runtime.sandesh, "Fuzz", 10**9)
    client = sandesh("client", "create", "--workspace", workspace, "--brand", "Fuzz", "--rate-limit", "100000")
    return client["key"]


CHECKS = ("not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,"
          "response_schema_conformance,negative_data_rejection")


def test_fuzzing_finds_no_5xx_and_nothing_undocumented(server, funded_key, route, tmp_path):
    """schemathesis's own command, as one would run it against a deployment: every operation,
    valid and invalid inputs, the examples, the coverage cases and random ones.  A long poll of
    GET /v1/events is asked not to wait: each would otherwise hold its case up to 30 s."""
    (tmp_path / "schemathesis.toml").write_text('[parameters]\n"query.wait" = 0\n')
    run = subprocess.run(
        [sys.executable, "-m", "schemathesis.cli", "run", server.url + "/v1/openapi.json",
         "--url", server.url, "--header", f"x-api-key: {funded_key}", "--checks", CHECKS,
         "--mode", "all", "--phases", "examples,coverage,fuzzing,stateful", "--max-examples", str(EXAMPLES),
         "--seed", "1", "--workers", "1", "--generation-database", "none", "--no-color",
         "--report", "junit", "--report-dir", str(tmp_path), "--request-timeout", "10"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert "passed" in run.stdout
