"""GET /metrics: Prometheus text format, without a key (docs/design.md, "Metrics").

What processes count (requests and sends here, SIM submits in the dispatcher, webhook attempts
in the sender) is kept by prometheus_client in files of the shared directory
PROMETHEUS_MULTIPROC_DIR, which `sandesh serve`, `sandesh worker` and `sandesh up` point at
SANDESH_METRICS_DIR; a scrape, answered by any API worker, sums them all.  What the database
knows (the queue, the SIMs, the projections' lag) is read when Prometheus asks, by
`DatabaseState`, with bounded index-backed queries, at most once in CACHE_SECONDS.  While the
database is away, a scrape still answers 200: `sandesh_database_up` is 0 and those gauges are
left out.  Only Prometheus gets an answer: the bearer token of SANDESH_METRICS_TOKEN, or a
caller on this machine when no token is set (docs/operations.md, "Metrics").

Every label has a bounded set of values: route templates, never paths; types and outcomes from
fixed lists; SIM ids of the operator's pool.  No message id, number or key is ever a label."""
from __future__ import annotations

import hmac
import ipaddress
import os
import threading
import time
from typing import Any, Callable, ContextManager, Iterator

import falcon
import falcon.asgi
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector

from sandesh.domain.clock import Clock
from sandesh.domain.release import VERSION
from sandesh.domain.types import MESSAGE_TYPES
from sandesh.projections import dispatch, follower, sim_health
from sandesh.projections.storage import releases
from sandesh.projections.storage.health import DatabaseHealth, is_outage

from .errors import ApiError
from .waiting import Blocking

REQUESTS = Counter("sandesh_http_requests", "HTTP requests answered, by route template, method and status",
                   ["route", "method", "status"])
REQUEST_SECONDS = Histogram("sandesh_http_request_duration_seconds", "Time to answer an HTTP request",
                            ["route", "method"])
SENDS = Counter("sandesh_sends", "Send requests (POST /v1/sms/send, /v1/sms/otp/send) by message type and outcome: "
                "accepted, replayed, or the error code answered", ["type", "outcome"])

UNMATCHED = "unmatched"  # the route of a path no resource answers: never the path itself
SEND_ROUTES = {"/v1/sms/send": None, "/v1/sms/otp/send": "otp"}  # route -> its type, when the route fixes it
COUNT_CAP = 100_000  # queue depth and projection lag are counted up to this (cost bounded by it, not the data)
CACHE_SECONDS = 5.0  # what the database said is kept this long: Prometheus scrapes every 15 s or more


