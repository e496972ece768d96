"""Authentication, gating and the request rate, in the order of docs/api.md, "Order of checks":
401 -> client disabled -> workspace status -> 429.  What is read of the caller comes from this
process's caller cache (projections/callers.py)."""
from __future__ import annotations

from typing import Any, Callable, ContextManager

import falcon

from sandesh.domain import log_context
from sandesh.domain.access import refusal
from sandesh.domain.credentials import KEY_PATTERN, sha256_hex
from sandesh.domain.clock import Clock
from sandesh.domain.ports import Caller
from sandesh.projections import request_rate
from sandesh.projections.callers import Callers

from .errors import INVALID_KEY, MISSING_KEY, ApiError


class Authentication:
    def __init__(self, connection: Callable[[], ContextManager[Any]], clock: Clock, callers: Callers, *,
                 rate_limit: bool = True):
        self.connection = connection
        self.clock = clock
        self.callers = callers
        self.rate_limit = rate_limit  # off only in the overhead benchmark's baseline

    def process_resource(self, req: falcon.Request, resp: falcon.Response, resource: Any, params: dict) -> None:
        if resource is None or not hasattr(resource, f"on_{req.method.lower()}"):
            return  # 404 and 405 are answered without a key
        if getattr(resource, "public", False):
            return  # health and readiness (api/health.py)
        key = req.get_header("x-api-key")
        if not key:
            raise ApiError("unauthorized", MISSING_KEY)
        if not KEY_PATTERN.match(key):
            raise ApiError("unauthorized", INVALID_KEY)
        now = self.clock.now()
        found = self.callers.find(sha256_hex(key), now)
        if found is None:
            raise ApiError("unauthorized", INVALID_KEY)
        row, has_route = found
        code = refusal(row["enabled"], row["status"], req.method)
        if code:
            raise ApiError(code)
        if self.rate_limit and not self.callers.within_rate(row["id"], row["rate_limit"], now):
            with self.connection() as conn:
                wait = request_rate.retry_after(conn, row["id"], row["rate_limit"], self.clock.now())
            raise ApiError("rate_limited", f"Request rate of {row['rate_limit']}/s exceeded; retry in {wait} s.",
                           headers={"Retry-After": str(wait)})
        log_context.set_fields(workspace_id=row["workspace_id"], client_id=row["id"])
        req.context.caller = Caller(row["id"], row["workspace_id"], row["brand"], row["status"], row["rates"],
                                    row["types"], row["sms_enabled"], has_route)
