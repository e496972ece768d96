"""POST /v1/sms/otp/send and /v1/sms/otp/verify (interface §POST /sms/otp/*, decisions §1 OTP).

Order: validation (400) -> calling-IP limit (429) -> message type allowed (403) -> SMS switch
and route (503) -> cooldown, per-number and per-end-user-IP limits (429) -> balance (402).
"""
from __future__ import annotations

from typing import Any

import falcon

from sandesh.domain import sending
from sandesh.domain.application import Sandesh
from sandesh.domain.clock import iso
from sandesh.domain.errors import InsufficientBalance, OtpLimited
from sandesh.projections import otp_limits

from .body import json_object
from .errors import ApiError, detail

_LIMIT_TEXT = {
    "cooldown": "A code was sent to this number for this purpose less than 60 seconds ago.",
    "otp_number_limit": "This number has received 3 codes in the last 10 minutes.",
    "otp_ip_limit": "This end-user IP has requested 10 codes in the last 10 minutes.",
    "caller_ip": "More than 60 OTP requests per minute from this calling IP.",
}


def _parsed(parse: Any, body: dict[str, Any]) -> Any:
    request, problems = parse(body)
    if problems:
        raise ApiError("invalid_request", problems[0].message,
                       details=[detail(p.path, p.message, p.code) for p in problems])
    return request


def _limited(limit: str, wait: float | None) -> ApiError:
    headers = {"Retry-After": str(max(1, int(-(-wait // 1))))} if wait is not None else None
    return ApiError("rate_limited", _LIMIT_TEXT[limit], headers=headers)


class _OtpResource:
    def __init__(self, app: Sandesh, connection: Any, trusted_proxies: tuple[str, ...]):
        self.app = app
        self.connection = connection
        self.trusted_proxies = trusted_proxies

    def calling_ip(self, req: falcon.Request) -> str:
        """The socket peer, or the first X-Forwarded-For hop when the peer is a trusted proxy."""
        peer = req.remote_addr or ""
        forwarded = req.get_header("X-Forwarded-For")
        if forwarded and peer in self.trusted_proxies:
            return forwarded.split(",")[0].strip() or peer
        return peer

    def count_calling_ip(self, req: falcon.Request) -> None:
        caller = req.context.caller
        with self.connection() as conn:
            wait = otp_limits.hit_caller_ip(conn, caller.client_id, self.calling_ip(req), self.app.clock.now())
        if wait is not None:
            raise _limited("caller_ip", wait)


class OtpSend(_OtpResource):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        caller = req.context.caller
        request = _parsed(sending.parse_otp_send, json_object(req))
        self.count_calling_ip(req)
        code = sending.refusal("otp", caller.allowed_types, caller.sms_enabled, caller.has_route)
        if code:
            raise ApiError(code)
        try:
            message, otp = self.app.send_otp(caller.client_id, caller.workspace_id, caller.brand, request.to,
                                             request.purpose, request.ip, caller.rates["otp"])
        except OtpLimited as limit:
            raise _limited(limit.limit, limit.retry_after if limit.retry_after is not None
                           else self._window_wait(limit.limit, caller.client_id, request)) from None
        except InsufficientBalance:
            raise ApiError("insufficient_balance") from None
        resp.status = falcon.HTTP_202
        resp.media = {"success": True, "messageId": message.id, "expiresAt": iso(otp.expires_at)}

    def _window_wait(self, limit: str, client_id: str, request: sending.OtpSendRequest) -> int:
        now = self.app.clock.now()
        with self.connection() as conn:
            if limit == "otp_number_limit":
                return otp_limits.retry_after_number(conn, request.to, now)
            return otp_limits.retry_after_ip(conn, client_id, request.ip or "", now)


class OtpVerify(_OtpResource):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        caller = req.context.caller
        request = _parsed(sending.parse_otp_verify, json_object(req))
        self.count_calling_ip(req)
        outcome = self.app.verify_otp(caller.client_id, request.to, request.purpose, request.code)
        body: dict[str, Any] = {"success": True, "verified": outcome.verified}
        if not outcome.verified:
            body["reason"] = outcome.reason
        resp.media = body
