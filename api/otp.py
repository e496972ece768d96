"""POST /v1/sms/otp/send and /v1/sms/otp/verify (docs/api.md, "OTP"; docs/design.md, "Decisions: OTP"):
parse, call the use case (domain/usecases/otp.py), render.  The order of the
checks is the use case's."""
from __future__ import annotations

from typing import Any

import falcon
import falcon.asgi

from sandesh.domain import sending
from sandesh.domain.application import Sandesh
from sandesh.domain.clock import iso

from .body import json_object, parsed
from .peers import calling_ip
from .waiting import Blocking, Commit, drive


class _OtpResource:
    def __init__(self, sandesh: Sandesh, blocking: Blocking, commit: Commit, trusted_proxies: tuple[str, ...]):
        self.sandesh, self.blocking, self.commit = sandesh, blocking, commit
        self.trusted_proxies = trusted_proxies

    def calling_ip(self, req: falcon.asgi.Request) -> str:
        return calling_ip(req, self.trusted_proxies)


class OtpSend(_OtpResource):
    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        request = parsed(sending.parse_otp_send, await json_object(req))
        steps = self.sandesh.otp.send_otp_steps(req.context.caller, request, self.calling_ip(req))
        sent = await drive(steps, self.blocking, self.commit)
        resp.status = falcon.HTTP_202
        resp.media = {"success": True, "messageId": sent.message.id, "expiresAt": iso(sent.otp.expires_at)}


class OtpVerify(_OtpResource):
    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response) -> None:
        request = parsed(sending.parse_otp_verify, await json_object(req))
        steps = self.sandesh.otp.verify_otp_steps(req.context.caller, request, self.calling_ip(req))
        outcome = await drive(steps, self.blocking, self.commit)
        body: dict[str, Any] = {"success": True, "verified": outcome.verified}
        if not outcome.verified:
            body["reason"] = outcome.reason
        resp.media = body
