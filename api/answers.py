"""The 202 bodies of the sending use cases' results (docs/api.md, "POST /v1/sms/send", "Batch
sends"): JSON is rendered here, never in the domain."""
from __future__ import annotations

from typing import Any, Sequence

import orjson

from sandesh.domain.message import Message, accepted_reply
from sandesh.domain.sending import ItemRefused

from .errors import item_error


def accepted(message: Message) -> dict[str, Any]:
    return accepted_reply(message.id, message.message_type, message.segments, message.encoding, message.cost,
                          message.expires_at, message.send_at)


def batch_answer(results: Sequence[Message | ItemRefused]) -> str:
    """A batch's 202 body: each item's reply, or the error body a single send would get."""
    return orjson.dumps({"results": [accepted(r) if isinstance(r, Message) else item_error(r.code, list(r.problems))
                                     for r in results]}).decode()
