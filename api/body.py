"""Reading a POST body: JSON, `content-type: application/json`, an object (docs/design.md,
"Decisions: HTTP interface")."""
from __future__ import annotations

from typing import Any, Callable

import falcon.asgi
import orjson

from .errors import ApiError, detail

MAX_BODY_BYTES = 64 * 1024


async def json_object(req: falcon.asgi.Request, max_bytes: int = MAX_BODY_BYTES) -> dict[str, Any]:
    content_type = (req.content_type or "").split(";")[0].strip().lower()
    if content_type != "application/json":
        raise ApiError("invalid_request", "content-type must be application/json.",
                       details=[detail([], "content-type must be application/json", "invalid_content_type")])
    raw = await req.stream.read(max_bytes + 1)
    if len(raw) > max_bytes:
        raise ApiError("invalid_request", "The body is too large.",
                       details=[detail([], f"at most {max_bytes} bytes", "too_large")])
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        raise ApiError("invalid_request", "The body is not valid JSON.",
                       details=[detail([], f"invalid JSON: {error}", "invalid_json")]) from None
    if not isinstance(value, dict):
        raise ApiError("invalid_request", "The body must be a JSON object.",
                       details=[detail([], "expected a JSON object", "invalid_type")])
    return value


def parsed(parse: Callable[[dict[str, Any]], tuple[Any, list[Any]]], body: dict[str, Any]) -> Any:
    """The typed request a domain parser makes of the body, or 400 listing every problem."""
    request, problems = parse(body)
    if problems:
        raise ApiError("invalid_request", problems[0].message,
                       details=[detail(p.path, p.message, p.code) for p in problems])
    return request
