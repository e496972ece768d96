"""A batch send kept for its Idempotency-Key (docs/api.md, "Batch sends").

A batch sent with an Idempotency-Key leaves one Batch in the log, appended with its messages
and their charge: it holds the 202 body, so a retry of the same batch answers it again,
byte for byte, and sends nothing.  A batch without a key leaves only its messages.
"""
from __future__ import annotations

from eventsourcing.domain import event

from .aggregate import Aggregate
from .credentials import new_id

MAX_ITEMS = 1_000


class Batch(Aggregate):
    @staticmethod
    def create_id(**_: object) -> str:
        return new_id("bat")

    @event("Accepted")
    def __init__(self, client_id: str, workspace_id: str, idempotency_key: str, request_hash: str,
                 response: str, message_ids: list[str], at: float):
        self.client_id = client_id
        self.workspace_id = workspace_id
        self.idempotency_key = idempotency_key
        self.request_hash = request_hash
        self.response = response
        self.message_ids = message_ids
        self.created_at = at


def record(**accepted: object) -> Batch:
    """A new Batch, without the library's per-call signature introspection (as message.accept)."""
    return Batch._create(Batch.Accepted, **accepted)
