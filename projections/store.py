"""How the event log is stored: orjson states, AES-GCM encryption, inline read models.

Every event state is encrypted with a key derived from SANDESH_SECRET_KEY before it reaches
PostgreSQL (decisions §4), using eventsourcing's own AESCipher.  Inline read models (the
registry of workspaces, clients and SIMs, the balance ledger, idempotency keys) are written by
the same transaction that appends their events: the recorder runs them before it takes the
events table lock, so a failed guard (e.g. a balance that would go below zero) aborts the append
and the lock is always the last one a writer takes.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import os
from datetime import datetime
from typing import Any, Callable, Sequence

import orjson
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from eventsourcing.persistence import InterfaceError, OperationalError, StoredEvent, Transcoder
from eventsourcing.postgres import PostgresAggregateRecorder, PostgresApplicationRecorder
from eventsourcing.utils import retry
from psycopg.conninfo import conninfo_to_dict

from domain.settings import Settings

EVENTS_TABLE = "sandesh_events"


def derive_key(secret_key: str, purpose: str) -> bytes:
    """A 32-byte key for one use, so no two uses share key material."""
    return hmac.new(secret_key.encode(), f"sandesh/{purpose}".encode(), hashlib.sha256).digest()


class OrjsonTranscoder(Transcoder):
    """Event states hold JSON values only; the library's `timestamp` comes back as a datetime."""

    def encode(self, obj: Any) -> bytes:
        return orjson.dumps(obj)

    def decode(self, data: bytes) -> Any:
        state = orjson.loads(data)
        stamp = state.get("timestamp")
        if isinstance(stamp, str):
            state["timestamp"] = datetime.fromisoformat(stamp)
        return state


class SandeshRecorder(PostgresApplicationRecorder):
    """The library's recorder, with the inline read-model writes given to `save(..., inline=writer)`
    run in the append's transaction, before the events table lock, and with fewer round trips:
    no pipeline, and lock + NOTIFY sent as one simple query."""

    def __init__(self, datastore: Any, *, events_table_name: str = "stored_events"):
        super().__init__(datastore, events_table_name=events_table_name)
        table = f'"{self.datastore.schema or "public"}"."{self.events_table_name}"'
        self._lock_and_notify = (
            f"SET LOCAL lock_timeout = '{self.datastore.lock_timeout}s';"
            f" LOCK TABLE {table} IN EXCLUSIVE MODE; NOTIFY \"{self.channel_name}\""
        )

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        inline: Callable[[Any], None] | None = kwargs.get("inline")
        with self.datastore.get_connection() as conn, conn.transaction(), conn.cursor() as curs:
            if inline is not None:
                inline(curs)  # a refused guard raises here, before the lock is taken
            if not stored_events:
                return []
            curs.execute(self._lock_and_notify)
            PostgresAggregateRecorder._insert_stored_events(self, curs, stored_events)
            return self._fetch_ids_after_insert_events(curs, stored_events)


class Sealer:
    """Encrypts small secrets (webhook secrets) at rest with a key derived from the server key."""

    def __init__(self, secret_key: str):
        self._aead = AESGCM(derive_key(secret_key, "sealed-secrets"))

    def seal(self, plaintext: str) -> str:
        nonce = os.urandom(12)
        return base64.urlsafe_b64encode(nonce + self._aead.encrypt(nonce, plaintext.encode(), None)).decode()

    def open(self, sealed: str) -> str:
        raw = base64.urlsafe_b64decode(sealed.encode())
        return self._aead.decrypt(raw[:12], raw[12:], None).decode()


def eventsourcing_env(settings: Settings, *, create_table: bool = False, pool_size: int | None = None) -> dict[str, str]:
    """The eventsourcing library's configuration, built from our settings (never from os.environ)."""
    params = conninfo_to_dict(settings.database_url)
    cipher_key = base64.b64encode(derive_key(settings.require_secret_key(), "event-store")).decode()
    return {
        "PERSISTENCE_MODULE": "eventsourcing.postgres",
        "POSTGRES_DBNAME": str(params.get("dbname") or "sandesh"),
        "POSTGRES_HOST": str(params.get("host") or "127.0.0.1"),
        "POSTGRES_PORT": str(params.get("port") or "5432"),
        "POSTGRES_USER": str(params.get("user") or os.environ.get("USER") or "postgres"),
        "POSTGRES_PASSWORD": str(params.get("password") or ""),
        "POSTGRES_LOCK_TIMEOUT": "5",
        "POSTGRES_POOL_SIZE": str(pool_size or settings.pool_size),
        "POSTGRES_MAX_OVERFLOW": "8",
        "POSTGRES_PRE_PING": "n",  # a round trip per checkout; the pool replaces broken connections itself
        "CREATE_TABLE": "y" if create_table else "n",
        "ORIGINATOR_ID_TYPE": "text",
        "TRANSCODER_TOPIC": "projections.store:OrjsonTranscoder",
        "APPLICATION_RECORDER_TOPIC": "projections.store:SandeshRecorder",
        "CIPHER_TOPIC": "eventsourcing.cryptography:AESCipher",
        "CIPHER_KEY": cipher_key,
    }
