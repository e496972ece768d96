"""The server's key ring (docs/operations.md, "Rotating the key").

`SANDESH_SECRET_KEY` is a process's newest key and `SANDESH_PREVIOUS_KEYS` the older ones it
still reads with.  A key is named by its id, a hash of it, so the database can say which keys
exist without holding any.  Every use derives its own key from each (`derive_key`): the event
cipher, sealed secrets (webhook secrets, PINs, TOTP secrets), the keys of texts, OTP code
hashes and the dashboard's CSRF tokens.

Owns `sandesh_keys`, the ring as the database knows it: one row per key id.  `position` 0 is
the key the installation began with: its event states and sealed values carry no key id, in
the formats of releases before key rotation.  The `current` key writes: every process reads it
every second (releases.Watch) and turns to it; `previous` keys are read only; a `retired` key
is needed by nothing and no process needs to hold it.  A process refuses to start without
every key that is not retired (`check`).

Formats.  An event state under a key other than the first is `EVENT_MARK`, the key id's four
bytes, then the library's AESCipher format (nonce, tag, ciphertext); a sealed value is
`k1.<key id>.<base64 of nonce + ciphertext>`.  A value in neither form, or one whose named key
does not open it, is tried with every key held (a first-key state begins with random bytes).
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import logging
from ssl import RAND_bytes
from typing import Any, Callable, Iterable, Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from psycopg.rows import dict_row, tuple_row

from sandesh.domain.settings import ConfigurationError

log = logging.getLogger("sandesh.keys")

DDL = """
CREATE TABLE IF NOT EXISTS sandesh_keys (
    id text PRIMARY KEY, position integer NOT NULL UNIQUE,
    state text NOT NULL CHECK (state IN ('current', 'previous', 'retired')),
    added_at timestamptz NOT NULL DEFAULT now(),
    current_since double precision, rotated_by text,
    resealed_through bigint, resealed_at timestamptz,
    retired_at timestamptz, retired_by text);
CREATE UNIQUE INDEX IF NOT EXISTS sandesh_keys_one_current ON sandesh_keys (state) WHERE state = 'current';
"""

EVENT_MARK = b"sk\x01"
SEALED_MARK = "k1."
ID_BYTES = 4
PURPOSES = ("event-store", "sealed-secrets", "text-keys", "otp-codes", "dashboard-csrf")


def derive_key(secret_key: str, purpose: str) -> bytes:
    """A 32-byte key for one use, so no two uses share key material."""
    return hmac.new(secret_key.encode(), f"sandesh/{purpose}".encode(), hashlib.sha256).digest()


def key_id(secret_key: str) -> str:
    """The key's public name: 8 hex digits that tell keys apart and reveal nothing of them."""
    return derive_key(secret_key, "key-id")[:ID_BYTES].hex()


class KeyMissing(ConfigurationError):
    """A process lacks a key the database still needs, or holds only retired ones; the message
    says which and what to set."""


