"""create_app(): the Falcon app from explicit collaborators (Falcon's "look" tutorial style)."""
from __future__ import annotations

import logging
import uuid
from typing import Any, Callable, ContextManager

import falcon
import falcon.media
import orjson

from domain.application import Sandesh

from .auth import Authentication
from .errors import ApiError
from .messages import MessageStatus
from .otp import OtpSend, OtpVerify
from .resources import Balance
from .send import Send

log = logging.getLogger("sandesh.api")

_HTTP_CODES = {400: "invalid_request", 404: "not_found", 405: "method_not_allowed", 413: "invalid_request"}


class RequestId:
    """Every response carries x-request-id, echoing the caller's when it sent one."""

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        given = req.get_header("x-request-id")
        req.context.request_id = given[:128] if given else uuid.uuid4().hex
        resp.set_header("x-request-id", req.context.request_id)


def _render(resp: falcon.Response, error: ApiError) -> None:
    resp.status = error.status
    resp.content_type = falcon.MEDIA_JSON
    resp.data = orjson.dumps(error.body())
    for name, value in error.headers.items():
        resp.set_header(name, value)


def _api_error(req: falcon.Request, resp: falcon.Response, error: ApiError, params: dict) -> None:
    _render(resp, error)


def _http_error(req: falcon.Request, resp: falcon.Response, error: falcon.HTTPError, params: dict) -> None:
    code = _HTTP_CODES.get(error.status_code, "server_error" if error.status_code >= 500 else "invalid_request")
    api_error = ApiError(code, error.description if code == "invalid_request" and error.description else None)
    api_error.status = error.status_code
    api_error.headers = dict(error.headers or {})
    _render(resp, api_error)


def _unexpected(req: falcon.Request, resp: falcon.Response, error: Exception, params: dict) -> None:
    request_id = getattr(req.context, "request_id", "-")
    log.exception("unexpected error in %s %s (request id %s)", req.method, req.path, request_id)
    _render(resp, ApiError("server_error", f"Unexpected error on the service side (request id {request_id})."))


def create_app(sandesh: Sandesh, connection: Callable[[], ContextManager[Any]], *, route_window: float,
               rate_limit: bool = True, trusted_proxies: tuple[str, ...] = ()) -> falcon.App:
    """`route_window`: Settings.route_window, how recent a SIM's healthy heartbeat must be for it to be a route."""
    authentication = Authentication(connection, sandesh.clock, route_window=route_window, rate_limit=rate_limit)
    app = falcon.App(middleware=[RequestId(), authentication])
    json_handler = falcon.media.JSONHandler(dumps=lambda o: orjson.dumps(o).decode(), loads=orjson.loads)
    app.resp_options.media_handlers[falcon.MEDIA_JSON] = json_handler
    app.req_options.media_handlers[falcon.MEDIA_JSON] = json_handler
    app.add_route("/v1/sms/balance", Balance(connection))
    app.add_route("/v1/sms/send", Send(sandesh, connection))
    app.add_route("/v1/sms/messages/{message_id}", MessageStatus(sandesh, connection))
    app.add_route("/v1/sms/otp/send", OtpSend(sandesh, connection, trusted_proxies))
    app.add_route("/v1/sms/otp/verify", OtpVerify(sandesh, connection, trusted_proxies))
    app.add_error_handler(Exception, _unexpected)
    app.add_error_handler(falcon.HTTPError, _http_error)
    app.add_error_handler(ApiError, _api_error)
    return app
