"""GET /v1/health and GET /v1/ready: what a load balancer or an orchestrator asks, without a
key (docs/design.md, "Health").

`health` says the process answers, and which release it runs; it never touches the database.  `ready` says whether this
instance can do its work now: the database answers, no followed projection is more than
MAX_LAG events behind the log, and at least one SIM is a route.  It answers 200 with each check,
or 503 with `Retry-After` and the reasons."""
from __future__ import annotations

from typing import Any, Callable, ContextManager

import falcon
import falcon.asgi
import orjson

from sandesh.domain.clock import Clock
from sandesh.domain.release import VERSION
from sandesh.projections import follower, sim_health
from sandesh.projections.storage.health import DatabaseHealth, is_outage

from .waiting import Blocking

MAX_LAG = 10_000  # events; under load the projections trail by a few hundred (docs/performance.md, "Send benchmark")
RETRY_AFTER = "2"


class Health:
    public = True  # no key, and answered while the database is away
    answer = orjson.dumps({"status": "ok", "version": VERSION})

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        resp.content_type = falcon.MEDIA_JSON
        resp.data = self.answer


class Ready:
    public = True

    def __init__(self, connection: Callable[[], ContextManager[Any]], clock: Clock, health: DatabaseHealth,
                 events_table: str, route_window: float, blocking: Blocking):
        self.connection, self.clock, self.health = connection, clock, health
        self.events_table, self.route_window = events_table, route_window
        self.blocking = blocking

    async def on_get(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        answer = await self.blocking(self.checks)
        resp.content_type = falcon.MEDIA_JSON
        if not answer["ready"]:
            resp.status = falcon.HTTP_503
            resp.set_header("Retry-After", RETRY_AFTER)
        resp.data = orjson.dumps(answer)

    def checks(self) -> dict[str, Any]:
        """The answer's body: `ready`, the `reasons` it is not, and each check (also the
        operators' Traffic page, api/dashboard/ops/traffic.py)."""
        checks: dict[str, Any] = {"database": "unreachable", "projectionLag": None, "route": None}
        reasons: list[str] = []
        if self.health.down:
            reasons.append("the database cannot be reached")
        else:
            try:
                with self.connection() as conn:
                    checks["database"] = "ok"
                    lags = follower.lags(conn, self.events_table, MAX_LAG + 1)
                    route = sim_health.has_route(conn, self.clock.now(), self.route_window)
            except Exception as error:
                if not is_outage(error):
                    raise
                self.health.failed(error)
                reasons.append("the database cannot be reached")
            else:
                checks["projectionLag"], checks["route"] = lags, route
                reasons += [f"projection {name} is more than {MAX_LAG} events behind the log"
                            for name, lag in lags.items() if lag > MAX_LAG]
                if not route:
                    reasons.append("no SIM is a route: sends answer 503 unavailable")
        return {"ready": not reasons, "reasons": reasons, "checks": checks}