class KeyRing:
    """The keys one process holds (newest first) and the database's word on which one writes."""

    def __init__(self, secrets: Sequence[str]):
        self.secrets: dict[str, str] = {}
        for secret in secrets:
            self.secrets.setdefault(key_id(secret), secret)
        self.newest = next(iter(self.secrets))
        self.current = self.newest        # the key that writes: the database's `current`, once read
        self.original: str | None = None  # the database's first key, whose values carry no id
        self.retired: frozenset[str] = frozenset()
        self._followed = False
        self._complained: set[str] = set()
        self._derived: dict[str, dict[str, bytes]] = {}
        self._aeads: dict[str, dict[str, AESGCM]] = {}

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(self.secrets)

    @property
    def legacy(self) -> bool:
        """Whether new values take the first key's formats, which releases before key rotation
        read: until the first rotation, so that a rolling upgrade's older processes read them."""
        if self.original is None:
            return len(self.secrets) == 1
        return self.current == self.original

    def follow(self, rows: Iterable[dict[str, Any]]) -> None:
        """Take the database's ring (rows of `sandesh_keys`): which key writes, which is first."""
        current = None
        retired = set()
        for row in rows:
            if row["position"] == 0:
                self.original = row["id"]
            if row["state"] == "current":
                current = row["id"]
            elif row["state"] == "retired":
                retired.add(row["id"])
        self.retired = frozenset(retired)
        first, self._followed = not self._followed, True
        if current is not None and current != self.current:
            if current in self.secrets:
                if not first:
                    log.info("writing with key %s from now on", current)
                self.current = current
            elif current not in self._complained:
                self._complained.add(current)
                log.error("the database writes with key %s, which this process does not hold: set it in "
                          "SANDESH_SECRET_KEY and restart (docs/operations.md, \"Rotating the key\")", current)

    def derived(self, purpose: str) -> dict[str, bytes]:
        """The key for `purpose` derived from each key held, by key id."""
        found = self._derived.get(purpose)
        if found is None:
            found = self._derived[purpose] = {kid: derive_key(s, purpose) for kid, s in self.secrets.items()}
        return found

    def aead(self, purpose: str, kid: str) -> AESGCM:
        by_id = self._aeads.setdefault(purpose, {})
        found = by_id.get(kid)
        if found is None:
            found = by_id[kid] = AESGCM(self.derived(purpose)[kid])
        return found

    def reading_order(self) -> list[str]:
        """The keys to try on a value that names none: the first key, then the writing one, then the rest."""
        first = [k for k in (self.original, self.current) if k in self.secrets]
        return list(dict.fromkeys(first + list(self.secrets)))

    @property
    def state(self) -> tuple[str, str | None]:
        """What the ciphers' cached choices depend on: they choose again when it changes."""
        return self.current, self.original


class RingCipher:
    """The event store's cipher over the ring: writes with the current key, reads with any
    (eventsourcing's Cipher interface; the library's AESCipher format inside).  Every event of
    a send and of a replay passes here, so its choices are kept until the ring changes."""

    def __init__(self, ring: KeyRing):
        self.ring = ring
        self._state: tuple[str, str | None] | None = None
        self._writer: tuple[AESGCM, bytes] = (ring.aead("event-store", ring.current), b"")
        self._order: tuple[AESGCM, ...] = ()
        self._marked = {bytes.fromhex(kid): ring.aead("event-store", kid) for kid in ring.secrets}

    def _choose(self) -> None:
        ring = self.ring
        self._state = ring.state
        self._writer = (ring.aead("event-store", ring.current),
                        b"" if ring.legacy else EVENT_MARK + bytes.fromhex(ring.current))
        self._order = tuple(ring.aead("event-store", kid) for kid in ring.reading_order())

    def encrypt(self, plaintext: bytes) -> bytes:
        if self._state != self.ring.state:
            self._choose()
        aead, mark = self._writer
        nonce = RAND_bytes(12)  # not os.urandom: docs/performance.md, "Random bytes without a thread switch"
        sealed = aead.encrypt(nonce, plaintext, None)
        return mark + nonce + sealed[-16:] + sealed[:-16]

    def decrypt(self, ciphertext: bytes) -> bytes:
        if self._state != self.ring.state:
            self._choose()
        if ciphertext[:3] == EVENT_MARK:
            aead = self._marked.get(ciphertext[3:7])
            if aead is not None:
                opened = _open_event(aead, ciphertext[7:])
                if opened is not None:
                    return opened
        if len(ciphertext) < 28:
            raise ValueError("Damaged cipher text: too short")
        for aead in self._order:
            opened = _open_event(aead, ciphertext)
            if opened is not None:
                return opened
        raise ValueError("Invalid cipher tag: no key of this process opens the event "
                         "(docs/operations.md, \"Rotating the key\")")


def _open_event(aead: AESGCM, body: bytes) -> bytes | None:
    try:
        return aead.decrypt(body[:12], body[28:] + body[12:28], None)
    except InvalidTag:
        return None


