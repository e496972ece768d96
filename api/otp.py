"""POST /v1/sms/otp/send and /v1/sms/otp/verify (docs/api.md, "OTP"; docs/design.md, "Decisions: OTP"):
parse, call the use case (Sandesh.send_otp, Sandesh.verify_otp), render.  The order of the
checks is the use case's."""
from __future__ import annotations

from typing import Any

import falcon

from sandesh.domain import sending
from sandesh.domain.application import Sandesh
from sandesh.domain.clock import iso

from .body import json_object, parsed


class _OtpResource:
    def __init__(self, app: Sandesh, trusted_proxies: tuple[str, ...]):
        self.app = app
        self.trusted_proxies = trusted_proxies

    def calling_ip(self, req: falcon.Request) -> str:
        """The socket peer, or the first X-Forwarded-For hop when the peer is a trusted proxy."""
        peer = req.remote_addr or ""
        forwarded = req.get_header("X-Forwarded-For")
        if forwarded and peer in self.trusted_proxies:
            return forwarded.split(",")[0].strip() or peer
        return peer


class OtpSend(_OtpResource):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        request = parsed(sending.parse_otp_send, json_object(req))
        sent = self.app.send_otp(req.context.caller, request, self.calling_ip(req))
        resp.status = falcon.HTTP_202
        resp.media = {"success": True, "messageId": sent.message.id, "expiresAt": iso(sent.otp.expires_at)}


class OtpVerify(_OtpResource):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        request = parsed(sending.parse_otp_verify, json_object(req))
        outcome = self.app.verify_otp(req.context.caller, request, self.calling_ip(req))
        body: dict[str, Any] = {"success": True, "verified": outcome.verified}
        if not outcome.verified:
            body["reason"] = outcome.reason
        resp.media = body
