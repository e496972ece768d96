"""How the event log is stored: orjson states, AES-GCM encryption, inline read models.

Every event state is encrypted with a key derived from SANDESH_SECRET_KEY before it reaches
PostgreSQL (decisions §4), using eventsourcing's own AESCipher.  Inline read models (the
registry of workspaces, clients and SIMs, and the balance ledger) are written by the same
transaction that appends their events: the recorder runs them before it takes the events
table lock, so a failed guard (e.g. a balance that would go below zero) aborts the append.
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
from eventsourcing.persistence import StoredEvent, Transcoder
from eventsourcing.postgres import PostgresApplicationRecorder
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
    """Runs the inline read-model writer given to `save(..., inline=writer)` in the append transaction."""

    def _insert_events(self, curs: Any, stored_events: Sequence[StoredEvent], **kwargs: Any) -> None:
        inline: Callable[[Any], None] | None = kwargs.get("inline")
        if inline is not None:
            # Leaving a nested pipeline block syncs it, so a refused guard raises here, before the
            # (prepared) event insert is queued in a pipeline that is already aborted.
            with curs.connection.pipeline():
                inline(curs)


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
        "POSTGRES_PRE_PING": "y",
        "CREATE_TABLE": "y" if create_table else "n",
        "ORIGINATOR_ID_TYPE": "text",
        "TRANSCODER_TOPIC": "projections.store:OrjsonTranscoder",
        "APPLICATION_RECORDER_TOPIC": "projections.store:SandeshRecorder",
        "CIPHER_TOPIC": "eventsourcing.cryptography:AESCipher",
        "CIPHER_KEY": cipher_key,
    }