class RingSealer:
    """Small secrets sealed at rest under the ring, one derived key per purpose (the domain's
    Sealer port): sealed with the current key, opened with any."""

    def __init__(self, ring: KeyRing, purpose: str = "sealed-secrets"):
        self.ring, self.purpose = ring, purpose

    def seal(self, plaintext: str) -> str:
        ring = self.ring
        nonce = RAND_bytes(12)
        body = base64.urlsafe_b64encode(nonce + ring.aead(self.purpose, ring.current).encrypt(
            nonce, plaintext.encode(), None)).decode()
        return body if ring.legacy else f"{SEALED_MARK}{ring.current}.{body}"

    def open(self, sealed: str) -> str:
        ring = self.ring
        if sealed.startswith(SEALED_MARK):
            kid, _, body = sealed[len(SEALED_MARK):].partition(".")
            if kid in ring.secrets:
                opened = self._open(kid, body)
                if opened is not None:
                    return opened
        for kid in ring.reading_order():
            opened = self._open(kid, sealed)
            if opened is not None:
                return opened
        raise ValueError("no key of this process opens the sealed value (docs/operations.md, \"Rotating the key\")")

    def current(self, sealed: str) -> bool:
        """Whether `sealed` is under the key that writes now (nothing to reseal)."""
        ring = self.ring
        if sealed.startswith(SEALED_MARK):
            return sealed[len(SEALED_MARK):].partition(".")[0] == ring.current
        return ring.legacy

    def _open(self, kid: str, body: str) -> str | None:
        try:
            raw = base64.urlsafe_b64decode(body.encode())
            return self.ring.aead(self.purpose, kid).decrypt(raw[:12], raw[12:], None).decode()
        except (InvalidTag, ValueError):
            return None


class RingHashes:
    """Keys of one use for keyed hashes (OTP codes, CSRF tokens): the current one makes them,
    every one held checks them, so those made before a rotation stay valid until they expire."""

    def __init__(self, ring: KeyRing, purpose: str):
        self.ring, self.purpose = ring, purpose

    def current(self) -> bytes:
        return self.ring.derived(self.purpose)[self.ring.current]

    def __call__(self) -> tuple[bytes, ...]:
        derived = self.ring.derived(self.purpose)
        ring = self.ring
        return (derived[ring.current], *(key for kid, key in derived.items()
                                         if kid != ring.current and kid not in ring.retired))


# The database's ring

def _rows(conn: Any, query: str, params: Any = None) -> list[dict[str, Any]]:
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(query, params).fetchall()


def _tuples(conn: Any, query: str, params: Any = None) -> list[tuple[Any, ...]]:
    with conn.cursor(row_factory=tuple_row) as cur:
        return cur.execute(query, params).fetchall()


def _value(conn: Any, query: str, params: Any = None) -> Any:
    found = _tuples(conn, query, params)
    return found[0][0] if found else None


def read(conn: Any) -> list[dict[str, Any]]:
    """The database's ring, first key first; [] before a release with key rotation migrated it."""
    if not _rows(conn, "SELECT to_regclass('sandesh_keys') IS NOT NULL AS present")[0]["present"]:
        return []
    return _rows(conn, "SELECT id, position, state, added_at, current_since, rotated_by, resealed_through,"
                       " resealed_at, retired_at, retired_by FROM sandesh_keys ORDER BY position")


def check(conn: Any, ring: KeyRing) -> list[dict[str, Any]]:
    """Refuse (KeyMissing) a ring without a key the database still needs, or whose newest key
    was retired; follow the database's ring otherwise.  Returns it."""
    rows = read(conn)
    missing = [r["id"] for r in rows if r["state"] != "retired" and r["id"] not in ring.secrets]
    if missing:
        raise KeyMissing(
            f"this database still needs key {', '.join(missing)}, which this process does not hold "
            f"(it holds {', '.join(ring.ids)}): put it in SANDESH_SECRET_KEY or SANDESH_PREVIOUS_KEYS "
            "(docs/operations.md, \"Rotating the key\")")
    if any(r["id"] == ring.newest and r["state"] == "retired" for r in rows):
        raise KeyMissing(f"SANDESH_SECRET_KEY is key {ring.newest}, which was retired: set the database's "
                         "current key (`sandesh key status`)")
    ring.follow(rows)
    return rows


def record_first_key(conn: Any, ring: KeyRing, opens_log: Callable[[KeyRing], str | None]) -> None:
    """At `db migrate`: a database without a ring records its first key, the one that opens its
    log's first event (`opens_log` gives its id, None for an empty log), else SANDESH_SECRET_KEY."""
    if read(conn):
        return
    first = opens_log(ring)
    if first is None:
        first = ring.newest
    conn.execute("INSERT INTO sandesh_keys (id, position, state) VALUES (%s, 0, 'current') ON CONFLICT DO NOTHING",
                 (first,))


