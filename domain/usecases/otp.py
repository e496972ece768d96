"""One-time passwords: a code sent as an `otp` message, and its check (docs/api.md, "OTP").
A code is kept only as its keyed hash, in the Otp aggregate of client + number + purpose."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..clock import Clock
from ..credentials import same_secret
from ..errors import Contended, OtpLimited, Refused
from ..message import Message, accept
from ..otp import LIFETIME, NO_ACTIVE_OTP, RESEND_COOLDOWN, Otp, Outcome, code_text, hash_code, new_code, otp_id
from ..ports import Caller, OtpWindows, Texts
from ..segments import segment
from ..sending import OtpSendRequest, OtpVerifyRequest, refusal as send_refusal
from ..steps import Read, Steps, retried, run
from .log import Log
from .sending import text_key


@dataclass(frozen=True)
class OtpSent:
    message: Message
    otp: Otp


class Otps:
    def __init__(self, log: Log, clock: Clock, texts: Texts, windows: OtpWindows, otp_keys: Callable[[], tuple[bytes, ...]],
                 append: Callable[..., None]):
        self.log, self.clock, self.texts, self.windows = log, clock, texts, windows
        # Key the hash of codes (no code is ever stored in clear): the first makes them, every one
        # checks them, so a code issued before a key rotation stays good until it expires.
        self.otp_keys = otp_keys
        self.append = append  # sends are appended by the process's group commit in the API

    def send_otp(self, caller: Caller, request: OtpSendRequest, calling_ip: str) -> OtpSent:
        return run(self.send_otp_steps(caller, request, calling_ip), self.append)

    def send_otp_steps(self, caller: Caller, request: OtpSendRequest, calling_ip: str) -> Steps[OtpSent]:
        """POST /v1/sms/otp/send after validation, in the order of docs/api.md, "OTP": the calling
        IP's limit, the refusals (Refused), the cooldown and the per-number and per-end-user-IP
        windows (OtpLimited, always with its retry_after), the charge (InsufficientBalance)."""
        yield Read(self._count_calling_ip, (caller, calling_ip))
        code = send_refusal("otp", caller.allowed_types, caller.sms_enabled, caller.has_route)
        if code:
            raise Refused(code)
        try:
            return (yield from self._issue(caller, request))
        except OtpLimited as limit:
            if limit.retry_after is not None:
                raise
            now = self.clock.now()
            wait = yield (Read(self.windows.retry_after_number, (request.to, now))
                          if limit.limit == "otp_number_limit"
                          else Read(self.windows.retry_after_ip, (caller.client_id, request.ip or "", now)))
            raise OtpLimited(limit.limit, wait) from limit

    def verify_otp(self, caller: Caller, request: OtpVerifyRequest, calling_ip: str) -> Outcome:
        return run(self.verify_otp_steps(caller, request, calling_ip), self.log.save)

    def verify_otp_steps(self, caller: Caller, request: OtpVerifyRequest, calling_ip: str) -> Steps[Outcome]:
        """POST /v1/sms/otp/verify after validation: the calling IP's limit, then the check of
        docs/api.md, "OTP" (verify results); concurrent checks race on the code's version, so one code
        is verified once."""
        yield Read(self._count_calling_ip, (caller, calling_ip))

        def attempt() -> Steps[tuple[tuple[Otp, ...], Outcome]]:
            otp = yield Read(self.log.find, (otp_id(caller.client_id, request.to, request.purpose), Otp))
            if otp is None or otp.state is None:
                return (), Outcome(False, NO_ACTIVE_OTP)
            outcome = otp.verify(self._hash_to_check(otp, request.code), self.clock.now())
            return ((otp,) if otp.pending_events else ()), outcome

        return (yield from retried(attempt, f"the check of a code for {request.to}"))

    def _hash_to_check(self, otp: Otp, code: str) -> str:
        """The code's hash under the key that made the code's own, if one does; else the first."""
        hashes = [hash_code(key, otp.id, code) for key in self.otp_keys()]
        return next((h for h in hashes if same_secret(h, otp.code_hash)),
                    hashes[0])

    def _count_calling_ip(self, caller: Caller, calling_ip: str) -> None:
        wait = self.windows.hit_caller_ip(caller.client_id, calling_ip, self.clock.now())
        if wait is not None:
            raise OtpLimited("caller_ip", wait)

    def _issue(self, caller: Caller, request: OtpSendRequest) -> Steps[OtpSent]:
        """A new code for client + number + purpose, sent as an `otp` message and charged at the
        workspace's `otp` rate per segment; the message, the code's hash and the charge commit together."""
        key_of_texts = yield from text_key(self.texts, caller.workspace_id)
        client_id, to, purpose = caller.client_id, request.to, request.purpose

        def attempt() -> Steps[tuple[tuple[Message, Otp], OtpSent]]:
            now = self.clock.now()
            otp = (yield Read(self.log.find, (otp_id(client_id, to, purpose), Otp))) or Otp(
                client_id=client_id, to=to, purpose=purpose)
            wait = otp.cooldown_left(now)
            if wait > 0:
                raise OtpLimited("cooldown", wait)
            code = new_code()
            text = code_text(code, caller.brand, caller.otp_template, caller.otp_web_domain, request.app_hash)
            parts = segment(text)
            message = accept(client_id=client_id, workspace_id=caller.workspace_id, to=to,
                             text=self.texts.seal_with(key_of_texts, text), message_type="otp",
                             segments=parts.segments, encoding=parts.encoding,
                             cost=caller.rates["otp"] * parts.segments,
                             idempotency_key=None, request_hash=None, at=now, expires_at=now + LIFETIME)
            otp.issue(code_hash=hash_code(self.otp_keys()[0], otp.id, code), message_id=message.id, ip=request.ip, at=now)
            return (message, otp), OtpSent(message, otp)

        try:
            return (yield from retried(attempt, f"a code for {to}", tries=3))
        except Contended:  # other sends for this code kept winning the race: one of them was just sent
            raise OtpLimited("cooldown", RESEND_COOLDOWN) from None
