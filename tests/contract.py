"""Every response the test suite receives, and every webhook its receiver gets, is checked
against the OpenAPI document the service serves (api/openapi.py), so the document cannot drift
from what the service answers.

`install()` (called by tests/conftest.py) wraps `requests.Session.send` and falcon's test
client; what does not conform is recorded, and an autouse fixture fails the test that received
it.  The checks are openapi-core's: the operation exists, the status is documented, the
content type, the required headers and the body match their schemas.  A path the document does
not have (an unknown path, a wrong method) must answer 404 or 405 in the error shape; the
dashboard's HTML pages under /dashboard are outside the API and its document."""
from __future__ import annotations

import threading
from typing import Any
from urllib.parse import urlsplit

import falcon.testing
import orjson
import requests
from jsonschema import Draft202012Validator
from openapi_core import OpenAPI
from openapi_core.datatypes import RequestParameters
from openapi_core.templating.paths.exceptions import OperationNotFound, PathNotFound
from openapi_core.testing import MockRequest, MockResponse
from werkzeug.datastructures import Headers

from sandesh.api.openapi import document

DOCUMENT = document()
SPEC = OpenAPI.from_dict(DOCUMENT)
DASHBOARD = "/dashboard"
_lock = threading.Lock()
violations: list[str] = []
checked = {"responses": 0, "webhooks": 0}


def _error_shape(body: bytes) -> list[str]:
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        return ["the body is not JSON"]
    schema = {**DOCUMENT["components"]["schemas"]["Error"]}
    schema["properties"] = {**schema["properties"], "details": {"type": "array"}}
    return [error.message for error in Draft202012Validator(schema).iter_errors(value)]


def check(method: str, url: str, status: int, headers: dict[str, str], body: bytes,
          request_headers: dict[str, str] | None = None) -> list[str]:
    """What is wrong with this answer to `method url`, by the document; [] when it conforms.
    The dashboard's pages are not part of the API (docs/dashboard.md): they are not checked."""
    parts = urlsplit(url)
    if parts.path == DASHBOARD or parts.path.startswith(DASHBOARD + "/"):
        return []
    request = MockRequest(f"{parts.scheme}://{parts.netloc}", method, parts.path,
                          headers=request_headers or {}, content_type="application/json")
    content_type = headers.get("content-type") or headers.get("Content-Type") or ""
    response = MockResponse(body, status_code=status, headers=headers, content_type=content_type)
    with _lock:
        checked["responses"] += 1
    try:
        errors = list(SPEC.iter_response_errors(request, response))
    except (PathNotFound, OperationNotFound):
        errors = []
        if status not in (404, 405):
            return [f"{method} {parts.path} is not in the document, yet answered {status}"]
        if not content_type.startswith("application/json"):
            return [f"{method} {parts.path}: {status} is {content_type!r}, not JSON"]
        return _error_shape(body)
    if errors and isinstance(errors[0], (PathNotFound, OperationNotFound)):
        if status not in (404, 405):
            return [f"{method} {parts.path} is not in the document, yet answered {status}"]
        return _error_shape(body)
    return [_describe(error) for error in errors]


def _describe(error: Exception) -> str:
    cause = error.__cause__
    inner = getattr(cause, "schema_errors", None) or getattr(error, "schema_errors", None)
    if inner:
        return f"{type(error).__name__}: " + "; ".join(f"{list(e.absolute_path)}: {e.message}" for e in inner)
    return f"{error}" + (f": {cause}" if cause else "")


def _record(what: str, problems: list[str]) -> None:
    if problems:
        with _lock:
            violations.append(f"{what}: " + " | ".join(problems))


class _WebhookCall:
    """A webhook delivery as openapi-core's webhook request protocol wants it."""

    def __init__(self, name: str, headers: dict[str, str], body: bytes):
        self.name = name
        self.method = "post"
        self.body = body
        self.content_type = headers.get("content-type", "")
        self.parameters = RequestParameters(header=Headers(headers))


def check_webhook(headers: dict[str, str], body: bytes) -> list[str]:
    """What is wrong with a webhook delivery the receiver got; [] when it conforms."""
    with _lock:
        checked["webhooks"] += 1
    name = headers.get("x-service-event", "")
    if name not in DOCUMENT["webhooks"]:
        return [f"x-service-event {name!r} is not a webhook of the document"]
    return [_describe(error) for error in SPEC.iter_request_errors(_WebhookCall(name, headers, body))]


def record_webhook(path: str, headers: dict[str, str], body: bytes) -> None:
    _record(f"webhook to {path}", check_webhook(headers, body))


_installed = False


# The devices' own web APIs (the HiLink emulator's host:port), and the alerts' json:// receiver:
# not Sandesh, not checked.
devices: set[str] = set()


def install() -> None:
    """Check every response received through `requests` (the live servers) and falcon's test
    client (in-process apps)."""
    global _installed
    if _installed:
        return
    _installed = True
    send = requests.Session.send

    def checked_send(self: requests.Session, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:
        response = send(self, request, **kwargs)
        parts = urlsplit(request.url or "")
        if parts.scheme == "http" and parts.netloc not in devices:  # the services under test; the webhook receiver is https
            _record(f"{request.method} {request.url} -> {response.status_code}",
                    check(request.method or "GET", request.url or "", response.status_code,
                          dict(response.headers), response.content, dict(request.headers)))
        return response

    requests.Session.send = checked_send  # type: ignore[method-assign]
    simulate = falcon.testing.TestClient.simulate_request

    def checked_simulate(self: falcon.testing.TestClient, method: str = "GET", path: str = "/",
                         *args: Any, **kwargs: Any) -> falcon.testing.Result:
        result = simulate(self, method, path, *args, **kwargs)
        what = f"{method} {path} -> {result.status_code} (in process)"
        if not path.startswith("/v1/test/"):
            _record(what, check(method, "http://falcon.test" + path, result.status_code, dict(result.headers),
                                result.content))
        elif result.status_code >= 400:  # a route a test adds to its own app: its errors are the service's
            _record(what, _error_shape(result.content))
        return result

    falcon.testing.TestClient.simulate_request = checked_simulate  # type: ignore[method-assign]


def take() -> list[str]:
    """The violations recorded since the last call."""
    with _lock:
        found = list(violations)
        violations.clear()
    return found
