"""Recording what a SIM received: a reply's part joins the reply it belongs to, and a complete
reply is attributed to the client whose keyword is its first word, or else to the message last
sent to its sender through that SIM (docs/operations.md, "Replies"; docs/api.md, "Keyword services").  Used by the dispatcher, for what it reads from a device, and by the API, for what
a phone posts to it (workers/dispatcher.py, api/devices.py)."""
from __future__ import annotations

from typing import Any

from sandesh.domain.inbound import ATTRIBUTION_WINDOW
from sandesh.domain.usecases.dispatch import KeywordOwner

from . import dispatch, inbound, registry


def record_part(runtime: Any, sim_id: str, sender: str, reference: int | None, total: int, sequence: int,
                text: str) -> None:
    with runtime.connection() as conn:
        open_reply = inbound.open_reply(conn, sim_id, sender, reference, total)
    reply = runtime.sandesh.dispatch.store_reply_part(open_reply, sim_id, sender, reference, total, sequence, text)
    if reply.all_parts:
        finish(runtime, reply.id)


def record_once(runtime: Any, sim_id: str, key: str, sender: str, text: str) -> bool:
    """A whole reply the device names by `key` (read from its inbox again after a crash, or told
    by a phone's webhook and in its inbox): recorded once, its id being the key's, and finished
    by whichever call finds it unfinished.  Whether this call recorded it."""
    reply, recorded = runtime.sandesh.dispatch.store_keyed_reply(sim_id, key, sender, text)
    if not reply.complete:
        finish(runtime, reply.id)
    return recorded


def finish(runtime: Any, reply_id: str) -> None:
    sandesh = runtime.sandesh
    reply = sandesh.dispatch.reply(reply_id)
    attributed = None
    if reply.sender.startswith("+") and reply.sender[1:].isdigit():
        with runtime.connection() as conn:
            message_id = dispatch.last_sent_to(conn, reply.sim_id, reply.sender[1:],
                                               sandesh.clock.now() - ATTRIBUTION_WINDOW)
        attributed = sandesh.history.message(message_id) if message_id else None
    sandesh.dispatch.finish_reply(reply_id, attributed, lambda word: keyword_owner(runtime, word))


def keyword_owner(runtime: Any, word: str) -> KeywordOwner | None:
    with runtime.connection() as conn:
        row = registry.keyword_owner(conn, word)
    return KeywordOwner(row["id"], row["workspace_id"]) if row else None
