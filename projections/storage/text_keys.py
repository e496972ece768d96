"""The keys that message and reply texts are encrypted under (domain/ports.py `Texts`;
docs/design.md, "Erasing texts").

Owns `text_keys`: one row per key, its owner (a workspace id, or `reply:<id>` for a reply still
gathering parts), the key itself sealed under the server's text-keys data key (keys.py), when
it was destroyed, and when it stopped sealing new texts (a rotation for a leaked root key
replaces every key: keys.rotate).  It is not a read model: nothing in the log makes it, a replay never touches
it, and a backup of the log and read models leaves it out (docs/design.md, "Erasing texts").  Destroying a
key sets its material to NULL; every text sealed under it is then unreadable wherever a copy of
it lies.

A sealed text is `tk1:<key id>:<base64 of nonce + AES-GCM ciphertext>`, the key id bound in as
associated data.  Each process keeps the keys it used for at most KEY_CACHE_SECONDS, so a key
destroyed in one process is refused by every other within that time (the house rule for state
an operator changes).
"""
from __future__ import annotations

import base64
import threading
import time
from ssl import RAND_bytes
from typing import Any, Callable, ContextManager

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from sandesh.domain.clock import Clock
from sandesh.domain.credentials import new_id

from .keys import RingSealer

TABLES = ("text_keys",)
DDL = """
CREATE TABLE IF NOT EXISTS text_keys (
    id text PRIMARY KEY, owner text NOT NULL, sealed text, created_at double precision NOT NULL,
    shredded_at double precision);
ALTER TABLE text_keys ADD COLUMN IF NOT EXISTS replaced_at double precision;
DROP INDEX IF EXISTS text_keys_current;
CREATE UNIQUE INDEX IF NOT EXISTS text_keys_current_one ON text_keys (owner)
    WHERE shredded_at IS NULL AND replaced_at IS NULL;
"""
PREFIX = "tk1:"
KEY_CACHE_SECONDS = 1.0


class TextKeys:
    def __init__(self, connection: Callable[[], ContextManager[Any]], sealer: RingSealer, clock: Clock):
        self._connection, self._sealer, self._clock = connection, sealer, clock
        self._current: dict[str, tuple[float, str, AESGCM]] = {}   # owner -> (read at, key id, cipher)
        self._known: dict[str, tuple[float, AESGCM | None]] = {}   # key id -> (read at, cipher or None)
        self._lock = threading.Lock()

    def seal(self, owner: str, text: str) -> str:
        return self.seal_with(self._current_key(owner), text)

    def key(self, owner: str) -> tuple[str, AESGCM]:
        """The owner's current key (read from the database when the cache's copy is older than
        KEY_CACHE_SECONDS), for `seal_with`."""
        return self._current_key(owner)

    def cached_key(self, owner: str) -> tuple[str, AESGCM] | None:
        """The owner's current key when the cache holds it fresh; None when `key` must read it."""
        with self._lock:
            cached = self._current.get(owner)
        if cached is not None and time.monotonic() - cached[0] < KEY_CACHE_SECONDS:
            return cached[1], cached[2]
        return None

    def seal_with(self, key: tuple[str, AESGCM], text: str) -> str:
        key_id, cipher = key
        nonce = RAND_bytes(12)  # not os.urandom: docs/performance.md, "Random bytes without a thread switch"
        sealed = cipher.encrypt(nonce, text.encode(), key_id.encode())
        return f"{PREFIX}{key_id}:{base64.b64encode(nonce + sealed).decode()}"

    def open(self, sealed: str | None) -> str | None:
        if sealed is None or not sealed.startswith(PREFIX):
            return sealed
        key_id, _, body = sealed[len(PREFIX):].partition(":")
        cipher = self._key(key_id)
        if cipher is None:
            return None
        raw = base64.b64decode(body)
        try:
            return cipher.decrypt(raw[:12], raw[12:], key_id.encode()).decode()
        except InvalidTag:
            return None

    def shred(self, owner: str) -> int:
        with self._connection() as conn:
            shredded = conn.execute("UPDATE text_keys SET sealed = NULL, shredded_at = %s"
                                    " WHERE owner = %s AND shredded_at IS NULL RETURNING id",
                                    (self._clock.now(), owner)).fetchall()
        with self._lock:
            self._current.pop(owner, None)
            for row in shredded:
                self._known.pop(row["id"], None)
        return len(shredded)

    def _current_key(self, owner: str) -> tuple[str, AESGCM]:
        now = time.monotonic()
        cached = self.cached_key(owner)
        if cached is not None:
            return cached
        with self._connection() as conn:
            row = conn.execute("SELECT id, sealed FROM text_keys WHERE owner = %s AND shredded_at IS NULL"
                               " AND replaced_at IS NULL", (owner,)).fetchone()
            if row is None:  # the owner's first text, or its first since its keys were destroyed
                key = AESGCM.generate_key(bit_length=256)
                conn.execute("INSERT INTO text_keys (id, owner, sealed, created_at) VALUES (%s, %s, %s, %s)"
                             " ON CONFLICT DO NOTHING",
                             (new_id("tk"), owner, self._sealer.seal(base64.b64encode(key).decode()),
                              self._clock.now()))
                row = conn.execute("SELECT id, sealed FROM text_keys WHERE owner = %s AND shredded_at IS NULL"
                                   " AND replaced_at IS NULL", (owner,)).fetchone()  # ours, or a twin's that won the race
        cipher = AESGCM(base64.b64decode(self._sealer.open(row["sealed"])))
        with self._lock:
            self._current[owner] = (now, row["id"], cipher)
            self._known[row["id"]] = (now, cipher)
        return row["id"], cipher

    def _key(self, key_id: str) -> AESGCM | None:
        now = time.monotonic()
        with self._lock:
            cached = self._known.get(key_id)
        if cached is not None and now - cached[0] < KEY_CACHE_SECONDS:
            return cached[1]
        with self._connection() as conn:
            row = conn.execute("SELECT sealed FROM text_keys WHERE id = %s", (key_id,)).fetchone()
        cipher = None
        if row is not None and row["sealed"] is not None:
            cipher = AESGCM(base64.b64decode(self._sealer.open(row["sealed"])))
        with self._lock:
            self._known[key_id] = (now, cipher)
        return cipher
