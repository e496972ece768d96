"""The error table (docs/api.md, "Error codes"), in one place, and the one error body shape."""
from __future__ import annotations

from typing import Any

from sandesh.domain.errors import (DomainError, IdempotencyConflict, InsufficientBalance, InvalidRequest,
                                   NotCancelable, NotFound, OtpLimited, Refused)

ERRORS: dict[str, tuple[int, str]] = {
    "invalid_request": (400, "The request is invalid."),
    "unauthorized": (401, "Invalid API key."),
    "insufficient_balance": (402, "The workspace balance is lower than the message cost."),
    "client_disabled": (403, "This API client is disabled."),
    "workspace_pending": (403, "The workspace is pending activation; POST requests are refused until it is active."),
    "workspace_suspended": (403, "The workspace is suspended; POST requests are refused."),
    "forbidden": (403, "This message type is not allowed for the workspace."),
    "recipient_opted_out": (403, "The recipient has opted out of this workspace's promotional messages (a STOP "
                                 "reply, or the operators). Nothing was charged."),
    "not_found": (404, "Not found."),
    "method_not_allowed": (405, "Method not allowed for this path."),
    "idempotency_conflict": (409, "Idempotency-Key conflict."),
    "message_not_cancelable": (409, "Only a scheduled or queued message that no modem has taken yet can be "
                                    "canceled."),
    "rate_limited": (429, "Too many requests."),
    "server_error": (500, "Unexpected error on the service side."),
    "unavailable": (503, "No sending route is available. Nothing was charged."),
    "sms_disabled": (503, "The SMS service is switched off temporarily."),
}

MISSING_KEY = "Missing API key: send your key in the x-api-key header."
INVALID_KEY = "Invalid API key."


class ApiError(Exception):
    def __init__(self, code: str, message: str | None = None, *, details: list[dict[str, Any]] | None = None,
                 headers: dict[str, str] | None = None):
        status, default_message = ERRORS[code]
        super().__init__(message or default_message)
        self.code = code
        self.status = status
        self.message = message or default_message
        self.details = details
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"error": self.message, "code": self.code}
        if self.details is not None:
            body["details"] = self.details
        return body


def detail(path: list[str | int], message: str, code: str) -> dict[str, Any]:
    return {"path": path, "message": message, "code": code}


def item_error(code: str, problems: list[Any]) -> dict[str, Any]:
    """A refused item of a batch send: the error body a single send would get, without its status."""
    if problems:
        return ApiError(code, problems[0].message,
                        details=[detail(p.path, p.message, p.code) for p in problems]).body()
    return ApiError(code).body()


def invalid(path: list[str | int], message: str, code: str) -> ApiError:
    return ApiError("invalid_request", message, details=[detail(path, message, code)])


_CONFLICT_TEXT = {
    IdempotencyConflict.RUNNING: "A request with this Idempotency-Key is still running; retry in a second.",
    IdempotencyConflict.DIFFERENT_BODY: "This Idempotency-Key was used with a different body; use a new key for "
                                        "a new message.",
}
_LIMIT_TEXT = {
    "cooldown": "A code was sent to this number for this purpose less than 60 seconds ago.",
    "otp_number_limit": "This number has received 3 codes in the last 10 minutes.",
    "otp_ip_limit": "This end-user IP has requested 10 codes in the last 10 minutes.",
    "caller_ip": "More than 60 OTP requests per minute from this calling IP.",
}


def from_domain(error: DomainError) -> ApiError | None:
    """The answer to a domain error a use case raised, or None for one that is not the
    caller's to see (a server error)."""
    if isinstance(error, Refused):
        return ApiError(error.code)
    if isinstance(error, InvalidRequest):
        return ApiError("invalid_request", error.message, details=[detail(error.path, error.message, error.code)])
    if isinstance(error, InsufficientBalance):
        return ApiError("insufficient_balance", str(error) if error.cost is not None else None)
    if isinstance(error, IdempotencyConflict):
        return ApiError("idempotency_conflict", _CONFLICT_TEXT[error.reason])
    if isinstance(error, OtpLimited):
        wait = error.retry_after
        headers = {"Retry-After": str(max(1, int(-(-wait // 1))))} if wait is not None else None
        return ApiError("rate_limited", _LIMIT_TEXT[error.limit], headers=headers)
    if isinstance(error, NotFound):
        return ApiError("not_found")
    if isinstance(error, NotCancelable):
        return ApiError("message_not_cancelable", f"The message is {error.status}; only a scheduled or queued "
                                                  "message that no modem has taken yet can be canceled.")
    return None
