"""POST /devices/{sim_id}/events: what a phone running SMS Gateway for Android posts as it
happens (its webhooks, docs/operations.md "Android phones"): a message it received, and the
fate of each message Sandesh gave it.  The dispatcher polls the phone for the same things, so
this only makes them arrive sooner; a phone that cannot reach Sandesh loses nothing.

No API key: the phone signs each post with the SIM's signing key, HMAC-SHA256 of the body and
then the `X-Timestamp` header, in hex in `X-Signature`.  A SIM without a signing key takes no
post; a post whose signature is wrong, or whose timestamp is more than SKEW seconds from this
machine's clock (the phone's, not the service clock: it bounds replays), is 401 and records nothing."""
from __future__ import annotations

import hashlib
import hmac
import time
from types import SimpleNamespace
from typing import Any, Callable, ContextManager

import falcon
import falcon.asgi
import orjson

from sandesh.domain.application import Sandesh
from sandesh.domain.errors import NotFound
from sandesh.projections import registry, replies

from .errors import ApiError
from .waiting import Blocking

SKEW = 300             # seconds a post's timestamp may be from the service clock
MAX_EVENT_BYTES = 64 * 1024
REPORTS = {"sms:delivered": 0x00, "sms:failed": 0x40}


def signature(key: str, body: bytes, timestamp: str) -> str:
    return hmac.new(key.encode(), body + timestamp.encode(), hashlib.sha256).hexdigest()


class DeviceEvents:
    public = True  # the signature is the credential

    def __init__(self, sandesh: Sandesh, connection: Callable[[], ContextManager[Any]], blocking: Blocking):
        self.sandesh, self.connection, self.blocking = sandesh, connection, blocking

    async def on_post(self, req: falcon.asgi.Request, resp: falcon.asgi.Response, sim_id: str) -> None:
        body = await req.stream.read(MAX_EVENT_BYTES + 1)
        if len(body) > MAX_EVENT_BYTES:
            raise ApiError("invalid_request", f"An event is at most {MAX_EVENT_BYTES} bytes.")
        await self.blocking(self._take, sim_id, body, req.get_header("X-Signature") or "",
                            req.get_header("X-Timestamp") or "")
        resp.status = falcon.HTTP_204

    def _take(self, sim_id: str, body: bytes, signed: str, timestamp: str) -> None:
        with self.connection() as conn:
            sim = registry.find_sim(conn, "id", sim_id)
        key = self.sandesh.sims.sim_signing_key(sim["port_secret_sealed"]) if sim and sim["enabled"] else None
        if key is None or not sim["port"].startswith("android://"):
            raise ApiError("not_found", "No SIM here takes a device's posts.")
        if not (timestamp.isdigit() and abs(int(timestamp) - time.time()) <= SKEW
                and hmac.compare_digest(signed, signature(key, body, timestamp))):
            raise ApiError("unauthorized", "The signature or its timestamp is wrong.")
        try:
            event = orjson.loads(body)
            kind, payload = event["event"], event["payload"]
            message_id = str(payload["messageId"])
        except (ValueError, KeyError, TypeError):
            raise ApiError("invalid_request", "Not an event of SMS Gateway for Android.") from None
        if kind == "sms:received":
            sender = str(payload.get("sender") or payload.get("phoneNumber") or "")
            runtime = SimpleNamespace(connection=self.connection, sandesh=self.sandesh)
            replies.record_once(runtime, sim_id, message_id, sender if sender.startswith("+") else "+" + sender,
                                str(payload.get("message") or ""))
        elif kind in REPORTS:
            self._report(message_id, sim_id, REPORTS[kind])

    def _report(self, message_id: str, sim_id: str, status: int) -> None:
        """The fate of a message this SIM sent (the phone names it by Sandesh's id)."""
        def report_all(message: Any) -> None:
            if message.sim_id == sim_id:  # another SIM's: nothing to record
                message.report_whole(status, at=self.sandesh.clock.now())

        try:
            self.sandesh.dispatch.change_message(message_id, report_all)
        except NotFound:
            return  # a message the phone has and this log has not: nothing to record