def first_event_state(conn: Any) -> bytes | None:
    state = _value(conn, "SELECT state FROM sandesh_events ORDER BY notification_id LIMIT 1")
    return None if state is None else bytes(state)


# Rotating and retiring (`sandesh key`)

class NotNow(Exception):
    """A rotation or a retirement that cannot happen yet; the message says why and what to do."""


def rotate(conn: Any, ring: KeyRing, actor: str, now: float, running: list[dict[str, Any]]) -> dict[str, Any]:
    """Make SANDESH_SECRET_KEY (the ring's newest) the key that writes; every process turns to it
    within a second.  NotNow while a `running` process (releases.processes) does not hold it."""
    rows = read(conn)
    if not rows:
        raise NotNow("the database has no key ring yet: run `sandesh db migrate` first")
    current = next(r for r in rows if r["state"] == "current")
    if current["id"] == ring.newest:
        raise NotNow(f"SANDESH_SECRET_KEY is key {ring.newest}, the one that writes already. Make a new key, "
                     "set it as SANDESH_SECRET_KEY and the current one in SANDESH_PREVIOUS_KEYS for every "
                     "process, restart them, then rotate (docs/operations.md, \"Rotating the key\")")
    if any(r["id"] == ring.newest and r["state"] == "retired" for r in rows):
        raise NotNow(f"key {ring.newest} was retired: it never writes again")
    lacking = [f"{p['kind']} on {p['host']} (pid {p['pid']})" for p in running
               if ring.newest not in (p["keys"] or [])]
    if lacking:
        raise NotNow(f"these processes do not hold key {ring.newest} yet: {'; '.join(lacking)}. Give them the "
                     "new SANDESH_SECRET_KEY (the current key in SANDESH_PREVIOUS_KEYS) and restart them first")
    with conn.transaction():
        conn.execute("LOCK TABLE sandesh_keys IN EXCLUSIVE MODE")
        conn.execute("UPDATE sandesh_keys SET state = 'previous' WHERE state = 'current'")
        conn.execute(
            "INSERT INTO sandesh_keys (id, position, state, current_since, rotated_by)"
            " VALUES (%s, (SELECT max(position) + 1 FROM sandesh_keys), 'current', %s, %s)"
            " ON CONFLICT (id) DO UPDATE SET state = 'current', current_since = excluded.current_since,"
            " rotated_by = excluded.rotated_by, resealed_through = NULL, resealed_at = NULL",
            (ring.newest, now, actor))
    ring.follow(read(conn))
    return {"current": ring.newest, "previous": current["id"]}


def still_writing(running: list[dict[str, Any]], ring: KeyRing) -> list[dict[str, Any]]:
    """The `running` processes (releases.processes) that write with another key than the current one."""
    return [p for p in running if p["writes"] is not None and p["writes"] != ring.current]


def _event_is_current(state: bytes, ring: KeyRing) -> bool:
    if ring.legacy:
        return state[:3] != EVENT_MARK
    return state[:7] == EVENT_MARK + bytes.fromhex(ring.current)


RESEAL_BATCH = 1000  # events per transaction: an append waits for at most one batch's update


