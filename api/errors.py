"""The error table of interface §Errors, in one place, and the one error body shape."""
from __future__ import annotations

from typing import Any

ERRORS: dict[str, tuple[int, str]] = {
    "invalid_request": (400, "The request is invalid."),
    "unauthorized": (401, "Invalid API key."),
    "insufficient_balance": (402, "The workspace balance is lower than the message cost."),
    "client_disabled": (403, "This API client is disabled."),
    "workspace_pending": (403, "The workspace is pending activation; POST requests are refused until it is active."),
    "workspace_suspended": (403, "The workspace is suspended; POST requests are refused."),
    "forbidden": (403, "This message type is not allowed for the workspace."),
    "not_found": (404, "Not found."),
    "method_not_allowed": (405, "Method not allowed for this path."),
    "idempotency_conflict": (409, "Idempotency-Key conflict."),
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


def invalid(path: list[str | int], message: str, code: str) -> ApiError:
    return ApiError("invalid_request", message, details=[detail(path, message, code)])