class RequestMetrics:
    """Falcon middleware, first in the chain: it sees every request, the 404s and 503s included."""

    async def process_request(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        req.context.metrics_started = time.perf_counter()

    async def process_response(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, resource: Any,
                               req_succeeded: bool) -> None:
        route = req.uri_template or UNMATCHED
        method = req.method if req.method in falcon.COMBINED_METHODS else "other"
        status = resp.status_code
        REQUESTS.labels(route, method, str(status)).inc()
        REQUEST_SECONDS.labels(route, method).observe(time.perf_counter() - req.context.metrics_started)
        if route in SEND_ROUTES and method == "POST":
            message_type = SEND_ROUTES[route] or getattr(req.context, "message_type", None)
            SENDS.labels(message_type if message_type in MESSAGE_TYPES else "unknown", _outcome(resp)).inc()


def _outcome(resp: falcon.Response) -> str:
    """accepted, replayed (an Idempotency-Key's first answer again), or the error code answered
    (api/errors.py ERRORS: a fixed list)."""
    if 200 <= resp.status_code <= 299:
        return "replayed" if resp.get_header("Idempotent-Replayed") else "accepted"
    return getattr(resp.context, "error_code", None) or "unknown"


class DatabaseState:
    """A collector of the gauges read from PostgreSQL (the SQL lives with the tables in
    projections/).  What it read is kept for CACHE_SECONDS: scrapes that come closer together,
    however many, cost the database one read."""

    def __init__(self, connection: Callable[[], ContextManager[Any]], clock: Clock, health: DatabaseHealth,
                 events_table: str, route_window: float):
        self.connection, self.clock, self.health = connection, clock, health
        self.events_table, self.route_window = events_table, route_window
        self._lock = threading.Lock()
        self._read_at = -CACHE_SECONDS
        self._families: list[Metric] = []

    def collect(self) -> Iterator[Metric]:
        build = GaugeMetricFamily("sandesh_build_info", "1, labelled with the release of the process that answered "
                                                        "the scrape", labels=["version"])
        build.add_metric([VERSION], 1)
        yield build
        with self._lock:
            if time.monotonic() - self._read_at >= CACHE_SECONDS:
                self._families, self._read_at = self._read_now(), time.monotonic()
            families = self._families
        up = GaugeMetricFamily("sandesh_database_up", "1 when this scrape read the database; 0 when it could not "
                                                      "(the gauges read from it are then left out)")
        up.add_metric([], 1 if families else 0)
        yield up
        yield from families

    def _read_now(self) -> list[Metric]:
        if self.health.down:
            return []
        try:
            with self.connection() as conn:
                return self._read(conn)
        except Exception as error:
            if not is_outage(error):
                raise
            self.health.failed(error)
            return []

    def _read(self, conn: Any) -> list[Metric]:
        now = self.clock.now()
        depth = GaugeMetricFamily("sandesh_queue_depth", f"Messages waiting for a SIM, by type (counted up to "
                                                         f"{COUNT_CAP})", labels=["type"])
        age = GaugeMetricFamily("sandesh_queue_oldest_age_seconds", "Age of the oldest message waiting for a SIM, "
                                                                    "by type (0 when none waits)", labels=["type"])
        for message_type, (count, oldest) in dispatch.waiting(conn, COUNT_CAP).items():
            depth.add_metric([message_type], count)
            age.add_metric([message_type], max(0.0, now - oldest) if oldest is not None else 0.0)
        state = GaugeMetricFamily("sandesh_sim_state", "1 for the SIM's state as `sandesh sim list` shows it, 0 for "
                                                       "the others", labels=["sim", "state"])
        parts = GaugeMetricFamily("sandesh_sim_parts_used", "Parts the SIM sent in the pacing window",
                                  labels=["sim"])
        credit = GaugeMetricFamily("sandesh_sim_credit_paisa", "The SIM's credit as its last balance query answered "
                                                               "(SIMs with a balance query that found an amount)",
                                   labels=["sim"])
        for sim in sim_health.pool(conn, now, self.route_window):
            for name in sim_health.STATES:
                state.add_metric([sim["id"], name], 1 if sim["state"] == name else 0)
            parts.add_metric([sim["id"]], sim["parts_used"])
            if sim["credit"] is not None:
                credit.add_metric([sim["id"]], sim["credit"])
        lag = GaugeMetricFamily("sandesh_projection_lag_events", f"Events of the log a followed projection has still "
                                                                 f"to apply (counted up to {COUNT_CAP})",
                                labels=["projection"])
        for name, events in follower.lags(conn, self.events_table, COUNT_CAP).items():
            lag.add_metric([name], events)
        database = GaugeMetricFamily("sandesh_database_release_info", "1, labelled with the release that last "
                                     "migrated the database and the release its log is finalized at (the upgrade "
                                     "gate, docs/operations.md \"Upgrading\")", labels=["migrated_by", "finalized"])
        found = releases.read(conn)
        if found is not None:
            database.add_metric([found.migrated, found.finalized], 1)
        return [depth, age, state, parts, credit, lag, database]


# Headers a proxy adds: a request that carries one did not come from this machine, whatever the
# socket's peer says (a proxy on this machine that is not in SANDESH_TRUSTED_PROXIES).
FORWARDED = ("Forwarded", "X-Forwarded-For", "X-Real-IP")


class Metrics:
    """GET /metrics, for Prometheus: with `token` (SANDESH_METRICS_TOKEN) to whoever sends it as
    `Authorization: Bearer <token>`; without one to callers on this machine only (a loopback
    peer, no proxy's headers).  Not an API key's endpoint: answered while the database is away."""
    public = True

    def __init__(self, database: DatabaseState, blocking: Blocking, token: str | None = None):
        self.database = database
        self.blocking = blocking
        self.token = token

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        self._admit(req)
        resp.content_type = CONTENT_TYPE_LATEST
        resp.data = await self.blocking(self._scrape)  # the files of every process, and the database

    def _admit(self, req: falcon.asgi.Request) -> None:
        if self.token is not None:
            scheme, _, given = (req.get_header("Authorization") or "").partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), self.token.encode()):
                raise ApiError("unauthorized", "GET /metrics needs `Authorization: Bearer` with the token of "
                                               "SANDESH_METRICS_TOKEN.", headers={"WWW-Authenticate": "Bearer"})
            return
        peer = req.remote_addr or ""
        if not _loopback(peer) or any(req.get_header(name) for name in FORWARDED):
            raise ApiError("forbidden", "GET /metrics answers callers on this machine only; set "
                                        "SANDESH_METRICS_TOKEN to scrape it from elsewhere.")

    def _scrape(self) -> bytes:
        # A registry per scrape, as prometheus_client's multiprocess mode asks: the metrics of
        # every process come from the files, none from this process's own registry.
        registry = CollectorRegistry()
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            MultiProcessCollector(registry)
        else:  # one process (an app built in a test or a benchmark): its own counters
            registry.register(REGISTRY)
        registry.register(self.database)
        return generate_latest(registry)


def _loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False