def reseal_events(conn: Any, ring: KeyRing, advance: Callable[[int], None]) -> dict[str, int]:
    """Encrypt again, under the current key, every event state under another, from where the
    last reseal stopped to the log's end; the events themselves are unchanged (the same state,
    decrypted).  Records how far it got after each batch, so an interrupted reseal goes on."""
    cipher = RingCipher(ring)
    after = _value(conn, "SELECT resealed_through FROM sandesh_keys WHERE id = %s", (ring.current,)) or 0
    end = _value(conn, "SELECT coalesce(max(notification_id), 0) FROM sandesh_events")
    changed = 0
    while after < end:
        with conn.transaction():
            conn.execute("SET LOCAL lock_timeout = '5s'")
            rows = _tuples(conn, "SELECT notification_id, state FROM sandesh_events WHERE notification_id > %s"
                                 " AND notification_id <= %s ORDER BY notification_id LIMIT %s",
                           (after, end, RESEAL_BATCH))
            if not rows:
                break
            ids, states = [], []
            for notification_id, state in rows:
                state = bytes(state)
                if not _event_is_current(state, ring):
                    ids.append(notification_id)
                    states.append(cipher.encrypt(cipher.decrypt(state)))
            if ids:
                conn.execute("UPDATE sandesh_events AS e SET state = v.state FROM"
                             " (SELECT unnest(%s::bigint[]) AS id, unnest(%s::bytea[]) AS state) AS v"
                             " WHERE e.notification_id = v.id", (ids, states))
            after = rows[-1][0]
            conn.execute("UPDATE sandesh_keys SET resealed_through = %s, resealed_at = now() WHERE id = %s",
                         (after, ring.current))
        changed += len(ids)
        advance(len(rows))
    conn.execute("UPDATE sandesh_keys SET resealed_through = %s, resealed_at = now() WHERE id = %s",
                 (max(after, end), ring.current))
    return {"events": int(end), "reencrypted": changed}


def events_to_reseal(conn: Any, ring: KeyRing) -> int | None:
    """Events not under the current key after where the last reseal got to; None when no reseal
    ran since the rotation (every event before it may be under an older key)."""
    through = _value(conn, "SELECT resealed_through FROM sandesh_keys WHERE id = %s", (ring.current,))
    if through is None:
        current = [r for r in read(conn) if r["id"] == ring.current]
        return None if current and current[0]["position"] > 0 else 0
    states = _tuples(conn, "SELECT state FROM sandesh_events WHERE notification_id > %s", (through,))
    return sum(1 for (state,) in states if not _event_is_current(bytes(state), ring))


def reseal_text_keys(conn: Any, sealer: RingSealer, advance: Callable[[int], None]) -> int:
    """Seal the keys of texts again under the current key; a key destroyed meanwhile stays destroyed."""
    changed, after = 0, ""
    while True:
        pairs = _tuples(conn, "SELECT id, sealed FROM text_keys WHERE id > %s AND sealed IS NOT NULL ORDER BY id"
                              " LIMIT %s", (after, RESEAL_BATCH))
        if not pairs:
            return changed
        with conn.transaction():
            for key_id_, sealed in pairs:
                if not sealer.current(sealed):
                    done = conn.execute("UPDATE text_keys SET sealed = %s WHERE id = %s AND sealed = %s",
                                        (sealer.seal(sealer.open(sealed)), key_id_, sealed))
                    changed += done.rowcount
        after = pairs[-1][0]
        advance(len(pairs))


def text_keys_to_reseal(conn: Any, sealer: RingSealer) -> int:
    return sum(1 for (sealed,) in _tuples(conn, "SELECT sealed FROM text_keys WHERE sealed IS NOT NULL")
               if not sealer.current(sealed))


def count_text_keys(conn: Any) -> int:
    return int(_value(conn, "SELECT count(*) FROM text_keys WHERE sealed IS NOT NULL"))


def events_after_reseal(conn: Any, ring: KeyRing) -> int:
    """How many events a reseal has yet to read: from where the last one stopped to the log's end."""
    after = _value(conn, "SELECT resealed_through FROM sandesh_keys WHERE id = %s", (ring.current,)) or 0
    return max(0, int(_value(conn, "SELECT coalesce(max(notification_id), 0) FROM sandesh_events")) - after)


def holders_of_secrets(conn: Any) -> list[tuple[str, str]]:
    """(kind, id) of every aggregate that may hold a sealed secret: clients (webhook secrets), SIMs
    with a PIN, people (authenticator secrets); domain/usecases/keys.py decides which are stale."""
    return ([("client", i) for (i,) in _tuples(conn, "SELECT id FROM clients ORDER BY id")]
            + [("sim", i) for (i,) in _tuples(conn, "SELECT id FROM sims WHERE pin_sealed IS NOT NULL ORDER BY id")]
            + [("person", i) for (i,) in _tuples(conn, "SELECT id FROM people ORDER BY id")])


def retire(conn: Any, kid: str, actor: str) -> None:
    conn.execute("UPDATE sandesh_keys SET state = 'retired', retired_at = now(), retired_by = %s WHERE id = %s",
                 (actor, kid))
