"""create_app(): the Falcon ASGI app from explicit collaborators (Falcon's "look" tutorial style).

Every endpoint and middleware is a coroutine on the worker's event loop; what reads the
database runs on the bounded `Blocking` threads and a use case's appends are awaited on the
group commit (api/waiting.py; docs/design.md, "The event loop")."""
from __future__ import annotations

import logging
import time
from ssl import RAND_bytes
from typing import Any, Callable, ContextManager

import falcon
import falcon.asgi
import falcon.media
import orjson

from sandesh.domain import log_context
from sandesh.domain.application import Sandesh
from sandesh.domain.errors import DomainError
from sandesh.domain.settings import DEFAULT_PUBLIC_URL
from sandesh.domain.sim import DEVICE_EVENTS
from sandesh.projections.callers import Callers
from sandesh.projections.storage.group_commit import GroupCommit
from sandesh.projections.storage.health import DatabaseHealth, is_contention, is_outage
from sandesh.projections.storage.keys import KeyRefused

from .auth import Authentication
from .dashboard import add_dashboard
from .dashboard.web import error_page, is_dashboard
from .errors import ApiError, from_domain
from .events import FEED_POLLS_PER_CLIENT, FEED_POLLS_PER_PROCESS, Arrivals, EventFeed, PollBudget
from .health import Health, Ready
from .inbound import Reply, ReplyList
from .messages import CancelMessage, MessageList, MessageStatus
from .metrics import UNMATCHED, DatabaseState, Metrics, RequestMetrics
from .compat import AakashSend, SparrowCredit, SparrowSend
from .devices import DeviceEvents
from .openapi import OpenApi
from .peers import over_tls
from .otp import OtpSend, OtpVerify
from .resources import Balance
from .send import Preview, Send, SendBatch
from .waiting import Blocking, Commit

logger = logging.getLogger("sandesh.api")

_HTTP_CODES = {400: "invalid_request", 404: "not_found", 405: "method_not_allowed", 413: "invalid_request"}


access = logging.getLogger("sandesh.access")


