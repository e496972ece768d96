"""Authentication, gating and the request rate, in the order of docs/api.md, "Order of checks":
401 -> client disabled -> workspace status -> 429.  What is read of the caller comes from this
process's caller cache (projections/callers.py); only what the cache does not hold is read
from the database, on a blocking thread (api/waiting.py)."""
from __future__ import annotations

from typing import Any, Callable, ContextManager

import falcon
import falcon.asgi

from sandesh.domain import log_context
from sandesh.domain.access import refusal
from sandesh.domain.credentials import KEY_PATTERN, sha256_hex
from sandesh.domain.clock import Clock
from sandesh.domain.ports import Caller
from sandesh.projections import request_rate
from sandesh.projections.callers import Callers

from .errors import INVALID_KEY, MISSING_KEY, ApiError
from .waiting import Blocking


class Authentication:
    def __init__(self, connection: Callable[[], ContextManager[Any]], clock: Clock, callers: Callers,
                 blocking: Blocking, *, rate_limit: bool = True):
        self.connection = connection
        self.clock = clock
        self.callers = callers
        self.blocking = blocking
        self.rate_limit = rate_limit  # off only in the overhead benchmark's baseline

    async def process_resource(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, resource: Any,
                               params: dict) -> None:
        if resource is None or not hasattr(resource, f"on_{req.method.lower()}"):
            return  # 404 and 405 are answered without a key
        if getattr(resource, "public", False):
            return  # health and readiness (api/health.py)
        if getattr(resource, "dashboard", False):
            return  # people sign in to the dashboard; an API key never opens it (api/dashboard/)
        req.context.caller = await self.caller(req.get_header("x-api-key"), req.method)

    async def caller(self, key: str | None, method: str) -> Caller:
        """The caller a key names, checked in the order of checks (ApiError otherwise): also for
        the resources that take their key elsewhere than x-api-key (api/compat.py)."""
        if not key:
            raise ApiError("unauthorized", MISSING_KEY)
        if not KEY_PATTERN.match(key):
            raise ApiError("unauthorized", INVALID_KEY)
        now = self.clock.now()
        key_hash = sha256_hex(key)
        found = self.callers.known(key_hash, now)
        if found is None:
            found = await self.blocking(self.callers.find, key_hash, now)
        if found is None:
            raise ApiError("unauthorized", INVALID_KEY)
        row, has_route = found
        code = refusal(row["enabled"], row["status"], method)
        if code:
            raise ApiError(code)
        if self.rate_limit and not self.callers.within_share(row["id"]) and not await self.blocking(
                self.callers.within_rate, row["id"], row["rate_limit"], now):
            wait = await self.blocking(self._retry_after, row["id"], row["rate_limit"])
            raise ApiError("rate_limited", f"Request rate of {row['rate_limit']}/s exceeded; retry in {wait} s.",
                           headers={"Retry-After": str(wait)})
        log_context.set_fields(workspace_id=row["workspace_id"], client_id=row["id"])
        return request_rate.caller_of(row, has_route)

    def _retry_after(self, client_id: str, rate: int) -> int:
        with self.connection() as conn:
            return request_rate.retry_after(conn, client_id, rate, self.clock.now())
