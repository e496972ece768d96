"""Idempotency-Key claims (docs/api.md, "Idempotency"; docs/design.md, "Decisions: idempotency").

A request with a key holds a session advisory lock on (client, key) while it runs, so a
concurrent twin sees "still running" (409).  The record itself is written by the append that
accepts the message (`remember`, called by registry.py's handler of `Message.Accepted`), so key,
message and charge commit together; its primary key is the backstop when two requests race past
the lock check.  Owns `idempotency_keys` (`MODEL`), part of registry.py's inline projection.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, ContextManager, Iterator

import orjson

from sandesh.domain.batch import Batch
from sandesh.domain.message import Message, accepted_reply
from sandesh.domain.ports import Claim, Prior

from .contract import ReadModel
from .rows import Rows, Table

IDEMPOTENCY_RETENTION = 24 * 3600  # docs/api.md, "Idempotency"
DDL = """
CREATE TABLE IF NOT EXISTS idempotency_keys (
    client_id text NOT NULL, key text NOT NULL, request_hash text NOT NULL, message_id text NOT NULL,
    response text NOT NULL, created_at double precision NOT NULL,
    CONSTRAINT idempotency_keys_pkey PRIMARY KEY (client_id, key));
"""


MODEL = ReadModel(tables={"idempotency_keys": Table("idempotency_keys", ("client_id", "key"))}, ddl=DDL)


def remember(rows: Rows, e: Message.Accepted) -> None:
    """Inside the append of a Message.Accepted: keep its key with the 202 body; the primary key
    refuses a second commit under the same key."""
    if e.idempotency_key is None:
        return
    rows.delete("idempotency_keys", (e.client_id, e.idempotency_key),
                older=("created_at", e.at - IDEMPOTENCY_RETENTION))
    reply = accepted_reply(e.originator_id, e.message_type, e.segments, e.encoding, e.cost,
                           e.expires_at, e.send_at)
    rows.insert("idempotency_keys", {"client_id": e.client_id, "key": e.idempotency_key,
                                     "request_hash": e.request_hash, "message_id": e.originator_id,
                                     "response": orjson.dumps(reply).decode(), "created_at": e.at})


def remember_batch(rows: Rows, e: Batch.Accepted) -> None:
    """Inside the append of a batch's messages: its key with the batch's 202 body."""
    rows.delete("idempotency_keys", (e.client_id, e.idempotency_key),
                older=("created_at", e.at - IDEMPOTENCY_RETENTION))
    rows.insert("idempotency_keys", {"client_id": e.client_id, "key": e.idempotency_key,
                                     "request_hash": e.request_hash, "message_id": e.originator_id,
                                     "response": e.response, "created_at": e.at})


def prior(conn: Any, client_id: str, key: str, now: float) -> Prior | None:
    row = conn.execute(
        "SELECT request_hash, response FROM idempotency_keys WHERE client_id = %s AND key = %s AND created_at > %s",
        (client_id, key, now - IDEMPOTENCY_RETENTION)).fetchone()
    return Prior(row["request_hash"], row["response"]) if row else None


@contextmanager
def claim(connection: Callable[[], ContextManager[Any]], client_id: str, key: str, now: float) -> Iterator[Claim]:
    lock = f"{client_id} {key}"  # client ids hold no space, so this names one (client, key)
    with connection() as conn:
        locked = conn.execute("SELECT pg_try_advisory_lock(hashtextextended(%s, 0)) AS locked", (lock,)).fetchone()["locked"]
        if not locked:
            yield Claim(running_elsewhere=True, prior=None)
            return
        try:
            yield Claim(running_elsewhere=False, prior=prior(conn, client_id, key, now))
        finally:
            conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (lock,))


class Keys:
    """The application's IdempotencyKeys port (domain/ports.py) on pooled connections."""

    def __init__(self, connection: Callable[[], ContextManager[Any]]):
        self.connection = connection

    def claim(self, client_id: str, key: str, now: float) -> ContextManager[Claim]:
        return claim(self.connection, client_id, key, now)

    def prior(self, client_id: str, key: str, now: float) -> Prior | None:
        with self.connection() as conn:
            return prior(conn, client_id, key, now)