class RequestId:
    """Every response carries x-request-id, echoing the caller's when it sent one; every request
    writes one access line (docs/operations.md, "Logs"): method, route template (never the path's
    values, a query string or a key), status, milliseconds, bytes, and the request, client and
    workspace ids from the log context."""

    async def process_request(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        req.context.started = time.perf_counter()
        given = req.get_header("x-request-id")
        req.context.request_id = given[:128] if given else RAND_bytes(16).hex()  # no thread switch, unlike uuid4()
        log_context.set_fields(request_id=req.context.request_id)  # each request is a task of its own context

    async def process_response(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, resource: Any,
                               req_succeeded: bool) -> None:
        resp.set_header("x-request-id", req.context.request_id)
        if access.isEnabledFor(logging.INFO):
            milliseconds = (time.perf_counter() - req.context.started) * 1000
            size = len(await resp.render_body() or b"")  # rendered once: Falcon keeps it for the answer
            access.info("%s %s %d %.1f ms %d B request %s", req.method, req.uri_template or UNMATCHED,
                        resp.status_code, milliseconds, size, req.context.request_id, extra={"access": {
                            "method": req.method, "route": req.uri_template or UNMATCHED,
                            "status": resp.status_code, "ms": round(milliseconds, 2), "bytes": size}})


def _render(req: falcon.Request, resp: falcon.Response, error: ApiError) -> None:
    """The error in the API's shape; under /dashboard, as a page (api/dashboard/web.py)."""
    if is_dashboard(req.path):
        error_page(resp, error.status, error.message, error.headers)
        return
    resp.status = error.status
    resp.context.error_code = error.code  # the sends metric's outcome (api/metrics.py)
    resp.content_type = falcon.MEDIA_JSON
    resp.data = orjson.dumps(error.body())
    for name, value in error.headers.items():
        resp.set_header(name, value)


async def _api_error(req: falcon.asgi.Request, resp: falcon.asgi.Response, error: ApiError, params: dict,
                     ws: Any = None) -> None:
    _render(req, resp, error)


async def _http_error(req: falcon.asgi.Request, resp: falcon.asgi.Response, error: falcon.HTTPError, params: dict,
                      ws: Any = None) -> None:
    code = _HTTP_CODES.get(error.status_code, "server_error" if error.status_code >= 500 else "invalid_request")
    api_error = ApiError(code, error.description if code == "invalid_request" and error.description else None)
    api_error.status = error.status_code
    api_error.headers = dict(error.headers or {})
    _render(req, resp, api_error)


def _unexpected(req: falcon.Request, resp: falcon.Response, error: Exception, params: dict) -> None:
    request_id = getattr(req.context, "request_id", "-")
    # The route template, never the path: a path can carry a set-password token (docs/operations.md, "Logs").
    logger.exception("unexpected error in %s %s (request id %s)", req.method, req.uri_template or UNMATCHED, request_id)
    _render(req, resp, ApiError("server_error", f"Unexpected error on the service side (request id {request_id})."))


OUTAGE_RETRY_AFTER = "2"


def outage_error() -> ApiError:
    """A database outage: 503 in the error shape, with Retry-After (docs/reliability.md).  A send
    whose answer was lost may have been accepted: retrying with the same Idempotency-Key
    replays it instead of sending it twice."""
    return ApiError("unavailable", "The service cannot reach its database right now. Retry with the same "
                                   "Idempotency-Key.", headers={"Retry-After": OUTAGE_RETRY_AFTER})


def contention_error() -> ApiError:
    """The database turned a statement of the request away for another transaction's sake (a
    deadlock, a lock not granted in time) and rolled its transaction back; the database is
    there, so the same request may be made again at once (a send with the same Idempotency-Key
    is never made twice)."""
    return ApiError("unavailable", "The service was busy with another change. Retry with the same Idempotency-Key.",
                    headers={"Retry-After": "1"})


class StrictTransport:
    """Over TLS (to us, or to a trusted proxy that says so), every answer tells the browser to
    come back over TLS only, for a year (HSTS, RFC 6797).  Over plain HTTP the header means
    nothing and is not sent."""
    HEADER = "max-age=31536000"

    def __init__(self, trusted_proxies: tuple[str, ...]):
        self.trusted_proxies = trusted_proxies

    async def process_response(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, resource: Any,
                               req_succeeded: bool) -> None:
        if over_tls(req, self.trusted_proxies):
            resp.set_header("Strict-Transport-Security", self.HEADER)


class DatabaseGate:
    """While this process knows the database is away, answer 503 at once instead of waiting
    for a pooled connection."""

    def __init__(self, health: DatabaseHealth):
        self.health = health

    async def process_resource(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, resource: Any,
                               params: dict) -> None:
        if self.health.down and not getattr(resource, "public", False):
            raise outage_error()


def _errors(health: DatabaseHealth) -> Callable[..., Any]:
    async def handle(req: falcon.asgi.Request, resp: falcon.asgi.Response, error: Exception, params: dict,
                     ws: Any = None) -> None:
        answer = from_domain(error) if isinstance(error, DomainError) else None
        if answer is not None:
            _render(req, resp, answer)
        elif is_contention(error):  # the database is there: only this request is answered so
            _render(req, resp, contention_error())
        elif is_outage(error):
            health.failed(error)
            _render(req, resp, outage_error())
        elif isinstance(error, KeyRefused):  # why is logged once, by the ring (projections/storage/keys.py)
            _render(req, resp, ApiError("unavailable", "The service cannot record anything right now. Retry with "
                                                       "the same Idempotency-Key.",
                                        headers={"Retry-After": OUTAGE_RETRY_AFTER}))
        else:
            _unexpected(req, resp, error, params)
    return handle


def create_app(sandesh: Sandesh, connection: Callable[[], ContextManager[Any]], *, route_window: float,
               health: DatabaseHealth, commits: GroupCommit, blocking_threads: int = 4, rate_limit: bool = True,
               trusted_proxies: tuple[str, ...] = (), callers: Callers | None = None,
               dashboard_keys: Callable[[], tuple[bytes, ...]] | None = None, metrics_token: str | None = None,
               public_url: str = DEFAULT_PUBLIC_URL, arrivals: Arrivals | None = None,
               polls: PollBudget | None = None) -> falcon.asgi.App:
    """`route_window`: Settings.route_window, how recent a SIM's healthy heartbeat must be for it to be a route;
    `health`: this process's view of the database (an outage is a 503, never a 500 or a hang);
    `commits`: the process's group commit, which the requests' appends await;
    `blocking_threads`: the threads that read the database for requests (the pool's connections);
    `callers`: the process's caller cache (without one, every request reads its caller from the database);
    `dashboard_keys`: the keys of the dashboard's CSRF tokens, the same in every process, the one that
    makes them first (a random one without it);
    `metrics_token`: SANDESH_METRICS_TOKEN, the bearer token of GET /metrics (without it, loopback callers only);
    `public_url`: SANDESH_PUBLIC_URL, where the links the dashboard hands out point;
    `arrivals`: what wakes this process's long polls of GET /v1/events (without it, they read
    again every second);
    `polls`: how many of those may wait in this process (without it, PollBudget's defaults)."""
    callers = callers or Callers(connection, route_window)
    blocking, commit = Blocking(blocking_threads), Commit(commits)
    authentication = Authentication(connection, sandesh.clock, callers, blocking, rate_limit=rate_limit)
    app = falcon.asgi.App(middleware=[RequestMetrics(), RequestId(), StrictTransport(trusted_proxies),
                                      DatabaseGate(health), authentication])
    json_handler = falcon.media.JSONHandler(dumps=lambda o: orjson.dumps(o).decode(), loads=orjson.loads)
    app.resp_options.media_handlers[falcon.MEDIA_JSON] = json_handler
    app.req_options.media_handlers[falcon.MEDIA_JSON] = json_handler
    app.add_route("/v1/sms/balance", Balance(connection, blocking))
    app.add_route("/v1/sms/send", Send(sandesh, blocking, commit))
    app.add_route("/v1/sms/send/batch", SendBatch(sandesh, blocking, commit))
    app.add_route("/v1/sms/preview", Preview(sandesh))
    app.add_route("/v1/sms/messages", MessageList(connection, blocking))
    app.add_route("/v1/sms/inbound", ReplyList(sandesh, connection, blocking))
    app.add_route("/v1/sms/inbound/{reply_id}", Reply(sandesh, connection, blocking))
    app.add_route("/v1/events", EventFeed(sandesh, connection, blocking, arrivals or Arrivals(None),
                                          polls or PollBudget(FEED_POLLS_PER_CLIENT, FEED_POLLS_PER_PROCESS)))
    app.add_route("/v1/sms/messages/{message_id}", MessageStatus(sandesh, connection, blocking))
    app.add_route("/v1/sms/messages/{message_id}/cancel", CancelMessage(sandesh, blocking, commit))
    app.add_route("/v1/sms/otp/send", OtpSend(sandesh, blocking, commit, trusted_proxies))
    app.add_route("/v1/sms/otp/verify", OtpVerify(sandesh, blocking, commit, trusted_proxies))
    app.add_route(DEVICE_EVENTS, DeviceEvents(sandesh, connection, blocking))
    for path in ("/compat/sparrow/v2/sms", "/compat/sparrow/v2/sms/"):  # Sparrow's base URL, with its slash or not
        app.add_route(path, SparrowSend(sandesh, authentication, blocking, commit))
    for path in ("/compat/sparrow/v2/credit", "/compat/sparrow/v2/credit/"):
        app.add_route(path, SparrowCredit(authentication, connection, blocking))
    app.add_route("/compat/aakash/sms/v3/send", AakashSend(sandesh, authentication, blocking, commit))
    app.add_route("/v1/health", Health())
    app.add_route("/v1/openapi.json", OpenApi())
    ready = Ready(connection, sandesh.clock, health, sandesh.log.recorder.events_table_name, route_window, blocking)
    app.add_route("/v1/ready", ready)
    app.add_route("/metrics", Metrics(DatabaseState(connection, sandesh.clock, health,
                                                    sandesh.log.recorder.events_table_name, route_window), blocking,
                                      metrics_token))
    add_dashboard(app, sandesh, connection, blocking, csrf_keys=dashboard_keys or _one_key(RAND_bytes(32)),
                  trusted_proxies=trusted_proxies, ready=ready, public_url=public_url)
    app.add_error_handler(Exception, _errors(health))
    app.add_error_handler(falcon.HTTPError, _http_error)
    app.add_error_handler(ApiError, _api_error)
    return app


def _one_key(key: bytes) -> Callable[[], tuple[bytes, ...]]:
    return lambda: (key,)
