"""The bodies of the sending use cases' results (docs/api.md, "POST /v1/sms/send", "Batch
sends", "POST /v1/sms/preview"): JSON is rendered here, never in the domain."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import orjson

from sandesh.domain.message import Message, accepted_reply
from sandesh.domain.preview import Preview
from sandesh.domain.sending import ItemRefused

from .errors import invalid, item_error


def accepted(message: Message) -> dict[str, Any]:
    return accepted_reply(message.id, message.message_type, message.segments, message.encoding, message.cost,
                          message.expires_at, message.send_at)


def batch_answer(results: Sequence[Message | ItemRefused]) -> str:
    """A batch's 202 body: each item's reply, or the error body a single send would get."""
    return orjson.dumps({"results": [accepted(r) if isinstance(r, Message) else item_error(r.code, list(r.problems))
                                     for r in results]}).decode()


def preview(request_type: str, shown: Preview) -> dict[str, Any]:
    """The 200 body of POST /v1/sms/preview."""
    body: dict[str, Any] = {
        "messageType": request_type, "segments": shown.segmentation.segments, "encoding": shown.segmentation.encoding,
        "characters": shown.segmentation.units, "charactersPerSegment": shown.characters_per_segment,
        "cost": shown.cost, "sendable": shown.sendable}
    if shown.characters:
        body["ucs2Characters"] = [{"position": c.position, "character": c.character, "replacement": c.replacement}
                                  for c in shown.characters]
    if shown.gsm7 is not None:
        body.update(gsm7Text=shown.gsm7_text, gsm7Segments=shown.gsm7.segments, gsm7Cost=shown.gsm7_cost)
    return body


def cursor_key(row: dict[str, Any] | None, order: Sequence[str], what: str) -> tuple[Any, ...]:
    """Where a list's next page starts: the ordering columns of the row its `cursor` names, or
    400 when the cursor names none of the client's `what`."""
    if row is None:
        raise invalid(["cursor"], f"cursor must be the nextCursor of an earlier page of this client's {what}",
                      "unknown_cursor")
    return tuple(row[column] for column in order)


def page_answer(rows: list[dict[str, Any]], limit: int, view: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
    """A list's page (docs/api.md, "GET /v1/sms/messages"): the first `limit` of `rows` (read
    `limit + 1` to know whether more follow), each as `view` shows it, and the cursor of the next."""
    page = rows[:limit]
    return {"data": [view(row) for row in page], "nextCursor": page[-1]["id"] if len(rows) > limit else None}
